"""Helpers shared by the measure metrics: validation, aggregation over samples, scaling."""

from __future__ import annotations

import math

import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist

from .._validation import Choices, check_measure_pair

#: The domain of every metric's ``multioutput`` (a constraint of its table).
_MULTIOUTPUT = Choices(("uniform_average", "raw_values"), why="the mean over samples, or one value per sample")


def _real_or_none(value, name):
    """A measured statistic as a float, or ``None`` when it was not measured (``None`` or NaN)."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number or None, got {value!r}.") from None
    return None if math.isnan(value) else value


def _check_sample_weight(sample_weight, n_samples):
    if sample_weight is None:
        return None
    sw = np.asarray(sample_weight)
    if sw.dtype.kind not in "biuf":
        raise TypeError(f"sample_weight must be numeric, got dtype {sw.dtype}.")
    sw = sw.astype(np.float64)
    if sw.ndim == 0:
        sw = np.full(n_samples, float(sw))
    if sw.shape != (n_samples,):
        raise ValueError(
            f"sample_weight must have shape (n_samples,) = ({n_samples},), got {sw.shape}; "
            "it weights whole measures. Use weights_true / weights_pred for per-point weights."
        )
    if not np.all(np.isfinite(sw)):
        raise ValueError("sample_weight contains NaN or inf; pass finite weights.")
    if np.any(sw < 0):
        raise ValueError("sample_weight has negative entries; sample weights must be >= 0.")
    if sw.max() <= 0:
        raise ValueError("sample_weight sums to 0; at least one sample needs a positive weight.")
    return sw / sw.max()  # only ratios matter, and a sum of huge weights would overflow


def _aggregate(values, sample_weight, multioutput, *, undefined_ok=False):
    """Per-sample values -> float or array.

    NaN marks a sample on which the metric is undefined; only a metric that
    documents such samples (and warns about them, ``undefined_ok``) may leave
    them out of the average. The mean is taken relative to the largest value,
    so that values near the float64 limit do not overflow their sum.
    """
    values = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(values) & ~(np.isnan(values) & undefined_ok)
    if np.any(bad):
        raise FloatingPointError(
            f"The metric is not finite ({values[bad][0]}) for sample(s) {np.flatnonzero(bad)[:5].tolist()} "
            "although the measures are finite; please report this with the data that produced it."
        )
    if multioutput == "raw_values":
        return values
    sw = np.ones_like(values) if sample_weight is None else sample_weight
    ok = ~np.isnan(values)
    total = sw[ok].sum()
    if not np.any(ok) or total <= 0:
        return float("nan")
    largest = float(np.max(np.abs(values[ok])))
    if largest == 0.0:
        return 0.0
    return float(largest * (np.sum((sw[ok] / total) * (values[ok] / largest))))


def _binary_scale(*arrays):
    """The power of two just above the largest ``|entry|`` (1 for all-zero arrays).

    Dividing by a power of two is exact in floating point, so measures brought to
    unit scale this way keep every digit, and distances of homogeneous degree
    ``k`` are ``scale**k`` times the distance of the scaled measures: squares and
    powers then neither overflow (data near 1e200) nor underflow (near 1e-200).
    """
    largest = max((float(np.max(np.abs(a))) if a.size else 0.0) for a in arrays)
    if largest == 0.0:
        return 1.0
    return math.ldexp(1.0, math.frexp(largest)[1])


def _times_power(value, scale, degree, what):
    """``value * scale**degree`` for ``value >= 0``, raising instead of overflowing or underflowing."""
    if value == 0.0 or degree == 0.0:
        return float(value)
    try:
        direct = value * math.pow(scale, degree)  # exact for degree 1 (scale is a power of two)
    except OverflowError:
        direct = math.inf
    if math.isfinite(direct) and direct > 0.0:
        return direct
    log_result = math.log(value) + degree * math.log(scale)
    if log_result > _LOG_FLOAT_MAX:
        raise ValueError(
            f"The {what} of these measures is about 10^{log_result / math.log(10):.0f}, beyond the "
            "float64 range. Compare them in space='symlog' (make_measure_scorer / to_space) or rescale."
        )
    result = math.exp(log_result)
    if result == 0.0:
        raise ValueError(
            f"The {what} of these measures is about 10^{log_result / math.log(10):.0f}, below the "
            "smallest float64. Rescale the measures (the distance is homogeneous in their scale)."
        )
    return result


_LOG_FLOAT_MAX = math.log(np.finfo(np.float64).max)


def _support(x, w):
    """Drop zero-weight points of one measure; renormalise the weights."""
    keep = w > 0
    w = w[keep]
    return np.ascontiguousarray(x[keep]), w / w.sum()


def _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight):
    """The validated measures, their normalised point weights and the sample weights."""
    y_true, y_pred, w_true, w_pred = check_measure_pair(
        y_true, y_pred, weights_true=weights_true, weights_pred=weights_pred
    )
    sw = _check_sample_weight(sample_weight, y_true.shape[0])
    return y_true, y_pred, w_true, w_pred, sw


def _per_sample_at_unit_scale(distance, y_true, y_pred, w_true, w_pred, *, extras=None, n_jobs=None):
    """``distance(x, a, y, b, scale, *extras[i])`` of each pair of measures ``i``, as an array.

    Each pair comes without its absent points (weights renormalised), divided
    by ``scale``, the power of two just above its largest coordinate (see
    :func:`_binary_scale`): ``distance`` computes at unit scale and scales its
    result back by its degree of homogeneity. ``n_jobs`` joblib workers share
    the pairs (``None``: 1).
    """

    def at_unit_scale(i):
        x, a = _support(y_true[i], w_true[i])
        y, b = _support(y_pred[i], w_pred[i])
        scale = _binary_scale(x, y)
        return x / scale, a, y / scale, b, scale

    n_samples = y_true.shape[0]
    extras = [()] * n_samples if extras is None else extras
    if n_jobs is not None and n_jobs != 1:
        jobs = (delayed(distance)(*at_unit_scale(i), *extras[i]) for i in range(n_samples))
        return np.array(Parallel(n_jobs=n_jobs)(jobs), dtype=np.float64)
    values = np.empty(n_samples)
    for i in range(n_samples):  # a loop, not a comprehension: warnings count the frames above them
        values[i] = distance(*at_unit_scale(i), *extras[i])
    return values


def _weighted_median(values, weights, tol=1e-9):
    """Lower weighted median: smallest v with cumulative weight >= 1/2.

    ``tol`` makes the rule insensitive to rounding in the cumulative sum, so a
    measure written with repeated points and the same measure written with
    integer weights give the same value.
    """
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    cum = np.cumsum(weights)
    idx = int(np.searchsorted(cum, 0.5 * cum[-1] * (1.0 - tol), side="left"))
    return float(values[min(idx, values.size - 1)])


def _median_pairwise_distance(x, w):
    """Weighted median of |X - X'| over pairs of distinct points, as ``(m, e)``.

    The median is ``m * 2**e``: measures near 1e200 have medians whose ratios
    (or squares) do not fit float64, so they are kept as a mantissa at unit
    scale and a binary exponent. ``m == 0`` for a single point or all points
    equal.
    """
    x, w = _support(x, w)
    if x.shape[0] < 2:
        return 0.0, 0
    scale = _binary_scale(x)
    iu = np.triu_indices(x.shape[0], k=1)
    d = cdist(x / scale, x / scale)[iu]
    pw = w[iu[0]] * w[iu[1]]
    return _weighted_median(d, pw), math.frexp(scale)[1] - 1


def _log_spreads(spreads):
    """Logs of ``(m, e)`` medians (``-inf`` for 0), for ranking."""
    with np.errstate(divide="ignore"):
        return np.array([math.log(m) + e * math.log(2.0) if m > 0 else -math.inf for m, e in spreads])
