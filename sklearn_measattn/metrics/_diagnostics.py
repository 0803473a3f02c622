"""Collapse diagnostics of measures: spread ratio, across-sample correlation, attention ESS."""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy.stats import rankdata
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.utils import check_random_state

from .._param_validation import validate_params
from .._validation import POSITIVE_INT, Choices, check_measure_pair, check_measures, combine_weights
from ..attention import query_ess_fractions
from ..kernels import get_kernel
from ._base import (
    _MULTIOUTPUT,
    _aggregate,
    _log_spreads,
    _median_pairwise_distance,
    _prepare,
    _support,
    _weighted_median,
)


@validate_params({"multioutput": [_MULTIOUTPUT]}, prefer_skip_nested_validation=True)
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
    y_true, y_pred, w_true, w_pred, sw = _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight)
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


@validate_params({"statistic": [Choices(("scale", "location"))]}, prefer_skip_nested_validation=True)
def across_sample_correlation(
    y_true,
    y_pred,
    *,
    statistic="scale",
    weights_true=None,
    weights_pred=None,
):
    r"""Measure across-sample collapse: whether predictions still vary with the input.

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


# X, its weights and the projections are checked by check_measures,
# combine_weights and _check_projections; the kernel by get_kernel.
@validate_params(
    {
        "kernel_params": [dict, None],
        "d_head": [POSITIVE_INT, None],
        "n_draws": [POSITIVE_INT],
        "per_query": ["boolean"],
        "max_queries": [POSITIVE_INT, None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
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
    a = combine_weights(weights, ragged_w, X.shape, "weights")

    Xt = torch.as_tensor(X, dtype=torch.float64)
    at = torch.as_tensor(a, dtype=torch.float64)
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
                q = (Xt[i, queries] @ Wq_t)[None]  # one head
                k = (Xt[i] @ Wk_t)[None]
                _check_scores_finite(q, k, i)
                frac[i, queries] += query_ess_fractions(q, k, kernel_obj, at[i])[0]
    frac = (frac / len(draws)).numpy()
    if per_query:
        return frac
    drawn = np.isfinite(frac)
    query_weights = np.where(drawn, a, 0.0)
    return np.sum(query_weights * np.where(drawn, frac, 0.0), axis=1) / query_weights.sum(axis=1)
