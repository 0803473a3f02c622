"""The kernel registry: the built-in kernels by name, their parameters' checks, and :func:`get_kernel`."""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F

from ._factorization import _LogFactorization, _PolyFactorization, _SoftplusFactorization
from ._forms import (
    AttentionKernel,
    _CompactDerivative,
    _CompactLogWeight,
    _d_log,
    _d_sigmoid,
    _d_softmax,
    _d_softplus,
    _g_log,
    _g_sigmoid,
    _g_softmax,
    _g_softplus,
    _PolyDerivative,
    _PolyLogWeight,
    _SparsemaxLogWeight,
)
from ._sparsemax import sparsemax_weights

_DEGREE_RANGE = (1e-3, 1e3)


# Bounded support: the fused CPU kernels and SDPA have no -inf weights; sparsemax's
# threshold per query is not an elementwise score_mod, so FlexAttention runs compact only.
_COMPACT_BACKENDS = ("flex", "chunked", "naive")
_SPARSEMAX_BACKENDS = ("chunked", "naive")


def _check_degree(degree, kernel="poly"):
    degree = _check_real(degree, "degree", kernel, finite=False)
    low, high = _DEGREE_RANGE
    if not low <= degree <= high:
        raise ValueError(
            f"{kernel} kernel: degree must be a number in [{low:g}, {high:g}], got {degree!r}. "
            "Use degree=1 (the default) for the slowest polynomial growth; large "
            "degrees approach softmax (already at degree 1000 for the scores a "
            "float32 network produces), and outside this range s / degree over- or "
            "underflows float32."
        )
    return degree


def _build_softmax():
    return AttentionKernel("softmax", _g_softmax, {}, "exponential", math.inf, _d_softmax)


#: Degree at which a learnt poly kernel (``degree="learn"``) starts, in every layer and head.
LEARNED_DEGREE_INITIAL = 1.0


def learned_degree(raw):
    """The positive degree of a learnt poly kernel from its unconstrained parameter.

    ``degree = low + softplus(raw)``, capped at the top of the float32-safe range
    ``[low, high] = [1e-3, 1e3]`` of fixed degrees: positive for every ``raw``, smooth,
    and equal to ``raw`` plus ``low`` for large ``raw``.
    """
    low, high = _DEGREE_RANGE
    return torch.clamp(low + F.softplus(raw), max=high)


def learned_degree_raw(degree):
    """The inverse of :func:`learned_degree`: the raw parameter of a degree (a float)."""
    low, _ = _DEGREE_RANGE
    return math.log(math.expm1(degree - low))


def poly_at_degree(kernel, degree):
    """The learnt-degree ``kernel`` at ``degree``, a tensor of shape ``(n_heads, 1, 1)``.

    Its ``log_weight`` broadcasts over ``(batch, n_heads, n_queries, n_keys)``
    scores; a degree that requires a gradient makes the backends that cannot
    differentiate a kernel's parameters step aside.
    """
    return AttentionKernel(
        kernel.name, _PolyLogWeight(degree), {"degree": "learn"}, "polynomial", None, _PolyDerivative(degree),
        None, "full", kernel.backends,
    )


def _build_poly(degree=1.0):
    if isinstance(degree, str):
        if degree != "learn":
            raise TypeError(
                f"poly kernel: degree must be a positive number or 'learn' (one degree per layer and head, "
                f"trained with the network), got {degree!r}."
            )
        # The log-weight at the initial degree describes the kernel before training; a module
        # holding this kernel owns the learnt degrees and computes with them.
        initial = LEARNED_DEGREE_INITIAL
        return AttentionKernel(
            "learned_poly", _PolyLogWeight(initial), {"degree": "learn"}, "polynomial", None, _PolyDerivative(initial),
            None, "full", ("flex", "chunked", "naive"),
        )
    degree = _check_degree(degree)
    # Integer degrees up to 4 get the one-exp factorisation (1 + r/p)^p by
    # products; other degrees go through g = p log1p(r/p) (a pow would cost a log
    # and an exp, and large degrees would overflow (1 + 1e4/p)^p).
    factorization = _PolyFactorization(degree) if degree in (1.0, 2.0, 3.0, 4.0) else None
    return AttentionKernel(
        "poly", _PolyLogWeight(degree), {"degree": degree}, "polynomial", degree + 1.0,
        _PolyDerivative(degree), factorization,
    )


