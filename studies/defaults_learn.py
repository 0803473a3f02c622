"""Does the estimator learn with its defaults? Held-out energy against the predictions that need no model.

``MeasureTransformerRegressor(kernel="log", transform="symlog", max_epochs=30)``
with the default architecture and optimiser, fitted on a few hundred measures
of each benchmark with heavy tails, scored on held-out measures in symlog space
beside the ``pooled``, ``identity`` and ``oracle`` rows
(:func:`sklearn_measattn.metrics.reference_predictions`) and judged by
:func:`sklearn_measattn.metrics.learned_verdict`.

Usage (from the repository root; about 40 s per fit on 2 cores)::

    .venv/bin/python studies/defaults_learn.py
    .venv/bin/python studies/defaults_learn.py --n-samples 384 --n-points 128 --seed 3
"""

from __future__ import annotations

import argparse
import time

import torch

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import load_benchmark, sample_target_law
from sklearn_measattn.metrics import (
    across_sample_correlation,
    energy_distance,
    learned_verdict,
    reference_predictions,
    to_space,
)

SETTINGS = (("matrix_inverse", "pareto", 0.7), ("matrix_inverse", "student_t", 1.0),
            ("sheared_swap", "pareto", 0.7), ("sheared_swap", "student_t", 1.0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=256)
    parser.add_argument("--n-points", type=int, default=128)
    parser.add_argument("--n-test", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"# defaults_learn: MeasureTransformerRegressor(kernel='log', transform='symlog', max_epochs={args.epochs}), "
          f"default architecture and optimiser; {args.n_samples} training measures x {args.n_points} points, "
          f"{args.n_test} held out, seed {args.seed}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| task | tail | model energy | pooled | identity | oracle | model / best no-model | learned | "
          "corr(scale) | fit s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for task, tail, index in SETTINGS:
        train = load_benchmark(task, n_samples=args.n_samples, n_points=args.n_points, tail=tail, tail_index=index,
                               random_state=args.seed)
        test = load_benchmark(task, n_samples=args.n_test, n_points=args.n_points, tail=tail, tail_index=index,
                              random_state=1_000_003 + args.seed)
        model = MeasureTransformerRegressor(kernel="log", transform="symlog", max_epochs=args.epochs,
                                            random_state=args.seed)
        start = time.perf_counter()
        model.fit(train.data, train.target)
        seconds = time.perf_counter() - start
        predictions = {"model": model.predict(test.data)}
        predictions.update(reference_predictions(test.data, test.target, train.target,
                                                 oracle=sample_target_law(test, random_state=2_000_003 + args.seed),
                                                 random_state=args.seed))
        target = to_space(test.target, "symlog")
        energy = {name: float(energy_distance(target, to_space(pred, "symlog"))) for name, pred in predictions.items()}
        verdict = learned_verdict(energy["model"], pooled=energy["pooled"], identity=energy["identity"],
                                  oracle=energy["oracle"])
        corr = across_sample_correlation(test.target, predictions["model"], statistic="scale")
        print(f"| {task} | {tail} {index:g} | {energy['model']:.4f} | {energy['pooled']:.4f} | "
              f"{energy['identity']:.4f} | {energy['oracle']:.4f} | {verdict['ratio']:.2f} | {verdict['learned']} | "
              f"{corr:+.2f} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
