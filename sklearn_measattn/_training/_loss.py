"""The loss as training uses it: tried once on a test batch before training, and given its own random stream."""

from __future__ import annotations

import torch

from ..losses import get_loss

__all__ = ["criterion_generator", "probe_loss"]


def probe_loss(loss, loss_params, n_features_out):
    """Call the loss once on two tiny batches and say what is wrong, before training."""
    generator = torch.Generator().manual_seed(0)
    if loss == "sliced" and "generator" not in loss_params:
        loss_params = {**loss_params, "generator": generator}  # not torch's global generator
    loss_fn = get_loss(loss, **loss_params)
    y_pred = torch.randn(2, 3, n_features_out, generator=generator, requires_grad=True)
    y_true = torch.randn(2, 3, n_features_out, generator=generator)
    name = getattr(loss, "__name__", loss)
    try:
        value = loss_fn(y_pred, y_true, None, None)
    except Exception as exc:
        raise ValueError(
            f"loss={name!r} raised {type(exc).__name__}: {exc} on a test batch of shape "
            "(2, 3, n_features_out); a loss is called as loss(y_pred, y_true, pred_weights, "
            "true_weights) with torch tensors (weights may be None)."
        ) from exc
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"loss={name!r} returned {type(value).__name__}; it must return a scalar torch tensor "
            "computed from y_pred with torch operations, so that it can be backpropagated."
        )
    if value.numel() != 1:
        hint = " (loss_params has reduction='none')" if loss_params.get("reduction") == "none" else ""
        raise ValueError(
            f"loss={name!r} returned a tensor of shape {tuple(value.shape)}{hint}; training needs "
            "a scalar loss. Use reduction='mean' or 'sum'."
        )
    if not value.dtype.is_floating_point or not value.requires_grad:
        raise TypeError(
            f"loss={name!r} returned a {value.dtype} tensor that does not depend on y_pred through "
            "autograd; compute it from y_pred with differentiable torch operations."
        )
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"loss={name!r} returned {float(value.detach())} on a finite test batch.")



def criterion_generator(criterion_params, streams):
    """A private generator for the sliced loss's projections, unless the parameters bring one.

    ``criterion_params`` are the net's ``criterion__*`` keyword arguments;
    ``streams`` the fit's :class:`~._streams.RandomStreams`.
    """
    if criterion_params.get("criterion__name") == "sliced" and "criterion__generator" not in criterion_params:
        return {"criterion__generator": streams.generator("loss_projections")}
    return {}
