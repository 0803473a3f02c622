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

from . import _fused
from .kernels import _fused_kind, get_kernel

__all__ = ["kernel_attention", "fused_status", "BACKENDS"]

#: Accepted values of ``backend``.
BACKENDS = ("auto", "sdpa", "flex", "fused", "chunked", "naive")

# Elements in one (batch, heads, chunk, n_keys) block of the chunked backend:
# 2**20 float32 values are 4 MiB per block buffer (backward keeps three), which
# stays in the last-level cache; measured on 2 cores at N = 4096, 16 to 64
# queries per block (1M to 4M scores over 8 heads) beat 128 or 256 by 10-30%.
# At least _MIN_CHUNK queries per block, so reading K and V once per block stays
# small next to the block's own work.
_CHUNK_ELEMENTS = 2**20
_MIN_CHUNK = 16
# Tiles of the fused CPU backend: queries x keys per tile (three float32 tiles of
# 64 x 512 stay in a 1 MiB L2 cache). Measured at N = 4096 on 2 cores: 32-128
# queries by 256-512 keys are within noise of each other; 1024 keys is slower.
_FUSED_QUERY_BLOCK = 64
_FUSED_KEY_BLOCK = 512
# FlexAttention pads point counts to a multiple of this (its tile size).
_FLEX_BLOCK = 128
# Compiled variants of flex_attention allowed (kernels x dtypes x shape buckets).
_FLEX_RECOMPILE_LIMIT = 64
# Largest score bound max|q| max|k| / sqrt(d) that "auto" sends to a backend whose
# backward recomputes the weights as exp(s - lse) from the forward's saved
# log-normaliser (SDPA, FlexAttention). Their backward recomputes s with other
# rounding than the forward: a float32 score of magnitude |s| moves by about
# d * 2**-24 * |s|, and exp of that error multiplies the weights. At 2**13 the
# error is below 0.01 for d_head <= 128 (weights off by under 1%); raw heavy-tailed
# data reach |s| ~ 1e12, where exp(s - lse) overflows and the gradients turn NaN
# while the forward is fine. Above the bound, "auto" runs "chunked", which
# renormalises its recomputed weights and so stays a probability distribution.
_RECOMPUTE_SAFE_SCORE = 2.0**13


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
    backend : {"auto", "sdpa", "flex", "fused", "chunked", "naive"}, default="auto"
        ``"sdpa"``: :func:`torch.nn.functional.scaled_dot_product_attention`
        (softmax only; fused flash/memory-efficient kernels). ``"flex"``:
        compiled FlexAttention with ``score_mod = g`` (fused forward and
        backward on CUDA; forward only on CPU). ``"fused"``: flash-style C++
        kernels for the built-in kernels on float32 CPU tensors, compiled with
        the machine's C++ compiler on first use (seconds, then cached; see
        :ref:`gpu`); forward and backward in one pass over cache-sized tiles,
        O(N * d) memory. ``"chunked"``: query blocks in an autograd function
        that recomputes scores in backward, so memory is O(N * chunk) rather
        than O(N^2), on any device, dtype and kernel (pure PyTorch).
        ``"naive"``: the materialised reference. ``"auto"`` picks sdpa for
        softmax, flex on CUDA, fused on CPU when it applies and builds, and
        chunked otherwise.
    chunk_size : int, optional
        Queries per block for ``"chunked"`` (by default chosen so one block of
        scores holds about 1M elements, at least 16 queries) and for ``"fused"``
        (default 64).

    Returns
    -------
    torch.Tensor of shape (batch, heads, n_queries, d_value)
        The attention output.

    Raises
    ------
    ValueError
        On mismatched shapes, devices or dtypes, negative or all-zero weights,
        an unknown backend, or a backend that cannot run the request (e.g.
        ``"sdpa"`` with a non-softmax kernel, ``"fused"`` with float64).
    RuntimeError
        If ``backend="fused"`` is requested where its kernels cannot be built
        (no C++ compiler, or ``MEASATTN_FUSED=0``); ``"auto"`` falls back to
        ``"chunked"`` instead.

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
    requested = backend
    backend = resolve_backend(backend, kernel, q)
    if requested == "auto":
        backend = _guard_large_scores(backend, q, k)
    log_weights = None if weights is None else torch.log(weights)
    return _dispatch(q, k, v, kernel, log_weights, backend, chunk_size)


def _guard_large_scores(backend, q, k):
    """Move ``"sdpa"``/``"flex"`` to ``"chunked"`` when the scores can be huge.

    Both recompute the attention weights in backward from the log-normaliser
    saved by the forward, ``exp(s - lse)``; when ``|s|`` is so large that float32
    rounding of the recomputed score exceeds about one, the weights no longer
    sum to one and, past ``|s| ~ 1e9``, overflow to inf (NaN gradients from a
    finite forward). The check is Cauchy-Schwarz on the largest query and key
    norms, ``O(N d)`` work, and only runs while gradients are needed.
    """
    if backend not in ("sdpa", "flex") or not torch.is_grad_enabled():
        return backend
    if not (q.requires_grad or k.requires_grad):
        return backend
    with torch.no_grad():
        bound = q.detach().norm(dim=-1).amax() * k.detach().norm(dim=-1).amax() / math.sqrt(q.shape[-1])
        if not bool(bound <= _RECOMPUTE_SAFE_SCORE):
            return "chunked"
    return backend


