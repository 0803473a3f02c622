"""The energy distance of torch point clouds in O(N + M) memory, with its analytic gradient.

The energy distance is a sum over pairs of points,

    E = 2 sum_ij a_i b_j D(x_i, y_j) - sum_ij a_i a_j D(x_i, x_j) - sum_ij b_i b_j D(y_i, y_j),

with ``D(x, y) = |x - y|^beta``, and so is its gradient:

    dE/dx_i = 2 a_i (sum_j b_j g(x_i, y_j) - sum_j a_j g(x_i, x_j)),
    g(x, y) = beta |x - y|^(beta - 2) (x - y)   (0 at x = y).

So the forward pass computes, in one sweep over the pairs, both the weighted
row sums of ``D`` and the gradients, keeps only the gradients (``O(N d)``), and
the backward pass scales them by the incoming gradient. No pairwise array is
ever held whole and autograd records nothing inside. Backends, chosen per call:

========= ==================================================================
fused     C++ on CPU (float32, float64), built with the fused attention
          kernels: tiles of the second cloud, vectorised across points
chunked   pure PyTorch on any device: row blocks of at most
          ``BLOCK_ELEMENTS`` distances at a time
reference the dense formula through autograd (``O(N M d)`` memory); the
          definition the others are tested against, and what runs when
          the weights themselves need a gradient
========= ==================================================================

The analytic gradient is not itself differentiable (a second derivative
through it raises); use ``backend="reference"`` for that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from .._extension import fused_unavailable_reason

# Distances held at a time by the chunked backend: 2**22 values (16 MiB in
# float32) per block, whatever N and M.
BLOCK_ELEMENTS = 2**22


@dataclass(frozen=True)
class _Backend:
    """One way to compute the energy distance.

    ``supports(x)`` returns why the backend cannot run tensors like ``x``
    (device, dtype), or ``None``; ``unavailable()`` why it cannot run on this
    machine at all (no compiled kernels), or ``None``; ``moment(x, y, w, beta,
    want_grad)`` computes the weighted row sums of the distances and their
    gradients (``None``: the dense formula through autograd).
    """

    name: str
    supports: Callable
    moment: Callable | None
    unavailable: Callable = lambda: None


def resolve_backend(backend, x):
    """The backend that ``backend="auto"`` (or an explicit name) runs for tensor ``x``."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    if backend == "auto":
        return next(name for name in AUTO_PREFERENCE
                    if _RECORDS[name].supports(x) is None and _RECORDS[name].unavailable() is None)
    record = _RECORDS[backend]
    why = record.supports(x)
    if why is not None:
        raise ValueError(f"backend={backend!r} {why}; use backend='auto' or 'chunked'.")
    reason = record.unavailable()
    if reason is not None:
        raise RuntimeError(f"backend={backend!r} is unavailable here: {reason}. Use backend='auto' or 'chunked'.")
    return backend


def energy_distance(x, a, y, b, beta, *, backend="auto"):
    """Energy distance per sample between weighted clouds (weights summing to one).

    ``x`` ``(B, N, d)`` and ``y`` ``(B, M, d)`` share dtype and device; ``a``
    ``(B, N)`` and ``b`` ``(B, M)`` are their weights (zero = absent point).
    Returns shape ``(B,)``, differentiable with respect to ``x`` and ``y``.
    """
    backend = resolve_backend(backend, x)
    if backend == "reference" or (a.requires_grad or b.requires_grad) and torch.is_grad_enabled():
        return reference_energy_distance(x, a, y, b, beta)
    return _EnergyDistance.apply(x, y, a.detach(), b.detach(), float(beta), backend)


class _EnergyDistance(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, a, b, beta, backend):
        need_x, need_y = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        moment = _RECORDS[backend].moment
        cross_rows, cross_grad = moment(x, y, b, beta, need_x)
        self_x_rows, self_x_grad = moment(x, x, a, beta, need_x)
        self_y_rows, self_y_grad = moment(y, y, b, beta, need_y)
        value = (a * (2.0 * cross_rows - self_x_rows)).sum(1) - (b * self_y_rows).sum(1)
        grad_x = 2.0 * a.unsqueeze(-1) * (cross_grad - self_x_grad) if need_x else None
        grad_y = None
        if need_y:
            _, cross_grad_y = moment(y, x, a, beta, True)
            grad_y = 2.0 * b.unsqueeze(-1) * (cross_grad_y - self_y_grad)
        ctx.save_for_backward(grad_x, grad_y)
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_value):
        grad_x, grad_y = ctx.saved_tensors
        scale = grad_value[:, None, None]
        return (
            None if grad_x is None else scale * grad_x,
            None if grad_y is None else scale * grad_y,
            None,
            None,
            None,
            None,
        )


