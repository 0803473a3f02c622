"""Build and load the fused CPU kernels (``csrc/*.cpp``): attention and the energy distance.

The C++ sources ship with the package and are compiled on first use by
:func:`torch.utils.cpp_extension.load`: ninja runs the machine's C++ compiler
with the installed torch's headers and libraries, one source per core, and
links one library in a build directory under the cache directory; later
processes find it up to date (ninja rebuilds it when a source or a flag
changes) and load it. The library is built with ``-march=native``, so the
build directory's name holds a signature of the CPU (its feature flags), of
the torch installation and of the compiler: a cache shared by different
machines, or by several environments, keeps one build of each. Processes that
start at once build once: the others wait on a lock that the system releases
when its holder dies, then load what the first built. A first use that waits
(for a build in this process, or for another process that holds the lock for
more than a second) prints one line to stderr: what it waits for, then, once
done, how long that took, e.g. ``sklearn_measattn: compiling the fused CPU
kernels (...)... done in 14 s`` or ``sklearn_measattn: waiting for another
process to build (or load) the fused CPU kernels in <directory>... done in
47 s``. It is printed, not logged, so that a Python session or ``measattn
fit`` that pauses for tens of seconds says why without any logging set up;
loading an up-to-date library prints nothing. A
cached library that fails to load (a truncated or corrupt file) is rebuilt
once; a cache directory that cannot be written falls back to one under the
system's temporary directory. Every other failure (no compiler, no ninja, a
compiler error) leaves the pure-PyTorch ``"chunked"`` backends (attention and
energy) in charge, and :func:`fused_unavailable_reason` says why.

Environment variables
---------------------
``MEASATTN_FUSED=0``
    Never build or use the fused kernels (``backend="auto"`` then runs chunked).
``MEASATTN_CACHE_DIR``
    Where compiled libraries are kept; default ``$XDG_CACHE_HOME/sklearn_measattn``
    or ``~/.cache/sklearn_measattn``.
``CXX``
    The C++ compiler (default ``c++``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

NAME = "measattn_fused"  # the library's name; its ops are torch.ops.measattn_fused.*
SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("fused_attention.cpp", "fused_energy.cpp"))
# The values of the C++ Kind enum in fused_attention.cpp (a test compares them).
KIND_SOFTMAX, KIND_POLY_INT, KIND_POLY_REAL, KIND_LOG, KIND_SIGMOID, KIND_SOFTPLUS = range(6)
# -fno-trapping-math lets the compiler if-convert the branch-free kernels into
# vector selects; -march=native is safe because the build directory's name holds
# the CPU's flags; on x86-64, -mprefer-vector-width=512 uses the full AVX-512
# width where the CPU has it (gcc tunes some Intel targets to 256-bit vectors)
# and changes nothing on AVX2 CPUs (the option does not exist for other
# architectures). -fopenmp also makes at::parallel_for, inlined from torch's
# headers as an OpenMP loop, run on torch's threads.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "x64")
_CFLAGS = ("-O3", "-march=native", *(("-mprefer-vector-width=512",) if _X86 else ()), "-fopenmp",
           "-fno-math-errno", "-fno-trapping-math")
_LDFLAGS = ("-fopenmp",)
# What the one line printed before a first build says to expect (measured on a
# 2-core AMD EPYC: 12-15 s, ninja compiling the two sources at once, 20 s of
# compiler CPU time; longer while other work loads the cores).
_BUILD_ESTIMATE = "about 10-30 s"
# How long a process waits for the build lock before it says so: one that only
# loads an up-to-date library holds the lock well under a second.
_SILENT_WAIT = 1.0

_lock = threading.Lock()
_state = {"loaded": False, "reason": None, "build_seconds": None, "library": None}


def fused_unavailable_reason():
    """Whether the fused kernels can be used, loading them (and building them if needed).

    Returns
    -------
    str or None
        ``None`` when the kernels are loaded, else a sentence saying why they
        cannot be used here.
    """
    if _state["loaded"]:
        return None
    with _lock:
        if not _state["loaded"] and _state["reason"] is None:
            _state["reason"] = _load()
            if _state["reason"] is not None and "MEASATTN_FUSED=0" not in _state["reason"]:
                logger.warning("fused CPU kernels unavailable (%s); using the chunked backends", _state["reason"])
    return _state["reason"]


def build_seconds():
    """Seconds this process spent compiling the library.

    Returns
    -------
    float or None
        ``0.0`` when the library was up to date in the cache, ``None`` before
        any load.
    """
    return _state["build_seconds"]


def _ninja_directory():
    """The directory of the ninja that builds the library: the one on the ``PATH``, else the
    binary of the ``ninja`` package (a dependency, installed with the package), else None."""
    found = shutil.which("ninja")
    if found is not None:
        return os.path.dirname(found)
    try:
        import ninja
    except ImportError:
        return None
    directory = getattr(ninja, "BIN_DIR", None)
    return directory if directory and shutil.which("ninja", path=directory) else None


@contextlib.contextmanager
def _ninja_on_path(directory):
    """``directory`` first on the ``PATH`` while torch runs ninja (it looks for it there only)."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = directory + os.pathsep + before
    try:
        yield
    finally:
        os.environ["PATH"] = before


