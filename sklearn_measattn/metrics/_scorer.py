"""Scorers for GridSearchCV: each metric with its direction, in one place, and scoring spaces."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
from sklearn.metrics import make_scorer

from .._param_validation import validate_parameter_constraints, validate_params
from .._validation import Choices, Described, check_keyword_arguments, is_ragged
from ..preprocessing import symlog
from ._base import _aggregate, _check_sample_weight
from ._diagnostics import spread_ratio
from ._distances import energy_distance, mmd, wasserstein_distance


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


_EMPTY = MappingProxyType({})


class _ScoredMetric(NamedTuple):
    """One row of the scorer table."""

    #: The public metric, whose table of parameters and domains applies.
    func: Callable
    #: Short name for make_measure_scorer, or None.
    alias: str | None = None
    #: get_scorer name (a symlog variant is named ``<scorer>_symlog``), or None.
    scorer: str | None = None
    #: Arguments that define this metric (a user may not change them).
    fixed: Mapping = _EMPTY
    #: Arguments the scorer sets unless the user gives them.
    defaults: Mapping = _EMPTY
    #: What the scorer minimises, where it is not ``func`` itself.
    scored: Callable | None = None


# A scorer must give the same score to the same predictions on every call
# (GridSearchCV compares candidates by it): the sliced method's projections are seeded.
_SEEDED = MappingProxyType({"random_state": 0})

# The one table of scorers: make_measure_scorer(name) and get_scorer(scorer
# name) both build from it, so the two spellings of a scorer are one object.
# What each scorer minimises, in one place: the metric itself for distances,
# |log ratio| for the spread ratio, whose ideal is 1 (scoring the ratio itself
# would reward collapsed models).
_METRICS = {
    "energy_distance": _ScoredMetric(energy_distance, alias="energy", scorer="neg_energy_distance"),
    "wasserstein_distance": _ScoredMetric(
        wasserstein_distance, alias="wasserstein", scorer="neg_wasserstein_distance", defaults=_SEEDED
    ),
    "sliced_wasserstein_distance": _ScoredMetric(
        wasserstein_distance, alias="sliced_wasserstein", scorer="neg_sliced_wasserstein_distance",
        fixed=MappingProxyType({"method": "sliced"}), defaults=_SEEDED,
    ),
    "mmd": _ScoredMetric(mmd, scorer="neg_mmd"),
    "spread_ratio": _ScoredMetric(spread_ratio, scored=_spread_log_deviation),
}
# Short names, as in ``make_measure_scorer("energy", space="symlog")``.
_METRIC_ALIASES = {row.alias: name for name, row in _METRICS.items() if row.alias is not None}

# Arguments a scorer supplies itself, call by call: ``sample_weight`` comes with
# each call, a scorer returns one number (``multioutput``), and point weights
# belong to the measures being scored (a fixed array cannot follow the splits
# of a cross-validation). A callable metric may take all but ``sample_weight``.
_POINT_WEIGHTS = "point weights belong to the measures scored, which change with every split"
_SCORER_OWNED = {
    "sample_weight": "it comes with each call, scorer(estimator, X, y, sample_weight=...)",
    "multioutput": "a scorer returns one number, the (weighted) mean over samples",
    "weights_true": _POINT_WEIGHTS,
    "weights_pred": _POINT_WEIGHTS,
}

#: Spaces a measure can be scored in: as given, or after ``symlog`` of every coordinate.
SCORING_SPACES = ("raw", "symlog")
_SPACE = Choices(
    SCORING_SPACES,
    why="'symlog' compares sign(y) * log1p(|y|) of every coordinate, which keeps distances finite and not "
    "dominated by a few extreme points on heavy-tailed (infinite-moment) data",
)


@validate_params({"space": [_SPACE]}, prefer_skip_nested_validation=True)
def to_space(y, space):
    """Return measures ``y`` (3-D array or list of 2-D arrays) as seen in scoring ``space``.

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
        now, not at scoring time: for a named metric against the metric's own
        table of parameters and domains (the one the metric checks its
        arguments with), for a callable against its signature. For named
        metrics ``sample_weight`` (passed with each call), ``multioutput`` (a
        scorer returns one number) and ``weights_true`` / ``weights_pred``
        (they belong to the measures scored) are refused. The Wasserstein
        scorers use ``random_state=0`` unless given one, so that the sliced
        method's projections, and so its scores, are the same on every call
        (``"sliced_wasserstein"`` here is the scorer
        ``get_scorer("neg_sliced_wasserstein_distance")``).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float``.

    Raises
    ------
    ValueError
        For an unknown metric name, a keyword argument the metric does not
        accept or that a scorer supplies itself, or an invalid value of one.
        Errors about ``metric``, ``greater_is_better``, ``space`` and the
        named metrics' arguments are also ``TypeError`` (e.g. when
        ``metric`` is neither a string nor a callable): catch either.

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
    validate_parameter_constraints(
        _MAKE_SCORER_PARAMETERS,
        {"metric": metric, "greater_is_better": greater_is_better, "space": space},
        caller_name="make_measure_scorer",
    )
    named = isinstance(metric, str)
    owned = [name for name in kwargs if name in (_SCORER_OWNED if named else ("sample_weight",))]
    if owned:
        raise ValueError(
            f"make_measure_scorer({getattr(metric, '__name__', metric)!r}) cannot fix {owned[0]}=; "
            f"{_SCORER_OWNED[owned[0]]}. Leave it out."
        )
    if named:
        metric = _METRIC_ALIASES.get(metric, metric)
        row = _METRICS[metric]
        clash = sorted(set(row.fixed) & set(kwargs))
        if clash:
            raise ValueError(f"{metric!r} fixes {clash}; use 'wasserstein_distance' to choose them.")
        if greater_is_better:
            ideal = "is best at 1 and scores as -mean |log ratio|" if metric == "spread_ratio" else "is a distance"
            raise ValueError(
                f"greater_is_better=True would reward the wrong models: {metric!r} {ideal}, so its "
                "scorer already makes larger scores better. Leave greater_is_better unset."
            )
        kwargs = {**row.defaults, **row.fixed, **kwargs}
        # Checked now against the metric's own table, so that a bad argument
        # fails here rather than at every scoring call (where a GridSearchCV
        # would record NaN).
        check_keyword_arguments(row.func, kwargs, caller=f"make_measure_scorer({metric!r})", refused=_SCORER_OWNED)
        scored = row.scored or row.func
    else:
        scored = metric
        _check_callable_arguments(metric, kwargs)
    if space != "raw":
        scored = _InSpace(scored, space)
    return make_scorer(scored, greater_is_better=bool(greater_is_better), **kwargs)


