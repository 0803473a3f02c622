"""The fused CPU backend (C++ kernels compiled on first use) against the reference."""

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from sklearn_measattn import _extension as extension
from sklearn_measattn import attention
from sklearn_measattn._extension import _loader as _fused
from sklearn_measattn.attention import fused_status, kernel_attention, resolve_backend
from sklearn_measattn.kernels import KERNEL_NAMES, get_kernel
from tests.conftest import fused_skip_reason

HAS_COMPILER = fused_skip_reason() is None  # the `fused` marker's condition (tests/conftest.py), for test bodies

KERNELS = [(name, {}) for name in KERNEL_NAMES] + [("poly", {"degree": d}) for d in (2, 3, 4, 1.5, 7.25)]
KERNEL_IDS = [name + "".join(f"-{v}" for v in params.values()) for name, params in KERNELS]


def make_inputs(batch=2, heads=3, n_queries=70, n_keys=90, d=8, d_value=None, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(batch, heads, n_queries, d, generator=generator)
    k = scale * torch.randn(batch, heads, n_keys, d, generator=generator)
    v = torch.randn(batch, heads, n_keys, d if d_value is None else d_value, generator=generator)
    return q, k, v


def run(q, k, v, kernel, backend, dtype, weights=None, grad_seed=1, **kwargs):
    """Output and (q, k, v) gradients of a random linear loss, in float64."""
    leaves = [t.detach().to(dtype).requires_grad_(True) for t in (q, k, v)]
    w = None if weights is None else weights.to(dtype)
    out = kernel_attention(*leaves, kernel, weights=w, backend=backend, **kwargs)
    cotangent = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=torch.float64).to(dtype)
    (out * cotangent).sum().backward()
    return [t.double() for t in (out, *(leaf.grad for leaf in leaves))]


def assert_matches(fused, reference, rtol=2e-5):
    for name, got, expected in zip(("out", "grad_q", "grad_k", "grad_v"), fused, reference):
        error = (got - expected).abs().max().item()
        size = expected.abs().max().item()
        assert torch.isfinite(got).all(), name
        assert error <= rtol * max(size, 1.0), f"{name}: max error {error:.3g} vs magnitude {size:.3g}"


@pytest.mark.fused
def test_builds_on_a_machine_with_a_compiler():
    assert _fused.fused_unavailable_reason() is None
    assert _fused.build_seconds() is not None


@pytest.mark.fused
@pytest.mark.parametrize("kernel, params", KERNELS, ids=KERNEL_IDS)
@pytest.mark.parametrize("with_weights", [False, True])
def test_matches_naive_float64(kernel, params, with_weights, monkeypatch):
    # Small tiles, so every path runs: several query and key tiles, partial
    # tiles at both ends, and the running-maximum rescale between key tiles.
    monkeypatch.setattr(attention._fused_cpu, "FUSED_KEY_BLOCK", 16)
    kernel = get_kernel(kernel, **params)
    q, k, v = make_inputs(d_value=5)
    weights = None
    if with_weights:
        weights = torch.rand(2, 90, generator=torch.Generator().manual_seed(3)) * 3
        weights[:, 10:40] = 0.0  # whole key tiles with weight 0 (log weight -inf)
    fused = run(q, k, v, kernel, "fused", torch.float32, weights, chunk_size=7)
    reference = run(q, k, v, kernel, "naive", torch.float64, weights)
    assert_matches(fused, reference)


@pytest.mark.fused
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_default_tiles_match_chunked(kernel):
    """Default tile sizes (keys spanning two tiles) give the chunked backend's numbers."""
    q, k, v = make_inputs(batch=1, heads=2, n_queries=130, n_keys=600, d=16)
    assert_matches(run(q, k, v, kernel, "fused", torch.float32), run(q, k, v, kernel, "chunked", torch.float64))


