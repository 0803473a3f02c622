"""Attention weights of the bounded-support kernels: sparsemax, and queries outside the support.

Sparsemax against a measure with point weights ``a_j`` (summing to 1) gives
query ``i`` the weights ``p_ij = a_j (s_ij - tau_i)_+``, where the threshold
``tau_i`` solves ``sum_j a_j (s_ij - tau_i)_+ = 1``: Nadaraya-Watson
regression with the kernel ``kappa_i(s) = (s - tau_i)_+``, whose threshold
adapts to the query so that the integral of the kernel against the measure is
one. For a uniform measure of ``n`` points this is the sparsemax of
Martins and Astudillo (2016) applied to ``s / n`` up to the scaling of the
threshold: the mean of ``(s - tau)_+``, not its sum, is one, so the weights
have a limit as ``n`` grows (a measure, not a list of ``n`` tokens).
"""

from __future__ import annotations

import torch

__all__ = ["sparsemax_weights", "sparsemax_score_grad", "uniform_where_empty"]


def _point_weights(scores, log_weights):
    """The normalised point weights ``a_j``, broadcastable to ``scores``."""
    if log_weights is None:
        return torch.full((1,) * scores.ndim, 1.0 / scores.shape[-1], dtype=scores.dtype, device=scores.device)
    return torch.softmax(log_weights.to(scores.dtype), dim=-1)


def sparsemax_weights(scores, log_weights=None):
    """Sparsemax attention weights of every query row of ``scores`` (keys on the last axis).

    ``log_weights`` are the logs of the point weights (``-inf`` at absent
    points), broadcastable to ``scores``; ``None`` for a uniform measure. The
    threshold is ``tau = max_k (sum_{top k} a s - 1) / sum_{top k} a`` over the
    keys sorted by decreasing score, which equals the root of
    ``sum_j a_j (s_j - tau)_+ = 1`` (each candidate is at most the root, and the
    candidate of the true support equals it). Differentiable by autograd (the
    reference); the chunked backend uses :func:`sparsemax_score_grad`.
    """
    a = _point_weights(scores, log_weights).expand_as(scores)
    # Sparsemax is shift invariant; measured from the row's top, the threshold keeps its resolution
    # (at |s| ~ 1e10 in float32, s - 1/a would round to s and every weight to 0).
    scores = scores - scores.detach().amax(dim=-1, keepdim=True)
    sorted_scores, order = torch.sort(scores, dim=-1, descending=True)
    sorted_a = torch.gather(a, -1, order)
    mass = torch.cumsum(sorted_a, dim=-1)
    first = torch.cumsum(sorted_a * sorted_scores, dim=-1)
    candidates = torch.where(mass > 0, (first - 1.0) / torch.clamp(mass, min=torch.finfo(scores.dtype).tiny),
                             torch.full_like(mass, -torch.inf))
    tau = candidates.amax(dim=-1, keepdim=True)
    return a * torch.relu(scores - tau)


def sparsemax_score_grad(weights, grad_weights, log_weights=None):
    """Gradient of a loss with respect to the scores, from its gradient with respect to the weights.

    On the support ``J`` of a query (``p_j > 0``), ``dp_j / ds_k = a_j (delta_jk
    - a_k / A_J)`` with ``A_J = sum_J a``, so ``dL/ds = m (dL/dp - <m, dL/dp> /
    <m, 1>)`` with ``m = a 1[p > 0]``. A constant added to every ``dL/dp`` of a
    row changes nothing, so the softmax backward's row term may be left in.
    """
    a = _point_weights(weights, log_weights)
    support = torch.where(weights > 0, a.expand_as(weights), torch.zeros_like(weights))
    mass = torch.clamp(support.sum(dim=-1, keepdim=True), min=torch.finfo(weights.dtype).tiny)
    mean = (support * grad_weights).sum(dim=-1, keepdim=True) / mass
    return support * (grad_weights - mean)


def uniform_where_empty(logits, log_weights=None):
    """Replace the rows of ``logits`` that are ``-inf`` everywhere by the log point weights.

    The rule of the bounded-support kernels for a query whose keys all lie
    outside the support: it attends uniformly to the measure (the limit of the
    kernel ``kappa + epsilon`` as ``epsilon -> 0``). ``log_weights``
    broadcastable to ``logits`` along the key axis, or ``None`` (uniform).
    Out of place, differentiable (the rows replaced get no gradient).
    """
    empty = torch.isneginf(logits.amax(dim=-1, keepdim=True))
    fallback = torch.zeros_like(logits) if log_weights is None else log_weights.to(logits.dtype).expand_as(logits)
    return torch.where(empty, fallback, logits)
