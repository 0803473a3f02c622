"""Tail index of a batch of measures: Hill's estimator with an exact confidence interval."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.integrate import quad
from scipy.stats import chi2, norm

from .._param_validation import validate_parameter_constraints, validate_params
from .._validation import Choices, NumberInterval, check_measures

__all__ = ["TailIndexEstimate", "estimate_tail_index", "LIGHT_TAIL_INDEX"]

#: Hill estimates above this are read as light tails (no power law that matters).
#: With ``k = sqrt(m)``, Gaussian coordinates give about 6 at m = 1 000 points,
#: 8 at 4 000 and 10 at 16 000 (the estimate of a light tail grows with m),
#: Student-t coordinates with 4 degrees of freedom about 3.8 and with 6 about 5.
LIGHT_TAIL_INDEX = 5.0

#: Fewest measures for the tail index across samples: Hill's ``k = floor(sqrt(n))`` must be at least 5.
MIN_MEASURES_ACROSS = 25

# Fewest order statistics Hill's estimator uses.
_MIN_TAIL = 5

#: The domains of the tail estimate's options, shared with the functions that pass them on.
TAIL_ESTIMATE_CONSTRAINTS = {
    "n_tail": [
        Choices(("sqrt",)),
        NumberInterval(Integral, _MIN_TAIL, None, closed="left", why="Hill's estimator needs k >= 5 order statistics"),
        NumberInterval(Real, 0, 1, closed="neither", why="the fraction of the points in the tail"),
    ],
    "confidence": [NumberInterval(Real, 0, 1, closed="neither", why="the level of the interval, e.g. 0.95")],
    "feature_names": [None, "array-like"],
}


@dataclass(frozen=True)
class TailIndexEstimate:
    """Hill estimates of the tail index, per feature and of the point norm.

    Entry ``j < n_features`` is feature ``j`` (on ``|x_j - median_j|``), the
    last entry is the Euclidean norm ``|x - median|``; ``labels`` names them.

    Parameters
    ----------
    labels : tuple of str
        ``("feature 0", ..., "norm")``, or the feature names given.
    tail_index : ndarray of shape (n_features + 1,)
        Hill's estimate ``alpha_hat``: ``P(|Z| > t) ~ C t^-alpha``. ``inf``
        when the ``k`` largest values are all equal, ``nan`` when the
        ``(k+1)``-th largest is 0 (more than ``m - k`` points at the median).
    standard_error : ndarray of shape (n_features + 1,)
        Asymptotic standard error ``alpha_hat / sqrt(k)``.
    ci_lower, ci_upper : ndarray of shape (n_features + 1,)
        Confidence interval at level ``confidence``, exact when the ``k`` values
        above the threshold follow a Pareto law:
        ``2 k alpha / alpha_hat ~ chi2(2 k)``.
    confidence : float
        Level of the interval.
    n_tail : int
        ``k``, the number of order statistics used.
    n_values : int
        ``m``, the number of values: the points pooled over all measures (or
        the measures, for an estimate across samples).
    light_tail_index : float
        Threshold of :attr:`light_tailed`.
    light_rule : {"estimate", "interval"}, default="estimate"
        How :attr:`light_tailed` reads the estimate. ``"estimate"``: light
        when the estimate exceeds ``light_tail_index``, right for thousands of
        values. ``"interval"``: light unless the whole interval lies below both
        ``light_tail_index`` and :attr:`gaussian_tail_index`, for a few dozen
        values, where Hill's estimate of a Gaussian tail is itself small (about
        4 from 40 values).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.experiments import estimate_tail_index
    >>> est = estimate_tail_index(np.random.default_rng(0).standard_cauchy(size=(20, 100, 1)))
    >>> est.labels, est.n_tail, est.n_values
    (('feature 0', 'norm'), 44, 2000)
    >>> sorted(est.rows()[0])
    ['ci_lower', 'ci_upper', 'confidence', 'light_tailed', 'n_tail', 'n_values', 'of', 'standard_error', 'tail_index']
    """

    labels: tuple
    tail_index: np.ndarray
    standard_error: np.ndarray
    ci_lower: np.ndarray
    ci_upper: np.ndarray
    confidence: float
    n_tail: int
    n_values: int
    light_tail_index: float = LIGHT_TAIL_INDEX
    light_rule: str = "estimate"

    def __post_init__(self):
        validate_parameter_constraints(
            {"light_rule": [Choices(("estimate", "interval"))]}, {"light_rule": self.light_rule},
            caller_name=type(self).__name__,
        )

    @property
    def gaussian_tail_index(self):
        """Hill's estimate on Gaussian values with this ``k`` and ``m``: what a light tail looks like here.

        The limit, for many values, of Hill's estimate from the top ``k / m``
        of ``|Z|``, ``Z`` standard normal: about 4 for ``m = 40``, 5.4 for
        ``m = 200`` and 7 for ``m = 1000`` with ``k = floor(sqrt(m))``.
        """
        return _gaussian_hill_index(self.n_tail, self.n_values)

    @property
    def light_tailed(self):
        """Boolean array: no power law that this many values can see.

        Hill's estimate of a light (exponential or Gaussian) tail is finite but
        grows with the sample size (like ``2 log(m / k)`` for a Gaussian), so a
        large estimate means "no power law that this many points can see". With
        ``light_rule="estimate"`` that is an estimate above
        :attr:`light_tail_index`; with ``light_rule="interval"``, an interval
        that does not lie wholly below both :attr:`light_tail_index` and
        :attr:`gaussian_tail_index`. An undetermined (NaN) estimate is not light.
        """
        if self.light_rule == "interval":
            bound = min(self.light_tail_index, self.gaussian_tail_index)
            return ~np.isnan(self.tail_index) & ~(self.ci_upper < bound)
        return self.tail_index > self.light_tail_index

    @property
    def norm(self):
        """``(tail_index, ci_lower, ci_upper)`` of the norm, the heaviest direction."""
        return float(self.tail_index[-1]), float(self.ci_lower[-1]), float(self.ci_upper[-1])

    def rows(self):
        """One dict per feature and for the norm (for :func:`write_csv`)."""
        return [
            {
                "of": label, "tail_index": float(a), "standard_error": float(se), "ci_lower": float(lo),
                "ci_upper": float(hi), "confidence": self.confidence, "n_tail": self.n_tail,
                "n_values": self.n_values, "light_tailed": bool(light),
            }
            for label, a, se, lo, hi, light in zip(
                self.labels, self.tail_index, self.standard_error, self.ci_lower, self.ci_upper, self.light_tailed
            )
        ]


@functools.lru_cache(maxsize=256)
def _gaussian_hill_index(k, m):
    """The limit of Hill's estimate from the top ``k / m`` of ``|Z|``, ``Z`` standard normal.

    With ``u`` the ``1 - k / m`` quantile of ``|Z|``, Hill's estimate tends to
    ``1 / E[log(|Z| / u) | |Z| > u] = P(|Z| > u) / int_u^inf P(|Z| > t) / t dt``.
    """
    u = float(norm.isf(k / (2.0 * m)))
    integral, _ = quad(lambda t: norm.sf(t) / t, u, np.inf)
    return float(norm.sf(u) / integral)


def _choose_k(n_tail, m):
    """``k`` of a checked ``n_tail`` for ``m`` values, refused unless ``5 <= k < m``."""
    if isinstance(n_tail, str):
        k = int(math.floor(math.sqrt(m)))
    elif isinstance(n_tail, Integral):
        k = int(n_tail)
    else:
        k = int(math.floor(n_tail * m))
    if k < _MIN_TAIL or k >= m:
        raise ValueError(
            f"n_tail={n_tail!r} gives k={k} order statistics out of {m} points; Hill's estimator needs "
            "5 <= k < number of points. Pass more measures or points (about 100 points in all at least), "
            "or choose n_tail accordingly."
        )
    return k


def _hill(values, k, confidence):
    """Hill's estimate from the k largest of ``values`` (>= 0) over the (k+1)-th."""
    top = np.partition(values, values.size - k - 1)[values.size - k - 1:]
    threshold = top.min()
    if threshold <= 0:
        return math.nan, math.nan, math.nan, math.nan
    log_excess = np.log(top[top > threshold] / threshold)
    # top holds k+1 values; ties at the threshold contribute log(1) = 0.
    total = float(log_excess.sum())
    if total == 0.0:
        return math.inf, math.nan, math.inf, math.inf
    alpha = k / total
    tail = (1.0 - confidence) / 2.0
    lower = alpha * chi2.ppf(tail, 2 * k) / (2 * k)
    upper = alpha * chi2.ppf(1.0 - tail, 2 * k) / (2 * k)
    return alpha, alpha / math.sqrt(k), lower, upper