@pytest.mark.fused
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_extreme_scores_stay_finite_and_match(kernel):
    # Scores of order 1e4, where exp overflows float32 and log-weights differ by
    # thousands between keys: the result must still equal the float64 reference.
    q, k, v = make_inputs(n_queries=20, n_keys=40, d=4, scale=60.0)
    fused = run(q, k, v, kernel, "fused", torch.float32)
    reference = run(q, k, v, kernel, "naive", torch.float64)
    assert_matches(fused, reference, rtol=1e-4)


@pytest.mark.fused
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_zero_weight_equals_deleting_points(kernel):
    q, k, v = make_inputs(n_keys=30)
    weights = torch.ones(2, 30)
    weights[:, ::4] = 0.0
    keep = weights[0] > 0
    with_zeros = kernel_attention(q, k, v, kernel, weights=weights, backend="fused")
    deleted = kernel_attention(q, k[:, :, keep], v[:, :, keep], kernel, backend="fused")
    torch.testing.assert_close(with_zeros, deleted, rtol=1e-5, atol=1e-6)


@pytest.mark.fused
def test_integer_weights_equal_repeated_points():
    q, k, v = make_inputs(n_keys=12)
    counts = torch.arange(1, 13) % 3 + 1
    index = torch.repeat_interleave(torch.arange(12), counts)
    weighted = kernel_attention(q, k, v, "log", weights=counts[None].float().expand(2, -1), backend="fused")
    repeated = kernel_attention(q, k[:, :, index], v[:, :, index], "log", backend="fused")
    torch.testing.assert_close(weighted, repeated, rtol=1e-5, atol=1e-6)


