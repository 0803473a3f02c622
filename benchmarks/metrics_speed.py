"""Time (and peak memory) of the measure metrics on large clouds.

Three checks, each the median of a few repeats in this one process run:

1. exact W_1 (``wasserstein_distance(method="exact")``, POT's network simplex)
   over many pairs of 2-D clouds, serial (``n_jobs=None``) against
   ``n_jobs=2``, interleaved; ratio = median(parallel) / median(serial)
   (ideal 1 / n_jobs on an idle machine). The joblib pool is started once
   before timing.
2. sliced W_1 (``method="sliced"``, 200 projections) on one pair of large clouds.
3. energy distance on one pair of clouds: time and peak traced memory
   (``tracemalloc``, which sees numpy's allocations), compared with one
   n x n float64 matrix, and with a row-blocked reference computation
   (defined here, not in the package) that never holds more than
   ``block x n`` distances.
4. the energy score of a particle filter's ensembles (``--score-members``
   members of 6 variables, 20 ensembles): the package, which takes scipy's
   compiled distances above 64 members, against numpy's broadcast
   differences in row blocks of the size the package uses below 64 members
   (a reference defined here); ratio = numpy / package.

Usage::

    python benchmarks/metrics_speed.py --quick     # 20 W_1 pairs, 10^4-point sliced, 2000-point energy; ~1 min
    python benchmarks/metrics_speed.py             # 100 W_1 pairs of 1000 points, 10^5 sliced, 10^4 energy
    python benchmarks/metrics_speed.py --n-jobs 2 --w1-pairs 100 --energy-points 5000 --repeats 3
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import tracemalloc

import numpy as np
import ot
import scipy
from scipy.spatial.distance import cdist

from sklearn_measattn.metrics import energy_distance, energy_score, wasserstein_distance

W1_TARGET = 0.6  # parallel/serial ratio with n_jobs=2 we call a useful speed-up (ideal 0.5)


def clouds(n_pairs, n_points, seed):
    """Gaussian clouds and shifted, stretched Gaussian clouds, shape (n_pairs, n_points, 2)."""
    rng = np.random.default_rng(seed)
    y_true = rng.standard_normal((n_pairs, n_points, 2))
    y_pred = rng.standard_normal((n_pairs, n_points, 2)) * [1.5, 0.7] + [0.5, -0.3]
    return y_true, y_pred


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def traced(fn):
    """(seconds, value, peak traced MiB above the start) of one call."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        seconds, value = timed(fn)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, value, (peak - base) / 2**20


def energy_blocked(x, y, beta=1.0, block=1024):
    """Uniform-weight energy distance E summed over row blocks: O(block * n) memory."""

    def mean_dist(u, v):
        total = 0.0
        for start in range(0, len(u), block):
            d = cdist(u[start:start + block], v)
            if beta != 1.0:
                d **= beta
            total += d.sum()
        return total / (len(u) * len(v))

    return max(2.0 * mean_dist(x, y) - mean_dist(x, x) - mean_dist(y, y), 0.0)