def _deviations(X, weights):
    """``|x - median|`` per feature and its norm, over the present points of every measure."""
    if weights is None:
        centred = (X - np.median(X, axis=1, keepdims=True)).reshape(-1, X.shape[2])
        return np.column_stack([np.abs(centred), np.linalg.norm(centred, axis=1)])
    chunks = []
    for i in range(X.shape[0]):
        points = X[i][weights[i] > 0]
        centred = points - np.median(points, axis=0)
        chunks.append(np.column_stack([np.abs(centred), np.linalg.norm(centred, axis=1)]))
    return np.concatenate(chunks)


def _check_feature_names(feature_names, n_features):
    if feature_names is None:
        return tuple(f"feature {j}" for j in range(n_features))
    if len(feature_names) != n_features:
        raise ValueError(
            f"feature_names must name each of the {n_features} features, got {feature_names!r}."
        )
    names = tuple(str(name) for name in feature_names)
    if "norm" in names or len(set(names)) != len(names):
        raise ValueError(f"feature_names must be distinct and not 'norm' (the norm's row), got {feature_names!r}.")
    return names


def per_measure_tail_index(X, weights=None, *, confidence=0.95):
    """Hill estimates of the norm's tail index of each measure on its own.

    Each measure uses ``k = floor(sqrt(n_i))`` of its own ``n_i`` points; a
    measure with fewer than 36 points (``k < 6``) gets NaN. The intervals are at
    level ``1 - (1 - confidence) / n`` for ``n`` measures (Bonferroni), so that
    when every measure has the same tail index all ``n`` intervals hold it
    together with probability at least ``confidence``: intervals that do not
    all overlap say the tails differ.

    Returns
    -------
    alpha, lower, upper : ndarray of shape (n_samples,)
        Estimates and intervals (NaN for measures too small to estimate).
    """
    n = X.shape[0]
    level = 1.0 - (1.0 - confidence) / max(n, 1)
    out = np.full((3, n), np.nan)
    for i in range(n):
        points = X[i] if weights is None else X[i][weights[i] > 0]
        norms = np.linalg.norm(points - np.median(points, axis=0), axis=1)
        k = int(math.floor(math.sqrt(norms.size)))
        if k < 6:
            continue
        alpha, _, lower, upper = _hill(norms, k, level)
        out[:, i] = alpha, lower, upper
    return out[0], out[1], out[2]