def build_precondition():
    """Why the library cannot be built here, checked without building, or None.

    Returns
    -------
    str or None
        The reason (``MEASATTN_FUSED=0``, not Linux, no C++ compiler, no
        ninja), or ``None`` when a build can be tried.
    """
    if os.environ.get("MEASATTN_FUSED", "1").strip() in ("0", "false", "False", "no"):
        return "disabled by the environment variable MEASATTN_FUSED=0"
    if not sys.platform.startswith("linux"):
        return f"the fused CPU kernels are built on Linux only (this is {sys.platform})"
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "no C++ compiler found (install g++ or set CXX) to build the fused CPU kernels"
    if _ninja_directory() is None:
        return "the fused CPU kernels are built with ninja, which is neither on the PATH nor installed (pip install ninja)"
    return None


def _load():
    reason = build_precondition()
    if reason is not None:
        return reason
    compiler = shutil.which(os.environ.get("CXX", "c++"))
    from torch.utils import cpp_extension

    try:
        directory = _writable_cache_dir() / _build_name(compiler)
        directory.mkdir(parents=True, exist_ok=True)
        library = directory / f"{NAME}.so"
        with _build_lock(directory):
            _remove_stale_baton(directory)
            built_before = _mtime(library)
            stale = built_before is None or built_before < max(_mtime(source) for source in SOURCES)
            started = time.perf_counter()
            try:
                with _one_line(_build_announcement(directory)) if stale else contextlib.nullcontext():
                    _build_and_load(cpp_extension, directory)
            except OSError as error:  # a truncated or corrupt cached file: rebuild it once
                logger.warning("cached fused kernel library %s failed to load (%s); rebuilding it", library, error)
                for product in (library, *directory.glob("*.o")):
                    product.unlink(missing_ok=True)
                with _one_line(f"rebuilding the fused CPU kernels in {directory}"):
                    _build_and_load(cpp_extension, directory)
            elapsed = time.perf_counter() - started
        _state["build_seconds"] = elapsed if _mtime(library) != built_before else 0.0
        if _state["build_seconds"]:
            logger.info("built fused CPU kernels in %.1f s: %s", elapsed, library)
        _register_fake_kernels()
        _state["library"] = library
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return f"building or loading the fused CPU kernels failed: {_last_lines(str(error))}"
    _state["loaded"] = True
    return None


def _build_and_load(cpp_extension, directory):
    # load() keeps a record of the builds of this process: it skips ninja when
    # called again with the same arguments, and names the library <name>_v1 when
    # called with others (another build directory). The directory tells builds
    # apart and ninja sees what is out of date, so forget the record.
    versioner = getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None)
    if versioner is not None:
        versioner.entries.pop(NAME, None)
    with _ninja_on_path(_ninja_directory()):
        cpp_extension.load(NAME, [str(source) for source in SOURCES], extra_cflags=list(_CFLAGS),
                           extra_ldflags=list(_LDFLAGS), build_directory=str(directory), is_python_module=False)


def _build_announcement(directory):
    """What the line before a build says: what is compiled, where, and about how long it takes."""
    names = ", ".join(source.name for source in SOURCES)
    return (f"compiling the fused CPU kernels ({names}, C++ against torch {torch.__version__}) into {directory}, "
            f"once per machine and torch version ({_BUILD_ESTIMATE})")


