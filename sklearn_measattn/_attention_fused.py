"""The fused CPU kernels (``_csrc/fused_attention.cpp``) as an autograd function."""

from __future__ import annotations

import torch

# Largest tile of queries x keys the fused kernels are given: each thread holds
# three float32 buffers of this many scores in backward (3 x 64 MiB here). Tiles
# are meant to stay in cache (the default is 128 x 512); larger ones only cost
# memory, and one of chunk_size x 512 floats per thread is allocated inside the
# C++ kernels, where a failed allocation cannot be turned into a message.
_MAX_TILE_ELEMENTS = 2**24
# The kernels call BLAS with 32-bit dimensions and leading dimensions.
_MAX_BLAS_DIM = 2**31 - 1


def _fused_query_block(query_block, q, v, key_block):
    """The query tile for the fused kernels, checked against the tensors and memory.

    A tile larger than the number of queries is cut to it (it would hold nothing
    more). A tile whose score buffers would exceed ``_MAX_TILE_ELEMENTS`` is
    refused, as are feature dimensions that 32-bit BLAS arguments cannot hold,
    before any kernel runs.
    """
    n_queries, d_head, d_value = q.shape[2], q.shape[3], v.shape[3]
    for name, size in (("d_head", d_head), ("d_value", d_value)):
        if size > _MAX_BLAS_DIM:
            raise ValueError(
                f"{name} = {size} is more than the fused CPU kernels' BLAS calls can index "
                f"({_MAX_BLAS_DIM}); use backend='chunked'."
            )
    block = max(1, min(query_block, n_queries))
    if block * key_block > _MAX_TILE_ELEMENTS:
        limit = _MAX_TILE_ELEMENTS // key_block
        raise ValueError(
            f"chunk_size={query_block} gives the fused backend tiles of {block} x {key_block} scores "
            f"({block * key_block * 4 / 2**20:.0f} MiB per buffer and thread, three buffers in backward); "
            f"tiles are meant to stay in cache: use chunk_size <= {limit} (default 128), or leave it unset."
        )
    return block


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
