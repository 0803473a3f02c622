"""Training and predicting on large ensembles with a subsampled context (``context_size``).

Three measurements, each in its own process so that peak memory is the run's own:

1. **Scale**: fit (2 epochs) and predict time and peak resident memory against the
   ensemble size N (points per measure) for ``context_size`` 256 and 1024, and the
   full context (``context_size=None``) where it fits in the time budget.
2. **Quality**: held-out energy distance (symlog space) of a model trained on
   subsampled contexts against one trained on full contexts, at a size where both
   run, beside the pooled-targets prediction that needs no model.
3. **Heavy tails**: how far a subsampled context moves a trained model's
   predictions from the full-context ones, per kernel, on Pareto (index 0.7)
   measures: a subsample estimates the slow kernels' integrals well and softmax's
   badly (its weight sits on the few most extreme points).

Usage::

    python benchmarks/large_ensembles.py              # all three (about 15 minutes on 2 cores)
    python benchmarks/large_ensembles.py --only scale --sizes 4096 65536

Prints the CPU model, one line per run and a summary; medians where repeated.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_speed import cpu_description  # noqa: E402

N_FEATURES = 3


def _child(task):
    """Run one measurement in this process; print its result as JSON."""
    import resource

    import torch

    from sklearn_measattn import MeasureTransformerRegressor
    from sklearn_measattn.datasets import make_matrix_inverse

    torch.set_num_threads(task["threads"])
    n_points, context = task["n_points"], task["context_size"]
    X, y = make_matrix_inverse(n_samples=task["n_train"] + task["n_test"], n_points=n_points, n_features=N_FEATURES,
                               tail=task["tail"], tail_index=task.get("tail_index", 1.5), random_state=0)
    X_train, y_train, X_test, y_test = X[: task["n_train"]], y[: task["n_train"]], X[task["n_train"]:], y[task["n_train"]:]
    model = MeasureTransformerRegressor(
        kernel=task["kernel"], transform="symlog", context_size=context, max_epochs=task["epochs"],
        batch_size=task.get("batch_size", 32), random_state=0, device="cpu", **task.get("network", {}),
    )
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    y_pred = model.predict(X_test)
    predict_seconds = time.perf_counter() - start
    result = {"fit_s": fit_seconds, "predict_s": predict_seconds,
              "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
              "predicted_points": int(np.prod(y_pred.shape[:2]))}
    if task.get("score"):
        from sklearn_measattn.metrics import energy_distance, to_space

        pool = y_train.reshape(-1, N_FEATURES)
        pooled = np.broadcast_to(pool[np.random.default_rng(1).choice(len(pool), n_points, replace=False)],
                                 y_test.shape)
        def score(prediction):
            return float(energy_distance(to_space(y_test, "symlog"), to_space(prediction, "symlog")))

        result.update(energy_symlog=score(y_pred), pooled_energy_symlog=score(pooled))
        if context is not None:  # trained on subsamples, every point predicted against the whole measure
            result["energy_symlog_whole_context"] = score(model.set_params(context_size=None).predict(X_test))
            model.set_params(context_size=context)
    if task.get("compare_full_context"):
        full = model.set_params(context_size=None).predict(X_test)
        model.set_params(context_size=context)
        scale = np.median(np.abs(full))
        result["relative_change_vs_full_context"] = float(np.median(np.abs(y_pred - full)) / scale)
    print(json.dumps(result))


def run(task, timeout):
    """One measurement in a fresh process; None when it ran past ``timeout`` seconds."""
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(task)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def scale(sizes, threads, timeout):
    print("\n== scale: 48 training measures x N points (3-D, Student-t 1.5), 2 epochs, predict 4 more ==")
    print(f"{'N':>7} {'context':>8} {'fit s':>8} {'predict s':>10} {'peak GiB':>9}")
    for n_points in sizes:
        for context in (256, 1024, None):
            if context is not None and context >= n_points:
                continue
            if context is None and n_points > 4096:
                print(f"{n_points:>7} {'full':>8} {'(not run: O(N^2), beyond the budget)':>30}")
                continue
            task = {"n_points": n_points, "context_size": context, "n_train": 48, "n_test": 4, "epochs": 2,
                    "kernel": "log", "tail": "student_t", "tail_index": 1.5, "threads": threads}
            result = run(task, timeout)
            label = "full" if context is None else str(context)
            if result is None:
                print(f"{n_points:>7} {label:>8} {'past the ' + str(timeout) + ' s limit':>30}")
                continue
            print(f"{n_points:>7} {label:>8} {result['fit_s']:>8.1f} {result['predict_s']:>10.1f} "
                  f"{result['peak_rss_gib']:>9.2f}", flush=True)


def quality(threads, timeout):
    print("\n== quality: held-out energy [symlog], subsampled against full contexts (log kernel, Pareto 0.7) ==")
    print(f"{'N':>6} {'context':>8} {'energy':>9} {'energy, predicting on whole measures':>38} {'pooled':>9} "
          f"{'fit s':>7}")
    for context in (None, 64, 256):
        task = {"n_points": 512, "context_size": context, "n_train": 256, "n_test": 32, "epochs": 20,
                "kernel": "log", "tail": "pareto", "tail_index": 0.7, "threads": threads, "score": True,
                "batch_size": 16, "network": {"d_model": 32, "n_heads": 4, "dim_feedforward": 64, "lr": 2e-3}}
        result = run(task, timeout)
        label = "full" if context is None else str(context)
        if result is None:
            print(f"{512:>6} {label:>8} past the limit")
            continue
        whole = result.get("energy_symlog_whole_context")
        whole = "(the same)" if whole is None else f"{whole:.4f}"
        print(f"{512:>6} {label:>8} {result['energy_symlog']:>9.4f} {whole:>38} {result['pooled_energy_symlog']:>9.4f} "
              f"{result['fit_s']:>7.1f}", flush=True)


def heavy_tails(threads, timeout):
    print("\n== heavy tails: median |prediction(context 64) - prediction(full)| / median |prediction|,"
          " 2048-point Pareto 0.7 measures ==")
    print(f"{'kernel':>8} {'transform':>9} {'relative change':>16}")
    for kernel in ("softmax", "poly", "log", "sigmoid"):
        task = {"n_points": 2048, "context_size": 64, "n_train": 64, "n_test": 8, "epochs": 5, "kernel": kernel,
                "tail": "pareto", "tail_index": 0.7, "threads": threads, "compare_full_context": True,
                "batch_size": 16, "network": {"d_model": 32, "n_heads": 4, "dim_feedforward": 64}}
        result = run(task, timeout)
        change = "past the limit" if result is None else f"{result['relative_change_vs_full_context']:.4f}"
        print(f"{kernel:>8} {'symlog':>9} {change:>16}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("scale", "quality", "heavy"), default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return _child(json.loads(args.child))
    print(f"CPU: {cpu_description()['model']}; torch threads {args.threads}")
    if args.only in (None, "scale"):
        scale(args.sizes, args.threads, args.timeout)
    if args.only in (None, "quality"):
        quality(args.threads, args.timeout)
    if args.only in (None, "heavy"):
        heavy_tails(args.threads, args.timeout)
    return None


if __name__ == "__main__":
    main()