def energy_score_broadcast(ensembles, truths, block_entries=2**23):
    """Uniform-weight energy score of each ensemble by numpy's broadcast differences, in row blocks of at
    most ``block_entries`` differences (the package's block below 64 members)."""
    scores = []
    for x, y in zip(ensembles, truths):
        n_members, n_features = x.shape
        rows = max(1, min(n_members, block_entries // (n_members * n_features)))
        spread = sum(np.linalg.norm(x[r0:r0 + rows, None, :] - x[None, :, :], axis=-1).sum()
                     for r0 in range(0, n_members, rows))
        scores.append(np.linalg.norm(x - y, axis=-1).mean() - 0.5 * spread / n_members**2)
    return np.array(scores)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w1-pairs", type=int, default=None, help="pairs for exact W_1 (default 100, --quick 20)")
    parser.add_argument("--w1-points", type=int, default=1000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--sliced-points", type=int, default=None, help="default 10^5, --quick 10^4")
    parser.add_argument("--energy-points", type=int, default=None, help="default 10^4, --quick 2000")
    parser.add_argument("--block", type=int, default=1024, help="rows per block of the blocked energy reference")
    parser.add_argument("--repeats", type=int, default=None, help="default 3, --quick 2")
    parser.add_argument("--score-members", type=int, default=1500, help="members of the scored ensembles")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)

    n_pairs = args.w1_pairs or (20 if args.quick else 100)
    n_sliced = args.sliced_points or (10_000 if args.quick else 100_000)
    n_energy = args.energy_points or (2000 if args.quick else 10_000)
    repeats = args.repeats or (2 if args.quick else 3)

    print(f"# metrics_speed: numpy {np.__version__}, scipy {scipy.__version__}, POT {ot.__version__}, "
          f"python {platform.python_version()}; median of {repeats} repeats, 2-D float64 clouds")
    print(f"# command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    header = f"| {'check':<44} | {'median s':>9} | {'min s':>8} | {'peak MiB':>9} | {'ratio':>6} |"
    print(header)
    print("|" + "|".join("-" * len(col) for col in header.split("|")[1:-1]) + "|")

    def row(label, values, peak=None, ratio=None):
        peak_s = f"{peak:>9.0f}" if peak is not None else f"{'':>9}"
        ratio_s = f"{ratio:>6.2f}" if ratio is not None else f"{'':>6}"
        print(f"| {label:<44} | {statistics.median(values):>9.3f} | {min(values):>8.3f} | {peak_s} | {ratio_s} |",
              flush=True)

    # 1. exact W_1, serial vs n_jobs
    y_true, y_pred = clouds(n_pairs, args.w1_points, seed=0)
    wasserstein_distance(y_true[:args.n_jobs], y_pred[:args.n_jobs], n_jobs=args.n_jobs)  # start the pool
    serial, parallel = [], []
    for _ in range(repeats):
        t, v_serial = timed(lambda: wasserstein_distance(y_true, y_pred, method="exact"))
        serial.append(t)
        t, v_parallel = timed(lambda: wasserstein_distance(y_true, y_pred, method="exact", n_jobs=args.n_jobs))
        parallel.append(t)
    if not np.isclose(v_serial, v_parallel, rtol=1e-10):
        raise AssertionError(f"serial W_1 {v_serial} != parallel {v_parallel}")
    w1_ratio = statistics.median(parallel) / statistics.median(serial)
    row(f"W1 exact {n_pairs} x {args.w1_points} pts, serial", serial, ratio=1.0)
    row(f"W1 exact {n_pairs} x {args.w1_points} pts, n_jobs={args.n_jobs}", parallel, ratio=w1_ratio)

    # 2. sliced W_1 on one large pair
    x, y = clouds(1, n_sliced, seed=1)
    sliced = []
    for _ in range(repeats):
        t, _ = timed(lambda: wasserstein_distance(x, y, method="sliced", random_state=0))
        sliced.append(t)
    row(f"W1 sliced (200 proj), 1 pair x {n_sliced} pts", sliced)

    # 3. energy distance on one pair: package vs blocked reference, interleaved
    x, y = clouds(1, n_energy, seed=2)
    pkg_t, pkg_peak, blk_t, blk_peak = [], [], [], []
    for _ in range(repeats):
        t, v_pkg, peak = traced(lambda: energy_distance(x, y))
        pkg_t.append(t)
        pkg_peak.append(peak)
        t, v_blk, peak = traced(lambda: energy_blocked(x[0], y[0], block=args.block))
        blk_t.append(t)
        blk_peak.append(peak)
    if not np.isclose(v_pkg, v_blk, rtol=1e-9):
        raise AssertionError(f"package energy {v_pkg} != blocked reference {v_blk}")
    nn_mib = n_energy * n_energy * 8 / 2**20
    energy_ratio = statistics.median(blk_t) / statistics.median(pkg_t)
    row(f"energy, 1 pair x {n_energy} pts (package)", pkg_t, max(pkg_peak), 1.0)
    row(f"energy, same, blocked reference ({args.block} rows)", blk_t, max(blk_peak), energy_ratio)
    print(f"# one {n_energy} x {n_energy} float64 matrix = {nn_mib:.0f} MiB; package peak = "
          f"{max(pkg_peak) / nn_mib:.2f} of it, blocked = {max(blk_peak) / nn_mib:.3f}")

    # 4. energy score of large ensembles: compiled pairwise distances against numpy's broadcast differences
    rng = np.random.default_rng(3)
    ensembles, truths = rng.standard_normal((20, args.score_members, 6)), rng.standard_normal((20, 6))
    compiled, broadcast = [], []
    for _ in range(repeats):
        t, v_compiled = timed(lambda: energy_score(ensembles, truths))
        compiled.append(t)
        t, v_broadcast = timed(lambda: energy_score_broadcast(ensembles, truths))
        broadcast.append(t)
    np.testing.assert_allclose(v_compiled, v_broadcast, rtol=1e-12)
    score_ratio = statistics.median(broadcast) / statistics.median(compiled)
    row(f"energy score, 20 x {args.score_members} members (package)", compiled, ratio=1.0)
    row("energy score, same, numpy broadcast", broadcast, ratio=score_ratio)
    print(f"summary: exact W1 n_jobs={args.n_jobs}/serial = {w1_ratio:.2f} "
          f"({'meets' if w1_ratio <= W1_TARGET else 'misses'} <= {W1_TARGET}); sliced {n_sliced} pts "
          f"{statistics.median(sliced):.2f} s; energy {n_energy} pts {statistics.median(pkg_t):.2f} s, peak "
          f"{max(pkg_peak):.0f} MiB ({max(pkg_peak) / nn_mib:.1f} x n^2 float64), blocked {max(blk_peak):.0f} MiB "
          f"at {energy_ratio:.2f}x the time; energy score of {args.score_members}-member ensembles {score_ratio:.1f}x "
          "faster than numpy's broadcast differences")


if __name__ == "__main__":
    main()