def _measure_medians(X, weights):
    """Each measure's coordinate-wise median, over its present points: ``(n_samples, n_features)``."""
    if weights is None:
        return np.median(X, axis=1)
    return np.stack([np.median(X[i][weights[i] > 0], axis=0) for i in range(X.shape[0])])


def across_sample_tail_index(X, weights=None, *, confidence=0.95, light_tail_index=LIGHT_TAIL_INDEX,
                              feature_names=None):
    """Hill estimates of the tail index across samples, or ``None`` below :data:`MIN_MEASURES_ACROSS` measures.

    The statistic is each measure's coordinate-wise median, centred at the
    median of those medians: a shift shared by all points of a measure moves
    its median, while the tails of i.i.d. points within a measure barely do
    (the median of ``n`` points has a much lighter tail than the points). The
    ``n`` medians are one sample of ``n`` values, estimated like
    :func:`estimate_tail_index` with ``k = floor(sqrt(n))`` (per feature and of
    the norm) and read with ``light_rule="interval"``. Medians within
    ``sqrt(eps)`` times the spread within ensembles (the features' median
    distance to their measure's median) of the median of all count as equal
    to it: measures already centred on their medians differ by rounding only,
    and their estimate is NaN rather than a reading of that noise.
    """
    if X.shape[0] < MIN_MEASURES_ACROSS:
        return None
    medians = _measure_medians(X, weights)
    # Medians that differ by less than sqrt(eps) of the spread within ensembles differ by rounding (measures
    # already centred on their own medians): they count as equal, so rounding noise is not read as a tail.
    centre = np.median(medians, axis=0)
    within = np.median(_deviations(X, weights)[:, :-1], axis=0)
    medians = np.where(np.abs(medians - centre) <= np.sqrt(np.finfo(np.float64).eps) * within, centre, medians)
    estimate = estimate_tail_index(medians[np.newaxis], n_tail="sqrt", confidence=confidence,
                                   light_tail_index=light_tail_index, feature_names=feature_names)
    return dataclasses.replace(estimate, light_rule="interval")