def _fused_moment(x, y, w, beta, want_grad):
    """Row sums ``sum_j w_j D(x_i, y_j)`` ``(B, N)`` and, if asked, their gradients ``(B, N, d)``."""
    rows, grad = torch.ops.measattn_fused.energy_moment(
        x.contiguous(), y.transpose(1, 2).contiguous(), w.contiguous(), beta, want_grad
    )
    return rows, (grad if want_grad else None)


def _chunked_moment(x, y, w, beta, want_grad):
    """What :func:`_fused_moment` computes, in row blocks of plain PyTorch ops.

    Distances come from ``torch.cdist`` without the matrix-product shortcut
    (exact zeros between equal points); the gradient
    ``sum_j c_ij (x_i - y_j) = x_i sum_j c_ij - sum_j c_ij y_j`` from two
    reductions, after both clouds are moved by the same per-sample offset (the
    gradient does not depend on it) so that points far from the origin keep
    their digits.
    """
    batch, n, d = x.shape
    rows_per_block = max(1, BLOCK_ELEMENTS // max(1, batch * y.shape[1]))
    rows = x.new_empty(batch, n)
    grad = x.new_empty(batch, n, d) if want_grad else None
    offset = y.median(dim=1, keepdim=True).values
    x, y = x - offset, y - offset
    weights = w.unsqueeze(-1)
    for start in range(0, n, rows_per_block):
        stop = min(n, start + rows_per_block)
        distance = torch.cdist(x[:, start:stop], y, compute_mode="donot_use_mm_for_euclid_dist")
        power = distance if beta == 1.0 else distance.pow(beta)  # NaN stays NaN
        rows[:, start:stop] = (power @ weights).squeeze(-1)
        if want_grad:
            usable = (distance > 0) & torch.isfinite(distance)
            coef = torch.where(usable, beta * power / torch.where(usable, distance.square(), 1.0), 0.0)
            coef = coef * w.unsqueeze(1)
            grad[:, start:stop] = x[:, start:stop] * coef.sum(-1, keepdim=True) - coef @ y
    return rows, grad


def reference_energy_distance(x, a, y, b, beta):
    """The dense V-statistic through autograd (``O(B N M d)`` memory)."""

    def moment(u, wu, v, wv):
        square = (u.unsqueeze(2) - v.unsqueeze(1)).square().sum(-1)
        # sqrt has an infinite derivative at 0, which autograd turns into NaN on the
        # diagonal: mask exact zeros inside the power so both branches stay finite.
        zero = square == 0
        power = torch.where(zero, 0.0, torch.where(zero, 1.0, square).pow(beta / 2.0))
        return (wu.unsqueeze(1) @ power @ wv.unsqueeze(-1))[:, 0, 0]

    return 2.0 * moment(x, a, y, b) - moment(x, a, x, a) - moment(y, b, y, b)



def _cpu_float(x):
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return None
    return f"runs float32 or float64 tensors on the CPU, got {x.dtype} on {x.device}"


_RECORDS = {record.name: record for record in (
    _Backend("fused", _cpu_float, _fused_moment, fused_unavailable_reason),
    _Backend("chunked", lambda x: None, _chunked_moment),
    _Backend("reference", lambda x: None, None),
)}
#: What ``backend="auto"`` tries, in order: the first that runs the tensors here.
AUTO_PREFERENCE = ("fused", "chunked")
#: The names ``backend`` takes.
BACKENDS = ("auto", *_RECORDS)

def energy_distance_batch(x, a, y, b, beta, *, backend="auto"):
    """``2 E|X - Y|^beta - E|X - X'|^beta - E|Y - Y'|^beta`` per sample.

    The expectations are taken exactly under the weighted empirical measures
    (a V-statistic: the pairs ``X = X'`` included), so the value depends on the
    measures only. Not clipped at 0: rounding can leave ``~ -1e-16`` relative.
    Computed in ``O(N + M)`` memory by this module, for
    numpy arrays (in float64) and torch tensors alike; ``backend`` is one of
    its backends.
    """
    if isinstance(x, np.ndarray):
        as_tensor = functools.partial(torch.as_tensor, dtype=torch.float64)
        with torch.no_grad():
            value = energy_distance(as_tensor(x), as_tensor(a), as_tensor(y), as_tensor(b), beta,
                                            backend=backend)
        return value.numpy()
    return energy_distance(x, a, y, b, beta, backend=backend)
