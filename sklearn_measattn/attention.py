"""Kernel attention: ``softmax(g(Q K^T / sqrt(d))) V`` with several backends.

A positive attention kernel ``kappa = exp(g)`` normalised over the keys is exactly
a softmax of the log-weights ``g(S)``. Per-point weights ``w_j`` of the input
measure enter as ``+ log w_j`` on the logits, so a zero weight removes a point
and a weight ``k`` counts it ``k`` times.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from . import _fused
from ._attention_chunked import _CHUNK_ELEMENTS, _ChunkedKernelAttention, _default_chunk
from ._attention_flex import _flex_attention
from ._attention_fused import _fused_query_block, _FusedKernelAttention
from ._sparse import uniform_where_empty
from .kernels import _fused_kind, _is_learned, get_kernel

__all__ = ["kernel_attention", "fused_status", "BACKENDS"]

#: Accepted values of ``backend``.
BACKENDS = ("auto", "sdpa", "flex", "fused", "chunked", "naive")

# Tiles of the fused CPU backend: queries x keys per tile (the backward's three
# float32 tiles of 128 x 512 take 768 KiB, inside a 1 MiB L2 cache). Measured on
# an AVX-512 Xeon at N = 2048 and 4096, one thread: 128 or 256 queries make the
# backward 5-10% faster than 32 or 64 (each key tile's dK, dV rows are revisited
# fewer times); 256 or 512 keys are within noise; 1024 keys is slower.
_FUSED_QUERY_BLOCK = 128
_FUSED_KEY_BLOCK = 512
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
        (default 128); ignored by the other backends. A value above the number
        of queries means one block of all of them.

    Returns
    -------
    torch.Tensor of shape (batch, heads, n_queries, d_value)
        The attention output.

    Raises
    ------
    ValueError
        On mismatched shapes, devices or dtypes, an empty feature axis
        (``d_head`` or ``d_value`` of 0) or no keys, negative or all-zero weights,
        a ``chunk_size`` that is not a positive integer (or, for ``"fused"``, whose
        tiles would not fit in memory),
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
    if _is_learned(kernel):
        raise ValueError(
            "kernel poly with degree='learn' needs a module that holds the learnt degrees: use it in "
            "KernelMultiheadAttention, MeasureTransformer or MeasureTransformerRegressor, or pass a "
            "number as the degree here."
        )
    _check_qkv(q, k, v)
    weights = _check_weights(weights, k)
    if chunk_size is not None:
        chunk_size = _check_chunk_size(chunk_size)
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
    restricted = getattr(kernel, "backends", None)
    if restricted is not None:
        if backend == "auto":
            return "chunked" if "chunked" in restricted else restricted[0]
        if backend not in restricted:
            raise ValueError(
                f"kernel {kernel.name!r} runs on backend {' or '.join(map(repr, restricted))} only, got "
                f"backend={backend!r}: its weights are zero outside a bounded support (or need a threshold per "
                "query), which the other backends do not implement. Use backend='auto' or 'chunked'."
            )
        return backend
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
        if kernel.normalizer is not None or kernel.support == "bounded":
            return _attention_probs(q, k, kernel, log_weights, scale) @ v
        return _naive_attention(q, k, v, kernel.log_weight, log_weights, scale)
    if backend == "chunked":
        chunk = _default_chunk(q, k) if chunk_size is None else _check_chunk_size(chunk_size)
        return _ChunkedKernelAttention.apply(q, k, v, log_weights, kernel, scale, chunk)
    if backend == "fused":
        kind, parameter = _fused_kind(kernel)
        query_block = _FUSED_QUERY_BLOCK if chunk_size is None else _check_chunk_size(chunk_size)
        query_block = _fused_query_block(query_block, q, v, _FUSED_KEY_BLOCK)
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
    if q.shape[-1] == 0:
        raise ValueError(
            "q and k have d_head = 0: the scores <q, k> / sqrt(d_head) are undefined; "
            "give queries and keys at least one feature."
        )
    if v.shape[-1] == 0:
        raise ValueError(
            "v has d_value = 0: there is nothing to average; give the values at least one feature."
        )
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
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    return int(chunk_size)


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
        scores = torch.matmul(q[:, :, start:stop], k_t) * scale
        lw = None if log_weights is None else log_weights[:, None, None, :]
        if kernel.normalizer is not None:
            yield start, stop, kernel.normalizer(scores, lw)
            continue
        logits = kernel.log_weight(scores)
        if lw is not None:
            logits = logits + lw
        if kernel.support == "bounded":
            logits = uniform_where_empty(logits, lw)
        negligible = logits < logits.amax(dim=-1, keepdim=True) - 300.0
        yield start, stop, torch.softmax(logits.masked_fill(negligible, -math.inf), dim=-1)


def _attention_probs(q, k, kernel, log_weights, scale):
    """Materialised attention weights of any kernel, differentiable by autograd (the reference)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    lw = None if log_weights is None else log_weights[:, None, None, :]
    if kernel.normalizer is not None:
        return kernel.normalizer(scores, lw)
    logits = kernel.log_weight(scores)
    if lw is not None:
        logits = logits + lw
    if kernel.support == "bounded":
        logits = uniform_where_empty(logits, lw)
    return torch.softmax(logits, dim=-1)


def _naive_attention(q, k, v, log_weight, log_weights, scale):
    return torch.softmax(_logits(q, k, log_weight, log_weights, scale), dim=-1) @ v


