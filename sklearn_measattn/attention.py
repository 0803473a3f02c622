"""Kernel attention: ``softmax(g(Q K^T / sqrt(d))) V`` with several backends.

A positive attention kernel ``kappa = exp(g)`` normalised over the keys is exactly
a softmax of the log-weights ``g(S)``. Per-point weights ``w_j`` of the input
measure enter as ``+ log w_j`` on the logits, so a zero weight removes a point
and a weight ``k`` counts it ``k`` times.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .kernels import AttentionKernel, get_kernel

__all__ = ["kernel_attention", "BACKENDS"]

#: Accepted values of ``backend``.
BACKENDS = ("auto", "sdpa", "flex", "chunked", "naive")

# Elements in one (batch, heads, chunk, n_keys) block of the chunked backend:
# 2**22 float32 values are 16 MiB, small next to the L2-missing cost of tiny
# blocks and far below an N x N matrix for large N.
_CHUNK_ELEMENTS = 2**22
# FlexAttention pads point counts to a multiple of this (its tile size).
_FLEX_BLOCK = 128


def kernel_attention(q, k, v, kernel="softmax", *, weights=None, backend="auto", chunk_size=None):
    """Normalised kernel attention of queries over a (weighted) measure of keys.

    Computes ``out_i = sum_j w_j kappa(s_ij) v_j / sum_j w_j kappa(s_ij)`` with
    ``s_ij = <q_i, k_j> / sqrt(d_head)`` and ``kappa = exp(g)``, that is
    ``softmax(g(S) + log w) @ V``.

    Parameters
    ----------
    q : torch.Tensor of shape (batch, heads, n_queries, d_head)
        Queries, in the layout of :func:`torch.nn.functional.scaled_dot_product_attention`.
    k : torch.Tensor of shape (batch, heads, n_keys, d_head)
        Keys.
    v : torch.Tensor of shape (batch, heads, n_keys, d_value)
        Values.
    kernel : str, callable or AttentionKernel, default="softmax"
        The attention kernel, see :func:`sklearn_measattn.kernels.get_kernel`.
    weights : torch.Tensor of shape (batch, n_keys), optional
        Nonnegative per-point weights of the key measure (zero = point absent).
        Each measure needs a positive total. No gradient flows to the weights.
    backend : {"auto", "sdpa", "flex", "chunked", "naive"}, default="auto"
        ``"sdpa"``: :func:`torch.nn.functional.scaled_dot_product_attention`
        (softmax only; fused flash/memory-efficient kernels). ``"flex"``:
        compiled FlexAttention with ``score_mod = g`` (fused forward and
        backward on CUDA; forward only on CPU). ``"chunked"``: query blocks in
        an autograd function that recomputes scores in backward, so memory is
        O(N * chunk) rather than O(N^2), on any device. ``"naive"``: the
        materialised reference. ``"auto"`` picks sdpa for softmax, flex on CUDA
        and chunked otherwise.
    chunk_size : int, optional
        Queries per block for ``"chunked"``; by default chosen so one block of
        scores holds about 4M elements.

    Returns
    -------
    torch.Tensor of shape (batch, heads, n_queries, d_value)
        The attention output.

    Raises
    ------
    ValueError
        On mismatched shapes, devices or dtypes, negative or all-zero weights,
        an unknown backend, or a backend that cannot run the request (e.g.
        ``"sdpa"`` with a non-softmax kernel).

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.attention import kernel_attention
    >>> q = k = v = torch.randn(2, 4, 16, 8, generator=torch.Generator().manual_seed(0))
    >>> out = kernel_attention(q, k, v, "log", backend="chunked")
    >>> out.shape
    torch.Size([2, 4, 16, 8])
    >>> ref = kernel_attention(q, k, v, "log", backend="naive")
    >>> bool(torch.allclose(out, ref, atol=1e-6))
    True
    """
    kernel = get_kernel(kernel)
    _check_qkv(q, k, v)
    weights = _check_weights(weights, k)
    backend = resolve_backend(backend, kernel, q)
    log_weights = None if weights is None else torch.log(weights)
    return _dispatch(q, k, v, kernel, log_weights, backend, chunk_size)


def resolve_backend(backend, kernel, tensor):
    """Validate ``backend`` for a kernel and device; resolve ``"auto"``."""
    if backend not in BACKENDS:
        raise ValueError(f"Unknown attention backend {backend!r}; valid choices are {', '.join(map(repr, BACKENDS))}.")
    if backend == "auto":
        if kernel.is_softmax:
            return "sdpa"
        return "flex" if tensor.is_cuda else "chunked"
    if backend == "sdpa" and not kernel.is_softmax:
        raise ValueError(
            f"backend='sdpa' computes softmax attention only, but kernel is {kernel.name!r}; "
            "use backend='auto', 'flex' (CUDA) or 'chunked'."
        )
    return backend


def _dispatch(q, k, v, kernel, log_weights, backend, chunk_size=None):
    """Run a resolved backend on checked inputs (no validation: internal hot path)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    if backend == "sdpa":
        mask = None if log_weights is None else log_weights[:, None, None, :].to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if backend == "naive":
        return _naive_attention(q, k, v, kernel.log_weight, log_weights, scale)
    if backend == "chunked":
        chunk = _default_chunk(q, k) if chunk_size is None else _check_chunk_size(chunk_size)
        return _ChunkedKernelAttention.apply(q, k, v, log_weights, kernel.log_weight, scale, chunk)
    return _flex_attention(q, k, v, kernel.log_weight, log_weights, scale)