@validate_params(
    {
        **TAIL_ESTIMATE_CONSTRAINTS,
        # an infinite threshold reads no tail as light
        "light_tail_index": [NumberInterval(Real, 0, None, closed="right")],
    },
    prefer_skip_nested_validation=True,
)
def estimate_tail_index(
    X, *, n_tail="sqrt", confidence=0.95, light_tail_index=LIGHT_TAIL_INDEX, feature_names=None
):
    r"""Estimate the tail index of a batch of measures, per feature and of the norm.

    Each measure is centred at its own coordinate-wise median; the deviations
    ``|x_j - median_j|`` of every point (per feature ``j``) and their Euclidean
    norm are pooled over all measures, and Hill's estimator is applied to the
    ``k`` largest of each pool ``v_(1) >= ... >= v_(k+1)``:

    .. math:: \hat\alpha = k \Big/ \sum_{i=1}^{k} \log \frac{v_{(i)}}{v_{(k+1)}}.

    Assumptions: the points are independent draws whose tail is a power law,
    ``P(|Z| > t) = L(t) t^{-\alpha}`` with ``L`` slowly varying (Student-t,
    Pareto, stable laws, Cauchy); the measures share the tail index (their
    locations and scales may differ: a mixture of such laws has the same index).
    The estimate is consistent as ``k -> inf`` and ``k / m -> 0``; the choice
    of ``k`` trades variance (small ``k``) for bias from the body of the law
    (large ``k``). The default ``k = floor(sqrt(m))`` of the ``m`` pooled
    points is a standard compromise that is nearly unbiased for Student-t and
    Pareto tails. For a light tail (Gaussian, exponential) there is no power
    law; Hill's estimate is then large and grows with ``m`` (about
    ``2 log(m / k)`` for a Gaussian), which :attr:`TailIndexEstimate.light_tailed`
    reports.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_points, n_features) or list of 2-D arrays
        The measures; a ragged list (measures of different sizes) is accepted.
    n_tail : "sqrt", int or float, default="sqrt"
        ``k``: ``"sqrt"`` for ``floor(sqrt(m))``, an integer for that many, a
        float in (0, 1) for that fraction of the ``m`` pooled points. ``k``
        must satisfy ``5 <= k < m``.
    confidence : float, default=0.95
        Level of the confidence interval, in (0, 1).
    light_tail_index : float, default=5.0
        Estimates above this are reported as light-tailed.
    feature_names : sequence of str, default=None
        Names of the features in :attr:`TailIndexEstimate.labels` (e.g. a
        table's column names); None means ``"feature 0", "feature 1", ...``.

    Returns
    -------
    estimate : TailIndexEstimate
        Per feature and of the norm: the estimate, its standard error
        ``alpha_hat / sqrt(k)`` and the interval, exact under a Pareto tail
        (``2 k alpha / alpha_hat`` is chi-square with ``2 k`` degrees of
        freedom).

    Raises
    ------
    ValueError
        For invalid measures (NaN, inf, wrong rank), too few points for ``k``,
        or invalid ``n_tail``, ``confidence`` or ``light_tail_index``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.experiments import estimate_tail_index
    >>> X = np.random.default_rng(0).standard_cauchy(size=(40, 250, 2))
    >>> est = estimate_tail_index(X)
    >>> est.labels
    ('feature 0', 'feature 1', 'norm')
    >>> est.n_tail, bool(est.light_tailed.any())
    (100, False)
    >>> bool(np.all((est.ci_lower < 1) & (1 < est.ci_upper)))  # the truth is 1
    True
    """
    X, weights = check_measures(X, input_name="X", dtype=np.float64)
    names = _check_feature_names(feature_names, X.shape[2])
    deviations = _deviations(X, weights)
    m = deviations.shape[0]
    k = _choose_k(n_tail, m)
    columns = [_hill(deviations[:, j], k, float(confidence)) for j in range(deviations.shape[1])]
    alpha, se, lower, upper = (np.array(values) for values in zip(*columns))
    labels = names + ("norm",)
    return TailIndexEstimate(labels, alpha, se, lower, upper, float(confidence), k, m, float(light_tail_index))
