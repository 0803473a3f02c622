"""Cost of one analysis of the local learned analysis against the LETKF's, in one run: time per cycle and the ratio.

Times ``twin_experiment``'s analysis step (``TwinResult.seconds_per_cycle``,
the forecast excluded) of the :class:`LETKF` and of the shipped
``pretrained_analysis("local")`` (with and without the reflection, which
doubles the batch of its one network call), on the same problem, interleaved
over ``--repeats`` rounds; prints the medians, the RMSE of each run and the
ratios to the LETKF, for each ensemble size in turn (the goal: at most 3x at 40
variables). One more row runs
the same step with its network left in training mode, so that every call
switches it to evaluation mode and back (what each call cost before a fitted
network was left in evaluation mode): the price of that switch, in the same run.
Where DAPPER is installed, its LETKF (``run_dapper``, the analysis time of its
cycle, with the same inflation and localisation) is timed in the same rounds:
the field's implementation beside the package's.

Usage::

    python benchmarks/local_analysis_cycle.py                      # 40 variables, every 4th observed, 10/20/40 members
    python benchmarks/local_analysis_cycle.py --members 40 --variables 80
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import sys
from pathlib import Path

import numpy as np

from sklearn_measattn.assimilation import (
    LETKF,
    LocalLearnedAnalysis,
    make_twin_problem,
    pretrained_analysis,
    run_dapper,
    twin_experiment,
)

sys.path.insert(0, str(Path(__file__).parent))
from attention_speed import cpu_description  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variables", type=int, default=40)
    parser.add_argument("--members", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--spacing", type=int, default=4, help="every k-th variable observed")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{cpu_description()}; {args.variables} variables, every {args.spacing}th observed, "
          f"{args.cycles} cycles x {args.repeats} rounds", flush=True)
    problem = make_twin_problem(n_variables=args.variables, observed=np.arange(0, args.variables, args.spacing),
                                dt_obs=0.15, n_cycles=args.cycles, random_state=0)
    local = pretrained_analysis("local")
    switching = copy.deepcopy(local.estimator)
    switching.net_.module_.train()
    dapper = importlib.util.find_spec("dapper") is not None
    steps = {"LETKF": LETKF(inflation=1.02, localization_radius=4.0),
             "local learned (reflect)": LocalLearnedAnalysis(local.estimator, reflect=True),
             "local learned (no reflect)": LocalLearnedAnalysis(local.estimator, reflect=False),
             "local learned (reflect, switching modes)": LocalLearnedAnalysis(switching, reflect=True)}
    for members in args.members:
        names = [*steps, *(["DAPPER LETKF"] if dapper else [])]
        times = {name: [] for name in names}
        rmse = {}
        for _ in range(args.repeats):
            for name, step in steps.items():
                result = twin_experiment(step, problem, ensemble_size=members, spin_up=args.cycles // 4,
                                         random_state=0)
                times[name].append(result.seconds_per_cycle)
                rmse[name] = result.rmse
            if dapper:  # DAPPER's loc_rad is the Gaspari-Cohn half-width over 1.82
                result = run_dapper("LETKF", problem, ensemble_size=members, spin_up=args.cycles // 4,
                                    random_state=0, infl=1.02, loc_rad=round(4.0 / 1.82, 4))
                times["DAPPER LETKF"].append(result.seconds_per_cycle)
                rmse["DAPPER LETKF"] = result.rmse
        base = statistics.median(times["LETKF"])
        for name in names:
            median = statistics.median(times[name])
            print(f"N={members:<3d} {name:41s} median {1e3 * median:7.2f} ms/cycle (min {1e3 * min(times[name]):.2f}, "
                  f"max {1e3 * max(times[name]):.2f}); rmse {rmse[name]:.3f}; ratio to LETKF {median / base:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