@pytest.mark.fused
def test_non_contiguous_inputs_and_single_thread():
    """Transposed (batch, points, heads, d) layouts, as the transformer makes them,
    and one intra-op thread give the same result as contiguous inputs."""
    q, k, v = make_inputs(n_queries=40, n_keys=50)
    strided = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    assert not strided[0].is_contiguous()
    expected = run(q, k, v, "poly", "fused", torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = run(*strided, "poly", "fused", torch.float32)
    finally:
        torch.set_num_threads(threads)
    for got, want in zip(single, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.fused
@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("with_weights", [False, True])
def test_backward_split_over_query_tiles_when_few_heads(threads, with_weights):
    """With fewer batch x heads than threads the backward splits query tiles
    between threads (per-thread dK, dV summed after): same numbers."""
    q, k, v = make_inputs(batch=1, heads=1, n_queries=100, n_keys=80)
    weights = None
    if with_weights:
        weights = torch.rand(1, 80, generator=torch.Generator().manual_seed(5))
        weights[:, :20] = 0.0
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        fused = run(q, k, v, "sigmoid", "fused", torch.float32, weights, chunk_size=16)
    finally:
        torch.set_num_threads(previous)
    assert_matches(fused, run(q, k, v, "sigmoid", "naive", torch.float64, weights))


@pytest.mark.fused
def test_repeated_runs_give_identical_bits():
    q, k, v = make_inputs(n_queries=50, n_keys=80)
    first, second = (run(q, k, v, "log", "fused", torch.float32) for _ in range(2))
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.fused
def test_saves_no_quadratic_tensor():
    n = 256
    q, k, v = [t.requires_grad_(True) for t in make_inputs(batch=1, heads=1, n_queries=n, n_keys=n, d=4)]
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        out = kernel_attention(q, k, v, "log", backend="fused")
    out.sum().backward()
    assert saved and max(saved) < n * n // 8, saved


@pytest.mark.fused
def test_auto_picks_fused_for_built_in_kernels_in_float32():
    x32, x64 = torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    for name in ("poly", "log", "sigmoid", "softplus"):
        assert resolve_backend("auto", get_kernel(name), x32) == "fused"
        assert resolve_backend("auto", get_kernel(name), x64) == "chunked"
    assert resolve_backend("auto", get_kernel("softmax"), x32) == "sdpa"
    assert resolve_backend("auto", get_kernel(lambda s: 0.5 * s), x32) == "chunked"


def test_explicit_fused_rejects_what_it_cannot_run():
    x64 = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="float32 CPU tensors only"):
        resolve_backend("fused", get_kernel("log"), x64)
    with pytest.raises(ValueError, match="built-in kernels"):
        resolve_backend("fused", get_kernel(lambda s: 0.5 * s), torch.zeros(1, 1, 2, 2))
    # A hand-built kernel that reuses a built-in name is not mistaken for it.
    fake = get_kernel("log").__class__("log", lambda s: 0.5 * s)
    with pytest.raises(ValueError, match="built-in kernels"):
        resolve_backend("fused", fake, torch.zeros(1, 1, 2, 2))


def test_unavailable_build_falls_back_to_chunked(monkeypatch):
    """Without the kernels (no compiler, disabled), auto runs chunked and an
    explicit request says why and what to use instead."""
    monkeypatch.setitem(_fused._state, "loaded", False)
    monkeypatch.setitem(_fused._state, "reason", "no C++ compiler found")
    x32 = torch.zeros(1, 1, 2, 2)
    assert resolve_backend("auto", get_kernel("log"), x32) == "chunked"
    with pytest.raises(RuntimeError, match=r"no C\+\+ compiler found.*backend='chunked'"):
        resolve_backend("fused", get_kernel("log"), x32)


def test_fused_status_reports_availability(monkeypatch):
    if HAS_COMPILER:
        assert fused_status().startswith("available (")
    monkeypatch.setitem(_fused._state, "loaded", False)
    monkeypatch.setitem(_fused._state, "reason", "disabled by the environment variable MEASATTN_FUSED=0")
    assert fused_status() == "unavailable: disabled by the environment variable MEASATTN_FUSED=0"


@pytest.mark.slow
def test_environment_variable_disables_the_build(tmp_path):
    code = (
        "from sklearn_measattn._extension import _loader as _fused; import torch;"
        "from sklearn_measattn.attention import resolve_backend;"
        "from sklearn_measattn.kernels import get_kernel;"
        "print(_fused.fused_unavailable_reason());"
        "print(resolve_backend('auto', get_kernel('log'), torch.zeros(1, 1, 2, 2)))"
    )
    env = {"MEASATTN_FUSED": "0", "MEASATTN_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    reason, backend = result.stdout.strip().splitlines()
    assert "MEASATTN_FUSED=0" in reason
    assert backend == "chunked"
    assert not list(tmp_path.iterdir())  # nothing was built


@pytest.mark.fused  # the build runs through ninja on Linux, with c++ asked for its version
def test_failed_compile_reports_the_compiler_error(tmp_path, monkeypatch):
    """A compiler that fails leaves a reason with its message and no library behind."""
    failing = tmp_path / "bad-c++"
    failing.write_text(ANSWERS_VERSION_QUERIES + "echo 'fatal error: simulated' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CXX", str(failing))
    monkeypatch.setenv("MEASATTN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MEASATTN_FUSED", raising=False)
    reason = _fused._load()
    assert reason is not None and "simulated" in reason
    assert not list((tmp_path / "cache").rglob("*.so"))


@pytest.mark.slow
@pytest.mark.fused
def test_torch_compile_traces_the_fused_ops():
    """The ops have shape-only fake kernels, so torch.compile can trace a model
    that uses them (aot_eager: dynamo and AOTAutograd, no C++ code generation)."""
    from sklearn_measattn.transformer import MeasureTransformer

    torch.manual_seed(0)
    model = MeasureTransformer(2, 3, d_model=16, n_heads=2, n_layers=1, kernel="log", attention_backend="fused")
    X = torch.randn(4, 50, 2)
    eager = model(X)
    eager.square().sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)(X)
    compiled.square().sum().backward()
    torch.testing.assert_close(compiled, eager)
    for param, grad in zip(model.parameters(), expected):
        torch.testing.assert_close(param.grad, grad)


# Stand-in compilers answer the version queries of torch's compiler check with
# the real compiler's answers.
ANSWERS_VERSION_QUERIES = """#!/bin/sh
case "$1" in -v|--version|-dumpversion|-dumpfullversion) exec c++ "$@";; esac
"""

# A stand-in compiler for ninja's two steps: it "compiles" each source into an
# empty object (with an empty dependency file), and "links" by recording the
# build, waiting a little (so that processes started together overlap) and
# copying an already built library.
FAKE_COMPILER = ANSWERS_VERSION_QUERIES + """out=
deps=
while [ "$#" -gt 0 ]; do
  case "$1" in -o) out="$2";; -MF) deps="$2";; esac
  shift
done
case "$out" in
  *.so) echo build >> "{log}"; sleep 1; cp "{library}" "$out";;
  *) echo "$out:" > "$deps"; : > "$out";;
esac
"""

LOAD_IN_A_FRESH_PROCESS = (
    "from sklearn_measattn._extension import _loader as _fused;"
    "print(_fused.fused_unavailable_reason());"
    "print(_fused._state['library'])"
)


def fake_compiler(tmp_path):
    assert _fused.fused_unavailable_reason() is None
    log = tmp_path / "builds.log"
    compiler = tmp_path / "fake-c++"
    compiler.write_text(FAKE_COMPILER.format(log=log, library=_fused._state["library"]))
    compiler.chmod(0o755)
    return compiler, log


def load_in_subprocesses(count, env, timeout=300):
    env = {**os.environ, **env}
    env.pop("MEASATTN_FUSED", None)
    processes = [
        subprocess.Popen([sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(count)
    ]
    try:
        return [process.communicate(timeout=timeout) + (process.returncode,) for process in processes]
    finally:
        for process in processes:
            process.kill()
            process.wait()


def build_lines(results):
    return sum(stderr.count("compiling the fused CPU kernels") for _, stderr, _ in results)


@pytest.mark.slow
@pytest.mark.fused
def test_concurrent_first_uses_build_once_and_say_so_once(tmp_path):
    compiler, log = fake_compiler(tmp_path)
    results = load_in_subprocesses(3, {"CXX": str(compiler), "MEASATTN_CACHE_DIR": str(tmp_path / "cache")})
    for stdout, stderr, code in results:
        assert code == 0, stderr
        assert stdout.splitlines()[0] == "None", stdout + stderr
    assert log.read_text().splitlines() == ["build"]
    assert build_lines(results) == 1
    # The line names what is compiled and how long it takes.
    line = next(line for _, stderr, _ in results for line in stderr.splitlines() if "compiling" in line)
    assert "fused_attention.cpp" in line and re.search(r"\.\.\. done in [0-9.]+ s$", line), line


@pytest.mark.slow
@pytest.mark.fused
def test_corrupt_cached_library_is_rebuilt_once(tmp_path):
    compiler, log = fake_compiler(tmp_path)
    cache = tmp_path / "cache"
    env = {"CXX": str(compiler), "MEASATTN_CACHE_DIR": str(cache)}
    [(stdout, stderr, code)] = load_in_subprocesses(1, env)
    library = Path(stdout.splitlines()[1])
    assert code == 0 and library.parent.parent == cache
    library.write_bytes(b"not a shared library")  # a truncated or damaged file
    [(stdout, stderr, code)] = load_in_subprocesses(1, env)
    assert code == 0 and stdout.splitlines()[0] == "None", stderr
    assert "failed to load" in stderr
    assert log.read_text().splitlines() == ["build", "build"]
    assert library.read_bytes() == Path(_fused._state["library"]).read_bytes()


@pytest.mark.slow
@pytest.mark.fused
def test_unwritable_cache_falls_back_to_a_temporary_directory(tmp_path):
    compiler, log = fake_compiler(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a cache directory below a file can never be created (even as root)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {"CXX": str(compiler), "MEASATTN_CACHE_DIR": str(blocker / "cache"), "TMPDIR": str(temporary)}
    [(stdout, stderr, code)] = load_in_subprocesses(1, env)
    assert code == 0 and stdout.splitlines()[0] == "None", stderr
    library = Path(stdout.splitlines()[1])
    assert library.parent.parent.parent == temporary and library.exists()
    assert "not writable" in stderr


@pytest.mark.slow
@pytest.mark.fused
def test_a_lock_left_by_a_killed_build_does_not_block_the_next(tmp_path):
    """torch's lock file, which a build killed midway leaves in the build
    directory, is removed by the next process, which then builds."""
    compiler, log = fake_compiler(tmp_path)
    cache = tmp_path / "cache"
    directory = cache / _fused._build_name(str(compiler))
    directory.mkdir(parents=True)
    (directory / "lock").touch()
    [(stdout, stderr, code)] = load_in_subprocesses(1, {"CXX": str(compiler), "MEASATTN_CACHE_DIR": str(cache)},
                                                    timeout=120)
    assert code == 0 and stdout.splitlines()[0] == "None", stderr
    assert Path(stdout.splitlines()[1]).parent == directory
    assert log.read_text().splitlines() == ["build"]
    assert not (directory / "lock").exists()


def loader_with_a_stand_in_build(tmp_path, monkeypatch):
    """The loader in a fresh state, with a build that writes an empty library (and compiles nothing) and a
    load that loads nothing: the build directory, and the list of the builds it ran."""
    monkeypatch.setattr(_fused, "_state", {"loaded": False, "reason": None, "build_seconds": None, "library": None})
    monkeypatch.setattr(_fused, "build_precondition", lambda: None)
    monkeypatch.setattr(_fused, "_register_fake_kernels", lambda: None)
    monkeypatch.setenv("CXX", sys.executable)
    monkeypatch.setenv("MEASATTN_CACHE_DIR", str(tmp_path))
    builds = []

    def build(cpp_extension, directory):
        library = directory / f"{_fused.NAME}.so"
        if not library.exists():  # as ninja: an up-to-date library is not rebuilt
            builds.append(directory)
            library.write_bytes(b"")

    monkeypatch.setattr(_fused, "_build_and_load", build)
    return tmp_path / _fused._build_name(sys.executable), builds


def test_a_build_says_so_in_one_line_with_its_duration_and_a_cached_load_says_nothing(
        tmp_path, monkeypatch, capsys):
    directory, builds = loader_with_a_stand_in_build(tmp_path, monkeypatch)
    assert _fused._load() is None and builds == [directory]
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert re.fullmatch(r"sklearn_measattn: compiling the fused CPU kernels \(fused_attention\.cpp, .*\) into "
                        rf"{re.escape(str(directory))}, .*\.\.\. done in [0-9.]+ s\n", err), err
    assert _fused._load() is None and builds == [directory]  # up to date: loaded, not rebuilt
    assert capsys.readouterr().err == ""


def test_a_failed_build_ends_its_line(tmp_path, monkeypatch, capsys):
    loader_with_a_stand_in_build(tmp_path, monkeypatch)

    def fail(cpp_extension, directory):
        raise RuntimeError("fatal error: simulated")

    monkeypatch.setattr(_fused, "_build_and_load", fail)
    assert "simulated" in _fused._load()
    [line] = capsys.readouterr().err.splitlines()
    assert "compiling the fused CPU kernels" in line and re.search(r"\.\.\. failed after [0-9.]+ s$", line)


def hold_the_build_lock(directory, seconds, while_held=lambda: None):
    """Hold the build lock as another process would, for ``seconds`` in a thread; the thread."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    handle = open(directory.with_suffix(".lock"), "a")
    fcntl.flock(handle, fcntl.LOCK_EX)

    def release():
        time.sleep(seconds)
        while_held()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()

    holder = threading.Thread(target=release)
    holder.start()
    return holder


@pytest.mark.slow
def test_waiting_for_another_process_building_says_so_in_one_line_with_its_duration(
        tmp_path, monkeypatch, capsys):
    directory, builds = loader_with_a_stand_in_build(tmp_path, monkeypatch)
    library = directory / f"{_fused.NAME}.so"
    monkeypatch.setattr(_fused, "_SILENT_WAIT", 0.1)
    holder = hold_the_build_lock(directory, 0.6, while_held=lambda: library.write_bytes(b""))  # it builds
    assert _fused._load() is None
    holder.join()
    assert builds == []  # loaded what the other built
    [line] = capsys.readouterr().err.splitlines()
    match = re.fullmatch(r"sklearn_measattn: waiting for another process to build \(or load\) the fused CPU "
                         rf"kernels in {re.escape(str(directory))}\.\.\. done in ([0-9.]+) s", line)
    assert match and float(match[1]) >= 0.5, line
    assert _fused.build_seconds() == 0.0


@pytest.mark.slow
def test_a_short_wait_for_the_lock_says_nothing(tmp_path, monkeypatch, capsys):
    """A process that only loads an up-to-date library holds the lock briefly: no line for that."""
    directory, builds = loader_with_a_stand_in_build(tmp_path, monkeypatch)
    monkeypatch.setattr(_fused, "_SILENT_WAIT", 30.0)
    assert _fused._load() is None and len(builds) == 1
    capsys.readouterr()
    holder = hold_the_build_lock(directory, 0.3)
    assert _fused._load() is None
    holder.join()
    assert capsys.readouterr().err == "" and len(builds) == 1


def test_build_directory_depends_on_the_cpu(monkeypatch):
    """Libraries built with -march=native for one CPU are never loaded on another
    that shares the cache: the build directory's name holds the CPU's flags."""
    monkeypatch.setattr(_fused, "_cpu_signature", lambda: "flags\t\t: fpu sse2 avx2 fma")
    avx2 = _fused._build_name("/usr/bin/c++")
    monkeypatch.setattr(_fused, "_cpu_signature", lambda: "flags\t\t: fpu sse2 avx2 fma avx512f avx512bw")
    avx512 = _fused._build_name("/usr/bin/c++")
    assert avx2 != avx512
    assert "-march=native" in _fused._CFLAGS


def test_python_kinds_equal_the_cpp_enum():
    """The KIND_* constants passed to the ops are the values of the C++ Kind enum."""
    source = _fused.SOURCES[0].read_text()
    [body] = re.findall(r"enum Kind : int64_t \{(.*?)\};", source, flags=re.DOTALL)
    cpp = {"KIND_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper(): int(value)
           for name, value in re.findall(r"k(\w+) = (\d+)", body)}
    python = {name: getattr(_fused, name) for name in dir(_fused) if name.startswith("KIND_")}
    assert len(cpp) == 6 and cpp == python
    assert set(python) <= set(extension.__all__)


def test_the_ninja_package_builds_when_no_ninja_is_on_the_path(tmp_path, monkeypatch):
    """torch looks for ninja on the PATH only; the ninja that pip installs with the package may
    not be there (a virtual environment not activated), so the loader puts it there for the build."""
    fake_bin = tmp_path / "ninja_bin"
    fake_bin.mkdir()
    (fake_bin / "ninja").write_text("#!/bin/sh\necho 1.11.1\n")
    (fake_bin / "ninja").chmod(0o755)
    monkeypatch.setitem(sys.modules, "ninja", type(sys)("ninja"))
    sys.modules["ninja"].BIN_DIR = str(fake_bin)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert _fused._ninja_directory() == str(fake_bin)
    with _fused._ninja_on_path(_fused._ninja_directory()):
        assert shutil.which("ninja") == str(fake_bin / "ninja")
    assert shutil.which("ninja") is None  # the PATH is given back


def test_no_ninja_anywhere_is_a_reason_not_a_failure(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ninja", None)  # import ninja raises ImportError
    monkeypatch.setenv("CXX", sys.executable)  # any executable passes the compiler's precondition
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("MEASATTN_FUSED", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert "ninja" in _fused.build_precondition()
