"""Chunked kernel attention: query blocks, scores recomputed in backward.

The pure-PyTorch backend of :func:`sklearn_measattn.attention.kernel_attention`
for any device, dtype and kernel: memory O(N * chunk) instead of O(N^2).
"""

from __future__ import annotations

import torch

from ..kernels import sparsemax_score_grad, sparsemax_weights, uniform_where_empty

# Elements in one (batch, heads, chunk, n_keys) block of the chunked backend:
# 2**20 float32 values are 4 MiB per block buffer (backward keeps three), which
# stays in the last-level cache; measured on 2 cores at N = 4096, 16 to 64
# queries per block (1M to 4M scores over 8 heads) beat 128 or 256 by 10-30%.
# At least _MIN_CHUNK queries per block, so reading K and V once per block stays
# small next to the block's own work.
CHUNK_ELEMENTS = 2**20
_MIN_CHUNK = 16


def default_chunk(q, k):
    """Queries per block of the chunked backend: about ``CHUNK_ELEMENTS`` scores per block, at least ``_MIN_CHUNK`` queries."""
    batch_heads = q.shape[0] * q.shape[1]
    return max(1, min(q.shape[2], max(_MIN_CHUNK, CHUNK_ELEMENTS // max(1, batch_heads * k.shape[2]))))


def _softmax_(x):
    """Softmax over the last dim, in place on CPU (the fused vectorised kernel
    reads each row before writing it), out of place elsewhere."""
    if x.device.type == "cpu":
        return torch.ops.aten._softmax.out(x, -1, False, out=x)
    return torch.softmax(x, dim=-1)


def _probabilities_(exponent, lw, kernel):
    """``softmax(exponent + log w)`` over the keys (in place where it can), with the empty-support rule."""
    if lw is not None:
        exponent.add_(lw)
    if kernel.support == "bounded":
        exponent = uniform_where_empty(exponent, lw)
    return _softmax_(exponent)


def _rows(buffer, batch_heads, rows, n_keys):
    """A contiguous ``(batch_heads, rows, n_keys)`` view at the start of a flat buffer."""
    return buffer[: batch_heads * rows * n_keys].view(batch_heads, rows, n_keys)


class ChunkedKernelAttention(torch.autograd.Function):
    """Blockwise attention over queries; backward recomputes each block's scores.

    All (batch, head) pairs go through batched matmuls together, one block of
    ``chunk`` queries at a time, with the block's scores in reused buffers.

    Kernels with a :class:`~sklearn_measattn.kernels.KappaFactorization`
    ``kappa(s) = exp(min(s, 0)) phi(s)`` compute ``E = softmax(min(s, 0) + log w)``
    with torch's fused softmax, the unnormalised weights ``E * phi`` and their
    row sums ``Z``; the attention weights are ``P = E * phi / Z``, so one
    exponential per score and no ``log`` of the kernel. Other kernels (softmax,
    poly with a non-integer degree, user callables) use ``P = softmax(g(s) + log
    w)`` and ``g'`` from the kernel's ``derivative`` or, for user callables,
    autograd on each block.

    Bounded-support kernels: a query whose logits are all ``-inf`` (every key
    outside the support) attends uniformly to the measure; ``sparsemax``
    computes its per-query threshold in each block (a sort of the block's
    scores) and its backward has the closed form of
    ``sparsemax_score_grad`` (in :mod:`sklearn_measattn.kernels`).

    Saved for backward: q, k, v, the output and, for factorised kernels, one ``Z``
    per query, so memory is O(N * d + chunk * N) instead of O(N^2).
    """

    @staticmethod
    def forward(ctx, q, k, v, log_weights, kernel, scale, chunk):
        batch, heads, n_queries, d_head = q.shape
        n_keys, d_value = k.shape[2], v.shape[-1]
        bh = batch * heads
        q_scaled = q.reshape(bh, n_queries, d_head) * scale
        k_t = k.reshape(bh, n_keys, d_head).transpose(1, 2)
        v3 = v.reshape(bh, n_keys, d_value)
        lw = _head_log_weights(log_weights, heads)
        factorization = kernel.factorization
        if factorization is not None:
            # A column of ones gives the row sums Z of E * phi in the same matmul.
            v3 = torch.cat([v3, v3.new_ones(bh, n_keys, 1)], dim=-1)
        out = q.new_empty(bh, n_queries, d_value)
        row_sums = q.new_empty(bh, n_queries) if factorization is not None else None
        rows = min(chunk, n_queries)
        score_buffer = q.new_empty(bh * rows * n_keys)
        exp_buffer = q.new_empty(bh * rows * n_keys) if factorization is not None else None
        for start in range(0, n_queries, chunk):
            stop = min(start + chunk, n_queries)
            scores = torch.bmm(q_scaled[:, start:stop], k_t, out=_rows(score_buffer, bh, stop - start, n_keys))
            if kernel.normalizer is not None:
                out[:, start:stop] = torch.bmm(kernel.normalizer(scores, lw), v3)
                continue
            if factorization is not None:
                exponent = torch.clamp(scores, max=0.0, out=_rows(exp_buffer, bh, stop - start, n_keys))
            else:
                exponent = kernel.log_weight(scores)
            probs = _probabilities_(exponent, lw, kernel)
            if factorization is not None:
                weights = factorization.phi_(scores).mul_(probs)
                block = torch.bmm(weights, v3)
                row_sums[:, start:stop] = block[..., d_value]
                out[:, start:stop] = block[..., :d_value] / block[..., d_value:]
            else:
                out[:, start:stop] = torch.bmm(probs, v3)
        out = out.view(batch, heads, n_queries, d_value)
        ctx.save_for_backward(q, k, v, log_weights, out, row_sums)
        ctx.kernel, ctx.scale, ctx.chunk = kernel, scale, chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v, log_weights, out, row_sums = ctx.saved_tensors
        kernel, scale, chunk = ctx.kernel, ctx.scale, ctx.chunk
        factorization = kernel.factorization
        batch, heads, n_queries, d_head = q.shape
        n_keys, d_value = k.shape[2], v.shape[-1]
        bh = batch * heads
        q_scaled = q.reshape(bh, n_queries, d_head) * scale
        k3 = k.reshape(bh, n_keys, d_head)
        k_t = k3.transpose(1, 2)
        v3 = v.reshape(bh, n_keys, d_value)
        lw = _head_log_weights(log_weights, heads)
        grad_out = grad_out.reshape(bh, n_queries, d_value)
        # delta_i = sum_j p_ij dp_ij = <dO_i, O_i>: the softmax backward's row term.
        delta = (grad_out * out.reshape(bh, n_queries, d_value)).sum(dim=-1)
        if factorization is not None:
            # P = E phi / Z: fold 1/Z into the (N, d) operands, not the blocks.
            inverse_sums = torch.reciprocal(row_sums)
            grad_out = grad_out * inverse_sums[..., None]
            delta = delta * inverse_sums
        # [dO, -delta] @ [V, 1]^T = dO V^T - delta: the row term comes with the matmul.
        grad_out_ext = torch.cat([grad_out, -delta[..., None]], dim=-1)
        v_t = torch.cat([v3, v3.new_ones(bh, n_keys, 1)], dim=-1).transpose(1, 2)
        grad_q = torch.empty_like(q_scaled)
        grad_k = torch.zeros_like(k3)
        grad_v = torch.zeros_like(v3)
        rows = min(chunk, n_queries)
        score_buffer = q.new_empty(bh * rows * n_keys)
        exp_buffer = q.new_empty(bh * rows * n_keys) if factorization is not None else None
        grad_buffer = q.new_empty(bh * rows * n_keys)
        for start in range(0, n_queries, chunk):
            stop = min(start + chunk, n_queries)
            q_block, grad_out_block = q_scaled[:, start:stop], grad_out[:, start:stop]
            scores = torch.bmm(q_block, k_t, out=_rows(score_buffer, bh, stop - start, n_keys))
            slope = scores_leaf = logits = None
            if kernel.normalizer is not None:
                closed_form = kernel.normalizer is sparsemax_weights
                with torch.enable_grad():
                    scores_leaf = scores.detach().requires_grad_(not closed_form)
                    weights = kernel.normalizer(scores_leaf, lw)
                grad_v.baddbmm_(weights.detach().transpose(1, 2), grad_out_block)
                grad_weights = torch.bmm(grad_out_ext[:, start:stop], v_t, out=_rows(grad_buffer, bh, stop - start, n_keys))
                if closed_form:
                    grad_scores = sparsemax_score_grad(weights, grad_weights, lw)
                else:  # another row normaliser: autograd on the block
                    (grad_scores,) = torch.autograd.grad(weights, scores_leaf, grad_weights)
                grad_q[:, start:stop] = torch.bmm(grad_scores, k3)
                grad_k.baddbmm_(grad_scores.transpose(1, 2), q_block)
                continue
            if factorization is not None:
                exponent = torch.clamp(scores, max=0.0, out=_rows(exp_buffer, bh, stop - start, n_keys))
            elif kernel.derivative is not None:
                exponent = kernel.log_weight(scores)
                slope = None if kernel.is_softmax else kernel.derivative(scores)
            else:
                with torch.enable_grad():
                    scores_leaf = scores.detach().requires_grad_(True)
                    logits = kernel.log_weight(scores_leaf)
                exponent = logits.detach().clone()
            probs = _probabilities_(exponent, lw, kernel)
            if factorization is not None:
                phi, slope = factorization.phi_psi_(scores)
                weights = phi.mul_(probs)  # E phi = Z P
            else:
                weights = probs
            grad_v.baddbmm_(weights.transpose(1, 2), grad_out_block)
            grad_scores = torch.bmm(grad_out_ext[:, start:stop], v_t, out=_rows(grad_buffer, bh, stop - start, n_keys))
            grad_scores.mul_(probs)
            if scores_leaf is not None:
                (grad_scores,) = torch.autograd.grad(logits, scores_leaf, grad_scores)
            elif slope is not None:
                grad_scores.mul_(slope)
            grad_q[:, start:stop] = torch.bmm(grad_scores, k3)
            grad_k.baddbmm_(grad_scores.transpose(1, 2), q_block)
        grad_q.mul_(scale)
        return (grad_q.view(q.shape), grad_k.view(k.shape), grad_v.view(v.shape), None, None, None, None)


def _head_log_weights(log_weights, heads):
    """``(batch, n_keys)`` log weights as ``(batch * heads, 1, n_keys)``."""
    if log_weights is None:
        return None
    batch, n_keys = log_weights.shape
    return log_weights[:, None, None, :].expand(batch, heads, 1, n_keys).reshape(batch * heads, 1, n_keys)
