"""One analysis step of the local learned analysis against its local ETKF analysis, on the forecasts of a tuned LETKF.

The forecasts are recorded from a cycled LETKF run on a tuning problem of a
setting of ``studies/local_analysis.py`` (seed 1000, never a held-out seed);
every kept forecast is then analysed once by the local learned analysis at
several correction weights (0 is the local ETKF analysis it corrects) and
scored against the truth: the RMSE of the analysis mean, the mean spread and
the CRPS per variable. A step that matches the ETKF here but loses to the
LETKF in a cycle adds its error through the cycle, not in one step.

Usage::

    python studies/local_one_step.py --setting sakov_oke --members 40 --letkf inflation=1.02 localization_radius=12
"""

from __future__ import annotations

import argparse

import numpy as np
from local_analysis import SPIN_UP, problems

from sklearn_measattn.assimilation import LETKF, pretrained_analysis, twin_experiment
from sklearn_measattn.metrics import crps_ensemble


def scores(ensemble, truth):
    """RMSE of the mean, spread (the root of the mean variance, as ``twin_experiment`` has it) and mean CRPS."""
    return (np.sqrt(np.mean((ensemble.mean(axis=0) - truth) ** 2)), np.sqrt(np.mean(ensemble.var(axis=0, ddof=1))),
            crps_ensemble(ensemble.T, truth).mean())


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
    args = parser.parse_args(argv)
    problem = problems(args.setting, (1000,), args.cycles + SPIN_UP)[0]
    kept = []

    def keep(cycle, forecast, analysis, truth):
        if cycle >= SPIN_UP and cycle % 2 == 0:
            kept.append((cycle, forecast.copy(), truth.copy()))

    letkf = LETKF(**{k: float(v) for k, v in (item.split("=") for item in args.letkf)})
    twin_experiment(letkf, problem, ensemble_size=args.members, spin_up=SPIN_UP, random_state=0, callback=keep)
    print(f"{args.setting}, N={args.members}, {len(kept)} forecasts of {letkf!r}")
    for weight in args.weights:
        step = pretrained_analysis("local", correction_weight=weight, localization_radius=args.localization_radius)
        step = step.bind(problem.observation_model)
        rmse, spread, crps = np.mean([scores(step(forecast, problem.observations[cycle]), truth)
                                      for cycle, forecast, truth in kept], axis=0)
        print(f"correction weight {weight:4.2f}: RMSE {rmse:.4f}  spread {spread:.4f}  CRPS {crps:.4f}")
    rmse, spread, crps = np.mean([scores(forecast, truth) for _, forecast, truth in kept], axis=0)
    print(f"forecast:                RMSE {rmse:.4f}  spread {spread:.4f}  CRPS {crps:.4f}")


if __name__ == "__main__":
    main()
