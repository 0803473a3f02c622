"""The attention backends as records in one table, and the rule that picks one.

Each backend says which requests it can run (``supports``: a reason when it
cannot, else ``None``), whether it can run on this machine at all
(``unavailable``), and how to run (``run``). ``"auto"`` takes the first backend
of :data:`AUTO_PREFERENCE` that supports the request; a kernel may restrict the
backends it runs on (:attr:`~sklearn_measattn.kernels.AttentionKernel.backends`).
Adding a backend is one record here (plus its implementation module when it
needs one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._extension import fused_unavailable_reason
from ..kernels import get_kernel
from ._chunked import ChunkedKernelAttention, default_chunk
from ._flex import kernel_flex_attention
from ._fused_cpu import fused_supports, run_fused
from ._trainable import checkpointed_attention, has_tensor_parameters
from ._weights import attention_probabilities

__all__ = ["AUTO_PREFERENCE", "BACKENDS", "resolve_backend", "run_attention"]

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


@dataclass(frozen=True)
class _Backend:
    """One attention backend.

    ``supports(kernel, tensor)`` returns why the backend cannot run ``kernel``
    on tensors like ``tensor`` (device, dtype), or ``None``; ``unavailable()``
    why it cannot run on this machine at all (a missing compiler), or ``None``;
    ``run(q, k, v, kernel, log_weights, scale, chunk_size)`` computes the
    attention. ``auto_devices``: device types on which ``"auto"`` considers it.
    ``recomputes_weights``: its backward recomputes the weights from a saved
    log-normaliser, which large scores break (see ``_RECOMPUTE_SAFE_SCORE``).
    """

    name: str
    supports: Callable
    run: Callable
    unavailable: Callable = lambda: None
    auto_devices: tuple | None = None
    recomputes_weights: bool = False


def _sdpa_supports(kernel, tensor):
    return None if kernel.is_softmax else "it computes softmax attention only"


def _sdpa_run(q, k, v, kernel, log_weights, scale, chunk_size):
    mask = None if log_weights is None else log_weights[:, None, None, :].to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _flex_supports(kernel, tensor):
    if kernel.normalizer is not None:
        return "its score_mod is elementwise, but this kernel needs a threshold per query"
    if has_tensor_parameters(kernel) and not hasattr(kernel.log_weight, "head"):
        return "its score_mod sees one head at a time, but this kernel's tensors have no head(index) to take"
    return None


def _flex_run(q, k, v, kernel, log_weights, scale, chunk_size):
    return kernel_flex_attention(q, k, v, kernel, log_weights, scale)


def _chunked_run(q, k, v, kernel, log_weights, scale, chunk_size):
    if has_tensor_parameters(kernel):
        return checkpointed_attention(q, k, v, kernel, log_weights, scale, chunk_size)
    chunk = default_chunk(q, k) if chunk_size is None else chunk_size
    return ChunkedKernelAttention.apply(q, k, v, log_weights, kernel, scale, chunk)


def _naive_run(q, k, v, kernel, log_weights, scale, chunk_size):
    return attention_probabilities(q, k, kernel, log_weights, scale) @ v


def _every_request(kernel, tensor):
    return None


_TABLE = {
    backend.name: backend
    for backend in (
        _Backend("sdpa", _sdpa_supports, _sdpa_run, recomputes_weights=True),
        _Backend("flex", _flex_supports, _flex_run, auto_devices=("cuda",), recomputes_weights=True),
        _Backend("fused", fused_supports, run_fused, unavailable=fused_unavailable_reason),
        _Backend("chunked", _every_request, _chunked_run),
        _Backend("naive", _every_request, _naive_run),
    )
}

#: Accepted values of ``backend``.
BACKENDS = ("auto", *_TABLE)
#: The backends ``"auto"`` tries, in order: the first that supports the request runs.
AUTO_PREFERENCE = ("sdpa", "flex", "fused", "chunked")


def _refusal(backend, kernel, tensor):
    """Why ``backend`` cannot run ``kernel`` on tensors like ``tensor``, or ``None``."""
    restricted = kernel.backends
    if restricted is not None and backend.name not in restricted:
        return (
            f"kernel {kernel.name!r} runs on backend {' or '.join(map(repr, restricted))} only, got "
            f"backend={backend.name!r}"
        )
    return backend.supports(kernel, tensor)


def resolve_backend(backend, kernel, tensor):
    """Validate ``backend`` for a kernel and device; resolve ``"auto"``.

    Parameters
    ----------
    backend : str
        One of :data:`BACKENDS`.
    kernel : str, callable or AttentionKernel
        The kernel to run, see :func:`sklearn_measattn.kernels.get_kernel`.
    tensor : torch.Tensor
        A tensor on the device and in the dtype of the inputs (only its
        ``device`` and ``dtype`` are read).

    Returns
    -------
    str
        The backend that will run: ``backend`` itself, or for ``"auto"`` the
        first of :data:`AUTO_PREFERENCE` that supports the request and can run
        here (``"chunked"`` runs every request).

    Raises
    ------
    ValueError
        For an unknown backend, or one that cannot run this kernel, device or dtype.
    TypeError
        When ``tensor`` has no torch ``device`` and ``dtype``, or ``kernel`` is
        not a kernel.
    RuntimeError
        For ``"fused"`` where its kernels cannot be built (``"auto"`` falls back).

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.attention import resolve_backend
    >>> from sklearn_measattn.kernels import get_kernel
    >>> resolve_backend("auto", get_kernel("softmax"), torch.empty(0))
    'sdpa'
    >>> resolve_backend("auto", get_kernel("sparsemax"), torch.empty(0))
    'chunked'
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown attention backend {backend!r}; valid choices are {', '.join(map(repr, BACKENDS))}.")
    if not (isinstance(getattr(tensor, "device", None), torch.device) and isinstance(getattr(tensor, "dtype", None),
                                                                                     torch.dtype)):
        raise TypeError(
            f"tensor must be a torch.Tensor on the device and in the dtype of the inputs (e.g. torch.empty(0, "
            f"device='cuda')), got {type(tensor).__name__}."
        )
    kernel = get_kernel(kernel)
    if backend == "auto":
        for name in AUTO_PREFERENCE:
            record = _TABLE[name]
            if record.auto_devices is not None and tensor.device.type not in record.auto_devices:
                continue
            if _refusal(record, kernel, tensor) is None and record.unavailable() is None:
                return name
        restricted = kernel.backends or ("chunked",)
        return "chunked" if "chunked" in restricted else restricted[0]
    record = _TABLE[backend]
    reason = _refusal(record, kernel, tensor)
    if reason is not None:
        alternatives = [name for name in BACKENDS[1:] if _refusal(_TABLE[name], kernel, tensor) is None]
        raise ValueError(
            f"backend={backend!r} cannot run kernel {kernel.name!r} here: {reason}. "
            f"Use backend='auto' (or one of {', '.join(map(repr, alternatives))})."
        )
    reason = record.unavailable()
    if reason is not None:
        raise RuntimeError(f"backend={backend!r} is unavailable: {reason}. Use backend='chunked' (or 'auto').")
    return backend


def run_attention(q, k, v, kernel, log_weights, backend, *, auto=False, chunk_size=None):
    """Run a resolved backend on checked inputs (the hot path: no validation).

    With ``auto=True`` (the backend came from ``"auto"``), a backend whose
    backward recomputes the weights from a saved log-normaliser is replaced by
    ``"chunked"`` when gradients are needed and the scores can be so large that
    the recomputation breaks (a Cauchy-Schwarz bound on the largest query and
    key norms, O(N d) work).
    """
    record = _TABLE[backend]
    if auto and record.recomputes_weights and _scores_may_break_recomputation(q, k):
        record = _TABLE["chunked"]
    return record.run(q, k, v, kernel, log_weights, 1.0 / math.sqrt(q.shape[-1]), chunk_size)


def _scores_may_break_recomputation(q, k):
    if not torch.is_grad_enabled() or not (q.requires_grad or k.requires_grad):
        return False
    with torch.no_grad():
        bound = q.detach().norm(dim=-1).amax() * k.detach().norm(dim=-1).amax() / math.sqrt(q.shape[-1])
        return not bool(bound <= _RECOMPUTE_SAFE_SCORE)
