"""Running a fitted estimator's network on new measures: the inputs checked and transformed, the batches.

One home for what ``predict``, ``transport``, the trained-attention
diagnostics and the hidden-state similarity all do before and around the
network: validate the measures against the fitted model, apply the fitted
input transform, and feed the network batch by batch in evaluation mode
without gradients.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from .._param_validation import validate_parameter_constraints
from .._validation import POSITIVE_INT, check_measures, check_n_features
from ._net import check_float32_range, transform_points

__all__ = [
    "batches", "evaluation", "inference_batch_size", "network_inputs", "normalized_point_weights",
    "targets_from_network",
]


def network_inputs(model, X):
    """Validate ``X`` for the fitted ``model``; return ``(X, x_weights, X_model)``.

    ``X`` is the padded float array, ``x_weights`` its point weights (``None``
    for dense input) and ``X_model`` what the network sees (after the fitted
    input transform, checked to fit float32).
    """
    check_is_fitted(model, "net_")
    X, x_weights = check_measures(X, input_name="X")
    check_n_features(X, model.n_features_in_)
    X_model = transform_points(model.transform_X_, X, "transform")
    check_float32_range(X_model, "X", model.transform)
    return X, x_weights, X_model


def inference_batch_size(model, batch_size, *, method=None):
    """``batch_size`` checked (a positive integer), or the fitted model's own when ``None``.

    ``method`` names the model's method that took ``batch_size``, for the error message.
    """
    caller = type(model).__name__ if method is None else f"{type(model).__name__}.{method}"
    validate_parameter_constraints({"batch_size": [None, POSITIVE_INT]}, {"batch_size": batch_size}, caller_name=caller)
    return model.batch_size if batch_size is None else int(batch_size)


def normalized_point_weights(X, x_weights):
    """Point weights summing to one per measure (uniform for dense input), float64."""
    weights = np.ones(X.shape[:2]) if x_weights is None else x_weights.astype(np.float64)
    return weights / weights.sum(axis=1, keepdims=True)


@contextlib.contextmanager
def evaluation(model):
    """The fitted network in evaluation mode without gradients, its training mode restored afterwards."""
    module = model.net_.module_
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            yield module
    finally:
        module.train(was_training)


def batches(model, batch_size, *arrays):
    """Yield ``(start, stop, tensors)`` over the measures, to run inside :func:`evaluation`.

    ``tensors`` holds ``arrays[j][start:stop]`` as float32 tensors on the
    fitted device (``None`` stays ``None``).
    """
    n_samples = next(len(a) for a in arrays if a is not None)
    for start in range(0, n_samples, batch_size):
        stop = min(start + batch_size, n_samples)
        yield start, stop, [
            None if a is None else torch.as_tensor(a[start:stop], dtype=torch.float32, device=model.device_)
            for a in arrays
        ]


def targets_from_network(model, y_model, largest_input, *, what="predictions"):
    """The network's float64 outputs ``y_model`` in target units, refused when not finite.

    ``largest_input`` is the largest ``|value|`` the network saw (quoted when its
    outputs overflowed); ``what`` names the outputs in the messages.
    """
    if not np.all(np.isfinite(y_model)):
        raise FloatingPointError(
            f"The network produced non-finite {what} (largest |value| {largest_input:.3g} of its inputs "
            "as the network sees them): the attention scores or activations overflowed float32 on extreme "
            "points. Train with transform='symlog' so that inputs reach the network on a logarithmic "
            "scale, or rescale the data."
        )
    y_pred = transform_points(model.transform_y_, y_model, "inverse_transform")
    if not np.all(np.isfinite(y_pred)):
        kind = "NaN" if np.any(np.isnan(y_pred)) else "inf"
        raise FloatingPointError(
            f"The network's {what} are finite, but transform={model.transform!r}'s inverse_transform "
            f"turned some into {kind}. Check that transformer's inverse_transform on the range of these "
            f"{what}, or use transform='symlog'."
        )
    return y_pred