def _check_qkv(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
        if t.ndim != 4:
            raise ValueError(
                f"{name} must be 4-D (batch, heads, n_points, d_head) like SDPA's inputs, "
                f"got shape {tuple(t.shape)}."
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}.")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}.")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}.")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            "q, k, v must agree on (batch, heads) and k, v on n_keys: got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same d_head, got {q.shape[-1]} and {k.shape[-1]}.")
    if k.shape[2] == 0:
        raise ValueError("k has 0 points; attention needs at least one key per measure.")


def _check_weights(weights, k):
    if weights is None:
        return None
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"weights must be a torch.Tensor of shape (batch, n_keys), got {type(weights).__name__}.")
    expected = (k.shape[0], k.shape[2])
    if tuple(weights.shape) != expected:
        raise ValueError(f"weights must have shape (batch, n_keys) = {expected}, got {tuple(weights.shape)}.")
    if weights.device != k.device:
        raise ValueError(f"weights are on {weights.device} but k is on {k.device}; move them to one device.")
    weights = weights.detach().to(k.dtype)
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ValueError("weights must be finite and >= 0 (0 means the point is absent).")
    if bool((weights.sum(dim=1) <= 0).any()):
        raise ValueError("weights sum to 0 for some measure; each measure needs a point with positive weight.")
    return weights


def _check_chunk_size(chunk_size):
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    return chunk_size


