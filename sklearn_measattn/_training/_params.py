"""The training parameters an estimator hands to the training home, and snapshots of them.

A snapshot (:func:`freeze_params`) is what a continued fit compares against to
tell which parameters changed since the network was built or last updated.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator

__all__ = ["TRAINING_OPTIONS", "freeze_params", "same_params", "split_options"]

# The training options this package adds to skorch's keyword arguments in the net parameters:
# turned into callbacks, a validation split and collate functions by the training home.
TRAINING_OPTIONS = ("callbacks", "lr_schedule", "early_stopping", "context_size")


def split_options(params):
    """``params`` as (skorch's keyword arguments, this package's training options)."""
    options = {name: params.get(name) for name in TRAINING_OPTIONS}
    return {name: value for name, value in params.items() if name not in TRAINING_OPTIONS}, options


def freeze_params(params):
    """A snapshot of parameter values that later in-place changes do not alter:
    containers copied, estimators (e.g. a transformer) as their class and params."""
    if isinstance(params, BaseEstimator):
        return (_EstimatorSnapshot, type(params), freeze_params(params.get_params(deep=False)))
    if isinstance(params, dict):
        return {key: freeze_params(value) for key, value in params.items()}
    if isinstance(params, (list, tuple)):
        return (type(params), *[freeze_params(value) for value in params])
    return params


class _EstimatorSnapshot:
    """Marks an estimator in a frozen snapshot."""


def same_params(a, b):
    """Whether two frozen values are the same (identity for objects without a safe ==)."""
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_params(a[key], b[key]) for key in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_params(x, y) for x, y in zip(a, b))
    if callable(a) or callable(b):
        return False  # functions, modules, callbacks: the same object or not at all
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - e.g. arrays, whose == is elementwise
        return False


