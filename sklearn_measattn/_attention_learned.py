"""Attention with a poly kernel whose degree is learnt, one degree per head.

The fused CPU kernels and the chunked backend's hand-written backward take the
kernel as a fixed function of the scores and return no gradient for its
parameters. A learnt degree therefore runs on this fallback: query blocks of
the chunked backend's size, each computed with autograd under activation
checkpointing, so memory stays O(N * chunk) (each block's scores are recomputed
in backward) and the gradient reaches the degrees. Measured on one CPU thread
of a shared machine at N = 1024, d_model = 32, 4 heads, forward plus backward of
one attention layer: 0.13-0.18 s, against 0.09-0.11 s for the chunked backend
with a fixed degree (1.2-1.7 times) and 0.04-0.05 s for the fused CPU kernels
(3-4 times): the recomputation, plus autograd's elementwise passes over each
block instead of a closed-form backward.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ._attention_chunked import _default_chunk

__all__ = ["learned_poly_attention"]


def _block(q_block, k_t, v, degree, log_weights, scale):
    scores = torch.matmul(q_block, k_t) * scale
    positive = F.relu(scores)
    logits = (scores - positive) + degree * torch.log1p(positive / degree)
    if log_weights is not None:
        logits = logits + log_weights
    return torch.matmul(torch.softmax(logits, dim=-1), v)


def learned_poly_attention(q, k, v, degree, log_weights=None, *, chunk_size=None, naive=False):
    """``softmax(g_p(q k^T / sqrt(d)) + log w) v`` with a degree ``p`` per head, differentiable in ``p``.

    ``q``, ``k``, ``v`` are ``(batch, heads, n, d)``; ``degree`` a positive
    ``(heads,)`` tensor; ``log_weights`` ``(batch, n_keys)`` or ``None``. With
    ``naive=True`` the whole score matrix is materialised (the reference).
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = degree.to(q.dtype)[:, None, None]
    lw = None if log_weights is None else log_weights[:, None, None, :].to(q.dtype)
    k_t = k.transpose(-1, -2)
    n_queries = q.shape[2]
    if naive:
        return _block(q, k_t, v, p, lw, scale)
    chunk = _default_chunk(q, k) if chunk_size is None else chunk_size
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, p))
    out = []
    for start in range(0, n_queries, chunk):
        q_block = q[:, :, start:start + chunk]
        if needs_grad:
            out.append(checkpoint(_block, q_block, k_t, v, p, lw, scale, use_reentrant=False))
        else:
            out.append(_block(q_block, k_t, v, p, lw, scale))
    return out[0] if len(out) == 1 else torch.cat(out, dim=2)