def _default_chunk(q, k):
    batch_heads = q.shape[0] * q.shape[1]
    return max(1, min(q.shape[2], _CHUNK_ELEMENTS // max(1, batch_heads * k.shape[2])))


def _logits(q_block, k, log_weight, log_weights, scale):
    scores = torch.matmul(q_block, k.transpose(-1, -2)) * scale
    logits = log_weight(scores)
    if log_weights is not None:
        logits = logits + log_weights[:, None, None, :]
    return logits


def _naive_attention(q, k, v, log_weight, log_weights, scale):
    return torch.softmax(_logits(q, k, log_weight, log_weights, scale), dim=-1) @ v


class _ChunkedKernelAttention(torch.autograd.Function):
    """Blockwise attention over queries; backward recomputes each block's scores.

    Saved for backward: q, k, v, the output and one log-sum-exp per query, so
    memory is O(N * d + chunk * N) instead of O(N^2).
    """

    @staticmethod
    def forward(ctx, q, k, v, log_weights, log_weight, scale, chunk):
        n_queries = q.shape[2]
        out = q.new_empty(*q.shape[:3], v.shape[-1])
        lse = q.new_empty(q.shape[:3])
        for start in range(0, n_queries, chunk):
            block = slice(start, start + chunk)
            logits = _logits(q[:, :, block], k, log_weight, log_weights, scale)
            block_lse = torch.logsumexp(logits, dim=-1, keepdim=True)
            out[:, :, block] = torch.exp(logits - block_lse) @ v
            lse[:, :, block] = block_lse.squeeze(-1)
        ctx.save_for_backward(q, k, v, log_weights, out, lse)
        ctx.log_weight, ctx.scale, ctx.chunk = log_weight, scale, chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v, log_weights, out, lse = ctx.saved_tensors
        log_weight, scale, chunk = ctx.log_weight, ctx.scale, ctx.chunk
        grad_out = grad_out.contiguous()
        grad_q = torch.empty_like(q)
        grad_k = torch.zeros_like(k)
        grad_v = torch.zeros_like(v)
        # delta_i = sum_j p_ij dp_ij = <dO_i, O_i>: the softmax backward's row term.
        delta = (grad_out * out).sum(dim=-1)
        k_t = k.transpose(-1, -2)
        for start in range(0, q.shape[2], chunk):
            block = slice(start, start + chunk)
            q_block, grad_out_block = q[:, :, block], grad_out[:, :, block]
            with torch.enable_grad():
                scores = (torch.matmul(q_block, k_t) * scale).requires_grad_(True)
                logits = log_weight(scores)
            full_logits = logits.detach()
            if log_weights is not None:
                full_logits = full_logits + log_weights[:, None, None, :]
            probs = torch.exp(full_logits - lse[:, :, block, None])
            grad_v += probs.transpose(-1, -2) @ grad_out_block
            grad_logits = probs * (grad_out_block @ v.transpose(-1, -2) - delta[:, :, block, None])
            (grad_scores,) = torch.autograd.grad(logits, scores, grad_logits)
            grad_scores = grad_scores * scale
            grad_q[:, :, block] = grad_scores @ k
            grad_k += grad_scores.transpose(-1, -2) @ q_block
        return grad_q, grad_k, grad_v, None, None, None, None


_compiled_flex = None


def _flex_attention(q, k, v, log_weight, log_weights, scale):
    """FlexAttention with ``score_mod = g (+ log w)``, compiled once per bucket.

    Point counts are padded to a multiple of the flex tile (padded keys get log
    weight -inf, padded queries are dropped), and the compiled function may
    specialise on a few buckets then turns dynamic; hitting the recompile limit
    raises instead of silently running the eager flex path, which materialises
    the full score matrix.
    """
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention

    if not q.is_cuda and torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise ValueError(
            "FlexAttention has no backward on CPU; use backend='chunked' for training on CPU "
            "(backend='auto' does this)."
        )
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)
    n_queries, n_keys = q.shape[2], k.shape[2]
    padded_q, padded_k = _round_up(n_queries), _round_up(n_keys)
    if log_weights is None:
        log_weights = q.new_zeros(k.shape[0], n_keys)
    if padded_k != n_keys:
        k = F.pad(k, (0, 0, 0, padded_k - n_keys))
        v = F.pad(v, (0, 0, 0, padded_k - n_keys))
        log_weights = F.pad(log_weights, (0, padded_k - n_keys), value=-math.inf)
    if padded_q != n_queries:
        q = F.pad(q, (0, 0, 0, padded_q - n_queries))
    log_weights = log_weights.to(torch.float32)

    def score_mod(score, batch, head, q_idx, kv_idx):
        return log_weight(score) + log_weights[batch, kv_idx]

    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        out = _compiled_flex(q, k, v, score_mod=score_mod, scale=scale)
    return out[:, :, :n_queries]


def _round_up(n, block=_FLEX_BLOCK):
    return -(-n // block) * block
