"""The fused CPU kernels (``_csrc/fused_attention.cpp``) as an autograd function."""

from __future__ import annotations

import torch


class _FusedKernelAttention(torch.autograd.Function):
    """The fused CPU kernels (``_csrc/fused_attention.cpp``) as an autograd function.

    Forward and backward each make one pass over tiles of queries x keys that
    stay in cache: a BLAS gemm for the tile's scores, the kernel's weights in
    vectorised loops, a gemm into the output (flash-attention style, with a
    running row maximum of the exponent). Saved for backward: q, k, v, the
    output and one ``log`` normaliser per query, so memory is O(N * d).
    """

    @staticmethod
    def forward(ctx, q, k, v, log_weights, kind, parameter, scale, query_block, key_block):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        if log_weights is not None:
            log_weights = log_weights.to(torch.float32).contiguous()
        out, log_normalizer = torch.ops.measattn_fused.forward(
            q, k, v, log_weights, kind, parameter, scale, query_block, key_block
        )
        ctx.save_for_backward(q, k, v, log_weights, out, log_normalizer)
        ctx.config = (kind, parameter, scale, query_block, key_block)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v, log_weights, out, log_normalizer = ctx.saved_tensors
        grad_q, grad_k, grad_v = torch.ops.measattn_fused.backward(
            q, k, v, log_weights, out, log_normalizer, grad_out.contiguous(), *ctx.config
        )
        return grad_q, grad_k, grad_v, None, None, None, None, None, None
