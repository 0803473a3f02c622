"""Cost of one analysis step in a cycled Lorenz-96 filter: a learned step against Bayes' rule and the Kalman baselines.

Times :func:`~sklearn_measattn.assimilation.twin_experiment`'s analysis step
(``TwinResult.seconds_per_cycle``, the forecast excluded) for the robust EnKF,
the serial EnKF, the rank histogram filter (Bayes' rule for each scalar
update, on its default 2000-point grid) and the learned scalar update the
assimilation pages evaluate (a shipped model, ``--model``, default
``quantile_residual_fit``; :func:`~sklearn_measattn.assimilation.pretrained_analysis`), on the same
problem, interleaved over ``--repeats`` rounds. Twice: without localisation
(every observation's update reaches every variable, so the serial filter
makes one network call per observation), and with a Gaspari-Cohn radius
``--radius``, where the learned step also runs with ``batch_disjoint=True``
(the observations whose localisation supports do not overlap updated in one
forward pass). Prints the medians, the RMSE of each run (so that a faster
configuration is seen not to be a worse filter) and the learned step's
ratios to the rank histogram filter's time in the same configuration.

Usage::

    python benchmarks/assimilation_cycle.py              # 40 variables, 40 members, 100 cycles, 3 rounds
    python benchmarks/assimilation_cycle.py --variables 80 --members 20 --cycles 50 --radius 4
"""

from __future__ import annotations

import argparse
import platform
import statistics

import numpy as np

from sklearn_measattn.assimilation import (
    ANALYSIS_MODELS,
    RankHistogramFilter,
    RobustEnKF,
    SerialEnKF,
    make_twin_problem,
    pretrained_analysis,
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
    parser.add_argument("--radius", type=float, default=2.0, help="Gaspari-Cohn half-width of the localised runs")
    parser.add_argument("--model", default="quantile_residual_fit", choices=sorted(ANALYSIS_MODELS),
                        help="the shipped learned model (default quantile_residual_fit)")
    args = parser.parse_args(argv)
    print(f"# {_cpu_model()}; {args.variables} variables (all observed), {args.members} members, "
          f"{args.cycles} cycles of Cauchy noise, {args.repeats} rounds; learned model {args.model}")
    problem = make_twin_problem(n_variables=args.variables, noise="cauchy", n_cycles=args.cycles, random_state=1)
    local = {"localization_radius": args.radius}
    steps = {
        "robust EnKF": RobustEnKF(),
        "serial EnKF": SerialEnKF(inflation=1.03, clip=2.0),
        "rank histogram filter": RankHistogramFilter(relaxation=0.3),
        "learned": pretrained_analysis(args.model, relaxation=0.3),
        "rank histogram filter, localised": RankHistogramFilter(relaxation=0.3, **local),
        "learned, localised": pretrained_analysis(args.model, relaxation=0.3, **local),
        "learned, localised, batch_disjoint": pretrained_analysis(args.model, relaxation=0.3, batch_disjoint=True,
                                                                  **local),
    }
    seconds = {name: [] for name in steps}
    rmse = {}
    for _ in range(args.repeats):
        for name, step in steps.items():
            result = twin_experiment(step, problem, ensemble_size=args.members, spin_up=0, random_state=0)
            seconds[name].append(result.seconds_per_cycle)
            rmse[name] = result.rmse
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"{'analysis step':36s} {'ms per analysis: median (min, max)':36s} RMSE")
    for name, median in medians.items():
        spread = f"{1e3 * median:8.2f} ({1e3 * min(seconds[name]):.2f}, {1e3 * max(seconds[name]):.2f})"
        print(f"{name:36s} {spread:36s} {rmse[name]:.3f}")
    learned, rhf = medians["learned"], medians["rank histogram filter"]
    local_rhf = medians["rank histogram filter, localised"]
    print(f"learned / rank histogram filter, no localisation: {learned / rhf:.1f}x "
          f"({1e3 * learned / args.variables:.2f} ms per scalar update)")
    print(f"learned / rank histogram filter, radius {args.radius:g}: {medians['learned, localised'] / local_rhf:.1f}x "
          f"serial, {medians['learned, localised, batch_disjoint'] / local_rhf:.1f}x with batch_disjoint")
    return 0 if all(np.isfinite(list(medians.values()))) else 1

if __name__ == "__main__":
    raise SystemExit(main())
