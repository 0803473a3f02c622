"""Attention with a kernel whose parameters are trained (the learnt poly degree).

The fused CPU kernels and the chunked backend's hand-written backward take the
kernel as a fixed function of the scores and return no gradient for its
parameters. A kernel with a parameter that requires a gradient therefore runs
on this fallback of the chunked backend: query blocks of the chunked backend's
size, each computed with autograd under activation checkpointing, so memory
stays O(N * chunk) (each block's scores are recomputed in backward) and the
gradient reaches the kernel's parameters. Measured on one CPU thread of a
shared machine at N = 1024, d_model = 32, 4 heads, forward plus backward of one
attention layer with a learnt poly degree: 0.13-0.18 s, against 0.09-0.11 s for
the chunked backend with a fixed degree (1.2-1.7 times) and 0.04-0.05 s for the
fused CPU kernels (3-4 times): the recomputation, plus autograd's elementwise
passes over each block instead of a closed-form backward.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from ._chunked import default_chunk
from ._weights import attention_probabilities

__all__ = ["has_tensor_parameters", "checkpointed_attention"]


def has_tensor_parameters(kernel):
    """Whether the kernel's ``g`` holds a tensor (a learnt degree, one per head).

    Such a kernel may need a gradient for the tensor, and its per-head shape
    ``(heads, 1, 1)`` broadcasts over ``(batch, heads, n_queries, n_keys)``
    scores only, not over the chunked backend's flattened ``(batch * heads, ...)``.
    """
    return any(isinstance(value, torch.Tensor) for value in getattr(kernel.log_weight, "__dict__", {}).values())


def _block(q_block, k, v, kernel, log_weights, scale):
    return attention_probabilities(q_block, k, kernel, log_weights, scale) @ v


def checkpointed_attention(q, k, v, kernel, log_weights, scale, chunk_size=None):
    """Kernel attention by query blocks, each under autograd with activation checkpointing.

    Differentiable in ``q``, ``k``, ``v`` and in any tensor the kernel holds;
    memory O(N * chunk) in forward and backward.
    """
    chunk = default_chunk(q, k) if chunk_size is None else chunk_size
    needs_grad = torch.is_grad_enabled()
    out = []
    for start in range(0, q.shape[2], chunk):
        q_block = q[:, :, start:start + chunk]
        if needs_grad:
            out.append(checkpoint(_block, q_block, k, v, kernel, log_weights, scale, use_reentrant=False))
        else:
            out.append(_block(q_block, k, v, kernel, log_weights, scale))
    return out[0] if len(out) == 1 else torch.cat(out, dim=2)
