"""Cost of one analysis step in a cycled Lorenz-96 filter: a learned step against Bayes' rule and the Kalman baselines.

Times :func:`~sklearn_measattn.assimilation.twin_experiment`'s analysis step
(``TwinResult.seconds_per_cycle``, the forecast excluded) for the robust EnKF,
the serial EnKF, the rank histogram filter (Bayes' rule for each scalar
update, on its default 2000-point grid) and a :class:`~sklearn_measattn.assimilation.LearnedAnalysis`
around a small trained :class:`~sklearn_measattn.MeasureTransformerRegressor`
(trained here, a few seconds), on the same problem, interleaved over
``--repeats`` rounds; prints the medians, the learned step's cost per scalar
update (one per observation) and its ratios to the rank histogram filter's
and the serial EnKF's, whose structure it shares.

Usage::

    python benchmarks/assimilation_cycle.py              # 40 variables, 40 members, 100 cycles, 3 rounds
    python benchmarks/assimilation_cycle.py --variables 80 --members 20 --cycles 50
"""

from __future__ import annotations

import argparse
import platform
import statistics

import numpy as np

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.assimilation import (
    LearnedAnalysis,
    RankHistogramFilter,
    RobustEnKF,
    SerialEnKF,
    make_analysis_training_data,
    make_twin_problem,
    twin_experiment,
)


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variables", type=int, default=40)
    parser.add_argument("--members", type=int, default=40)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"# {_cpu_model()}; {args.variables} variables (all observed), {args.members} members, "
          f"{args.cycles} cycles, {args.repeats} rounds")
    X, y = make_analysis_training_data(n_variables=args.variables, noise="cauchy", n_cycles=40, spin_up=10,
                                       ensemble_size=args.members, random_state=0)
    model = MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=32, n_heads=4, n_layers=2,
                                        dim_feedforward=64, batch_size=256, max_epochs=1, random_state=0).fit(X, y)
    problem = make_twin_problem(n_variables=args.variables, noise="cauchy", n_cycles=args.cycles, random_state=1)
    steps = {
        "robust EnKF": RobustEnKF(),
        "serial EnKF": SerialEnKF(inflation=1.03, clip=2.0),
        "rank histogram filter": RankHistogramFilter(),
        "learned (log/symlog, d_model 32)": LearnedAnalysis(model, relaxation=0.3),
    }
    seconds = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            result = twin_experiment(step, problem, ensemble_size=args.members, spin_up=0, random_state=0)
            seconds[name].append(result.seconds_per_cycle)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"{name:34s} {1e3 * median:8.2f} ms per analysis (min {1e3 * min(seconds[name]):.2f}, "
              f"max {1e3 * max(seconds[name]):.2f})")
    learned = medians["learned (log/symlog, d_model 32)"]
    print(f"learned step: {1e3 * learned / args.variables:.2f} ms per scalar update; "
          f"{learned / medians['rank histogram filter']:.1f}x the rank histogram filter, "
          f"{learned / medians['serial EnKF']:.1f}x the serial EnKF, {learned / medians['robust EnKF']:.0f}x the "
          f"robust EnKF per analysis")
    return 0 if np.isfinite(learned) else 1


if __name__ == "__main__":
    raise SystemExit(main())
