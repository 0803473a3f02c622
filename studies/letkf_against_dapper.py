"""The package's LETKF beside DAPPER's with the same parameters on the same held-out problems of a study setting.

DAPPER's LETKF runs twice: with one local analysis per variable
(``loc_batch=1``, as the package's) and with its own Lorenz-96 set-up, one per
pair of neighbouring variables (``loc_batch=2``). Its inflation multiplies the
analysis anomalies and the package's the forecast's, and it rotates its
analysis at random (``rot=True``, its default), so the runs are not the same
realisation; ``loc_batch=1``, ``infl=1``, ``rot=False`` gives the same
analysis (``tests/assimilation/test_letkf.py``).

Usage::

    python studies/letkf_against_dapper.py --setting mnmef_sd07 --members 10 --inflation 1.08 --radius 3.0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sklearn_measattn.assimilation import LETKF, run_dapper, twin_experiment

sys.path.insert(0, str(Path(__file__).parent))
import local_analysis as study  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setting", choices=list(study.SETTINGS), default="mnmef_sd07")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--inflation", type=float, default=1.08)
    parser.add_argument("--radius", type=float, default=3.0, help="the package's Gaspari-Cohn half-width")
    parser.add_argument("--seeds", type=int, nargs="+", default=[61, 62, 63])
    args = parser.parse_args(argv)
    held_out = study.problems(args.setting, args.seeds, study.SETTINGS[args.setting]["cycles"] + study.SPIN_UP)
    dapper = dict(ensemble_size=args.members, spin_up=study.SPIN_UP, random_state=0, infl=args.inflation,
                  loc_rad=study.dapper_loc_rad(args.radius))
    print(f"{study.TITLES[args.setting]}, N = {args.members}, inflation {args.inflation}, half-width {args.radius}")
    for seed, problem in zip(args.seeds, held_out):
        runs = {"package LETKF": twin_experiment(LETKF(inflation=args.inflation, localization_radius=args.radius),
                                                 problem, ensemble_size=args.members, spin_up=study.SPIN_UP,
                                                 random_state=0),
                "DAPPER, per variable": run_dapper("LETKF", problem, loc_batch=1, **dapper),
                "DAPPER, in pairs": run_dapper("LETKF", problem, **dapper)}
        print(f"seed {seed}: " + "; ".join(f"{name} {r.rmse:.3f}{' (d)' if r.diverged else ''}"
                                           for name, r in runs.items()), flush=True)


if __name__ == "__main__":
    main()
