"""Peak memory of kernel attention forward+backward against the number of points.

Each configuration runs in a fresh subprocess; its peak resident memory
(``ru_maxrss``) minus the resident memory just before the attention call is the
attention's own peak. Compared with one N x N float32 score matrix, the fused
backend's peak stays O(N * d), the chunked backend's O(N * chunk), while the
naive backend's grows as N^2.

Usage::

    python benchmarks/attention_memory.py                 # fused and chunked up to N = 65536
    python benchmarks/attention_memory.py --max-n 32768 --backends fused chunked naive
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, torch
from sklearn_measattn.attention import kernel_attention
n, backend, kernel, d_head = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.manual_seed(0)
# Warm up at a small size first: the first call pages in torch's kernels, which
# would otherwise count as the attention's memory.
warm = [torch.randn(1, 1, 256, d_head, requires_grad=True) for _ in range(3)]
kernel_attention(*warm, kernel, backend=backend).square().sum().backward()
q, k, v = (torch.randn(1, 1, n, d_head, requires_grad=True) for _ in range(3))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
out = kernel_attention(q, k, v, kernel, backend=backend)
out.square().sum().backward()
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ok = bool(torch.isfinite(q.grad).all())
print(json.dumps({"peak_mib": max(peak - before, 0) / 1024, "seconds": elapsed, "finite": ok}))
"""


def measure(n, backend, kernel, d_head):
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), backend, kernel, str(d_head)],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr else "failed"}
    return json.loads(result.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=65536)
    parser.add_argument("--min-n", type=int, default=1024)
    parser.add_argument("--backends", nargs="+", default=["fused", "chunked"])
    parser.add_argument("--kernel", default="log")
    parser.add_argument("--d-head", type=int, default=16)
    parser.add_argument("--naive-max-n", type=int, default=16384, help="largest N tried with the naive backend")
    args = parser.parse_args(argv)

    print(f"kernel={args.kernel}, batch=1, heads=1, d_head={args.d_head}, forward+backward, CPU")
    print(f"{'N':>7} {'backend':>8} {'peak MiB':>10} {'N x N f32 MiB':>14} {'peak / NxN':>11} {'seconds':>8}")
    worst_ratio = {}
    n = args.min_n
    while n <= args.max_n:
        square_mib = n * n * 4 / 2**20
        for backend in args.backends:
            if backend == "naive" and n > args.naive_max_n:
                continue
            row = measure(n, backend, args.kernel, args.d_head)
            if "error" in row:
                print(f"{n:>7} {backend:>8}  error: {row['error']}")
                continue
            ratio = row["peak_mib"] / square_mib
            if backend != "naive" and n >= 8192:
                worst_ratio[backend] = max(worst_ratio.get(backend, 0.0), ratio)
            print(f"{n:>7} {backend:>8} {row['peak_mib']:>10.1f} {square_mib:>14.1f} {ratio:>11.4f} {row['seconds']:>8.2f}"
                  + ("" if row["finite"] else "  NON-FINITE GRADIENT"))
        n *= 2
    for backend, ratio in worst_ratio.items():
        print(f"summary: {backend} peak memory is at most {ratio:.4f} x one N x N float32 matrix for N >= 8192")


if __name__ == "__main__":
    main()
