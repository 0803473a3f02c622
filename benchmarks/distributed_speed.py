"""One fit on 1 and on 2 CPU processes at the same global batch: epoch time, agreement, held-out score.

Runs ``MeasureTransformerRegressor(distributed=True)`` under ``torchrun
--standalone --nproc_per_node 2`` (each process one torch thread, per-process
batch b) and the same fit in one process (two threads, batch 2b), then prints
the median epoch time of each (first epoch dropped), their ratio, whether the
two processes' predictions are identical, and the held-out energy distance
(symlog space) of both fits. On a 2-core machine expect little speed-up: the
point is correctness and the cost of communication.

Usage::

    python benchmarks/distributed_speed.py            # about 2 minutes on 2 cores
    python benchmarks/distributed_speed.py --n-samples 512 --epochs 6
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch


def fit_and_report(args, distributed, batch_size, threads, out):
    from sklearn_measattn import MeasureTransformerRegressor
    from sklearn_measattn.datasets import make_matrix_inverse
    from sklearn_measattn.metrics import energy_distance, to_space

    torch.set_num_threads(threads)
    X, y = make_matrix_inverse(n_samples=args.n_samples, n_points=args.n_points, tail="pareto", tail_index=0.7,
                               random_state=0)
    X_test, y_test = make_matrix_inverse(n_samples=64, n_points=args.n_points, tail="pareto", tail_index=0.7,
                                         random_state=1)
    model = MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=32, dim_feedforward=64,
                                        batch_size=batch_size, lr=2e-3, max_epochs=args.epochs, random_state=0,
                                        distributed=distributed)
    model.fit(X, y)
    prediction = model.predict(X_test)
    rank = torch.distributed.get_rank() if distributed else 0
    result = {
        "epochs": [float(d) for d in model.history_[1:, "dur"]],
        "energy_symlog": float(energy_distance(to_space(y_test, "symlog"), to_space(prediction, "symlog"))),
        "prediction_sum": float(np.sum(prediction, dtype=np.float64)),
        "prediction": prediction[:4].tolist(),
    }
    with open(os.path.join(out, f"{'distributed' if distributed else 'single'}_{rank}.json"), "w") as handle:
        json.dump(result, handle)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=256)
    parser.add_argument("--n-points", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8, help="per process; the single process uses twice it")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch (start-up) is left out of the median")
    if args.worker:
        fit_and_report(args, True, args.batch_size, 1, args.worker)
        return 0

    out = tempfile.mkdtemp(prefix="measattn-distributed-")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    print(f"# distributed_speed: {cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"# matrix inverse Pareto(0.7), {args.n_samples} measures x {args.n_points} points, log/symlog, "
          f"{args.epochs} epochs; global batch {2 * args.batch_size}")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               os.path.abspath(__file__), "--worker", out, "--n-samples", str(args.n_samples), "--n-points",
               str(args.n_points), "--batch-size", str(args.batch_size), "--epochs", str(args.epochs)]
    print(f"# command: {' '.join(command[1:])}")
    started = time.perf_counter()
    subprocess.run(command, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    distributed_wall = time.perf_counter() - started
    started = time.perf_counter()
    fit_and_report(args, False, 2 * args.batch_size, 2, out)
    single_wall = time.perf_counter() - started

    def load(name):
        with open(os.path.join(out, name)) as handle:
            return json.load(handle)

    ranks = [load("distributed_0.json"), load("distributed_1.json")]
    single = load("single_0.json")
    identical = ranks[0]["prediction"] == ranks[1]["prediction"] and \
        ranks[0]["prediction_sum"] == ranks[1]["prediction_sum"]
    two = statistics.median(ranks[0]["epochs"])
    one = statistics.median(single["epochs"])
    print("| run | median epoch s | held-out energy [symlog] | wall s (with start-up) |")
    print("|---|---|---|---|")
    print(f"| 1 process, 2 threads, batch {2 * args.batch_size} | {one:.3f} | {single['energy_symlog']:.4f} | "
          f"{single_wall:.1f} |")
    print(f"| 2 processes, 1 thread each, batch {args.batch_size} each | {two:.3f} | "
          f"{ranks[0]['energy_symlog']:.4f} | {distributed_wall:.1f} |")
    print(f"summary: epoch time 2 processes / 1 process = {two / one:.2f}; the two processes predict "
          f"{'identically' if identical else 'DIFFERENTLY'}; held-out energy {ranks[0]['energy_symlog']:.4f} "
          f"(2 processes) against {single['energy_symlog']:.4f} (1 process)")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
