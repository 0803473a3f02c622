"""The collapse verdict: three faces of ensemble collapse, each with a fixed threshold.

The thresholds are fixed here, in code, before any study is run with them, and
are never tuned on study results.

*Attention face* (``attention_ess < ATTENTION_ESS_THRESHOLD = 0.05``): the
median, over held-out measures and heads, of the trained first layer's
attention effective sample size ``1 / sum_j w_ij^2`` as a fraction of ``n``
(:meth:`MeasureTransformerRegressor.attention_ess`). When the kernel's
integral against the measure converges, ESS / n tends to a positive constant
``(∫kappa)^2 / ∫kappa^2`` as ``n`` grows (law of large numbers), so a trained
model that uses attention has ESS / n of order one (random projections of
Gaussian or symlog data give 0.6-0.99). When the integral diverges, the largest
point takes all the weight and ESS / n falls like ``1/n``. Under 0.05 every
query draws on fewer than one point in twenty: at 256 points, fewer than 13.
The first layer is the one that sees the data's scale (later layers of a
post-norm transformer see LayerNorm-ed features).

*Within-ensemble face* (``spread_ratio < SPREAD_THRESHOLD = 0.2``): the median
over held-out measures of the spread ratio (median pairwise distance of the
prediction over its target's). In both benchmarks the target scale varies
across measures by at most a factor 4 (``condition=4`` gives eigenvalues of
``A^-1`` in ``[1/2, 2]``; ``scale_range=(0.5, 2)``), so a model that outputs one
well-spread average measure whatever its input has spread ratios of roughly
``[1/4, 4]`` and a median near 1: a median below 0.2 can only come from the
particles contracting. The median is used because heavy-tailed targets make
single ratios explode.

*Across-sample face* (``across_correlation < CORRELATION_THRESHOLD = 0.2``): the
Spearman correlation across held-out measures of predicted vs target scale.
0.2 is about the one-sided 5% critical value of Spearman's rho under
independence for 64 held-out measures (``1.645 / sqrt(63) = 0.207``): below it
the predictions' scale is statistically indistinguishable from not depending on
the input. An under-trained model that has not yet learnt the input dependence
fails this face too, so it is reported on its own and does not by itself make
the verdict.

*Depth face* (``hidden_similarity``, reported on its own, in no verdict): the
median over held-out measures of the mean pairwise cosine similarity of one
measure's hidden states, after the embedding and after each block
(:meth:`MeasureTransformerRegressor.hidden_similarity`). Attention averages, so
with depth the points of one ensemble may become alike (rank collapse). No
threshold is fixed for it yet: it enters no verdict until a study shows where
one lies.

``collapsed`` is the attention face OR the within-ensemble face: the two that
say the weights or the particles sit on one point. The residual stream of a
post-norm transformer keeps particles apart even when its attention has
collapsed, so the faces need not agree; each is reported separately.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from .._param_validation import validate_params
from .._validation import POSITIVE_INT, NumberInterval
from ._base import _real_or_none
from ._diagnostics import across_sample_correlation, spread_ratio
from ._distances import energy_distance, wasserstein_distance
from ._scorer import _SPACE, to_space

__all__ = [
    "ATTENTION_ESS_THRESHOLD",
    "SPREAD_THRESHOLD",
    "CORRELATION_THRESHOLD",
    "COLLAPSE_RULE",
    "collapse_verdict",
    "collapse_diagnostics",
]

#: Attention face: median trained first-layer attention ESS / n below this.
ATTENTION_ESS_THRESHOLD = 0.05
#: Within-ensemble face: median spread ratio below this.
SPREAD_THRESHOLD = 0.2
#: Across-sample face: Spearman correlation of predicted vs target scale below this.
CORRELATION_THRESHOLD = 0.2
#: One-line statement of the rule, printed under every table.
COLLAPSE_RULE = (
    f"collapsed = attention ESS/n < {ATTENTION_ESS_THRESHOLD} (attention face) OR median spread ratio < "
    f"{SPREAD_THRESHOLD} (within-ensemble face); the across-sample face (corr(scale) < "
    f"{CORRELATION_THRESHOLD}) is reported on its own, since under-training also fails it."
)


def _below(value, threshold, name):
    value = _real_or_none(value, name)
    return None if value is None else bool(value < threshold)


def collapse_verdict(*, attention_ess=None, spread_ratio=None, across_correlation=None):
    """Apply the fixed collapse rule to the three summary statistics.

    Parameters
    ----------
    attention_ess : float or None
        Median trained attention ESS / n (first layer) over held-out measures
        and heads; ``None`` or ``nan`` when not measured.
    spread_ratio : float or None
        Median spread ratio over held-out measures.
    across_correlation : float or None
        Across-sample Spearman correlation of predicted vs target scale.

    Returns
    -------
    verdict : dict
        ``{"attention", "within", "across", "collapsed"}``: each face is
        ``True``/``False``, or ``None`` when its statistic is missing;
        ``collapsed`` is ``attention or within`` over the faces measured
        (``None`` when neither was).

    Examples
    --------
    >>> from sklearn_measattn.metrics import collapse_verdict
    >>> collapse_verdict(attention_ess=0.004, spread_ratio=1.1, across_correlation=0.6)
    {'attention': True, 'within': False, 'across': False, 'collapsed': True}
    >>> collapse_verdict(attention_ess=0.55, spread_ratio=0.9)
    {'attention': False, 'within': False, 'across': None, 'collapsed': False}
    """
    attention = _below(attention_ess, ATTENTION_ESS_THRESHOLD, "attention_ess")
    within = _below(spread_ratio, SPREAD_THRESHOLD, "spread_ratio")
    across = _below(across_correlation, CORRELATION_THRESHOLD, "across_correlation")
    measured = [face for face in (attention, within) if face is not None]
    collapsed = any(measured) if measured else None
    return {"attention": attention, "within": within, "across": across, "collapsed": collapsed}


# estimator, X, y and y_pred are checked where they are used (the estimator's
# methods, the metrics); layer against the estimator's depth by attention_ess.
@validate_params(
    {
        "space": [_SPACE],
        "layer": [NumberInterval(Integral, 0, None, closed="left")],
        "max_queries": [POSITIVE_INT, None],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=False,
)
def collapse_diagnostics(
    estimator, X, y, *, y_pred=None, space="symlog", layer=0, max_queries=256, random_state=0
):
    """Measure every face of collapse of a fitted model on held-out measures.

    With ``estimator=None`` it measures the faces of a prediction made without
    a model (``y_pred``, e.g. from :func:`reference_predictions`): everything
    but the attention face, which is then ``None``.

    Parameters
    ----------
    estimator : MeasureTransformerRegressor or None
        A fitted model, or ``None`` to score ``y_pred`` alone.
    X, y : array-like of shape (n_samples, n_points, n_features) or lists
        Held-out input and target measures (at least 3, for the correlation).
    y_pred : array-like or list, default=None
        ``estimator.predict(X)`` when the caller already has it; predicted here
        otherwise. Required with ``estimator=None``.
    space : {"raw", "symlog"}, default="symlog"
        Space of the energy distance and W1 reported next to the faces (the
        faces themselves are scale-free).
    layer : int, default=0
        Block whose attention ESS is measured.
    max_queries : int or None, default=256
        Queries per measure in the attention ESS (see
        :meth:`MeasureTransformerRegressor.attention_ess`).
    random_state : int, default=0
        Seeds the query subsample and the sliced W1 above 512 points.

    Returns
    -------
    report : dict
        ``attention_ess`` (median over measures and heads),
        ``attention_ess_min_head`` (smallest per-head median),
        ``spread_ratio`` (median), ``corr_scale``, ``energy`` and ``w1`` (in
        ``space``), ``space``, the faces of :func:`collapse_verdict`, and the
        depth face, which is in no verdict: ``hidden_similarity`` (list of
        ``n_layers + 1`` medians over measures of the mean pairwise cosine
        similarity of the hidden states, after the embedding and after each
        block; empty without a model) and ``hidden_similarity_last`` (its last
        entry, ``nan`` without a model).

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> from sklearn_measattn.metrics import collapse_diagnostics
    >>> X, y = make_matrix_inverse(n_samples=12, n_points=16, tail="gaussian", random_state=0)
    >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1,
    ...                                     random_state=0).fit(X, y)
    >>> report = collapse_diagnostics(model, X[:6], y[:6])
    >>> sorted(report)  # doctest: +NORMALIZE_WHITESPACE
    ['across', 'attention', 'attention_ess', 'attention_ess_min_head', 'collapsed', 'corr_scale',
     'energy', 'hidden_similarity', 'hidden_similarity_last', 'space', 'spread_ratio', 'w1', 'within']
    >>> len(report["hidden_similarity"])  # after the embedding and after the one block
    2
    """
    if estimator is None:
        if y_pred is None:
            raise ValueError("collapse_diagnostics(None, ...) scores a given prediction: pass y_pred.")
        ess = np.full((1, 1), np.nan)
        depth = []
    else:
        ess = estimator.attention_ess(X, layer=layer, max_queries=max_queries, random_state=random_state)
        depth = [
            float(np.median(c[np.isfinite(c)])) if np.isfinite(c).any() else math.nan  # nan: one-point measures
            for c in estimator.hidden_similarity(X).T
        ]
    if y_pred is None:
        y_pred = estimator.predict(X)
    ratios = spread_ratio(y, y_pred, multioutput="raw_values")
    corr = across_sample_correlation(y, y_pred, statistic="scale")
    n_points = max(np.shape(m)[0] for m in y_pred)
    y_space, pred_space = to_space(y, space), to_space(y_pred, space)
    method = "exact" if n_points <= 512 else "sliced"
    report = {
        "attention_ess": float(np.median(ess)),
        "attention_ess_min_head": float(np.min(np.median(ess, axis=0))),  # nan without a model
        "spread_ratio": float(np.nanmedian(ratios)),
        "corr_scale": float(corr),
        "energy": float(energy_distance(y_space, pred_space)),
        "w1": float(wasserstein_distance(y_space, pred_space, method=method, random_state=random_state)),
        "space": space,
        "hidden_similarity": depth,  # the depth face: reported, in no verdict
        "hidden_similarity_last": depth[-1] if depth else math.nan,
    }
    report.update(
        collapse_verdict(
            attention_ess=report["attention_ess"],
            spread_ratio=report["spread_ratio"],
            across_correlation=report["corr_scale"],
        )
    )
    return report