# make_measure_scorer's own table; the arguments it fixes for a named metric
# are checked against the metric's table.
_MAKE_SCORER_PARAMETERS = {
    "metric": [
        Choices((*_METRICS, *_METRIC_ALIASES)),
        Described(callable, "a callable metric(y_true, y_pred, **kwargs) -> float"),
    ],
    "greater_is_better": ["boolean", None],
    "space": [_SPACE],
}


def _check_callable_arguments(metric, kwargs):
    """Bind a callable metric's fixed arguments to its signature now, not at every scoring call."""
    try:
        signature = inspect.signature(metric)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    try:
        signature.bind_partial(None, None, **kwargs)
    except TypeError as exc:
        accepted = [
            p.name for p in list(signature.parameters.values())[2:]
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "sample_weight"
        ]
        raise ValueError(
            f"Invalid keyword arguments for metric {getattr(metric, '__name__', metric)!r}: {exc}. It takes "
            f"{', '.join(accepted) if accepted else 'no keyword arguments'}."
        ) from exc


# Every named scorer, in both spellings, built from the table above: the raw
# scorer ``<scorer>`` is also the module-level object ``<scorer without
# "_distance">_scorer``, a name get_scorer accepts too.
_SCORERS = {}
_SCORER_ALIASES = {}
for _name, _row in _METRICS.items():
    if _row.scorer is None:
        continue
    for _space in SCORING_SPACES:
        _key = _row.scorer if _space == "raw" else f"{_row.scorer}_{_space}"
        _SCORERS[_key] = make_measure_scorer(_name, space=_space)
    _SCORER_ALIASES[f"{_row.scorer.removesuffix('_distance')}_scorer"] = _row.scorer

neg_energy_scorer = _SCORERS["neg_energy_distance"]
neg_wasserstein_scorer = _SCORERS["neg_wasserstein_distance"]
neg_sliced_wasserstein_scorer = _SCORERS["neg_sliced_wasserstein_distance"]
neg_mmd_scorer = _SCORERS["neg_mmd"]

#: Names accepted by :func:`get_scorer`.
SCORER_NAMES = tuple(_SCORERS) + tuple(_SCORER_ALIASES)


@validate_params(
    {"name": [Choices(SCORER_NAMES, why="make_measure_scorer(metric, **kwargs) builds scorers with other settings")]},
    prefer_skip_nested_validation=True,
)
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
    ``"<name>_symlog"``, for each name     the same after symlog of target and
    above without alias                    prediction (:func:`to_space`)
    =====================================  ==========================================

    Each scores the mean over samples of the metric between ``y`` and
    ``estimator.predict(X)`` (both batches of measures); larger is better.
    ``get_scorer(name)`` and :func:`make_measure_scorer` with the metric's
    name build the same scorer (one table defines both), e.g.
    ``get_scorer("neg_sliced_wasserstein_distance")`` is
    ``make_measure_scorer("sliced_wasserstein")``.

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
    >>> from sklearn_measattn.metrics import get_scorer, make_measure_scorer
    >>> scorer = get_scorer("neg_sliced_wasserstein_distance_symlog")
    >>> repr(scorer) == repr(make_measure_scorer("sliced_wasserstein", space="symlog"))
    True

    Scores with it are in :func:`make_measure_scorer`'s examples.
    """
    return copy.deepcopy(_SCORERS[_SCORER_ALIASES.get(name, name)])
