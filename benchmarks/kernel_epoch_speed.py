"""Training epoch time of MeasureTransformerRegressor per attention kernel, as ratios to softmax.

Every kernel trains on the same data with the same sizes and seed. Epoch
durations come from skorch's ``history_[:, "dur"]`` (seconds per epoch, data
loading, forward, loss, backward and optimizer step included); the first epoch
of every fit is dropped as warm-up. Kernels are fitted in round-robin order for
several rounds, so that load from other processes hits them alike; the table
reports the median epoch time of each kernel over all its kept epochs and the
ratio ``median(kernel) / median(softmax)`` measured in this one process run.

Usage::

    python benchmarks/kernel_epoch_speed.py --quick          # 1 round, N = 256; well under a minute
    python benchmarks/kernel_epoch_speed.py                  # 3 rounds x 4 epochs, N = 256; a few minutes on CPU
    python benchmarks/kernel_epoch_speed.py --n-points 1024 --rounds 2
    python benchmarks/kernel_epoch_speed.py --threads 1 --backend chunked
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np
import torch

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.attention import resolve_backend
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.kernels import KERNEL_NAMES, get_kernel

TARGET = 1.3  # the goal: a training epoch within 1.3x of softmax's


def epoch_times(kernel, X, y, args):
    """Fit one model; return the per-epoch seconds after the first (warm-up) epoch."""
    model = MeasureTransformerRegressor(
        kernel=kernel,
        d_model=args.d_model,
        n_heads=args.n_heads,
        n_layers=args.n_layers,
        dim_feedforward=args.dim_feedforward,
        batch_size=args.batch_size,
        max_epochs=args.epochs,
        device=args.device,
        attention_backend=args.backend,
        loss=args.loss,
        random_state=0,
    )
    model.fit(X, y)
    durations = [float(d) for d in model.history_[:, "dur"]]
    return durations[1:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=64)
    parser.add_argument("--n-points", type=int, default=256, help="points per measure (e.g. 1024 for the larger run)")
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("--dim-feedforward", type=int, default=128, help="estimator default")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--loss", default="energy")
    parser.add_argument("--kernels", nargs="+", default=list(KERNEL_NAMES), choices=KERNEL_NAMES)
    parser.add_argument("--backend", default="auto", help="attention_backend of the estimator")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per fit, the first dropped (default 4)")
    parser.add_argument("--rounds", type=int, default=None, help="round-robin rounds over the kernels (default 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="1 round of 3 epochs")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    args.epochs = args.epochs or (3 if args.quick else 4)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.epochs < 2:
        parser.error("--epochs must be >= 2 (the first epoch of every fit is dropped)")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    kernels = list(dict.fromkeys(["softmax", *args.kernels]))

    X, y = make_matrix_inverse(n_samples=args.n_samples, n_points=args.n_points, tail="gaussian", random_state=0)
    X, y = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.float32)

    print(f"# training_speed: torch {torch.__version__}, device {args.device}, {torch.get_num_threads()} threads, "
          f"python {platform.python_version()}")
    print(f"# make_matrix_inverse n_samples={args.n_samples} n_points={args.n_points}; d_model={args.d_model} "
          f"n_heads={args.n_heads} n_layers={args.n_layers} dim_feedforward={args.dim_feedforward} "
          f"batch_size={args.batch_size} loss={args.loss} backend={args.backend}")
    print(f"# {rounds} round-robin rounds x {args.epochs} epochs per fit, first epoch of each fit dropped; "
          "median over kept epochs; ratio = median(kernel) / median(softmax) in this run")
    print(f"# command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    probe = torch.zeros(1, 1, 1, 1, device=args.device)
    resolved = {kernel: resolve_backend(args.backend, get_kernel(kernel), probe) for kernel in args.kernels}
    print("# attention backend per kernel: " + ", ".join(f"{k} -> {b}" for k, b in resolved.items()))

    times = {kernel: [] for kernel in kernels}
    start = time.perf_counter()
    for r in range(rounds):
        order = kernels[r % len(kernels):] + kernels[:r % len(kernels)]  # rotate the order every round
        for kernel in order:
            kept = epoch_times(kernel, X, y, args)
            times[kernel].extend(kept)
            print(f"# round {r + 1}/{rounds} {kernel}: " + " ".join(f"{t:.2f}" for t in kept) + " s",
                  file=sys.stderr, flush=True)
    total = time.perf_counter() - start

    header = f"| {'kernel':<8} | {'median epoch s':>14} | {'min s':>7} | {'max s':>7} | {'epochs':>6} | {'ratio':>6} |"
    print(header)
    print("|" + "|".join("-" * len(col) for col in header.split("|")[1:-1]) + "|")
    base = statistics.median(times["softmax"])
    ratios = {}
    for kernel in kernels:
        values = times[kernel]
        med = statistics.median(values)
        ratios[kernel] = med / base
        print(f"| {kernel:<8} | {med:>14.3f} | {min(values):>7.3f} | {max(values):>7.3f} | {len(values):>6} | "
              f"{ratios[kernel]:>6.2f} |", flush=True)
    others = {k: v for k, v in ratios.items() if k != "softmax"}
    if others:
        worst = max(others, key=others.get)
        verdict = "met" if others[worst] <= TARGET else "NOT met"
        print(f"summary: epoch time / softmax at n_points={args.n_points}: worst {others[worst]:.2f}x ({worst}), "
              f"median {statistics.median(others.values()):.2f}x; target {TARGET}x {verdict} "
              f"({total:.0f} s total)")


if __name__ == "__main__":
    main()
