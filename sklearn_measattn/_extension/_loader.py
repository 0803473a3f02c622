"""Build and load the fused CPU kernels (``csrc/*.cpp``): attention and the energy distance.

The C++ sources ship with the package and are compiled together on first use,
with the machine's C++ compiler against the installed torch, into one library
in a cache directory; later processes load the cached library. The first build prints one line to
stderr saying what is compiled and about how long it takes. Processes that start
at once build it once (the others wait on a file lock, then load it); a cached
library that fails to load (a truncated or corrupt file) is rebuilt once; a cache
directory that cannot be written falls back to one under the system's temporary
directory. Every other failure (no compiler, a torch build without the BLAS
symbol) leaves the pure-PyTorch ``"chunked"`` backends (attention and energy)
in charge, and
:func:`fused_unavailable_reason` says why.

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

SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("fused_attention.cpp", "fused_energy.cpp"))
# Keep in sync with the Kind enum of the C++ source.
KIND_SOFTMAX, KIND_POLY_INT, KIND_POLY_REAL, KIND_LOG, KIND_SIGMOID, KIND_SOFTPLUS = range(6)
# -fno-trapping-math lets the compiler if-convert the branch-free kernels into
# vector selects; -march=native is safe because the cache key includes the CPU;
# on x86-64, -mprefer-vector-width=512 uses the full AVX-512 width where the CPU
# has it (gcc tunes some Intel targets to 256-bit vectors) and changes nothing on
# AVX2 CPUs (the option does not exist for other architectures).
_X86 = platform.machine().lower() in ("x86_64", "amd64", "x64")
_CFLAGS = ("-O3", "-march=native", *(("-mprefer-vector-width=512",) if _X86 else ()), "-fopenmp",
           "-fno-math-errno", "-fno-trapping-math", "-std=c++20", "-fPIC", "-shared")
# What the one line printed before a first build says to expect (measured: 11-30 s
# on 2-core x86-64 machines, longer while other work loads the cores).
_BUILD_ESTIMATE = "about 15-30 s"

_lock = threading.Lock()
_state = {"loaded": False, "reason": None, "build_seconds": None, "library": None}


def fused_unavailable_reason():
    """Return ``None`` when the fused kernels are loaded (building them if
    needed), else a sentence saying why they cannot be used here."""
    if _state["loaded"]:
        return None
    with _lock:
        if not _state["loaded"] and _state["reason"] is None:
            _state["reason"] = _load()
            if _state["reason"] is not None and "MEASATTN_FUSED=0" not in _state["reason"]:
                logger.warning("fused CPU kernels unavailable (%s); using the chunked backends", _state["reason"])
    return _state["reason"]


def build_seconds():
    """Seconds this process spent compiling the library (``0.0`` when it came
    from the cache, ``None`` before any load)."""
    return _state["build_seconds"]


def _load():
    if os.environ.get("MEASATTN_FUSED", "1").strip() in ("0", "false", "False", "no"):
        return "disabled by the environment variable MEASATTN_FUSED=0"
    if not sys.platform.startswith("linux"):
        return f"the fused CPU kernels are built on Linux only (this is {sys.platform})"
    compiler = shutil.which(os.environ.get("CXX", "c++"))
    if compiler is None:
        return "no C++ compiler found (install g++ or set CXX) to build the fused CPU kernels"
    try:
        library = _library_path(compiler, _writable_cache_dir())
        with _build_lock(library):
            _state["build_seconds"] = 0.0
            if not library.exists():
                _build(compiler, library)
            try:
                torch.ops.load_library(str(library))
            except OSError as error:  # a truncated or corrupt cached file: rebuild it once
                logger.warning("cached fused kernel library %s failed to load (%s); rebuilding it", library, error)
                library.unlink(missing_ok=True)
                _build(compiler, library)
                torch.ops.load_library(str(library))
        _register_fake_kernels()
        _state["library"] = library
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return f"building or loading the fused CPU kernels failed: {error}"
    _state["loaded"] = True
    return None


def _build(compiler, library):
    names = ", ".join(source.name for source in SOURCES)
    print(f"sklearn_measattn: compiling the fused CPU kernels ({names}, C++ against torch "
          f"{torch.__version__}) into {library.parent}; {_BUILD_ESTIMATE}, once per machine and torch version.",
          file=sys.stderr, flush=True)
    started = time.perf_counter()
    _compile(compiler, library)
    _state["build_seconds"] = time.perf_counter() - started
    logger.info("built fused CPU kernels in %.1f s: %s", _state["build_seconds"], library)


@contextlib.contextmanager
def _build_lock(library):
    """Hold an exclusive lock on ``<library>.lock`` while building or loading, so
    that processes starting together build once: the others wait, then load."""
    import fcntl  # POSIX only, like the build itself

    with open(library.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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


def _library_path(compiler, directory):
    key = hashlib.sha256()
    sources = [source.read_bytes() for source in SOURCES]
    for part in (*sources, torch.__version__.encode(), compiler.encode(), " ".join(_CFLAGS).encode(),
                 _cpu_signature().encode()):
        key.update(part)
        key.update(b"\0")
    return directory / f"fused_attention_{key.hexdigest()[:16]}.so"


def _compile(compiler, library):
    from torch.utils import cpp_extension

    library.parent.mkdir(parents=True, exist_ok=True)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    includes = [f"-I{path}" for path in cpp_extension.include_paths()]
    lib_dirs = cpp_extension.library_paths()
    links = [f"-L{path}" for path in lib_dirs] + [f"-Wl,-rpath,{path}" for path in lib_dirs]
    # Compile into a temporary name, then rename: concurrent processes (dask
    # workers, pytest-xdist) may build at once, and a reader never sees half a file.
    handle, partial = tempfile.mkstemp(suffix=".so", dir=library.parent)
    os.close(handle)
    command = [compiler, *_CFLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *includes, *map(str, SOURCES), "-o", partial,
               *links, "-lc10", "-ltorch_cpu"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}\n{result.stderr[-2000:]}")
        os.replace(partial, library)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