@contextlib.contextmanager
def _one_line(what, started=None):
    """One line on stderr around a wait: ``sklearn_measattn: <what>...`` before it, and after it
    ``done in 14 s`` (or ``failed after``, ``interrupted after``) on the same line.

    Parameters
    ----------
    what : str
        What the process waits for.
    started : float, optional
        When the wait began (a ``time.perf_counter()`` reading), if before now.
    """
    print(f"sklearn_measattn: {what}...", end="", file=sys.stderr, flush=True)
    started = time.perf_counter() if started is None else started
    ending = "interrupted after"
    try:
        yield
        ending = "done in"
    except Exception:
        ending = "failed after"
        raise
    finally:
        seconds = time.perf_counter() - started
        print(f" {ending} {seconds:.0f} s" if seconds >= 10 else f" {ending} {seconds:.1f} s",
              file=sys.stderr, flush=True)


def _last_lines(message, limit=2000):
    """The end of a long message (a build's output ends with the compiler's error)."""
    return message if len(message) <= limit else "..." + message[-limit:]


def _mtime(path):
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _build_lock(directory):
    """Hold an exclusive lock on ``<directory>.lock`` while building or loading, so
    that processes starting together build once: the others wait, then load.

    torch's own lock (the file ``lock`` in the build directory, which
    :func:`~torch.utils.cpp_extension.load` creates and deletes) outlives a
    process killed while building, and every later load would wait for it
    forever; this one is released by the system when its holder dies.
    """
    import fcntl  # POSIX only, like the build itself

    with open(directory.with_suffix(".lock"), "a") as handle:
        _take_lock(handle, directory)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _take_lock(handle, directory):
    """Take the exclusive lock on the open file ``handle``; a wait longer than
    ``_SILENT_WAIT`` (another process building) is said on stderr, with its length."""
    import fcntl

    started = time.perf_counter()
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.perf_counter() - started >= _SILENT_WAIT:
                break
            time.sleep(0.05)
    with _one_line(f"waiting for another process to build (or load) the fused CPU kernels in {directory}",
                   started=started):
        fcntl.flock(handle, fcntl.LOCK_EX)


def _remove_stale_baton(directory):
    """Delete torch's lock file left by a build that was killed: under
    :func:`_build_lock` no other process is inside ``load()`` for this directory."""
    baton = directory / "lock"
    if baton.exists():
        logger.warning("removing %s, left behind by a build of the fused CPU kernels that was killed", baton)
        baton.unlink(missing_ok=True)


def _register_fake_kernels():
    """Shape-only versions of the ops, so ``torch.compile`` can trace models
    that use them (without these, dynamo fails on the real kernels' fake tensors)."""

    @torch.library.register_fake("measattn_fused::forward")
    def _forward(q, k, v, log_weights, kind, parameter, scale, query_block, key_block):
        return q.new_empty((*q.shape[:3], v.shape[-1])), q.new_empty(q.shape[:3])

    @torch.library.register_fake("measattn_fused::backward")
    def _backward(q, k, v, log_weights, out, log_normalizer, grad_out, kind, parameter, scale, query_block, key_block):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    @torch.library.register_fake("measattn_fused::energy_moment")
    def _energy_moment(x, y_t, w, beta, want_grad):
        return x.new_empty(x.shape[:2]), x.new_empty(x.shape if want_grad else (0,))


def _cache_dir():
    configured = os.environ.get("MEASATTN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sklearn_measattn"


def _writable_cache_dir():
    """The cache directory, or a per-user one under the temporary directory when
    it cannot be created or written (a read-only home, a container)."""
    preferred = _cache_dir()
    for directory in (preferred, Path(tempfile.gettempdir()) / f"sklearn_measattn-{os.getuid()}"):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=directory):
                pass
        except OSError as error:
            logger.warning("cache directory %s is not writable (%s)", directory, error)
            continue
        if directory != preferred:
            logger.warning("building the fused CPU kernels in %s instead of %s", directory, preferred)
        return directory
    raise OSError(f"neither {preferred} nor the temporary directory can be written; set MEASATTN_CACHE_DIR")


def _cpu_signature():
    """The CPU's feature flags (``-march=native`` code is only valid on such a CPU)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _build_name(compiler):
    """The build directory's name: one per CPU, torch installation, compiler and
    copy of the sources (changes to the sources and flags are ninja's to see)."""
    key = hashlib.sha256()
    for part in (_cpu_signature(), torch.__version__, torch.__file__, compiler, str(SOURCES[0].parent)):
        key.update(part.encode())
        key.update(b"\0")
    return f"{NAME}-{key.hexdigest()[:16]}"
