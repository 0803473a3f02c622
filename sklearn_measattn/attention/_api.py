"""Kernel attention: ``softmax(g(Q K^T / sqrt(d))) V`` with several backends.

A positive attention kernel ``kappa = exp(g)`` normalised over the keys is exactly
a softmax of the log-weights ``g(S)``. Per-point weights ``w_j`` of the input
measure enter as ``+ log w_j`` on the logits, so a zero weight removes a point
and a weight ``k`` counts it ``k`` times.
"""

from __future__ import annotations

import torch

from .._extension import build_seconds, fused_unavailable_reason
from .._param_validation import validate_params
from .._validation import POSITIVE_INT, Choices
from ..kernels import get_kernel
from ._backends import BACKENDS, resolve_backend, run_attention
from ._weights import log_point_weights

__all__ = ["kernel_attention", "fused_status"]


# q, k, v and the weights are checked in the body; the kernel by get_kernel, whose validation
# must not be skipped as nested.
@validate_params({"backend": [Choices(BACKENDS)], "chunk_size": [None, POSITIVE_INT]}, prefer_skip_nested_validation=False)
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
        ``"naive"``: the materialised reference. ``"auto"`` takes the first of
        :data:`~sklearn_measattn.attention.AUTO_PREFERENCE` that supports the
        request: sdpa for softmax, flex on CUDA (not for ``sparsemax``), fused
        on CPU when it applies and builds, and chunked otherwise.
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
    if kernel.learns_degree:
        raise ValueError(
            "kernel poly with degree='learn' needs a module that holds the learnt degrees: use it in "
            "KernelMultiheadAttention, MeasureTransformer or MeasureTransformerRegressor, or pass a "
            "number as the degree here."
        )
    _check_qkv(q, k, v)
    weights = _check_weights(weights, k)
    if chunk_size is not None:
        chunk_size = int(chunk_size)
    resolved = resolve_backend(backend, kernel, q)
    log_weights = None if weights is None else log_point_weights(weights)
    return run_attention(q, k, v, kernel, log_weights, resolved, auto=backend == "auto", chunk_size=chunk_size)


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
    reason = fused_unavailable_reason()
    if reason is not None:
        return f"unavailable: {reason}"
    seconds = build_seconds()
    return f"available (compiled in {seconds:.1f} s)" if seconds else "available (loaded from the cache)"


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
    # hot path calls run_attention and never pays for it.
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
