"""Attention weights for inspection: the materialised reference, blocks of queries, query ESS."""

from __future__ import annotations

import math

import torch

from ..kernels import uniform_where_empty
from ._chunked import CHUNK_ELEMENTS

__all__ = ["attention_probabilities", "attention_weight_blocks", "log_point_weights", "query_ess_fractions"]


def log_point_weights(weights):
    """Point weights as attention's additive logits: ``log w``, ``-inf`` at absent points, no gradient."""
    return torch.log(weights.detach())


def _kernel_logits(scores, kernel, lw):
    """``g(S) + log w`` with the bounded-support rule for queries with no key in the support."""
    logits = kernel.log_weight(scores)
    if lw is not None:
        logits = logits + lw
    if kernel.support == "bounded":
        logits = uniform_where_empty(logits, lw)
    return logits


def attention_probabilities(q, k, kernel, log_weights, scale):
    """Materialised attention weights of any kernel, differentiable by autograd (the reference).

    ``q``, ``k`` are ``(batch, heads, n, d_head)``; ``log_weights`` ``(batch,
    n_keys)`` with ``-inf`` at absent points, or ``None``. Returns ``(batch,
    heads, n_queries, n_keys)`` weights summing to one along the keys.
    """
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    lw = None if log_weights is None else log_weights[:, None, None, :].to(scores.dtype)
    if kernel.normalizer is not None:
        return kernel.normalizer(scores, lw)
    return torch.softmax(_kernel_logits(scores, kernel, lw), dim=-1)


def attention_weight_blocks(q, k, kernel, log_weights=None, *, block_elements=CHUNK_ELEMENTS):
    """The attention weights ``softmax(g(S) + log w)``, one block of queries at a time.

    The one place where the package computes attention weights for inspection
    (the collapse diagnostics of random projections and of trained models):
    yields ``(start, stop, weights)`` with ``weights`` of shape ``(batch, heads,
    stop - start, n_keys)``, so that memory stays O(block * N) for any N.

    ``q`` and ``k`` are ``(batch, heads, n, d_head)`` tensors, ``log_weights``
    ``(batch, n_keys)`` with ``-inf`` at absent points. Logits more than 300
    below each row's maximum get weight exactly 0: weights under ``e^-300``
    change nothing measurable, and their ``exp`` would underflow into
    subnormals, which are very slow on CPU. (A floor at ``max - 300`` instead
    would be wrong for logits near 1e300, where ``max - 300 == max``.)
    """
    batch, heads, n_queries, _ = q.shape
    n_keys = k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    rows = max(1, min(n_queries, block_elements // max(1, batch * heads * n_keys)))
    k_t = k.transpose(-1, -2)
    lw = None if log_weights is None else log_weights[:, None, None, :]
    for start in range(0, n_queries, rows):
        stop = min(start + rows, n_queries)
        scores = torch.matmul(q[:, :, start:stop], k_t) * scale
        if kernel.normalizer is not None:
            yield start, stop, kernel.normalizer(scores, lw)
            continue
        logits = _kernel_logits(scores, kernel, lw)
        negligible = logits < logits.amax(dim=-1, keepdim=True) - 300.0
        yield start, stop, torch.softmax(logits.masked_fill(negligible, -math.inf), dim=-1)


def query_ess_fractions(q, k, kernel, a):
    """Attention ESS of each query of one measure, as a fraction of the measure's effective size.

    The one definition of attention ESS, shared by
    :func:`~sklearn_measattn.metrics.attention_ess` (random projections) and the
    fitted estimator's ``attention_ess``: with weights ``w_ij = softmax_j(g(S_ij)
    + log a_j)``, ``ESS_i = 1 / sum_j w_ij^2``, divided by ``1 / sum_j a_j^2``.

    ``q`` is a ``(heads, n_queries, d_head)`` and ``k`` a ``(heads, n_keys,
    d_head)`` float64 tensor; ``a`` the ``(n_keys,)`` point weights, summing to
    1, 0 at absent points. Returns a ``(heads, n_queries)`` tensor.
    """
    blocks = attention_weight_blocks(q[None], k[None], kernel, log_point_weights(a)[None])
    inverse_ess = torch.cat([(w * w).sum(dim=-1)[0] for _, _, w in blocks], dim=-1)
    return (a * a).sum() / inverse_ess
