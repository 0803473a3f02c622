"""The fused CPU kernels (``_extension/csrc/fused_attention.cpp``) as an autograd function."""

from __future__ import annotations

import torch

from .._extension import KIND_LOG, KIND_POLY_INT, KIND_POLY_REAL, KIND_SIGMOID, KIND_SOFTMAX, KIND_SOFTPLUS

# Tiles of the fused CPU backend: queries x keys per tile (the backward's three
# float32 tiles of 128 x 512 take 768 KiB, inside a 1 MiB L2 cache). Measured on
# an AVX-512 Xeon at N = 2048 and 4096, one thread: 128 or 256 queries make the
# backward 5-10% faster than 32 or 64 (each key tile's dK, dV rows are revisited
# fewer times); 256 or 512 keys are within noise; 1024 keys is slower.
FUSED_QUERY_BLOCK = 128
FUSED_KEY_BLOCK = 512

# Largest tile of queries x keys the fused kernels are given: each thread holds
# three float32 buffers of this many scores in backward (3 x 64 MiB here). Tiles
# are meant to stay in cache (the default is 128 x 512); larger ones only cost
# memory, and one of chunk_size x 512 floats per thread is allocated inside the
# C++ kernels, where a failed allocation cannot be turned into a message.
_MAX_TILE_ELEMENTS = 2**24
# The kernels call BLAS with 32-bit dimensions and leading dimensions.
_MAX_BLAS_DIM = 2**31 - 1


def fused_kind(kernel):
    """``(kind, parameter)`` of the C++ kernels' closed form for ``kernel``, or ``None`` when they have none."""
    form = kernel.builtin_form
    if form is None:
        return None
    name, parameter = form
    if name == "poly":
        return (KIND_POLY_INT if parameter in (1.0, 2.0, 3.0, 4.0) else KIND_POLY_REAL), parameter
    kinds = {"softmax": KIND_SOFTMAX, "log": KIND_LOG, "sigmoid": KIND_SIGMOID,
             "softplus": KIND_SOFTPLUS}
    return kinds[name], parameter


def fused_supports(kernel, tensor):
    """Why the fused kernels cannot run ``kernel`` on tensors like ``tensor``, or ``None``."""
    if tensor.device.type != "cpu" or tensor.dtype != torch.float32:
        return f"it runs float32 CPU tensors only, got dtype {tensor.dtype} on {tensor.device}"
    if fused_kind(kernel) is None:
        return "it has closed-form code for the built-in kernels with a fixed parameter only"
    return None


def run_fused(q, k, v, kernel, log_weights, scale, chunk_size=None):
    """The fused kernels on checked float32 CPU tensors; ``chunk_size`` queries per tile (default 128)."""
    kind, parameter = fused_kind(kernel)
    query_block = fused_query_block(FUSED_QUERY_BLOCK if chunk_size is None else chunk_size, q, v, FUSED_KEY_BLOCK)
    return FusedKernelAttention.apply(q, k, v, log_weights, kind, parameter, scale, query_block, FUSED_KEY_BLOCK)


def fused_query_block(query_block, q, v, key_block):
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


class FusedKernelAttention(torch.autograd.Function):
    """The fused CPU kernels (``_extension/csrc/fused_attention.cpp``) as an autograd function.

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
