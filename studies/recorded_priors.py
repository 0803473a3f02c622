"""How calibrated are the forecasts the local learned analysis trains on? Their mean's error against their spread.

``record_forecasts(return_truth=True)`` runs the recording filter (the
recipe's ``LETKF(inflation=1.1, localization_radius=4)`` or another inflation)
in each setting of the recipe (every first, second or fourth variable observed
every 0.05, 0.1 or 0.15, unit Gaussian noise) and keeps the truth beside each
forecast. For forecasts whose ``n = N + 1`` members and the truth are draws of
one law, ``E|mean - truth|^2 = spread^2 (1 + 1/n)``: the printed ratio of the
two is 1. Below 1 the forecasts are wider than their error, and the truth lies
nearer their mean than a member does: a member drawn as the stand-in truth
(the recipe) is then farther from the mean than the truth (training against
the truth on these forecasts teaches the network to shrink them).

Usage::

    python studies/recorded_priors.py                       # the recipe's LETKF, N = 20
    python studies/recorded_priors.py --inflation 1.02 --members 10 40
"""

from __future__ import annotations

import argparse

import numpy as np

from sklearn_measattn.assimilation import LETKF, record_forecasts


def calibration(forecasts, truths):
    """RMSE of the forecast means against the truths, the spread, and the ratio that is 1 for calibrated forecasts."""
    error = np.mean([np.mean((forecast.mean(axis=0) - truth) ** 2) for forecast, truth in zip(forecasts, truths)])
    variance = np.mean([np.mean(forecast.var(axis=0, ddof=1)) for forecast in forecasts])
    n_members = forecasts[0].shape[0]
    return np.sqrt(error), np.sqrt(variance), error / (variance * (1 + 1 / n_members))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[20], help="N (the runs have N + 1 members)")
    parser.add_argument("--inflation", type=float, default=1.1, help="of the recording LETKF (the recipe's: 1.1)")
    parser.add_argument("--cycles", type=int, default=400)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    analysis = LETKF(inflation=args.inflation, localization_radius=4.0)
    print(f"recording LETKF: inflation {args.inflation}, localisation 4; {args.cycles} cycles after 100, every 3rd "
          f"forecast; seed {args.seed}")
    for size in args.members:
        for dt in (0.05, 0.1, 0.15):
            for spacing in (1, 2, 4):
                forecasts, truths = record_forecasts(ensemble_sizes=(size,), dt_obs=(dt,),
                                                     observation_spacings=(spacing,), n_cycles=args.cycles,
                                                     spin_up=100, every=3, analysis=analysis, return_truth=True,
                                                     random_state=args.seed)
                rmse, spread, ratio = calibration(forecasts, truths)
                print(f"N={size:3d} dt {dt:.2f} every {spacing}: RMSE of the mean {rmse:.3f}, spread {spread:.3f}, "
                      f"error^2 / (spread^2 (1 + 1/n)) {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
