"""One-call GPU check of kernel attention: correctness, speed against SDPA, one epoch.

Run on a CUDA machine (written for one NVIDIA H200; a few minutes)::

    python benchmarks/gpu_check.py            # everything; paste stdout into RESULTS.md
    python benchmarks/gpu_check.py --dry-run  # tiny sizes on CPU: checks the script itself

Sections, all printed to stdout as markdown:

1. correctness: the ``flex`` backend (and ``chunked``) against ``naive`` for every
   kernel, float32 and bfloat16, output and gradients of q, k, v, with per-point
   weights (one of them zero);
2. speed: forward+backward time of each kernel (flex, the GPU default) against
   SDPA softmax at the same shape, N in {4096, 16384, 65536}, batch x heads = 8,
   d_head in {32, 64}, bfloat16, medians of interleaved repeats, ratio
   kernel / SDPA and whether it meets the 1.3x target;
3. one training epoch of ``MeasureTransformerRegressor`` per kernel (skipped with a
   message if the estimator is not importable);
4. the energy loss (chunked backend, the device default): forward+backward time
   and peak device memory at N = M = 16384 and 65536 (B = 4, d = 2, float32),
   its value and gradient against the dense reference at a small size, and
   whether the peak stays O(N): the ratio of peak memory to N should not grow
   with N (an N x N float32 matrix at N = 65536 would take 16 GiB per measure);
5. a summary line with the worst ratio against the target.

The exit status is 1 if a correctness check fails (speed misses are reported,
not failed). On CPU (``--dry-run``/``--cpu``) flex runs forward only (it has no
CPU backward), so its gradient checks and timings are skipped there.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from sklearn_measattn.attention import kernel_attention
from sklearn_measattn.kernels import KERNEL_NAMES, get_kernel

TARGET_RATIO = 1.3
# Absolute/relative tolerances against naive (computed in float32 from the same
# low-precision inputs for bf16, so the reference itself is not rounded).
TOLERANCES = {torch.float32: 2e-3, torch.bfloat16: 3e-2}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def check_correctness(device, n, dtypes, backends, grad_backends):
    """Return (rows, ok): max abs error of each backend against naive."""
    rows, ok = [], True
    generator = torch.Generator().manual_seed(0)
    shape = (2, 4, n, 16)
    base = [torch.randn(*shape, generator=generator) for _ in range(3)]
    weights = torch.rand(2, n, generator=generator).to(device)
    weights[:, 1] = 0.0
    grad_out = torch.randn(*shape, generator=generator).to(device)
    for dtype in dtypes:
        tol = TOLERANCES[dtype]
        inputs = [t.to(device=device, dtype=dtype) for t in base]
        # Reference: naive in float32 (float64 on CPU) from the same rounded inputs.
        ref_dtype = torch.float64 if device.type == "cpu" else torch.float32
        for kernel in KERNEL_NAMES:
            ref_inputs = [t.detach().to(ref_dtype).requires_grad_(True) for t in inputs]
            expected_out = kernel_attention(*ref_inputs, kernel, weights=weights.to(ref_dtype), backend="naive")
            expected = (expected_out, *torch.autograd.grad(expected_out, ref_inputs, grad_out.to(ref_dtype)))
            for backend in backends:
                with_grad = backend in grad_backends
                if backend == "chunked" and dtype == torch.bfloat16 and device.type == "cpu":
                    continue
                qkv = [t.detach().clone().requires_grad_(with_grad) for t in inputs]
                try:
                    with torch.set_grad_enabled(with_grad):
                        out = kernel_attention(*qkv, kernel, weights=weights, backend=backend)
                    got = [out]
                    if with_grad:
                        got += list(torch.autograd.grad(out, qkv, grad_out.to(dtype)))
                except Exception as exc:  # report, count as failure
                    message = f"{type(exc).__name__}: {str(exc)[:80]}"
                    rows.append((kernel, backend, str(dtype).replace("torch.", ""), "ERROR", message))
                    ok = False
                    continue
                names = ["out", "dq", "dk", "dv"][: len(got)]
                errors = []
                passed = True
                for name, g, e in zip(names, got, expected):
                    g, e = g.float(), e.float()
                    finite = bool(torch.isfinite(g).all())
                    err = (g - e).abs().max().item() if finite else math.inf
                    scale = e.abs().max().item()
                    good = finite and err <= tol + tol * scale
                    passed &= good
                    errors.append(f"{name} {err:.1e}")
                ok &= passed
                rows.append((kernel, backend, str(dtype).replace("torch.", ""), "ok" if passed else "FAIL", ", ".join(errors)))
    return rows, ok


def time_speed(device, dtype, ns, d_heads, kernels, backend, repeats, batch, heads):
    """Return rows (n, d, kernel, kernel_ms, sdpa_ms, ratio, first_ms)."""
    rows = []
    for n in ns:
        for d in d_heads:
            try:
                rows.extend(_time_shape(device, dtype, n, d, kernels, backend, repeats, batch, heads))
            except torch.OutOfMemoryError as exc:
                print(f"  N={n} d={d}: out of memory ({exc!s:.60})", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def _time_shape(device, dtype, n, d, kernels, backend, repeats, batch, heads):
    """Forward+backward of SDPA and each kernel at one shape, interleaved; the
    tensors live only in this call, so memory is freed before the next shape."""
    generator = torch.Generator().manual_seed(1)
    q, k, v, grad_out = (
        torch.randn(batch, heads, n, d, generator=generator).to(device=device, dtype=dtype) for _ in range(4)
    )
    for t in (q, k, v):
        t.requires_grad_(True)

    def step(fn):
        _sync(device)
        start = time.perf_counter()
        torch.autograd.backward(fn(q, k, v), grad_out)
        _sync(device)
        q.grad = k.grad = v.grad = None
        return time.perf_counter() - start

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    fns = {name: (lambda q, k, v, name=name: kernel_attention(q, k, v, name, backend=backend)) for name in kernels}
    step(sdpa)
    first = {}
    for name, fn in fns.items():
        first[name] = step(fn)  # includes compilation for flex
        step(fn)
    times = {name: [] for name in fns}
    sdpa_times = []
    for _ in range(repeats):
        for name, fn in fns.items():
            sdpa_times.append(step(sdpa))
            times[name].append(step(fn))
    sdpa_ms = statistics.median(sdpa_times) * 1e3
    return [(n, d, name, statistics.median(times[name]) * 1e3, sdpa_ms,
             statistics.median(times[name]) * 1e3 / sdpa_ms, first[name] * 1e3) for name in fns]


def one_epoch(device, kernels, n_samples, n_points, dry_run):
    """Fit one epoch per kernel; return rows (kernel, seconds, score) or None if skipped."""
    try:
        from sklearn_measattn import MeasureTransformerRegressor
    except ImportError as exc:
        print(f"estimator: skipped, sklearn_measattn.MeasureTransformerRegressor is not importable ({exc})")
        return None
    from sklearn_measattn.datasets import make_matrix_inverse

    X, y = make_matrix_inverse(n_samples=n_samples, n_points=n_points, n_features=2, tail="student_t", random_state=0)
    rows = []
    for kernel in kernels:
        model = MeasureTransformerRegressor(
            kernel=kernel, max_epochs=1, batch_size=16, d_model=32 if dry_run else 64,
            device=device.type, random_state=0,
        )
        start = time.perf_counter()
        model.fit(X, y)
        _sync(device)
        seconds = time.perf_counter() - start
        score = model.score(X[:8], y[:8])
        rows.append((kernel, seconds, score))
    return rows


def energy_loss_check(device, ns, repeats, batch=4):
    """Return (rows, ok): energy loss fwd+bwd time and peak memory per N, and its error against the reference."""
    from sklearn_measattn.losses import energy_loss

    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 300, 2, generator=generator), torch.randn(2, 200, 2, generator=generator) + 0.5
    x, y = x.to(device, torch.float64).requires_grad_(True), y.to(device, torch.float64)
    exact = energy_loss(x, y, backend="reference")
    (exact_grad,) = torch.autograd.grad(exact, x)
    got = energy_loss(x, y)
    (got_grad,) = torch.autograd.grad(got, x)
    error = max(float((got - exact).detach().abs() / exact.detach().abs()), float((got_grad - exact_grad).abs().max()
                                                                 / exact_grad.abs().max()))
    ok = error < 1e-8
    rows = []
    for n in ns:
        a = torch.randn(batch, n, 2, device=device, requires_grad=True)
        b = torch.randn(batch, n, 2, device=device)
        times = []
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        for _ in range(repeats + 1):
            _sync(device)
            start = time.perf_counter()
            energy_loss(a, b).backward()
            _sync(device)
            times.append(time.perf_counter() - start)
            a.grad = None
        peak = (torch.cuda.max_memory_allocated() - before) / 2**20 if device.type == "cuda" else math.nan
        rows.append((n, statistics.median(times[1:]) * 1e3, peak, peak / n * 1024 if peak == peak else math.nan))
    return rows, ok, error


def flex_kernel_check(device):
    """The learnt poly degree and the compact kernel on flex against chunked/naive.

    Returns rows ``(what, max abs error, ok)``. On CUDA forward and backward
    (the degrees' gradient included); on CPU (dry run) forward only, as flex
    has no CPU backward.
    """
    from sklearn_measattn.transformer import KernelMultiheadAttention

    rows = []
    with_grad = device.type == "cuda"
    torch.manual_seed(0)
    x = torch.randn(2, 256, 32, device=device)
    layers = {}
    for backend in ("flex", "chunked"):
        torch.manual_seed(1)
        layer = KernelMultiheadAttention(32, 4, kernel="learned_poly", backend=backend).to(device)
        with torch.no_grad():
            layer.degree_raw.copy_(torch.tensor([-1.0, 0.0, 1.0, 2.0]))
        layers[backend] = layer
    outs, grads = {}, {}
    for backend, layer in layers.items():
        with torch.set_grad_enabled(with_grad):
            out = layer(x)
        outs[backend] = out
        if with_grad:
            out.square().sum().backward()
            grads[backend] = layer.degree_raw.grad.clone()
    error = (outs["flex"] - outs["chunked"]).abs().max().item()
    rows.append(("learned_poly forward (flex vs chunked)", error, error <= 2e-3))
    if with_grad:
        reference = grads["chunked"]
        error = ((grads["flex"] - reference).abs().max() / reference.abs().max()).item()
        rows.append(("learned_poly degree gradient (relative)", error, error <= 2e-3))
    generator = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 256, 16, generator=generator).to(device) for _ in range(3))
    q[0, :, :64] = -q[0, :, :64].abs() - 1.0  # no key in the support for these queries
    k[0] = k[0].abs()
    kernel = get_kernel("compact", threshold=0.5, degree=1.5)
    result = {}
    for backend in ("flex", "naive"):
        leaves = [t.detach().clone().requires_grad_(with_grad) for t in (q, k, v)]
        with torch.set_grad_enabled(with_grad):
            out = kernel_attention(*leaves, kernel, backend=backend)
        result[backend] = [out]
        if with_grad:
            result[backend] += list(torch.autograd.grad(out.square().sum(), leaves))
    for name, got, expected in zip(["out", "dq", "dk", "dv"], result["flex"], result["naive"]):
        error = (got - expected).abs().max().item()
        finite = bool(torch.isfinite(got).all())
        rows.append((f"compact {name} (flex vs naive)", error, finite and error <= 2e-3 * (1 + expected.abs().max().item())))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", "--cpu", dest="dry_run", action="store_true",
                        help="tiny sizes on CPU (tests the script; the speed numbers mean nothing)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--n", type=int, nargs="+", default=None, help="point counts for the speed section")
    parser.add_argument("--d-head", type=int, nargs="+", default=None)
    parser.add_argument("--skip-epoch", action="store_true")
    args = parser.parse_args(argv)

    if args.dry_run:
        device = torch.device("cpu")
        ns, d_heads, repeats = args.n or [256], args.d_head or [16], args.repeats or 2
        speed_dtype, backend = torch.float32, "chunked"
        check_backends, grad_backends = ("flex", "chunked"), ("chunked",)
        dtypes = (torch.float32, torch.bfloat16)
        epoch_sizes = (32, 16)
    else:
        if not torch.cuda.is_available():
            print("No CUDA device: run with --dry-run to test the script on CPU.")
            return 2
        device = torch.device("cuda")
        ns, d_heads, repeats = args.n or [4096, 16384, 65536], args.d_head or [32, 64], args.repeats or 5
        speed_dtype, backend = torch.bfloat16, "flex"
        check_backends, grad_backends = ("flex", "chunked"), ("flex", "chunked")
        dtypes = (torch.float32, torch.bfloat16)
        epoch_sizes = (256, 256)

    print("## GPU check" + (" (dry run on CPU, tiny sizes)" if args.dry_run else ""))
    print()
    name = torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu"
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}; device: {name}; torch {torch.__version__}; "
          f"python {platform.python_version()}")
    print(f"- command: `python {' '.join(sys.argv)}`")
    print()

    print("### Correctness against naive (max abs error; tolerance atol = rtol = 2e-3 fp32, 3e-2 bf16)")
    print()
    t0 = time.perf_counter()
    rows, ok = check_correctness(device, 300 if not args.dry_run else 64, dtypes, check_backends, grad_backends)
    print("| kernel | backend | dtype | result | errors |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\ncorrectness: {'all passed' if ok else 'FAILURES'} ({time.perf_counter() - t0:.1f} s)\n", flush=True)

    print(f"### Forward+backward vs SDPA softmax ({backend}, {str(speed_dtype).replace('torch.', '')}, "
          f"batch 2 x heads 4, median of {repeats})")
    print()
    speed_kernels = [k for k in KERNEL_NAMES if k != "softmax"] if device.type == "cuda" else list(KERNEL_NAMES)
    if device.type == "cuda":
        speed_kernels = list(KERNEL_NAMES)  # softmax through flex too: the cost of flex itself
    t0 = time.perf_counter()
    speed = time_speed(device, speed_dtype, ns, d_heads, speed_kernels, backend, repeats, 2, 4)
    print("| N | d_head | kernel | ms | SDPA ms | ratio | meets 1.3x | first call ms |")
    print("|---|---|---|---|---|---|---|---|")
    for n, d, kernel, ms, sdpa_ms, ratio, first_ms in speed:
        print(f"| {n} | {d} | {kernel} | {ms:.2f} | {sdpa_ms:.2f} | {ratio:.2f} | "
              f"{'yes' if ratio <= TARGET_RATIO else 'no'} | {first_ms:.0f} |")
    print(f"\n({time.perf_counter() - t0:.1f} s)\n", flush=True)

    print("### One training epoch per kernel (MeasureTransformerRegressor, matrix-inverse, Student-t)")
    print()
    epoch = None
    if not args.skip_epoch:
        try:
            epoch = one_epoch(device, ["softmax", "log"] if args.dry_run else list(KERNEL_NAMES), *epoch_sizes,
                              args.dry_run)
        except Exception:  # an estimator bug should not hide the attention results
            print("estimator: FAILED")
            traceback.print_exc(file=sys.stdout)
    else:
        print("estimator: skipped (--skip-epoch)")
    if epoch:
        print("| kernel | epoch seconds | score (neg. energy) |")
        print("|---|---|---|")
        for kernel, seconds, score in epoch:
            print(f"| {kernel} | {seconds:.2f} | {score:.4g} |")
    print()

    if speed:
        worst = max(speed, key=lambda r: r[5])
        verdict = "meets" if worst[5] <= TARGET_RATIO else "misses"
        print(f"summary: correctness {'passed' if ok else 'FAILED'}; worst kernel/SDPA ratio {worst[5]:.2f}x "
              f"({worst[2]}, N={worst[0]}, d={worst[1]}) {verdict} the {TARGET_RATIO}x target; "
              f"{sum(r[5] <= TARGET_RATIO for r in speed)}/{len(speed)} configurations within target")
    else:
        print(f"summary: correctness {'passed' if ok else 'FAILED'}; no speed measurements")

    print()
    print(f"### Energy loss (B = 4, d = 2, float32, median of {repeats} after one warm-up)")
    print()
    energy_rows, energy_ok, energy_error = energy_loss_check(device, [512, 2048] if args.dry_run else [16384, 65536],
                                                             repeats)
    print(f"value and gradient against the dense reference (float64): max relative error {energy_error:.2g} "
          f"({'passed' if energy_ok else 'FAILED'}, tolerance 1e-8)")
    print()
    print("| N = M | fwd+bwd ms | peak MiB | peak KiB per point |")
    print("|---|---|---|---|")
    for n, ms, peak, per_point in energy_rows:
        print(f"| {n} | {ms:.1f} | {peak:.1f} | {per_point:.2f} |")
    print()
    print("### FlexAttention: the learnt degree and the compact kernel" + (" (forward only on CPU)" if args.dry_run else ""))
    print()
    flex_rows = flex_kernel_check(device)
    print("| check | max error | result |")
    print("|---|---|---|")
    for what, error, good in flex_rows:
        print(f"| {what} | {error:.1e} | {'ok' if good else 'FAIL'} |")
    flex_ok = all(good for _, _, good in flex_rows)
    print()
    return 0 if ok and energy_ok and flex_ok else 1


if __name__ == "__main__":
    sys.exit(main())
