"""Running a trained network on new measures: evaluation mode, batches on the device, outputs in target units.

The pieces that :class:`~._fitted.FittedNetwork` runs inference with (and
through it ``predict``, ``transport``, the trained-attention diagnostics and
the hidden-state similarity): each takes what it needs explicitly.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from .._param_validation import validate_parameter_constraints
from .._validation import POSITIVE_INT
from ..preprocessing import transform_points

__all__ = [
    "batches", "checked_batch_size", "evaluation", "normalized_point_weights",
    "targets_from_network",
]


def checked_batch_size(batch_size, default, *, caller):
    """``batch_size`` checked (a positive integer), or ``default`` when ``None``; ``caller`` names the method."""
    validate_parameter_constraints({"batch_size": [None, POSITIVE_INT]}, {"batch_size": batch_size}, caller_name=caller)
    return default if batch_size is None else int(batch_size)


def normalized_point_weights(X, x_weights):
    """Point weights summing to one per measure (uniform for dense input), float64."""
    weights = np.ones(X.shape[:2]) if x_weights is None else x_weights.astype(np.float64)
    return weights / weights.sum(axis=1, keepdims=True)


@contextlib.contextmanager
def evaluation(module):
    """``module`` in evaluation mode without gradients, its training mode restored afterwards.

    A module already in evaluation mode is left alone: switching modes walks
    every submodule, which costs more than a forward pass of a small network
    (a filter runs one per scalar update).
    """
    was_training = module.training
    if was_training:
        module.eval()
    try:
        with torch.no_grad():
            yield module
    finally:
        if was_training:
            module.train()


def batches(device, batch_size, *arrays):
    """Yield ``(start, stop, tensors)`` over the measures, to run inside :func:`evaluation`.

    ``tensors`` holds ``arrays[j][start:stop]`` as float32 tensors on
    ``device`` (``None`` stays ``None``).
    """
    n_samples = next(len(a) for a in arrays if a is not None)
    for start in range(0, n_samples, batch_size):
        stop = min(start + batch_size, n_samples)
        yield start, stop, [
            None if a is None else torch.as_tensor(a[start:stop], dtype=torch.float32, device=device)
            for a in arrays
        ]


def targets_from_network(transform_y, transform, y_model, largest_input, *, what="predictions"):
    """The network's float64 outputs ``y_model`` in target units (``transform_y`` inverted), refused when
    not finite.

    ``transform`` is the estimator's parameter, named in the messages;
    ``largest_input`` the largest ``|value|`` the network saw (quoted when its
    outputs overflowed); ``what`` names the outputs.
    """
    if not np.all(np.isfinite(y_model)):
        raise FloatingPointError(
            f"The network produced non-finite {what} (largest |value| {largest_input:.3g} of its inputs "
            "as the network sees them): the attention scores or activations overflowed float32 on extreme "
            "points. Train with transform='symlog' so that inputs reach the network on a logarithmic "
            "scale, or rescale the data."
        )
    y_pred = transform_points(transform_y, y_model, "inverse_transform")
    if not np.all(np.isfinite(y_pred)):
        kind = "NaN" if np.any(np.isnan(y_pred)) else "inf"
        raise FloatingPointError(
            f"The network's {what} are finite, but transform={transform!r}'s inverse_transform "
            f"turned some into {kind}. Check that transformer's inverse_transform on the range of these "
            f"{what}, or use transform='symlog'."
        )
    return y_pred

