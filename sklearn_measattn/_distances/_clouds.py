"""Checks of the tensors and options the training losses take."""

from __future__ import annotations

import torch

from .._validation import Choices, check_comparable

#: How a loss combines its per-sample values (a constraint of every loss's table).
REDUCTION = Choices(("mean", "sum", "none"))


def as_cloud(t, name, like=None):
    """A 3-D floating tensor ``(batch, n_points, n_features)`` with at least one point."""
    if not torch.is_tensor(t):
        try:
            t = torch.as_tensor(t)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{name} must be a tensor of shape (B, n_points, d); {exc}") from None
    if t.ndim != 3:
        raise ValueError(
            f"{name} must be a 3-D tensor (batch, n_points, n_features), got shape "
            f"{tuple(t.shape)}. For a single cloud use {name}[None]."
        )
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype() if like is None else like.dtype)
    if like is not None:
        t = t.to(dtype=like.dtype, device=like.device)
    if t.shape[1] < 1:
        raise ValueError(f"{name} has 0 points (shape {tuple(t.shape)}); each cloud needs at least one.")
    return t


def normalized_weights(w, cloud, name):
    """Weights of shape ``(B, n)`` that sum to one per row (uniform for ``None``)."""
    B, n = cloud.shape[:2]
    if w is None:
        return cloud.new_full((B, n), 1.0 / n)
    if not torch.is_tensor(w):
        w = torch.as_tensor(w)
    w = w.to(dtype=cloud.dtype, device=cloud.device)
    if tuple(w.shape) != (B, n):
        raise ValueError(
            f"{name} must have shape (batch, n_points) = {(B, n)} to match its cloud, "
            f"got {tuple(w.shape)}."
        )
    w = w.detach()
    if bool(torch.any(w < 0)) or not bool(torch.all(torch.isfinite(w))):
        raise ValueError(f"{name} must be finite and >= 0 (0 means the point is absent).")
    total = w.sum(dim=1, keepdim=True)
    if bool(torch.any(total <= 0)):
        raise ValueError(
            f"{name} sums to 0 for some sample; every cloud needs at least one point "
            "with positive weight."
        )
    return w / total


def prepare_clouds(x, y, x_weights, y_weights):
    """Validate a predicted and a target batch; return ``(x, y, a, b)`` with normalised weights."""
    x = as_cloud(x, "x")
    y = as_cloud(y, "y", like=x)
    check_comparable(x, y, ("x", "y"))
    a = normalized_weights(x_weights, x, "x_weights")
    b = normalized_weights(y_weights, y, "y_weights")
    return x, y, a, b


def reduce(values, reduction):
    """Combine the per-sample values as ``reduction`` says."""
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def split_points_weights(value, name):
    """Accept a tensor, a ``(points, weights)`` pair or a ``{"points", "weights"}`` dict."""
    if isinstance(value, dict):
        keys = set(value)
        points_key = next((k for k in ("points", "y", "X") if k in value), None)
        if points_key is None or not keys <= {points_key, "weights"}:
            raise ValueError(
                f"{name} as a dict must have keys 'points' and optionally 'weights', got {sorted(keys)}."
            )
        return value[points_key], value.get("weights")
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} as a tuple must be (points, weights), got {len(value)} items.")
        return value[0], value[1]
    return value, None
