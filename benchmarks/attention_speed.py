"""Forward+backward time of kernel attention against SDPA softmax, as ratios.

For every shape, SDPA softmax (:func:`torch.nn.functional.scaled_dot_product_attention`)
and each (kernel, backend) pair run forward+backward in an interleaved loop, so
that load from other processes hits them alike; the table reports the median
time of each and the ratio ``median(kernel) / median(SDPA)`` measured in this one
process run. The naive backend is skipped where its N x N score matrix (and the
copies its backward keeps) would not fit comfortably in memory.

Usage::

    python benchmarks/attention_speed.py --quick                 # N = 1024, 4096; a few minutes on CPU
    python benchmarks/attention_speed.py                         # N = 1024, 4096, 16384; d_head 16, 32
    python benchmarks/attention_speed.py --n 4096 --d-head 32 --kernels poly log --backends fused chunked
    python benchmarks/attention_speed.py --quick --fresh-build   # also time compiling the fused kernels
    python benchmarks/attention_speed.py --quick --cpu-time      # one thread, its CPU time: for a busy machine

The fused CPU backend compiles its C++ kernels on the first call of a process
(or loads them from the cache); that time is printed on its own line, before
the table, and never enters the ratios.

The header names the CPU and its vector instruction set; every row also gives
the achieved GFLOP/s of the attention's matrix products and their fraction of
the machine's float32 FMA peak, so a reader sees how far each path is from the
limit. The work counted is the same for every backend: forward ``Q K^T`` and
``P V``, backward the recomputed ``Q K^T``, ``dV = P^T dO``, ``dP = dO V^T``,
``dQ = dS K`` and ``dK = dS^T Q``, that is ``2 N^2 (3 d + 2 d_v) + 2 N^2 (d + d_v)``
per batch x head. The peak is cores x clock x FMA units x SIMD lanes x 2: the
cores are the intra-op threads, the clock is the nominal frequency the kernel
reports in ``/proc/cpuinfo`` (turbo and AVX-512 down-clocking are not known,
so it is an assumption), the lanes follow from the instruction set (16 float32
lanes with AVX-512, 8 with AVX2), and the FMA units per core are assumed: 2 on
Intel, and 2 of 256 bits on AMD (so 8 lanes each even with AVX-512, as on Zen 4).
``--peak-gflops`` replaces the derived peak with a known one.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from sklearn_measattn.attention import kernel_attention
from sklearn_measattn.kernels import KERNEL_NAMES

# Forward+backward time against SDPA softmax that each kernel aims at on CPU.
TARGETS = {"poly": 1.1, "log": 1.3, "sigmoid": 1.3, "softplus": 1.6}
# Vector instruction sets, widest first: (cpuinfo flag, name, float32 lanes).
_VECTOR_SETS = (("avx512f", "AVX-512", 16), ("avx2", "AVX2", 8), ("avx", "AVX", 8), ("sse2", "SSE2", 4))

# Largest N x N float32 matrices (summed over batch x heads) the naive backend
# may build: it keeps about four of them alive in backward.
NAIVE_MAX_ELEMENTS = 2**31 // 4  # 2 GiB of float32 per matrix


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# The clock of the timings: wall time by default; --cpu-time switches to the CPU
# time of the calling thread (with one intra-op thread), which time taken by
# other processes on a shared machine does not inflate.
_clock = time.perf_counter


def _step(fn, q, k, v, grad_out):
    """One forward+backward; returns seconds."""
    _sync(q.device)
    start = _clock()
    out = fn(q, k, v)
    torch.autograd.backward(out, grad_out)
    _sync(q.device)
    elapsed = _clock() - start
    q.grad = k.grad = v.grad = None
    return elapsed


def cpu_description():
    """CPU model, vector instruction set, nominal MHz and vendor, from /proc/cpuinfo."""
    model, flags, mhz, vendor = platform.processor() or platform.machine(), set(), None, ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    model = value
                elif key == "flags" and not flags:
                    flags = set(value.split())
                elif key == "cpu MHz" and mhz is None:
                    mhz = float(value)
                elif key == "vendor_id":
                    vendor = value
    except OSError:
        pass
    vector = next(((name, lanes) for flag, name, lanes in _VECTOR_SETS if flag in flags), ("scalar", 1))
    extras = [name for flag, name in (("avx512_bf16", "AVX512-BF16"), ("avx512_fp16", "AVX512-FP16"),
                                      ("amx_tile", "AMX")) if flag in flags]
    return {"model": model, "vector": vector[0], "lanes": vector[1], "extras": extras, "mhz": mhz, "vendor": vendor}


def fma_peak_gflops(cpu, cores):
    """float32 FMA peak: cores x GHz x FMA units x lanes x 2 (see the module docstring)."""
    if cpu["mhz"] is None:
        return None, "peak unknown (no clock in /proc/cpuinfo)"
    units, lanes = 2, cpu["lanes"]
    if cpu["vendor"] == "AuthenticAMD":
        lanes = min(lanes, 8)  # 256-bit FMA pipes: AVX-512 runs as two halves
    peak = cores * cpu["mhz"] / 1e3 * units * lanes * 2
    return peak, (f"{cores} cores x {cpu['mhz'] / 1e3:.2f} GHz (nominal, assumed) x {units} FMA units (assumed) "
                  f"x {lanes} float32 lanes x 2 = {peak:.0f} GFLOP/s")


def matmul_flops(n, d_head, batch, heads):
    """Floating-point operations of the attention's matrix products, forward+backward."""
    d_value = d_head
    return 2 * n * n * ((d_head + d_value) + (3 * d_head + 2 * d_value)) * batch * heads


