"""One analysis step of the local learned analysis against its local ETKF analysis, from the forecasts of a cycle.

The forecasts are recorded from a cycled run (a tuned LETKF, the learned
scalar update or the local step itself: ``--cycle``) on a tuning problem of a
setting of ``studies/local_analysis.py`` (seed 1000, never a held-out seed);
every kept forecast is then analysed once by the local learned analysis at
several correction weights (0 is the local ETKF analysis it corrects), and by
the learned scalar update with ``--scalar``, and scored against the truth: the
RMSE of the analysis mean, the mean spread and the CRPS per variable, then the
same of the next forecast made from that analysis. A step that matches
another here but loses to it in a cycle adds its error through the cycle, not
in one step.

Usage::

    python studies/local_one_step.py --setting sakov_oke --members 40 --letkf inflation=1.02 localization_radius=12
    python studies/local_one_step.py --setting mnmef_sd1 --members 20 --model studies/results/local_truth_round1.safetensors
    python studies/local_one_step.py --setting other_cauchy_005 --members 20 --localization-radius 12 \
        --weights 0 0.5 1 --scalar localization_radius=8 --cycle local
"""

from __future__ import annotations

import argparse

import numpy as np
from local_analysis import SPIN_UP, problems

from sklearn_measattn import load_model
from sklearn_measattn.assimilation import LETKF, LocalLearnedAnalysis, pretrained_analysis, twin_experiment
from sklearn_measattn.metrics import crps_ensemble


def scores(ensemble, truth):
    """RMSE of the mean, spread (the root of the mean variance, as ``twin_experiment`` has it) and mean CRPS."""
    return (np.sqrt(np.mean((ensemble.mean(axis=0) - truth) ** 2)), np.sqrt(np.mean(ensemble.var(axis=0, ddof=1))),
            crps_ensemble(ensemble.T, truth).mean())


def named_values(items):
    """``["name=value", ...]`` (or None) as keyword arguments with float values."""
    return {name: float(value) for name, value in (item.split("=") for item in items or ())}


def report(label, step, problem, kept):
    """Print the analysis's scores, and those of the next forecast made from it (one observation interval later)."""
    now, later = [], []
    for cycle, forecast, truth in kept:
        analysis = step(forecast, problem.observations[cycle])
        now.append(scores(analysis, truth))
        later.append(scores(problem.forecast(analysis), problem.truth[cycle + 2]))
    (rmse, spread, crps), (next_rmse, next_spread, next_crps) = np.mean(now, axis=0), np.mean(later, axis=0)
    print(f"{label} RMSE {rmse:.4f}  spread {spread:.4f}  CRPS {crps:.4f}   next forecast: RMSE {next_rmse:.4f}  "
          f"spread {next_spread:.4f}  CRPS {next_crps:.4f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setting", default="sakov_oke")
    parser.add_argument("--members", type=int, default=40)
    parser.add_argument("--letkf", nargs="*", default=["inflation=1.02", "localization_radius=12"],
                        help="the cycled LETKF's parameters, name=value")
    parser.add_argument("--localization-radius", type=float, default=8.0,
                        help="of the local ETKF analysis the network corrects")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--scalar", nargs="*", default=None,
                        help="also score the scalar learned analysis with these parameters, name=value")
    parser.add_argument("--cycle", choices=("letkf", "scalar", "local"), default="letkf",
                        help="whose cycle records the forecasts (local: at the last of --weights)")
    parser.add_argument("--model", default=None,
                        help="a local model file to score instead of the shipped pretrained_analysis('local')")
    args = parser.parse_args(argv)

    def local_step(**params):
        return LocalLearnedAnalysis(load_model(args.model), **params) if args.model else \
            pretrained_analysis("local", **params)

    problem = problems(args.setting, (1000,), args.cycles + SPIN_UP)[0]
    kept = []

    def keep(cycle, forecast, analysis, truth):
        if cycle >= SPIN_UP and cycle % 2 == 0:
            kept.append((cycle, forecast.copy(), truth.copy()))

    scalar = pretrained_analysis("quantile_residual_fit", batch_disjoint=True, **named_values(args.scalar))
    cycled = {"letkf": lambda: LETKF(**named_values(args.letkf)), "scalar": lambda: scalar,
              "local": lambda: local_step(correction_weight=args.weights[-1],
                                          localization_radius=args.localization_radius)}[args.cycle]()
    twin_experiment(cycled, problem, ensemble_size=args.members, spin_up=SPIN_UP, random_state=0, callback=keep)
    print(f"{args.setting}, N={args.members}, {len(kept)} forecasts of {cycled!r}; local model "
          f"{args.model or 'shipped'}")
    for weight in args.weights:
        step = local_step(correction_weight=weight, localization_radius=args.localization_radius)
        report(f"correction weight {weight:4.2f}:", step.bind(problem.observation_model), problem, kept)
    if args.scalar is not None:
        report("scalar learned:         ", scalar.bind(problem.observation_model), problem, kept)
    rmse, spread, crps = np.mean([scores(forecast, truth) for _, forecast, truth in kept], axis=0)
    print(f"forecast:                RMSE {rmse:.4f}  spread {spread:.4f}  CRPS {crps:.4f}")


if __name__ == "__main__":
    main()
