"""The learned face: did a fitted model learn the measure-dependent map?

Fixed here, in code, before any study is run with it, like the collapse faces.

A model has *learned* when its held-out energy distance (symlog space) is
clearly below the best prediction that needs no model:

- ``pooled``: each held-out measure predicted by points drawn from all the
  training targets pooled together, whatever the input -- the best prediction
  that ignores the input measure, up to its shape;
- ``identity``: the input measure itself (``y_pred = X``), where the feature
  dimensions match -- a map that copies its input.

``learned = energy < LEARNED_MARGIN * min(pooled, identity)`` with
``LEARNED_MARGIN = 0.8``: at least 20% below the better of the two. Why 20%:
the pooled row is itself a random draw. Measured over 10 draws of the pool on
64 held-out measures of 128 points (both benchmarks, Pareto 0.7 and
Student-t 1 tails, 512 training measures), its symlog energy has a standard
deviation of 2% to 7% of its mean, and spans 0.077-0.095 in the noisiest
case; 20% is about three standard deviations there, so a model within it is
not distinguishable from one that ignores its input. Why both rows: the
scale correlation alone cannot tell learning from copying -- on a map that
shrinks each ensemble toward its median, the identity prediction follows the
target's scale across measures almost perfectly (rank correlation near 1)
while being far from the target, so the energy against the identity row is
what says the model did better than copying.

The ``oracle`` row of the built-in benchmarks (a fresh sample of the true
target law, :func:`sklearn_measattn.datasets.sample_target_law`) scores what
random draws from the true target law score: the two-sample level of the
distance, which says how far a learned model is from the truth. It is a
yardstick, not a bound: a model can land below it, since its points are not
an independent random sample (a smooth, well-spread prediction can be closer
to the target sample than a second random sample is). It enters the verdict
in one case only: when even the oracle is not below the margin
(``oracle >= LEARNED_MARGIN`` times the better no-model row), the held-out
data cannot show learning at this size (after symlog, the target laws differ
too little across measures for the distance to see it), and the verdict is
``None`` rather than a ``False`` that would blame the model.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_measures
from ._base import _real_or_none

__all__ = ["LEARNED_MARGIN", "LEARNED_RULE", "REFERENCE_NAMES", "learned_verdict", "reference_predictions"]

#: Names of the reference predictions, in the order tables show them.
REFERENCE_NAMES = ("pooled", "identity", "oracle")

#: A fit has learned when its held-out energy is below this fraction of the best no-model row.
LEARNED_MARGIN = 0.8
#: One-line statement of the rule, printed under every comparison table.
LEARNED_RULE = (
    f"learned = held-out energy [symlog] < {LEARNED_MARGIN:g} x the lower of the 'pooled' and 'identity' rows "
    "(predictions that need no model: the pooled training targets, the input itself)."
)


def learned_verdict(energy, *, pooled=None, identity=None, oracle=None):
    """Apply the fixed learned rule to a held-out energy and the no-model rows.

    Parameters
    ----------
    energy : float
        The model's held-out energy distance (symlog space, mean over
        held-out measures).
    pooled : float or None
        The same distance for the pooled-targets prediction.
    identity : float or None
        The same distance for ``y_pred = X``; ``None`` when the input and
        target dimensions differ.
    oracle : float or None
        The same distance for a fresh sample of the true target law, where it
        is known.

    Returns
    -------
    verdict : dict
        ``learned`` (``True``/``False``, or ``None`` when ``energy`` or both
        rows are missing, or when the oracle itself is not below the margin),
        ``baseline`` (``"pooled"`` or ``"identity"``, the
        lower of the two), ``baseline_energy`` and ``ratio``
        (``energy / baseline_energy``; learned means ``ratio < LEARNED_MARGIN``).

    Examples
    --------
    >>> from sklearn_measattn.metrics import learned_verdict
    >>> learned_verdict(0.025, pooled=0.077, identity=0.222)["learned"]
    True
    >>> verdict = learned_verdict(0.065, pooled=0.077, identity=0.222)  # within 20% of pooled
    >>> verdict["learned"], verdict["baseline"], round(verdict["ratio"], 3)
    (False, 'pooled', 0.844)
    >>> learned_verdict(0.05, pooled=0.06, oracle=0.055)["learned"] is None  # the data cannot tell
    True
    """
    energy = _real_or_none(energy, "energy")
    rows = {name: _real_or_none(value, name) for name, value in (("pooled", pooled), ("identity", identity))}
    rows = {name: value for name, value in rows.items() if value is not None}
    if not rows:
        return {"learned": None, "baseline": None, "baseline_energy": math.nan, "ratio": math.nan}
    baseline = min(rows, key=rows.get)
    reference = rows[baseline]
    if energy is None:
        return {"learned": None, "baseline": baseline, "baseline_energy": reference, "ratio": math.nan}
    ratio = energy / reference if reference > 0 else math.inf
    oracle = _real_or_none(oracle, "oracle")
    undecidable = oracle is not None and not oracle < LEARNED_MARGIN * reference
    return {"learned": None if undecidable else bool(ratio < LEARNED_MARGIN), "baseline": baseline,
            "baseline_energy": reference, "ratio": ratio}


def _measures(X, input_name):
    """A validated batch as a list of 2-D float64 arrays (present points only) and whether it was dense."""
    dense, padding = check_measures(X, input_name=input_name, dtype=np.float64)
    if padding is None:
        return list(dense), True
    return [dense[i, padding[i] > 0] for i in range(len(dense))], False


def reference_predictions(X_test, y_test, y_train, *, oracle=None, random_state=None):
    """The predictions that need no model, for held-out measures.

    Parameters
    ----------
    X_test : array-like of shape (n_test, n_points, n_features_in) or list of 2-D arrays
        Held-out input measures.
    y_test : array-like of shape (n_test, n_points_y, n_features_out) or list of 2-D arrays
        Their target measures (only their sizes are used: each prediction has
        as many points as its target).
    y_train : array-like of shape (n_train, n_points_y, n_features_out) or list of 2-D arrays
        The training targets, pooled for the ``pooled`` prediction.
    oracle : array-like or list, default=None
        A fresh independent sample of each held-out target law, where it is
        known (:func:`sklearn_measattn.datasets.sample_target_law`), returned
        as the ``oracle`` prediction.
    random_state : int, RandomState instance or None, default=None
        Seeds the draws of the pooled prediction.

    Returns
    -------
    predictions : dict
        ``"pooled"``: for held-out measure ``i``, ``len(y_test[i])`` points
        drawn without replacement (with replacement when the pool is smaller)
        from all training target points; ``"identity"``: ``X_test`` itself,
        only when its features match the targets'; ``"oracle"``: ``oracle``
        when given. Each is a 3-D array when all its measures have one size,
        else a list of 2-D arrays.

    Raises
    ------
    ValueError
        For invalid measures, ``X_test`` and ``y_test`` (or ``oracle``) of
        different lengths, or training targets whose features differ from the
        held-out targets'.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import reference_predictions
    >>> rng = np.random.default_rng(0)
    >>> X_test, y_test, y_train = rng.normal(size=(4, 10, 2)), rng.normal(size=(4, 12, 2)), rng.normal(size=(8, 12, 2))
    >>> refs = reference_predictions(X_test, y_test, y_train, random_state=0)
    >>> sorted(refs), refs["pooled"].shape
    (['identity', 'pooled'], (4, 12, 2))
    """
    X_list, _ = _measures(X_test, "X_test")
    y_list, _ = _measures(y_test, "y_test")
    train_list, _ = _measures(y_train, "y_train")
    if len(X_list) != len(y_list):
        raise ValueError(f"X_test has {len(X_list)} measures but y_test has {len(y_list)}; give one target per input.")
    n_features = y_list[0].shape[1]
    if train_list[0].shape[1] != n_features:
        raise ValueError(
            f"y_train has {train_list[0].shape[1]} features but y_test has {n_features}; the pooled prediction "
            "draws training target points, so both must describe the same space."
        )
    rng = check_random_state(random_state)
    pool = np.concatenate(train_list)
    pooled = [pool[rng.choice(len(pool), size=len(y), replace=len(pool) < len(y))] for y in y_list]
    predictions = {"pooled": _stack_if_equal(pooled)}
    if X_list[0].shape[1] == n_features:
        predictions["identity"] = _stack_if_equal(X_list)
    if oracle is not None:
        oracle_list, _ = _measures(oracle, "oracle")
        if len(oracle_list) != len(y_list) or oracle_list[0].shape[1] != n_features:
            raise ValueError(
                f"oracle must hold one measure per held-out target ({len(y_list)}) with {n_features} features, got "
                f"{len(oracle_list)} measures with {oracle_list[0].shape[1]} features."
            )
        predictions["oracle"] = _stack_if_equal(oracle_list)
    return predictions


def _stack_if_equal(measures):
    if len({m.shape for m in measures}) == 1:
        return np.stack(measures)
    return measures
