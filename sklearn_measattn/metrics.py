"""Distances between batches of measures, collapse diagnostics and scorers.

Every metric compares ``y_true`` and ``y_pred`` *sample by sample*: both are
batches of measures of shape ``(n_samples, n_points, n_features)`` (or ragged
lists of ``(n_points_i, n_features)`` arrays); ``n_points`` may differ between
the two, ``n_features`` may not.

Return convention (shared by every distance and by :func:`spread_ratio`),
following scikit-learn's ``multioutput`` argument:

- ``multioutput="uniform_average"`` (default): a float, the average over samples
  of the per-sample values, weighted by ``sample_weight`` when given;
- ``multioutput="raw_values"``: the per-sample values, an array of shape
  ``(n_samples,)`` (``sample_weight`` is validated but does not change them).

Per-point weights ``weights_true`` / ``weights_pred`` of shape
``(n_samples, n_points)`` make each measure ``sum_i w_i delta_{x_i}``
(normalised to total mass 1); a zero weight means the point is absent.

The collapse diagnostics measure the three faces of ensemble collapse:
:func:`attention_ess` (attention level, of random projections; a fitted model
has :meth:`~sklearn_measattn.MeasureTransformerRegressor.attention_ess`),
:func:`spread_ratio` (within an ensemble) and :func:`across_sample_correlation`
(across samples); :func:`collapse_verdict` applies the fixed rule to them and
:func:`collapse_diagnostics` measures all of them on a fitted model.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import warnings

import numpy as np
import ot
import torch
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
from scipy.stats import rankdata
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import make_scorer
from sklearn.utils import check_random_state

from ._collapse import (
    ATTENTION_ESS_THRESHOLD,
    COLLAPSE_RULE,
    CORRELATION_THRESHOLD,
    SPREAD_THRESHOLD,
    collapse_diagnostics,
    collapse_verdict,
)
from ._validation import (
    _combine_weights,
    check_measure_pair,
    check_measures,
    check_positive,
    is_ragged,
)
from .attention import _attention_weight_blocks
from .kernels import get_kernel
from .preprocessing import symlog

__all__ = [
    "wasserstein_distance",
    "energy_distance",
    "mmd",
    "spread_ratio",
    "across_sample_correlation",
    "attention_ess",
    "collapse_verdict",
    "collapse_diagnostics",
    "ATTENTION_ESS_THRESHOLD",
    "SPREAD_THRESHOLD",
    "CORRELATION_THRESHOLD",
    "COLLAPSE_RULE",
    "to_space",
    "SCORING_SPACES",
    "make_measure_scorer",
    "get_scorer",
    "neg_energy_scorer",
    "neg_wasserstein_scorer",
    "neg_sliced_wasserstein_scorer",
    "neg_mmd_scorer",
    "SCORER_NAMES",
]

_WASSERSTEIN_METHODS = ("exact", "sliced", "sinkhorn")
_MULTIOUTPUT = ("uniform_average", "raw_values")


# --------------------------------------------------------------------------- #
# shared helpers
# --------------------------------------------------------------------------- #
def _check_multioutput(multioutput):
    if not isinstance(multioutput, str) or multioutput not in _MULTIOUTPUT:
        raise ValueError(
            f"multioutput must be one of {', '.join(repr(m) for m in _MULTIOUTPUT)} "
            f"(mean over samples, or one value per sample), got {multioutput!r}."
        )
    return multioutput


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


def _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight, multioutput):
    multioutput = _check_multioutput(multioutput)
    y_true, y_pred, w_true, w_pred = check_measure_pair(
        y_true, y_pred, weights_true=weights_true, weights_pred=weights_pred
    )
    sw = _check_sample_weight(sample_weight, y_true.shape[0])
    return y_true, y_pred, w_true, w_pred, sw, multioutput


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


# --------------------------------------------------------------------------- #
# Wasserstein
# --------------------------------------------------------------------------- #
def _wasserstein_one(x, a, y, b, p, method, reg, projections):
    x, a = _support(x, a)
    y, b = _support(y, b)
    # W_p is homogeneous of degree 1: solve at unit scale, scale the result back.
    scale = _binary_scale(x, y)
    x, y = x / scale, y / scale
    if method == "sliced":
        if len(x) == len(y) and np.ptp(a) == 0 and np.ptp(b) == 0:
            # Equal-size uniform clouds: the 1-D optimal plan pairs sorted
            # projections, ~6x faster than POT's general quantile routine.
            gaps = np.abs(np.sort(x @ projections, axis=0) - np.sort(y @ projections, axis=0))
            largest = float(gaps.max())
            if largest == 0.0:
                return 0.0
            # relative to the largest gap, so that a large p neither over- nor underflows
            return float(scale * largest * np.mean((gaps / largest) ** p) ** (1.0 / p))
        value = ot.sliced_wasserstein_distance(x, y, a, b, p=p, projections=projections)
        return float(scale * value)
    # scipy's cdist, not ot.dist: ot.dist expands |x|^2 + |y|^2 - 2<x, y>, which
    # leaves ~1e-8 on the diagonal of identical clouds instead of 0.
    distances = cdist(x, y, "euclidean")
    largest = _binary_scale(distances)
    if float(distances.max()) == 0.0:
        return 0.0
    # Costs relative to the largest distance (a power of two): for large p the
    # raw |x - y|^p would overflow.
    M = cdist(x / largest, y / largest, "sqeuclidean") if p == 2 else (distances / largest) ** p
    if method == "exact":
        plan = ot.emd(a, b, M, numItermax=max(100000, 50 * x.shape[0] * y.shape[0]))
        cost = float(np.sum(plan * M))
        if cost <= 0.0 and float(np.sum(plan * distances)) > 0.0:
            raise ValueError(
                f"W_p with p={p:g} underflows float64 on these measures: the transport costs "
                f"(|x - y| / max|x - y|)^p are all below 1e-308. Use a smaller p."
            )
    else:
        reg_scaled = reg / (scale * largest) ** p
        if not (np.isfinite(reg_scaled) and reg_scaled > 0):
            raise ValueError(
                f"reg={reg!r} cannot be expressed at the scale of these measures (costs up to "
                f"{scale * largest:.3g}^{p:g}); reg is absolute, in units of |x - y|^p. Use "
                "method='exact' or 'sliced', which work at every scale."
            )
        cost = ot.sinkhorn2(
            a, b, M, reg_scaled, method="sinkhorn_stabilized", numItermax=5000, stopThr=1e-9, warn=True
        )
        if not np.isfinite(float(cost)):
            raise ValueError(
                f"Sinkhorn returned a non-finite cost ({float(cost)}) for ground costs up to "
                f"{scale * largest:.3g}^{p:g} with reg={reg!r}; reg is absolute, in units of |x - y|^p. "
                "Raise reg to the scale of the costs, or use method='exact'."
            )
    return float(scale * largest * max(float(cost), 0.0) ** (1.0 / p))


def wasserstein_distance(
    y_true,
    y_pred,
    *,
    p=1,
    method="exact",
    n_projections=200,
    reg=0.05,
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
    n_jobs=None,
    random_state=None,
):
    r"""Wasserstein-p distance between paired measures, with POT.

    For each sample ``i`` computes ``W_p(mu_i, nu_i)`` between ``y_true[i]`` and
    ``y_pred[i]`` with Euclidean ground distance:
    ``W_p = (min_P <P, |x - y|^p>)^(1/p)``.

    - ``method="exact"``: network simplex ``ot.emd2`` on the cost
      ``M = |x - y| ** p`` (Euclidean distances from ``scipy.spatial.distance.cdist``,
      exact 0 between equal points), so ``W_2`` is the square root of ``emd2``
      with squared-Euclidean cost. Cost ``O(n^3)`` per sample.
    - ``method="sliced"``: ``ot.sliced_wasserstein_distance``, i.e.
      ``(E_theta W_p^p(theta#mu, theta#nu))^(1/p)`` over ``n_projections``
      random unit directions. It is a different distance, not an estimate of
      ``W_p``: it is ``<= W_p`` and, e.g. for a translation by ``t`` in
      ``d = 2``, ``SW_1 = (2/pi)|t|`` and ``SW_2 = |t| / sqrt(2)``. In 1-D it
      equals ``W_p`` exactly.
    - ``method="sinkhorn"``: entropic OT (``ot.sinkhorn2``, log-stabilised), returning
      ``<P_reg, M>^(1/p)`` for the entropic plan ``P_reg``. This is an
      approximation biased *upwards* (``P_reg`` is not optimal for ``M``); the
      bias grows with ``reg``, which is absolute, in units of the cost
      ``|x - y|^p`` -- scale it to your data. POT warns (``UserWarning``) when
      Sinkhorn does not converge in 5000 iterations; raise ``reg`` then.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    p : float, default=1
        Order of the distance, ``p >= 1``.
    method : {"exact", "sliced", "sinkhorn"}, default="exact"
        Solver; see above.
    n_projections : int, default=200
        Number of random directions for ``method="sliced"``.
    reg : float, default=0.05
        Entropic regularisation for ``method="sinkhorn"`` (absolute, > 0).
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
        ``None`` means uniform weights.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.
    n_jobs : int, default=None
        Number of joblib workers over samples (worth it for ``"exact"`` on many
        samples). ``None`` means 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the projections of ``method="sliced"``.

    Returns
    -------
    distance : float or ndarray of shape (n_samples,)
        Mean distance, or per-sample distances with ``multioutput="raw_values"``.

    Raises
    ------
    ValueError
        For ``p < 1``, an unknown ``method``, invalid measures (wrong rank,
        NaN/inf, empty, mismatched ``n_samples`` or ``n_features``) or invalid
        weights.

    See Also
    --------
    energy_distance, mmd

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import wasserstein_distance
    >>> y_true = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    >>> wasserstein_distance(y_true, y_true + [3.0, 4.0])
    5.0
    >>> wasserstein_distance(y_true, y_true + [3.0, 4.0], p=2, multioutput="raw_values")
    array([5.])
    """
    p = check_positive(p, "p")
    if p < 1:
        raise ValueError(f"p must be >= 1 (W_p is not a metric below 1), got p={p!r}.")
    if not isinstance(method, str) or method not in _WASSERSTEIN_METHODS:
        raise ValueError(
            f"Unknown method {method!r}; valid methods are "
            f"{', '.join(repr(m) for m in _WASSERSTEIN_METHODS)}."
        )
    n_projections = check_positive(n_projections, "n_projections", integer=True)
    reg = check_positive(reg, "reg")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(
            f"n_jobs must be None, a positive number of workers or a negative one (-1: all cores, "
            f"as in joblib), got {n_jobs!r}."
        )
    y_true, y_pred, w_true, w_pred, sw, multioutput = _prepare(
        y_true, y_pred, weights_true, weights_pred, sample_weight, multioutput
    )
    n_samples, _, n_features = y_true.shape
    projections = [None] * n_samples
    if method == "sliced":
        rng = check_random_state(random_state)
        projections = []
        for _ in range(n_samples):
            theta = rng.standard_normal((n_features, n_projections))
            projections.append(theta / np.linalg.norm(theta, axis=0, keepdims=True))
    jobs = (
        delayed(_wasserstein_one)(y_true[i], w_true[i], y_pred[i], w_pred[i], p, method, reg, projections[i])
        for i in range(n_samples)
    )
    if n_jobs is None or n_jobs == 1:
        values = [fn(*args, **kw) for fn, args, kw in jobs]
    else:
        values = Parallel(n_jobs=n_jobs)(jobs)
    return _aggregate(values, sw, multioutput)


# --------------------------------------------------------------------------- #
# energy distance and MMD
# --------------------------------------------------------------------------- #
def _check_beta(beta):
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise TypeError(f"beta must be a real number in (0, 2), got {beta!r}.")
    beta = float(beta)
    if not (0.0 < beta < 2.0):
        raise ValueError(
            f"beta must lie in the open interval (0, 2), got {beta!r}; only there is "
            "the energy distance a metric between measures (beta=1 is the usual choice)."
        )
    return beta


def energy_distance(
    y_true,
    y_pred,
    *,
    beta=1.0,
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
):
    r"""Squared energy distance ``E`` between paired measures.

    For each sample computes the weighted V-statistic

    ``E(mu, nu) = 2 E|X - Y|^beta - E|X - X'|^beta - E|Y - Y'|^beta``,

    with ``X, X' ~ mu`` and ``Y, Y' ~ nu`` independent, Euclidean norms, and the
    expectations taken exactly under the (weighted) empirical measures
    (``X = X'`` pairs included). ``E >= 0``, ``E = 0`` iff ``mu = nu``, and it
    depends only on the measures (repeating a point ``k`` times equals giving
    it weight ``k``).

    This returns ``E`` itself, *not* its square root: it is the quantity the
    energy loss minimises and it is linear in each measure's weights.
    ``scipy.stats.energy_distance(u, v, u_weights, v_weights)`` is defined as
    ``sqrt(2 E|X-Y| - E|X-X'| - E|Y-Y'|)`` in 1-D, so for 1-D measures and
    ``beta=1``::

        energy_distance(y_true, y_pred) == scipy.stats.energy_distance(u, v) ** 2

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    beta : float, default=1.0
        Exponent of the distance, in the open interval ``(0, 2)``.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.

    Returns
    -------
    energy : float or ndarray of shape (n_samples,)
        Mean of ``E`` over samples, or per-sample ``E`` with
        ``multioutput="raw_values"``. Tiny negative values from rounding are
        clipped to 0.

    Raises
    ------
    ValueError
        For ``beta`` outside ``(0, 2)`` or invalid measures or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import energy_distance
    >>> y_true = np.array([[[0.0], [1.0]]])
    >>> energy_distance(y_true, y_true)
    0.0
    >>> energy_distance(y_true, y_true + 2.0)  # 2*2 - 0.5 - 0.5
    3.0
    """
    beta = _check_beta(beta)
    y_true, y_pred, w_true, w_pred, sw, multioutput = _prepare(
        y_true, y_pred, weights_true, weights_pred, sample_weight, multioutput
    )
    values = np.empty(y_true.shape[0])
    for i in range(y_true.shape[0]):
        x, a = _support(y_true[i], w_true[i])
        y, b = _support(y_pred[i], w_pred[i])
        # E is homogeneous of degree beta: computed at unit scale, scaled back.
        scale = _binary_scale(x, y)
        x, y = x / scale, y / scale
        cross = _weighted_distance_moment(x, a, y, b, beta)
        unit = max(2.0 * cross - _weighted_distance_moment(x, a, x, a, beta)
                   - _weighted_distance_moment(y, b, y, b, beta), 0.0)
        values[i] = _times_power(unit, scale, beta, "energy distance")
    return _aggregate(values, sw, multioutput)


# Rows of the distance matrix computed at a time: 2**22 / n float64 values keep a
# block near 32 MiB, so energy distance of large ensembles needs O(n) memory.
_ENERGY_BLOCK_ELEMENTS = 2**22


def _weighted_distance_moment(x, a, y, b, beta):
    """``sum_ij a_i b_j |x_i - y_j|^beta``, in row blocks of the distance matrix."""
    block = max(1, _ENERGY_BLOCK_ELEMENTS // max(1, len(y)))
    total = 0.0
    for start in range(0, len(x), block):
        distances = cdist(x[start : start + block], y)
        if beta != 1.0:
            np.power(distances, beta, out=distances)
        total += a[start : start + block] @ distances @ b
    return total


def _median_bandwidth(z, c):
    """Weighted lower median of |Z - Z'|, Z, Z' iid from sum c_i delta_{z_i}."""
    d = cdist(z, z).ravel()
    h = _weighted_median(d, np.outer(c, c).ravel())
    return h if h > 0 else 1.0


def mmd(
    y_true,
    y_pred,
    *,
    bandwidth="median",
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
):
    r"""Squared maximum mean discrepancy ``MMD^2`` with a Gaussian kernel.

    For each sample computes the weighted V-statistic

    ``MMD^2 = E k(X, X') + E k(Y, Y') - 2 E k(X, Y)``,
    ``k(x, y) = exp(-|x - y|^2 / (2 h^2))``,

    with expectations taken exactly under the (weighted) empirical measures,
    diagonal pairs included; so it depends only on the measures (integer
    weights equal repeated points). Returns ``MMD^2``, not ``MMD``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    bandwidth : float or "median", default="median"
        Kernel bandwidth ``h > 0``. ``"median"`` picks, per sample, the median
        heuristic: the lower weighted median of ``|Z - Z'|`` for ``Z, Z'``
        independent draws from the pooled measure ``(mu + nu) / 2`` (1.0 if
        that median is 0). A fixed float makes values comparable across samples.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.

    Returns
    -------
    mmd2 : float or ndarray of shape (n_samples,)
        Mean of ``MMD^2`` over samples, or per-sample values with
        ``multioutput="raw_values"``; in ``[0, 2]``.

    Raises
    ------
    ValueError
        For a non-positive bandwidth, an unknown bandwidth rule, or invalid
        measures or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import mmd
    >>> y_true = np.array([[[0.0], [1.0]]])
    >>> mmd(y_true, y_true)
    0.0
    >>> round(mmd(y_true, y_true + 100.0, bandwidth=1.0), 6)  # far apart: (1 + exp(-1/2)) / 2 * 2
    1.606531
    """
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise ValueError(f"bandwidth must be a positive float or 'median', got {bandwidth!r}.")
    else:
        bandwidth = check_positive(bandwidth, "bandwidth")
    y_true, y_pred, w_true, w_pred, sw, multioutput = _prepare(
        y_true, y_pred, weights_true, weights_pred, sample_weight, multioutput
    )
    values = np.empty(y_true.shape[0])
    for i in range(y_true.shape[0]):
        x, a = _support(y_true[i], w_true[i])
        y, b = _support(y_pred[i], w_pred[i])
        # The kernel depends on |x - y| / h only: measure both at unit scale.
        scale = _binary_scale(x, y)
        x, y = x / scale, y / scale
        if bandwidth == "median":
            log_h = math.log(_median_bandwidth(np.concatenate([x, y]), np.concatenate([a, b]) / 2.0))
        else:
            log_h = math.log(bandwidth) - math.log(scale)

        def gram(u, v):
            # log(0) = -inf on the diagonal gives kernel 1; overflow to inf, kernel 0
            with np.errstate(divide="ignore", over="ignore"):
                return np.exp(-0.5 * np.exp(2.0 * (np.log(cdist(u, v)) - log_h)))

        values[i] = max(a @ gram(x, x) @ a + b @ gram(y, y) @ b - 2.0 * (a @ gram(x, y) @ b), 0.0)
    return _aggregate(values, sw, multioutput)


# --------------------------------------------------------------------------- #
# collapse diagnostics
# --------------------------------------------------------------------------- #
def spread_ratio(
    y_true,
    y_pred,
    *,
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
):
    r"""Within-ensemble collapse: robust spread of each prediction over its target's.

    The spread of a measure is the weighted median of the Euclidean distances
    ``|x_i - x_j|`` over pairs of *distinct* points ``i < j``, pair weight
    ``w_i w_j`` (padding, weight 0, never counts). The per-sample ratio is
    ``spread(y_pred[i]) / spread(y_true[i])``: about 1 when the predicted
    ensemble is as spread out as its target, near 0 when its particles have
    collapsed onto a point, above 1 when it is too dispersed. Samples whose
    target spread is 0 (a single point, or all points equal) get ``nan`` and are
    left out of the average, with an
    :class:`~sklearn.exceptions.UndefinedMetricWarning` (so a ``nan`` result is
    never silent).

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point).
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean ratio over samples (ignoring ``nan``), or the
        per-sample ratios.

    Returns
    -------
    ratio : float or ndarray of shape (n_samples,)
        Mean spread ratio, or per-sample ratios with ``multioutput="raw_values"``.

    Raises
    ------
    ValueError
        For invalid measures or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import spread_ratio
    >>> y_true = np.array([[[0.0], [1.0], [3.0]]])
    >>> spread_ratio(y_true, 2.0 * y_true)
    2.0
    >>> spread_ratio(y_true, np.zeros((1, 3, 1)), multioutput="raw_values")
    array([0.])
    """
    y_true, y_pred, w_true, w_pred, sw, multioutput = _prepare(
        y_true, y_pred, weights_true, weights_pred, sample_weight, multioutput
    )
    s_true = [_median_pairwise_distance(y_true[i], w_true[i]) for i in range(len(y_true))]
    s_pred = [_median_pairwise_distance(y_pred[i], w_pred[i]) for i in range(len(y_pred))]
    ratio = np.full(len(y_true), np.nan)
    ok = np.array([m > 0 for m, _ in s_true])
    with np.errstate(over="ignore", under="ignore"):
        for i in np.flatnonzero(ok):
            ratio[i] = np.ldexp(s_pred[i][0] / s_true[i][0], s_pred[i][1] - s_true[i][1])
    if np.any(np.isinf(ratio)) or np.any((ratio == 0) & np.array([m > 0 for m, _ in s_pred])):
        raise ValueError(
            "spread_ratio is outside the float64 range: some predicted ensembles are more than "
            "1e308 times more (or less) spread than their targets. Compare the measures in symlog "
            "space (to_space)."
        )
    if not np.all(ok):
        bad = np.flatnonzero(~ok)[:5].tolist()
        what = "every sample, so the result is nan" if not np.any(ok) else "them, left out of the average"
        warnings.warn(
            f"spread_ratio is undefined for sample(s) {bad}: their target spread is 0 (a single "
            f"point, or all points equal); the ratio is nan for {what}.",
            UndefinedMetricWarning,
            stacklevel=2,
        )
    return _aggregate(ratio, sw, multioutput, undefined_ok=True)


def _spearman(u, v):
    """Spearman correlation; 0.0 when either side is constant (no variation)."""
    ru = rankdata(u)
    rv = rankdata(v)
    ru = ru - ru.mean()
    rv = rv - rv.mean()
    den = math.sqrt(float(ru @ ru) * float(rv @ rv))
    if den == 0.0:
        return 0.0
    return float(np.clip((ru @ rv) / den, -1.0, 1.0))


def _weighted_location(x, w):
    x, w = _support(x, w)
    return np.array([_weighted_median(x[:, k], w) for k in range(x.shape[1])])


_STATISTICS = ("scale", "location")


def across_sample_correlation(
    y_true,
    y_pred,
    *,
    statistic="scale",
    weights_true=None,
    weights_pred=None,
):
    r"""Across-sample collapse: does the prediction still vary with the input?

    Computes a robust statistic of every target and every predicted measure and
    returns the Spearman rank correlation, across samples, between the two:

    - ``statistic="scale"``: the median pairwise distance of the measure (as in
      :func:`spread_ratio`); the result is Spearman(scale(y_pred), scale(y_true)).
    - ``statistic="location"``: the coordinate-wise weighted median of the
      measure; one Spearman correlation per feature, averaged over features.

    About 1 when predictions rank the samples like their targets do; near 0 when
    the model outputs one average measure whatever the input. A statistic that
    is constant across samples (on either side) has no rank order: its
    correlation is defined as 0.0 (not ``nan``). With few samples the value is
    noisy; use dozens of samples.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures, ``n_samples >= 3``.
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    statistic : {"scale", "location"}, default="scale"
        Which robust per-measure statistic to correlate.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point).

    Returns
    -------
    correlation : float
        In ``[-1, 1]``; one number for the whole batch.

    Raises
    ------
    ValueError
        For an unknown ``statistic``, fewer than 3 samples, or invalid measures
        or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import across_sample_correlation
    >>> rng = np.random.default_rng(0)
    >>> y_true = rng.normal(size=(20, 30, 2)) * rng.uniform(0.5, 3, size=(20, 1, 1))
    >>> across_sample_correlation(y_true, 1.5 * y_true)
    1.0
    >>> across_sample_correlation(y_true, np.broadcast_to(y_true[:1], y_true.shape))
    0.0
    """
    if not isinstance(statistic, str) or statistic not in _STATISTICS:
        raise ValueError(
            f"statistic must be one of {', '.join(repr(s) for s in _STATISTICS)}, got {statistic!r}."
        )
    y_true, y_pred, w_true, w_pred = check_measure_pair(
        y_true, y_pred, weights_true=weights_true, weights_pred=weights_pred
    )
    n_samples = y_true.shape[0]
    if n_samples < 3:
        raise ValueError(
            f"across_sample_correlation needs at least 3 samples to rank, got {n_samples}; "
            "pass a larger batch of measures."
        )
    if statistic == "scale":
        # ranks of the log spreads: the same ranks, and no overflow near 1e200
        t = _log_spreads([_median_pairwise_distance(y_true[i], w_true[i]) for i in range(n_samples)])
        p = _log_spreads([_median_pairwise_distance(y_pred[i], w_pred[i]) for i in range(n_samples)])
        return _spearman(t, p)
    t = np.stack([_weighted_location(y_true[i], w_true[i]) for i in range(n_samples)])
    p = np.stack([_weighted_location(y_pred[i], w_pred[i]) for i in range(n_samples)])
    return float(np.mean([_spearman(t[:, k], p[:, k]) for k in range(t.shape[1])]))


def _check_projections(projections, n_features, d_head):
    if not (isinstance(projections, (tuple, list)) and len(projections) == 2):
        raise ValueError(
            "projections must be a pair (W_q, W_k) of arrays of shape (n_features, d_head)."
        )
    mats = []
    for name, W in zip(("W_q", "W_k"), projections):
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2 or W.shape[0] != n_features or W.shape[1] < 1:
            raise ValueError(
                f"projections {name} must have shape (n_features, d_head) = ({n_features}, d_head), "
                f"got {W.shape}."
            )
        if not np.all(np.isfinite(W)):
            raise ValueError(f"projections {name} contains NaN or inf.")
        mats.append(W)
    if mats[0].shape != mats[1].shape:
        raise ValueError(f"W_q and W_k must have the same shape, got {mats[0].shape} and {mats[1].shape}.")
    if d_head is not None and d_head != mats[0].shape[1]:
        raise ValueError(
            f"d_head={d_head} disagrees with the projections' d_head={mats[0].shape[1]}; "
            "leave d_head=None when passing projections."
        )
    return mats


def _check_scores_finite(q, k, sample):
    """Raise when the attention scores of a measure may overflow float64 (Cauchy-Schwarz bound)."""
    bound = float(q.abs().amax()) * float(k.abs().amax()) / math.sqrt(q.shape[-1])
    if not math.isfinite(bound):
        raise ValueError(
            f"The attention scores of measure {sample} reach about {bound:.3g}, at the edge of the "
            "float64 range, so its attention weights cannot be computed. At such magnitudes softmax "
            "attention is collapsed (ESS/n near 1/n); apply symlog first (preprocessing.symlog) "
            "to measure the ESS of a model that sees the data on a logarithmic scale."
        )


def attention_ess(
    X,
    kernel="softmax",
    *,
    kernel_params=None,
    d_head=None,
    projections=None,
    n_draws=1,
    weights=None,
    per_query=False,
    max_queries=None,
    random_state=None,
):
    r"""Attention-level collapse: effective sample size of kernel attention weights.

    For each measure ``X[i]`` (points ``x_1..x_n`` with weights ``a_j``), builds
    queries ``q = x W_q`` and keys ``k = x W_k``, scores
    ``S_ij = <q_i, k_j> / sqrt(d_head)``, and the attention weights of kernel
    ``kappa = exp(g)`` against the measure,
    ``w_ij = a_j exp(g(S_ij)) / sum_l a_l exp(g(S_il))``
    (``softmax_j(g(S_ij) + log a_j)``, computed in float64 torch with the
    kernel's ``log_weight``). The effective sample size of query ``i`` is
    ``ESS_i = 1 / sum_j w_ij^2``, reported as a fraction of the measure's own
    effective size ``1 / sum_j a_j^2`` (that is ``n`` for uniform weights, the
    number of present points with 0/1 padding weights). So 1 means flat
    attention and values near 0 mean one key takes all the weight (collapse).

    The random projections have i.i.d. ``N(0, 1 / n_features)`` entries, so
    queries and keys are on the scale of the data; standardise the data first
    if its scale is arbitrary, since ESS depends on it.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_points, n_features) or list
        Measures (a list of 2-D arrays may be ragged).
    kernel : str, callable or AttentionKernel, default="softmax"
        Attention kernel, see :func:`sklearn_measattn.kernels.get_kernel`.
    kernel_params : dict, default=None
        Parameters for the kernel (e.g. ``{"degree": 2}`` for ``"poly"``).
    d_head : int, default=None
        Head dimension of random projections; defaults to ``n_features``. Must
        be left ``None`` (or agree) when ``projections`` is given.
    projections : tuple (W_q, W_k), default=None
        Fixed projection matrices, each of shape ``(n_features, d_head)``.
        ``None`` draws Gaussian ones from ``random_state``.
    n_draws : int, default=1
        Number of independent random projection pairs to average the ESS
        fraction over (must be 1 when ``projections`` is given).
    weights : array-like of shape (n_samples, n_points), default=None
        Nonnegative point weights (0 = absent point).
    per_query : bool, default=False
        If True return the per-query fractions (``nan`` at absent points);
        otherwise average over queries with the point weights ``a_i``.
    max_queries : int, default=None
        Evaluate the ESS of at most this many queries per measure, drawn at
        random among the present points (each against all keys), which keeps
        large ``n_points`` cheap: the average over queries is then an unbiased
        estimate. ``None`` uses every query. With ``per_query=True`` the
        queries not drawn are ``nan``.
    random_state : int, RandomState instance or None, default=None
        Seeds the random projections.

    Returns
    -------
    ess : ndarray of shape (n_samples,) or (n_samples, n_points)
        ESS fraction in ``(0, 1]`` per measure (mean over queries), or per query
        with ``per_query=True``.

    Raises
    ------
    ValueError
        For invalid measures, weights, kernel names or projection shapes.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import attention_ess
    >>> X = np.random.default_rng(0).normal(size=(2, 50, 2))
    >>> attention_ess(X, "softmax", projections=(np.zeros((2, 2)), np.zeros((2, 2))))
    array([1., 1.])
    >>> ess = attention_ess(X, "log", random_state=0)
    >>> ess.shape, bool(np.all((ess > 0) & (ess <= 1)))
    ((2,), True)
    """
    kernel_obj = get_kernel(kernel, **(kernel_params or {}))
    X, ragged_w = check_measures(X, input_name="X", dtype=np.float64)
    n_samples, n_points, n_features = X.shape
    n_draws = check_positive(n_draws, "n_draws", integer=True)
    d_head = check_positive(d_head, "d_head", integer=True, allow_none=True)
    if projections is not None:
        if n_draws != 1:
            raise ValueError("n_draws must be 1 when fixed projections are given.")
        draws = [_check_projections(projections, n_features, d_head)]
    else:
        d_head = n_features if d_head is None else d_head
        rng = check_random_state(random_state)
        scale = 1.0 / math.sqrt(n_features)
        draws = [
            [rng.standard_normal((n_features, d_head)) * scale for _ in range(2)] for _ in range(n_draws)
        ]
    a = _combine_weights(weights, ragged_w, X.shape, "weights")

    Xt = torch.as_tensor(X, dtype=torch.float64)
    at = torch.as_tensor(a, dtype=torch.float64)
    log_a = torch.where(at > 0, torch.log(torch.clamp(at, min=1e-300)), torch.full_like(at, -math.inf))
    base_ess = 1.0 / (at * at).sum(dim=1)  # (n_samples,)
    max_queries = check_positive(max_queries, "max_queries", integer=True, allow_none=True)
    query_sets = [np.flatnonzero(a[i] > 0) for i in range(n_samples)]
    if max_queries is not None:
        query_rng = check_random_state(random_state)
        query_sets = [
            np.sort(query_rng.choice(q, max_queries, replace=False)) if len(q) > max_queries else q
            for q in query_sets
        ]
    frac = torch.full((n_samples, n_points), math.nan, dtype=torch.float64)
    for i, queries in enumerate(query_sets):
        frac[i, queries] = 0.0
    with torch.no_grad():
        for Wq, Wk in draws:
            Wq_t = torch.as_tensor(Wq, dtype=torch.float64)
            Wk_t = torch.as_tensor(Wk, dtype=torch.float64)
            for i, queries in enumerate(query_sets):
                q = (Xt[i, queries] @ Wq_t)[None, None]
                k = (Xt[i] @ Wk_t)[None, None]
                _check_scores_finite(q, k, i)
                ess = torch.cat([
                    1.0 / (attn * attn).sum(dim=-1)[0, 0]
                    for _, _, attn in _attention_weight_blocks(q, k, kernel_obj, log_a[i][None, :])
                ])
                frac[i, queries] += ess / base_ess[i]
    frac = (frac / len(draws)).numpy()
    if per_query:
        return frac
    drawn = np.isfinite(frac)
    query_weights = np.where(drawn, a, 0.0)
    return np.sum(query_weights * np.where(drawn, frac, 0.0), axis=1) / query_weights.sum(axis=1)


# --------------------------------------------------------------------------- #
# scorers
# --------------------------------------------------------------------------- #
def _spread_log_deviation(y_true, y_pred, *, weights_true=None, weights_pred=None, sample_weight=None):
    """Mean over samples of ``|log spread_ratio|``: 0 for the right spread, growing
    alike for collapsed (ratio 0.1) and for over-dispersed (ratio 10) predictions."""
    ratio = spread_ratio(
        y_true, y_pred, weights_true=weights_true, weights_pred=weights_pred, multioutput="raw_values"
    )
    with np.errstate(divide="ignore"):
        deviation = np.abs(np.log(ratio))
    # A prediction collapsed to one point (ratio 0) gets a deviation larger than
    # any finite ratio can have (|log| of float64 ratios stays below 1460), but
    # finite, so that averages over folds stay finite.
    deviation[np.isinf(deviation)] = 1500.0
    sw = _check_sample_weight(sample_weight, len(ratio))
    return _aggregate(deviation, sw, "uniform_average", undefined_ok=True)


# Each metric with its fixed arguments and, in one place, what its scorer
# minimises: the metric itself for distances, |log ratio| for the spread ratio,
# whose ideal is 1 (scoring the ratio itself would reward collapsed models).
_METRICS = {
    "energy_distance": (energy_distance, {}, energy_distance),
    "wasserstein_distance": (wasserstein_distance, {}, wasserstein_distance),
    "sliced_wasserstein_distance": (wasserstein_distance, {"method": "sliced"}, wasserstein_distance),
    "mmd": (mmd, {}, mmd),
    "spread_ratio": (spread_ratio, {}, _spread_log_deviation),
}
# Short names, as in ``make_measure_scorer("energy", space="symlog")``.
_METRIC_ALIASES = {"energy": "energy_distance", "wasserstein": "wasserstein_distance",
                   "sliced_wasserstein": "sliced_wasserstein_distance"}

#: Spaces a measure can be scored in: as given, or after ``symlog`` of every coordinate.
SCORING_SPACES = ("raw", "symlog")


def _check_space(space):
    """Validate a scoring space name; return it."""
    if not isinstance(space, str) or space not in SCORING_SPACES:
        raise ValueError(
            f"space must be one of {', '.join(map(repr, SCORING_SPACES))}, got {space!r}; 'symlog' "
            "compares sign(y) * log1p(|y|) of every coordinate, which keeps distances finite and "
            "not dominated by a few extreme points on heavy-tailed (infinite-moment) data."
        )
    return space


def to_space(y, space):
    """Measures ``y`` (3-D array or list of 2-D arrays) as seen in scoring ``space``.

    ``"raw"`` returns ``y`` unchanged; ``"symlog"`` applies
    :func:`~sklearn_measattn.preprocessing.symlog` (``scale=1``) to every
    coordinate of every point. Distances between heavy-tailed measures with
    infinite moments are dominated by a few extreme points in raw space; after
    symlog every point counts on a logarithmic scale in the tails.

    Parameters
    ----------
    y : array-like of shape (n_samples, n_points, n_features) or list
        Measures; a list of 2-D arrays may be ragged.
    space : {"raw", "symlog"}
        The scoring space.

    Returns
    -------
    y_space : ndarray or list
        The measures in that space, in the layout of ``y``.

    Raises
    ------
    ValueError
        For an unknown ``space``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import to_space
    >>> to_space(np.array([[[0.0, -1e6]]]), "symlog").round(2)
    array([[[  0.  , -13.82]]])
    """
    space = _check_space(space)
    if space == "raw":
        return y
    if is_ragged(y):
        return [symlog(np.asarray(m, dtype=np.float64)) for m in y]
    return symlog(np.asarray(y, dtype=np.float64))


class _InSpace:
    """A metric evaluated after mapping both measures into a scoring space (picklable)."""

    def __init__(self, func, space):
        self.func, self.space = func, space
        self.__name__ = f"{getattr(func, '__name__', 'metric')}_{space}"

    def __call__(self, y_true, y_pred, **kwargs):
        return self.func(to_space(y_true, self.space), to_space(y_pred, self.space), **kwargs)

    def __repr__(self):
        return f"{getattr(self.func, '__name__', self.func)} in {self.space} space"


def make_measure_scorer(metric, *, greater_is_better=None, space="raw", **kwargs):
    """Build a scikit-learn scorer from a measure metric.

    The scorer calls ``estimator.predict(X)`` (which must return measures, e.g.
    a 3-D array) and compares it with ``y`` sample by sample; larger scores are
    always better, as ``GridSearchCV`` and ``cross_val_score`` expect. Named
    metrics have their direction built in: distances score as their negative,
    and ``"spread_ratio"``, whose ideal is 1, as ``-mean |log ratio|`` (so a
    collapsed model, ratio 0.01, loses to the right one, ratio 1, and ratio 10
    counts as badly as ratio 0.1). It is a ``sklearn.metrics.make_scorer``
    object, so ``sample_weight`` and metadata routing work as for any scorer.

    Parameters
    ----------
    metric : str or callable
        One of ``"energy_distance"`` (or ``"energy"``), ``"wasserstein_distance"``
        (``"wasserstein"``), ``"sliced_wasserstein_distance"``
        (``"sliced_wasserstein"``), ``"mmd"``, ``"spread_ratio"``, or a
        callable ``metric(y_true, y_pred, **kwargs) -> float``.
    greater_is_better : bool or None, default=None
        Whether larger values of a callable ``metric`` are better; ``None``
        means False (a distance). Named metrics fix their own direction, and
        giving one that contradicts it raises.
    space : {"raw", "symlog"}, default="raw"
        Where the measures are compared: as predicted, or after
        ``sign(y) * log1p(|y|)`` of every coordinate of both the target and
        the prediction (see :func:`to_space`). On data with infinite moments
        (Pareto or Student-t tail index <= 1) raw energy and Wasserstein
        distances are dominated by a few extreme points; ``"symlog"`` ranks
        models by the whole ensemble. The model still predicts in raw space.
    **kwargs
        Fixed keyword arguments passed to the metric (e.g. ``p=2``); checked
        against the metric's signature now, not at scoring time.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float``.

    Raises
    ------
    ValueError
        For an unknown metric name or a keyword argument the metric does not
        accept.
    TypeError
        If ``metric`` is neither a string nor a callable.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyRegressor
    >>> from sklearn_measattn.metrics import make_measure_scorer
    >>> class Identity(DummyRegressor):
    ...     def predict(self, X):
    ...         return X
    >>> X = np.zeros((3, 4, 2))
    >>> scorer = make_measure_scorer("wasserstein_distance", p=2)
    >>> scorer(Identity(), X, X + [3.0, 4.0])
    -5.0
    >>> symlog_scorer = make_measure_scorer("energy", space="symlog")
    >>> float(symlog_scorer(Identity(), X + 1e6, X + 1e6))
    -0.0
    """
    space = _check_space(space)
    if isinstance(metric, str):
        metric = _METRIC_ALIASES.get(metric, metric)
        if metric not in _METRICS:
            raise ValueError(
                f"Unknown metric {metric!r}; valid names are "
                f"{', '.join(repr(m) for m in (*_METRICS, *_METRIC_ALIASES))}, "
                "or pass a callable metric(y_true, y_pred, **kwargs)."
            )
        func, fixed, scored = _METRICS[metric]
        clash = sorted(set(fixed) & set(kwargs))
        if clash:
            raise ValueError(f"{metric!r} fixes {clash}; use 'wasserstein_distance' to choose them.")
        if greater_is_better:
            ideal = "is best at 1 and scores as -mean |log ratio|" if metric == "spread_ratio" else "is a distance"
            raise ValueError(
                f"greater_is_better=True would reward the wrong models: {metric!r} {ideal}, so its "
                "scorer already makes larger scores better. Leave greater_is_better unset."
            )
        kwargs = {**fixed, **kwargs}
    elif callable(metric):
        func = scored = metric
    else:
        raise TypeError(f"metric must be a metric name or a callable, got {metric!r}.")
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature: skip the check
        signature = None
    if signature is not None:
        try:
            signature.bind_partial(None, None, **kwargs)
        except TypeError as exc:
            name = getattr(func, "__name__", func)
            raise ValueError(f"Invalid keyword arguments for metric {name!r}: {exc}.") from None
    if isinstance(metric, str):
        _validate_kwargs(func, kwargs)
    if space != "raw":
        scored = _InSpace(scored, space)
    return make_scorer(scored, greater_is_better=bool(greater_is_better), **kwargs)


def _validate_kwargs(func, kwargs):
    """Check hyper-parameter values now (e.g. p < 1) by scoring a tiny dummy pair."""
    dummy = np.array([[[0.0], [1.0]], [[0.5], [2.0]], [[1.0], [3.0]]])
    skip = ("sample_weight", "weights_true", "weights_pred", "n_jobs")
    func(dummy, dummy, **{k: v for k, v in kwargs.items() if k not in skip})


# Built directly (no validation run at import time); make_measure_scorer gives
# the same objects.
neg_energy_scorer = make_scorer(energy_distance, greater_is_better=False)
neg_wasserstein_scorer = make_scorer(wasserstein_distance, greater_is_better=False)
neg_sliced_wasserstein_scorer = make_scorer(
    wasserstein_distance, greater_is_better=False, method="sliced", random_state=0
)
neg_mmd_scorer = make_scorer(mmd, greater_is_better=False)

_SCORERS = {
    "neg_energy_distance": neg_energy_scorer,
    "neg_wasserstein_distance": neg_wasserstein_scorer,
    "neg_sliced_wasserstein_distance": neg_sliced_wasserstein_scorer,
    "neg_mmd": neg_mmd_scorer,
    "neg_energy_distance_symlog": make_scorer(_InSpace(energy_distance, "symlog"), greater_is_better=False),
    "neg_wasserstein_distance_symlog": make_scorer(
        _InSpace(wasserstein_distance, "symlog"), greater_is_better=False
    ),
}
_SCORER_ALIASES = {
    "neg_energy_scorer": "neg_energy_distance",
    "neg_wasserstein_scorer": "neg_wasserstein_distance",
    "neg_sliced_wasserstein_scorer": "neg_sliced_wasserstein_distance",
    "neg_mmd_scorer": "neg_mmd",
}

#: Names accepted by :func:`get_scorer`.
SCORER_NAMES = tuple(_SCORERS) + tuple(_SCORER_ALIASES)


def get_scorer(name):
    """Return a measure scorer by name, for ``GridSearchCV(scoring=...)``.

    =====================================  ==========================================
    name (alias)                           score
    =====================================  ==========================================
    ``"neg_energy_distance"``              ``-energy_distance`` (``E``, beta=1)
    (``"neg_energy_scorer"``)
    ``"neg_wasserstein_distance"``         ``-wasserstein_distance`` (exact W_1)
    (``"neg_wasserstein_scorer"``)
    ``"neg_sliced_wasserstein_distance"``  ``-wasserstein_distance(method="sliced")``
    (``"neg_sliced_wasserstein_scorer"``)  (200 projections, ``random_state=0``)
    ``"neg_mmd"`` (``"neg_mmd_scorer"``)   ``-mmd`` (median bandwidth)
    ``"neg_energy_distance_symlog"``       ``-energy_distance`` after symlog of
                                           target and prediction (:func:`to_space`)
    ``"neg_wasserstein_distance_symlog"``  ``-wasserstein_distance`` after symlog
    =====================================  ==========================================

    Each scores the mean over samples of the metric between ``y`` and
    ``estimator.predict(X)`` (both batches of measures); larger is better.

    Parameters
    ----------
    name : str
        A name from the table above.

    Returns
    -------
    scorer : callable
        A fresh copy of the scorer, ``scorer(estimator, X, y, sample_weight=None)``.

    Raises
    ------
    ValueError
        If ``name`` is unknown; the message lists the valid names. Use
        :func:`make_measure_scorer` for other settings.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyRegressor
    >>> from sklearn_measattn.metrics import get_scorer
    >>> class Identity(DummyRegressor):
    ...     def predict(self, X):
    ...         return X
    >>> X = np.array([[[0.0], [1.0]]])
    >>> get_scorer("neg_energy_distance")(Identity(), X, X + 2.0)
    -3.0
    """
    key = _SCORER_ALIASES.get(name, name) if isinstance(name, str) else None
    if key not in _SCORERS:
        raise ValueError(
            f"Unknown measure scorer {name!r}; valid names are {', '.join(repr(n) for n in SCORER_NAMES)}. "
            "Use make_measure_scorer(metric, **kwargs) for other metrics or settings."
        )
    return copy.deepcopy(_SCORERS[key])