def _build_log():
    return AttentionKernel("log", _g_log, {}, "logarithmic", 1.0, _d_log, _LogFactorization())


def _build_sigmoid():
    # No factorisation: softmax(logsigmoid(s)) with g' = sigmoid(-s) measured faster
    # than exp(min(s, 0)) / (1 + exp(-|s|)) (two exps and more passes).
    return AttentionKernel("sigmoid", _g_sigmoid, {}, "bounded", 1.0, _d_sigmoid)


def _build_softplus():
    return AttentionKernel("softplus", _g_softplus, {}, "linear", 2.0, _d_softplus, _SoftplusFactorization())


def _check_real(value, name, kernel, *, finite=True):
    """A kernel parameter as a float; a ``TypeError`` unless a real number (a finite one when ``finite``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (finite and not math.isfinite(value)):
        qualifier = "finite real number" if finite else "real number"
        raise TypeError(f"{kernel} kernel: {name} must be a {qualifier}, got {value!r}.")
    return float(value)


def _build_compact(threshold=0.0, degree=1.0):
    threshold = _check_real(threshold, "threshold", "compact")
    degree = _check_degree(degree, "compact")
    return AttentionKernel(
        "compact", _CompactLogWeight(threshold, degree), {"threshold": threshold, "degree": degree},
        "polynomial", degree + 1.0, _CompactDerivative(threshold, degree), None, "bounded", _COMPACT_BACKENDS,
    )


def _build_sparsemax():
    return AttentionKernel(
        "sparsemax", _SparsemaxLogWeight(), {}, "linear", 2.0, None, None, "bounded", _SPARSEMAX_BACKENDS,
        sparsemax_weights,
    )


_REGISTRY = {
    "softmax": (_build_softmax, ()),
    "poly": (_build_poly, ("degree",)),
    "log": (_build_log, ()),
    "sigmoid": (_build_sigmoid, ()),
    "softplus": (_build_softplus, ()),
    "compact": (_build_compact, ("threshold", "degree")),
    "sparsemax": (_build_sparsemax, ()),
    # the poly kernel with a learnt degree under a name of its own, for tools that take kernel names only
    "learned_poly": (lambda: _build_poly("learn"), ()),
}

#: Names of the built-in kernels that are positive everywhere, in order of decreasing growth.
KERNEL_NAMES = ("softmax", "poly", "log", "sigmoid", "softplus")
#: Names of the built-in kernels with bounded support (zero weight below a threshold).
SPARSE_KERNEL_NAMES = ("compact", "sparsemax")
#: Every name :func:`get_kernel` accepts: the positive kernels, the bounded-support
#: ones and ``"learned_poly"`` (the poly kernel whose degree the network learns).
ALL_KERNEL_NAMES = tuple(_REGISTRY)


def get_kernel(kernel, **params) -> AttentionKernel:
    """Return the :class:`AttentionKernel` for a name, a callable or a kernel.

    =============  ==============================  ============  ===========================
    name           kappa(s), s >= 0 (e^s if s<0)   growth        integrates tails alpha >
    =============  ==============================  ============  ===========================
    ``softmax``    e^s                             exponential   none (diverges for all)
    ``poly``       (1 + s/p)^p                     polynomial    p + 1
    ``log``        1 + log(1 + s)                  logarithmic   1
    ``sigmoid``    sigmoid(s) (all s)              bounded       1
    ``softplus``   log(1 + e^s) (all s)            linear        2
    ``compact``    (s - t)_+^p, 0 below t (all s)  polynomial    p + 1
    ``sparsemax``  a_j (s - tau_i)_+ (all s)       linear        2
    =============  ==============================  ============  ===========================

    The last column is the tail index above which the attention integral
    ``int kappa(<q, k(y)>) v(y) dmu(y)`` converges when keys and values are linear
    in ``y`` (the ``+1`` is the value's own growth). The first five kernels
    are positive, increasing and C^1; ``poly`` tends to softmax as ``p``
    grows. ``compact`` (threshold ``t``, default 0, degree ``p``, default 1)
    and ``sparsemax`` (threshold ``tau_i`` per query, solving ``sum_j a_j (s_ij
    - tau_i)_+ = 1`` for the point weights ``a`` of the measure) have bounded
    support: a query whose keys all lie outside it attends uniformly to the
    measure. They run on the chunked backend (``backend="auto"`` picks it).

    ``get_kernel("poly", degree="learn")`` is the poly kernel whose degree a
    network learns, one per layer and head (see
    :class:`~sklearn_measattn.transformer.KernelMultiheadAttention`); it has
    ``min_tail_index=None`` (unknown until learnt) and, on its own, describes
    the kernel at its initial degree 1. Its name is ``"learned_poly"``, and
    ``get_kernel("learned_poly")`` builds the same kernel, for tools that take
    kernel names only (:func:`~sklearn_measattn.experiments.compare_kernels`).

    Parameters
    ----------
    kernel : str, callable or AttentionKernel
        A registry name, a user log-weight ``g`` (elementwise torch function,
        should be increasing and finite), or an already built kernel (returned
        unchanged when no params are given).
    **params
        Kernel parameters: ``degree`` (float > 0, default 1, or ``"learn"``)
        for ``poly``;
        ``threshold`` (real, default 0) and ``degree`` (float > 0, default 1)
        for ``compact``.

    Returns
    -------
    AttentionKernel
        The kernel, with its log-weight ``g`` and documentation fields.

    Raises
    ------
    ValueError
        If the name is unknown or a parameter is invalid or not accepted by the
        kernel; the message lists the valid choices.
    TypeError
        If ``kernel`` is neither a string nor a callable.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.kernels import get_kernel
    >>> get_kernel("log")(torch.tensor([-1.0, 0.0]))
    tensor([-1., 0.])
    >>> get_kernel(lambda s: 0.5 * s).name
    '<lambda>'
    >>> get_kernel("compact").kappa(torch.tensor([-1.0, 2.0]))  # zero below the threshold
    tensor([0., 2.])
    """
    if isinstance(kernel, AttentionKernel):
        if params:
            raise ValueError(
                f"kernel_params {sorted(params)} cannot be applied to an already built "
                f"AttentionKernel {kernel.name!r}; pass the kernel name instead."
            )
        return kernel
    if isinstance(kernel, str):
        if kernel not in _REGISTRY:
            raise ValueError(
                f"Unknown attention kernel {kernel!r}. Valid choices are "
                f"{', '.join(map(repr, ALL_KERNEL_NAMES))}, or a callable g(s) "
                "returning log-weights."
            )
        builder, accepted = _REGISTRY[kernel]
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            accepted_text = ", ".join(accepted) if accepted else "no parameters"
            raise ValueError(
                f"Kernel {kernel!r} got unknown parameter(s) {unknown}; it accepts "
                f"{accepted_text}."
            )
        return builder(**params)
    if callable(kernel):
        if params:
            raise ValueError(
                f"kernel_params {sorted(params)} were given with a callable kernel; "
                "bind parameters inside the callable instead (e.g. functools.partial)."
            )
        name = getattr(kernel, "__name__", type(kernel).__name__)
        return AttentionKernel(name, kernel, {}, "user", None)
    raise TypeError(
        f"kernel must be one of {', '.join(repr(k) for k in KERNEL_NAMES + SPARSE_KERNEL_NAMES)} or a "
        f"callable g(s), got {kernel!r} of type {type(kernel).__name__}."
    )
