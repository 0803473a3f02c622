"""Time the local recipe's data stages on one worker and on every core, in one run: forecasts and windows.

The local learned analysis's first round spends its time before training in
two places: ``record_forecasts`` (27 cycled LETKF runs, independent of each
other) and ``make_local_analysis_data`` (the windows of every draw, also
independent). Both take ``n_jobs``; their results do not depend on it. This
script runs each stage with ``n_jobs=1`` and with ``--n-jobs`` (default -1,
every core), checks that the results are equal, and prints the times and
their ratio. The defaults are the shipped recipe's (``fit_local_analysis``
with its defaults makes the same windows); ``--quick`` runs a small version
to check the script.

Usage::

    python benchmarks/local_training_data.py
    python benchmarks/local_training_data.py --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from sklearn_measattn.assimilation import (
    CauchyNoise,
    GaussianNoise,
    StudentTNoise,
    make_local_analysis_data,
    record_forecasts,
)

sys.path.insert(0, str(Path(__file__).parent))
from attention_speed import cpu_description  # noqa: E402

QUICK = dict(ensemble_sizes=(10, 20), dt_obs=(0.1, 0.15), observation_spacings=(2, 4), n_cycles=150, spin_up=30)
#: The noise laws of the shipped model's first round (``fit_local_analysis``'s default).
LAWS = [GaussianNoise(), StudentTNoise(df=1.5), StudentTNoise(df=4.0), CauchyNoise()]


def timed(function, **kwargs):
    start = time.perf_counter()
    result = function(**kwargs)
    return result, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small version (smoke test of the script)")
    parser.add_argument("--n-jobs", type=int, default=-1)
    args = parser.parse_args(argv)
    print(f"{cpu_description()}; {os.cpu_count()} logical CPUs; n_jobs=1 against n_jobs={args.n_jobs}", flush=True)
    settings = QUICK if args.quick else {}
    # the parallel run first: its workers' start-up is part of its time, as in a fresh training run
    parallel, parallel_s = timed(record_forecasts, **settings, random_state=0, n_jobs=args.n_jobs)
    alone, alone_s = timed(record_forecasts, **settings, random_state=0, n_jobs=1)
    assert len(alone) == len(parallel) and all(np.array_equal(a, b) for a, b in zip(alone, parallel))
    print(f"record_forecasts ({len(alone)} forecasts)      n_jobs=1 {alone_s:7.1f} s   n_jobs={args.n_jobs} "
          f"{parallel_s:7.1f} s   ratio {parallel_s / alone_s:.2f}", flush=True)
    windows = dict(forecasts=alone, noise=LAWS, n_draws=2, random_state=0)
    (X_parallel, y_parallel), parallel_s = timed(make_local_analysis_data, **windows, n_jobs=args.n_jobs)
    (X_alone, y_alone), alone_s = timed(make_local_analysis_data, **windows, n_jobs=1)
    assert all(np.array_equal(X_alone[size], X_parallel[size]) and np.array_equal(y_alone[size], y_parallel[size])
               for size in X_alone)
    n_windows = sum(len(X) for X in X_alone.values())
    print(f"make_local_analysis_data ({n_windows} windows)  n_jobs=1 {alone_s:7.1f} s   n_jobs={args.n_jobs} "
          f"{parallel_s:7.1f} s   ratio {parallel_s / alone_s:.2f}", flush=True)
    print("results equal for both n_jobs")


if __name__ == "__main__":
    main()