def backends_for(device, requested):
    names = []
    for backend in requested:
        if backend == "flex" and device.type != "cuda":
            continue  # FlexAttention has no backward on CPU
        if backend == "fused" and device.type != "cpu":
            continue  # the fused C++ kernels are CPU kernels; flex is the CUDA one
        names.append(backend)
    return names


def run_shape(n, d_head, batch, heads, kernels, backends, repeats, warmup, device, dtype, chunk_size=None, seed=0):
    """Return ``{label: [seconds, ...]}`` for SDPA and each (kernel, backend)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v, grad_out = (
        torch.randn(batch, heads, n, d_head, generator=generator).to(device=device, dtype=dtype) for _ in range(4)
    )
    for t in (q, k, v):
        t.requires_grad_(True)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    runs = {("softmax", "sdpa"): sdpa}
    for kernel in kernels:
        for backend in backends:
            if backend == "naive" and batch * heads * n * n > NAIVE_MAX_ELEMENTS:
                continue
            runs[(kernel, backend)] = (
                lambda q, k, v, kernel=kernel, backend=backend: kernel_attention(
                    q, k, v, kernel, backend=backend, chunk_size=chunk_size if backend == "chunked" else None
                )
            )
    times = {label: [] for label in runs}
    first = {}
    for label, fn in runs.items():  # warm-up (and compile, for flex): timed separately
        first[label] = _step(fn, q, k, v, grad_out)
        for _ in range(warmup - 1):
            _step(fn, q, k, v, grad_out)
    for _ in range(repeats):
        for label, fn in runs.items():
            if label != ("softmax", "sdpa"):
                times[("softmax", "sdpa")].append(_step(sdpa, q, k, v, grad_out))
            times[label].append(_step(fn, q, k, v, grad_out))
    return times, first


def _prepare_fused(backends, fresh_build):
    """Build or load the fused kernels now, so the time is reported on its own."""
    from sklearn_measattn.attention import fused_status

    if fresh_build:
        os.environ["MEASATTN_CACHE_DIR"] = tempfile.mkdtemp(prefix="measattn-build-")
    start = time.perf_counter()
    status = fused_status()
    elapsed = time.perf_counter() - start
    if status.startswith("unavailable"):
        print(f"# fused: {status}; skipped")
        return [b for b in backends if b != "fused"]
    print(f"# fused: first use {elapsed:.2f} s, {status}; not included in any timing below")
    return backends


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=None, help="point counts N (default 1024 4096 16384)")
    parser.add_argument("--d-head", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kernels", nargs="+", default=list(KERNEL_NAMES), choices=KERNEL_NAMES)
    parser.add_argument("--backends", nargs="+", default=["fused", "chunked", "naive", "flex"],
                        choices=["fused", "chunked", "naive", "flex", "auto"])
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per shape (default 5, --quick 3)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--chunk-size", type=int, default=None, help="chunked backend's queries per block")
    parser.add_argument("--quick", action="store_true", help="N = 1024 4096, 3 repeats, no naive above N = 4096")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--cpu-time", action="store_true",
                        help="CPU: one intra-op thread, timed by its CPU time (robust to other load on the machine)")
    parser.add_argument("--peak-gflops", type=float, default=None,
                        help="the machine's float32 peak, instead of the one derived from /proc/cpuinfo")
    parser.add_argument("--fresh-build", action="store_true",
                        help="compile the fused kernels into an empty cache, to time the first-use build")
    args = parser.parse_args(argv)

    global _clock
    if args.cpu_time:
        if args.device != "cpu":
            parser.error("--cpu-time times CPU runs only")
        torch.set_num_threads(1)
        _clock = time.thread_time
    ns = args.n or ([1024, 4096] if args.quick else [1024, 4096, 16384])
    repeats = args.repeats or (3 if args.quick else 5)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    backends = backends_for(device, args.backends)

    print(f"# attention_speed: torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads, "
          f"python {platform.python_version()}, {args.dtype}")
    clock = "CPU time of the one computing thread" if args.cpu_time else "wall time"
    print(f"# batch={args.batch} heads={args.heads}; forward+backward; median of {repeats} interleaved repeats "
          f"({clock}); ratio = median(kernel) / median(SDPA softmax) in this run")
    print(f"# command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    peak = None
    if device.type == "cpu":
        cpu = cpu_description()
        print(f"# cpu: {cpu['model']}; vector instructions {cpu['vector']}"
              + (f" (also {', '.join(cpu['extras'])})" if cpu["extras"] else "")
              + f"; {os.cpu_count()} logical CPUs")
        if args.peak_gflops:
            peak, how = args.peak_gflops, f"{args.peak_gflops:.0f} GFLOP/s (given with --peak-gflops)"
        else:
            peak, how = fma_peak_gflops(cpu, torch.get_num_threads())
        print(f"# FMA peak: {how}")
    print("# GFLOP/s: matrix products of forward+backward, 2 N^2 (4 d + 3 d_v) per batch x head, over the median time")
    if "fused" in backends:
        backends = _prepare_fused(backends, args.fresh_build)
    header = (f"| {'N':>6} | {'d':>3} | {'kernel':<8} | {'backend':<7} | {'median ms':>10} | {'SDPA ms':>9} | "
              f"{'ratio':>6} | {'GFLOP/s':>8} | {'% peak':>6} | {'1st call ms':>11} |")
    print(header)
    print("|" + "|".join("-" * (len(col)) for col in header.split("|")[1:-1]) + "|")
    rows = []
    for n in ns:
        for d_head in args.d_head:
            times, first = run_shape(n, d_head, args.batch, args.heads, args.kernels, backends, repeats,
                                     args.warmup, device, dtype, args.chunk_size)
            sdpa_ms = statistics.median(times[("softmax", "sdpa")]) * 1e3
            flops = matmul_flops(n, d_head, args.batch, args.heads)
            for (kernel, backend), values in times.items():
                ms = statistics.median(values) * 1e3
                ratio = ms / sdpa_ms
                rows.append((n, d_head, kernel, backend, ratio))
                gflops = flops / ms / 1e6
                fraction = f"{100 * gflops / peak:>6.1f}" if peak else f"{'-':>6}"
                print(f"| {n:>6} | {d_head:>3} | {kernel:<8} | {backend:<7} | {ms:>10.1f} | {sdpa_ms:>9.1f} | "
                      f"{ratio:>6.2f} | {gflops:>8.1f} | {fraction} | {first[(kernel, backend)] * 1e3:>11.1f} |",
                      flush=True)
    measured = [r for r in rows if r[3] not in ("sdpa", "naive")]
    by_backend = {}
    for n, _, kernel, backend, ratio in measured:
        by_backend.setdefault((backend, n), []).append((ratio, kernel))
    for (backend, n), values in by_backend.items():
        ratios = [ratio for ratio, _ in values]
        worst_ratio, worst_kernel = max(values)
        worst_by_kernel = {}
        for ratio, kernel in values:
            worst_by_kernel[kernel] = max(ratio, worst_by_kernel.get(kernel, 0.0))
        targets = [f"{kernel} {worst_by_kernel[kernel]:.2f}x (target {TARGETS[kernel]}x"
                   f"{', met' if worst_by_kernel[kernel] <= TARGETS[kernel] else ', missed'})"
                   for kernel in TARGETS if kernel in worst_by_kernel]
        target_text = f"; worst per kernel: {', '.join(targets)}" if targets else ""
        print(f"summary: {backend} / SDPA forward+backward, N={n}: median {statistics.median(ratios):.2f}x, "
              f"worst {worst_ratio:.2f}x ({worst_kernel}){target_text}")


if __name__ == "__main__":
    main()