def fused_status():
    """Say whether the fused CPU backend can run here, building it if needed.

    The first call in a process compiles the C++ kernels (or loads them from
    the cache); ``backend="auto"`` does the same on its first CPU call.

    Returns
    -------
    str
        ``"available (compiled in ... s)"``, ``"available (loaded from the
        cache)"`` or ``"unavailable: <reason>"``; when unavailable,
        ``backend="auto"`` runs ``"chunked"`` (same numbers, slower).

    Examples
    --------
    >>> from sklearn_measattn.attention import fused_status
    >>> fused_status().split(" ")[0] in ("available", "unavailable:")
    True
    """
    reason = _fused.fused_unavailable_reason()
    if reason is not None:
        return f"unavailable: {reason}"
    seconds = _fused.build_seconds()
    return f"available (compiled in {seconds:.1f} s)" if seconds else "available (loaded from the cache)"


def resolve_backend(backend, kernel, tensor):
    """Validate ``backend`` for a kernel and device; resolve ``"auto"``."""
    if backend not in BACKENDS:
        raise ValueError(f"Unknown attention backend {backend!r}; valid choices are {', '.join(map(repr, BACKENDS))}.")
    if backend == "auto":
        if kernel.is_softmax:
            return "sdpa"
        if tensor.is_cuda:
            return "flex"
        if _fusable(kernel, tensor) and _fused.fused_unavailable_reason() is None:
            return "fused"
        return "chunked"
    if backend == "fused":
        if not _fusable(kernel, tensor):
            raise ValueError(
                "backend='fused' runs the built-in kernels on float32 CPU tensors only, got kernel "
                f"{kernel.name!r}, dtype {tensor.dtype}, device {tensor.device}; use backend='auto' "
                "(chunked or flex for the rest)."
            )
        reason = _fused.fused_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"backend='fused' is unavailable: {reason}. Use backend='chunked' (or 'auto').")
    if backend == "sdpa" and not kernel.is_softmax:
        raise ValueError(
            f"backend='sdpa' computes softmax attention only, but kernel is {kernel.name!r}; "
            "use backend='auto', 'flex' (CUDA) or 'chunked'."
        )
    return backend


def _fusable(kernel, tensor):
    return tensor.device.type == "cpu" and tensor.dtype == torch.float32 and _fused_kind(kernel) is not None


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
        return _ChunkedKernelAttention.apply(q, k, v, log_weights, kernel, scale, chunk)
    if backend == "fused":
        kind, parameter = _fused_kind(kernel)
        query_block = _FUSED_QUERY_BLOCK if chunk_size is None else _check_chunk_size(chunk_size)
        return _FusedKernelAttention.apply(q, k, v, log_weights, kind, parameter, scale, query_block, _FUSED_KEY_BLOCK)
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
    # One reduction per tensor on the public entry point only; the transformer's
    # hot path calls _dispatch and never pays for it.
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or inf; attention inputs must be finite.")


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
    return max(1, min(q.shape[2], max(_MIN_CHUNK, _CHUNK_ELEMENTS // max(1, batch_heads * k.shape[2]))))


def _logits(q_block, k, log_weight, log_weights, scale):
    scores = torch.matmul(q_block, k.transpose(-1, -2)) * scale
    logits = log_weight(scores)
    if log_weights is not None:
        logits = logits + log_weights[:, None, None, :]
    return logits


def _attention_weight_blocks(q, k, kernel, log_weights=None, *, block_elements=_CHUNK_ELEMENTS):
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
    for start in range(0, n_queries, rows):
        stop = min(start + rows, n_queries)
        logits = kernel.log_weight(torch.matmul(q[:, :, start:stop], k_t) * scale)
        if log_weights is not None:
            logits = logits + log_weights[:, None, None, :]
        negligible = logits < logits.amax(dim=-1, keepdim=True) - 300.0
        yield start, stop, torch.softmax(logits.masked_fill(negligible, -math.inf), dim=-1)


def _naive_attention(q, k, v, log_weight, log_weights, scale):
    return torch.softmax(_logits(q, k, log_weight, log_weights, scale), dim=-1) @ v


def _softmax_(x):
    """Softmax over the last dim, in place on CPU (the fused vectorised kernel
    reads each row before writing it), out of place elsewhere."""
    if x.device.type == "cpu":
        return torch.ops.aten._softmax.out(x, -1, False, out=x)
    return torch.softmax(x, dim=-1)


def _rows(buffer, batch_heads, rows, n_keys):
    """A contiguous ``(batch_heads, rows, n_keys)`` view at the start of a flat buffer."""
    return buffer[: batch_heads * rows * n_keys].view(batch_heads, rows, n_keys)


class _ChunkedKernelAttention(torch.autograd.Function):
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
            if factorization is not None:
                exponent = torch.clamp(scores, max=0.0, out=_rows(exp_buffer, bh, stop - start, n_keys))
            else:
                exponent = kernel.log_weight(scores)
            if lw is not None:
                exponent.add_(lw)
            probs = _softmax_(exponent)
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
            if lw is not None:
                exponent.add_(lw)
            probs = _softmax_(exponent)
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


def _head_log_weights(log_weights, heads):
    """``(batch, n_keys)`` log weights as ``(batch * heads, 1, n_keys)``."""
    if log_weights is None:
        return None
    batch, n_keys = log_weights.shape
    return log_weights[:, None, None, :].expand(batch, heads, 1, n_keys).reshape(batch * heads, 1, n_keys)


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

    # Each kernel's score_mod (and each dtype) is a separate compiled entry of the
    # one flex_attention code object: dynamo's default limit of 8 is hit by a
    # study of five kernels in two dtypes, so allow 64 before failing.
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True, recompile_limit=_FLEX_RECOMPILE_LIMIT):
        out = _compiled_flex(q, k, v, score_mod=score_mod, scale=scale)
    return out[:, :, :n_queries]


def _round_up(n, block=_FLEX_BLOCK):
    return -(-n // block) * block
