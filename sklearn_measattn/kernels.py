"""Attention kernels, each defined by its log-weight ``g(s) = log kappa(s)``.

Normalised kernel attention with a positive kernel ``kappa = exp(g)`` is exactly
``softmax(g(S)) @ V``, so a kernel is fully described by ``g``. Every built-in ``g``
below is written so that it is finite, with finite gradient, for scores as large
as ``|s| = 1e4`` in float32, and is branch-free or clamped inside each branch
(``torch.where`` evaluates both branches, and a NaN in the unused one would
still poison the gradient).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ._kappa import KappaFactorization, _LogFactorization, _PolyFactorization, _SoftplusFactorization

__all__ = ["AttentionKernel", "KappaFactorization", "get_kernel", "KERNEL_NAMES", "SPARSE_KERNEL_NAMES"]


@dataclass(frozen=True)
class AttentionKernel:
    """An attention kernel ``kappa(s) = exp(g(s))`` given by its log-weight ``g``.

    Build one with :func:`get_kernel`; the fields are documentation as much as
    data.

    Parameters
    ----------
    name : str
        Registry name (``"softmax"``, ``"poly"``, ``"log"``, ``"sigmoid"``,
        ``"softplus"``, ``"compact"``, ``"sparsemax"``, ``"learned_poly"``) or the callable's ``__name__`` for user kernels.
    log_weight : callable
        Elementwise ``g``: maps a tensor of scores to a tensor of the same shape.
    params : dict
        Parameters the kernel was built with (e.g. ``{"degree": 2}``).
    growth : str
        How ``kappa(s)`` grows as ``s -> +inf``: ``"exponential"``,
        ``"polynomial"``, ``"logarithmic"``, ``"linear"``, ``"bounded"`` or
        ``"user"``.
    min_tail_index : float or None
        Smallest polynomial tail index ``alpha`` (``P(|Y| > t) ~ t^-alpha``) for
        which both attention integrals ``int kappa(<q, k(y)>) v(y) dmu(y)`` and
        ``int kappa(<q, k(y)>) dmu(y)`` converge when keys and values grow
        linearly in ``y``: they converge for ``alpha > min_tail_index``.
        ``inf`` for softmax (no polynomial tail is integrable), ``None`` when
        unknown (user kernels).
    derivative : callable or None
        Closed-form ``g'(s)``, elementwise; used by the chunked backward instead of
        differentiating ``log_weight`` with autograd. ``None`` (user kernels):
        autograd is used.
    factorization : KappaFactorization or None
        Optional closed forms ``kappa(s) = exp(min(s, 0)) phi(s)`` and
        ``kappa'(s) = exp(min(s, 0)) psi(s)`` with which the chunked backend needs
        one exponential per score; see :class:`KappaFactorization`.
    support : str, default="full"
        ``"full"``: ``kappa > 0`` for every score. ``"bounded"``: ``kappa = 0``
        below a threshold (``g = -inf`` there; ``"compact"``, ``"sparsemax"``).
        A query whose keys all lie outside the support attends uniformly to
        the measure (weights ``w_j / sum_l w_l``): the limit of ``kappa +
        epsilon`` as ``epsilon -> 0``.
    backends : tuple of str or None, default=None
        The attention backends that can run this kernel; ``None`` means every
        backend that runs a log-weight ``g``. ``backend="auto"`` picks
        ``"chunked"`` for kernels restricted to ``("chunked", "naive")``.
    normalizer : callable or None, default=None
        For kernels whose weights are not ``softmax(g(S) + log w)`` with an
        elementwise ``g`` (``"sparsemax"``: a threshold per query):
        ``normalizer(scores, log_weights)`` returns the attention weights of
        every query row, ``log_weights`` broadcastable to ``scores`` along the
        last (key) axis, or ``None`` for uniform measures.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.kernels import get_kernel
    >>> kernel = get_kernel("poly", degree=2)
    >>> kernel.growth, kernel.min_tail_index
    ('polynomial', 3.0)
    >>> kernel.kappa(torch.tensor([0.0, 2.0]))
    tensor([1., 4.])
    """

    name: str
    log_weight: Callable[[torch.Tensor], torch.Tensor] = field(repr=False)
    params: dict = field(default_factory=dict)
    growth: str = "user"
    min_tail_index: float | None = None
    derivative: Callable[[torch.Tensor], torch.Tensor] | None = field(default=None, repr=False)
    factorization: KappaFactorization | None = field(default=None, repr=False)
    support: str = "full"
    backends: tuple | None = None
    normalizer: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"AttentionKernel name must be a string, got {self.name!r}.")
        if self.support not in ("full", "bounded"):
            raise ValueError(f"AttentionKernel support must be 'full' or 'bounded', got {self.support!r}.")
        if self.log_weight not in _BUILTIN_LOG_WEIGHTS and not isinstance(self.log_weight, _BUILTIN_LOG_WEIGHT_TYPES):
            _probe_log_weight(self.log_weight, self.name)

    def __call__(self, scores: torch.Tensor) -> torch.Tensor:
        """Return ``g(scores)``, the log-weights."""
        return self.log_weight(scores)

    def kappa(self, scores: torch.Tensor) -> torch.Tensor:
        """Return ``kappa(scores) = exp(g(scores))``, the unnormalised weights.

        Parameters
        ----------
        scores : torch.Tensor
            Attention scores ``s``.

        Returns
        -------
        kappa : torch.Tensor
            The kernel's values, of the shape of ``scores``.
        """
        return torch.exp(self.log_weight(scores))

    @property
    def is_softmax(self) -> bool:
        """Whether this is plain softmax (so fused SDPA kernels apply).

        Decided by what the kernel computes, the built-in ``g(s) = s``, never by
        its name: a user kernel called ``"softmax"`` runs as the user wrote it.
        """
        return self.log_weight is _g_softmax

    @property
    def learns_degree(self) -> bool:
        """Whether this is the poly kernel whose degree the network learns (``degree="learn"``)."""
        return isinstance(self.params, dict) and self.params.get("degree") == "learn"

    @property
    def builtin_form(self):
        """``(name, parameter)`` of a built-in ``g`` with a fixed parameter, else ``None``.

        ``("softmax", 1.0)``, ``("poly", degree)``, ``("log", 1.0)``,
        ``("sigmoid", 1.0)`` or ``("softplus", 1.0)``; ``None`` for user
        callables, bounded-support kernels and a degree held in a tensor. Decided
        by the identity of ``log_weight``, so a kernel built by hand with a
        built-in name but its own ``g`` is not mistaken for the built-in. Backends
        with closed-form code per kernel (the fused CPU kernels) run these only.
        """
        log_weight = self.log_weight
        if isinstance(log_weight, _PolyLogWeight):
            if self.learns_degree or isinstance(log_weight.degree, torch.Tensor):
                return None
            return "poly", float(log_weight.degree)
        names = {_g_softmax: "softmax", _g_log: "log", _g_sigmoid: "sigmoid", _g_softplus: "softplus"}
        name = names.get(log_weight)
        return None if name is None else (name, 1.0)


def _probe_log_weight(g, name):
    """Call a user log-weight once on a small tensor of scores and say what is wrong.

    Run when the kernel is built, so that a bad kernel fails with its own name
    before any training instead of deep inside the attention at the first batch.
    """
    if isinstance(g, type):
        raise TypeError(
            f"kernel {name!r} is the class {g.__name__}, not a function; pass an instance "
            f"({g.__name__}()) or a function g(scores) -> log-weights."
        )
    if not callable(g):
        raise TypeError(f"kernel {name!r}: log_weight must be callable, got {type(g).__name__}.")
    # on the CPU explicitly: modules may be built under a meta-device context
    scores = torch.linspace(-10.0, 10.0, 21, device="cpu").reshape(3, 7)
    try:
        out = g(scores)
    except Exception as exc:
        raise ValueError(
            f"kernel {name!r} raised {type(exc).__name__}: {exc} when called on a (3, 7) float32 "
            "tensor of scores; g must map a tensor of attention scores to log-weights elementwise."
        ) from exc
    if not isinstance(out, torch.Tensor):
        raise TypeError(
            f"kernel {name!r} returned {type(out).__name__} for a tensor of scores; it must return "
            "a torch tensor of log-weights of the same shape (use torch functions, not math/numpy)."
        )
    if tuple(out.shape) != tuple(scores.shape):
        raise ValueError(
            f"kernel {name!r} returned shape {tuple(out.shape)} for scores of shape "
            f"{tuple(scores.shape)}; g is applied elementwise and must keep the shape."
        )
    if not out.dtype.is_floating_point:
        raise TypeError(
            f"kernel {name!r} returned dtype {out.dtype} for float32 scores; log-weights must be "
            "floating point (avoid integer operations such as // or .long())."
        )
    if not bool(torch.isfinite(out).all()):
        bad = scores[~torch.isfinite(out)]
        raise ValueError(
            f"kernel {name!r} returned non-finite log-weights at scores {bad[:3].tolist()}; g must "
            "be finite for every finite score (a weight of 0 is g = -inf only at absent points)."
        )


def _g_softmax(s):
    return s


class _PolyLogWeight:
    """``g`` of the poly kernel; a class rather than a closure so models pickle."""

    def __init__(self, degree):
        self.degree = degree

    def __call__(self, s):
        # min(s, 0) + p log1p(max(s, 0) / p): equals s below 0, p log(1 + s/p)
        # above, C^1 at 0, one transcendental, no branch to poison gradients.
        # relu (not clamp) so the derivative at exactly s = 0 is 1, not 2: clamp
        # passes the gradient on its boundary, relu does not.
        positive = F.relu(s)
        return (s - positive) + self.degree * torch.log1p(positive / self.degree)

    def head(self, index):
        """``g`` at the degree of head ``index`` when the degree is a tensor with one entry per head."""
        return _PolyLogWeight(self.degree.reshape(-1)[index])

    def __repr__(self):
        if isinstance(self.degree, torch.Tensor):
            return f"poly(degree={self.degree.flatten().tolist()})"
        return f"poly(degree={self.degree:g})"


def _g_log(s):
    positive = F.relu(s)
    return (s - positive) + torch.log1p(torch.log1p(positive))


def _g_sigmoid(s):
    return F.logsigmoid(s)


def _g_softplus(s):
    # log(softplus(s)). For s < 0 write it as s + log(log1p(t) / t), t = e^s, with
    # t kept away from 0 (log1p(t)/t == 1 to working precision there); for s >= 0
    # softplus(s) = s + log1p(e^-s) >= log 2 is safe to take the log of.
    t = torch.exp(torch.clamp(s, min=-30.0, max=0.0))
    negative = s + torch.log(torch.log1p(t) / t)
    s_pos = torch.clamp(s, min=0.0)
    positive = torch.log(s_pos + torch.log1p(torch.exp(-s_pos)))
    return torch.where(s < 0, negative, positive)


def _d_softmax(s):
    return torch.ones_like(s)


class _PolyDerivative:
    """``g'`` of the poly kernel: 1 below 0, ``1 / (1 + s/p)`` above."""

    def __init__(self, degree):
        self.degree = degree

    def __call__(self, s):
        return torch.reciprocal(F.relu(s) / self.degree + 1.0)

    def __repr__(self):
        return f"poly_derivative(degree={self.degree:g})"


def _d_log(s):
    one_plus_r = F.relu(s) + 1.0
    return torch.reciprocal(one_plus_r * (torch.log(one_plus_r) + 1.0))


def _d_sigmoid(s):
    return torch.sigmoid(-s)


def _d_softplus(s):
    return _SoftplusFactorization().derivative(s)


class _CompactLogWeight:
    """``g`` of the compact kernel: ``p log(s - t)`` above the threshold ``t``, ``-inf`` below.

    The log is clamped inside its branch, so neither branch of the ``where``
    produces a NaN gradient (at ``s = t`` exactly the weight is 0).
    """

    def __init__(self, threshold, degree):
        self.threshold = threshold
        self.degree = degree

    def __call__(self, s):
        excess = s - self.threshold
        inside = self.degree * torch.log(torch.clamp(excess, min=torch.finfo(s.dtype).tiny))
        return torch.where(excess > 0, inside, torch.full_like(s, -math.inf))

    def __repr__(self):
        return f"compact(threshold={self.threshold:g}, degree={self.degree:g})"


class _CompactDerivative:
    """``g'`` of the compact kernel: ``p / (s - t)`` above ``t`` (capped to stay finite), 0 below."""

    def __init__(self, threshold, degree):
        self.threshold = threshold
        self.degree = degree

    def __call__(self, s):
        excess = s - self.threshold
        slope = self.degree / torch.clamp(excess, min=1e-30 if s.dtype != torch.float16 else 1e-4)
        return torch.where(excess > 0, slope, torch.zeros_like(s))


class _SparsemaxLogWeight:
    """The log of sparsemax's weights of a uniform measure, row by row (last axis = keys).

    Not elementwise: each query row has its own threshold. The backends call
    the kernel's ``normalizer`` instead, which also takes the point weights.
    """

    def __call__(self, s):
        from ._sparse import sparsemax_weights

        return torch.log(sparsemax_weights(s, None))

    def __repr__(self):
        return "sparsemax"


#: Degrees of the poly kernel for which ``g`` and ``g'`` are finite in float32.
_DEGREE_RANGE = (1e-3, 1e3)


_BUILTIN_LOG_WEIGHTS = (_g_softmax, _g_log, _g_sigmoid, _g_softplus)
_BUILTIN_LOG_WEIGHT_TYPES = (_PolyLogWeight, _CompactLogWeight, _SparsemaxLogWeight)
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
_LEARNED_DEGREE_INITIAL = 1.0


def _learned_degree(raw):
    """The positive degree of a learnt poly kernel from its unconstrained parameter.

    ``degree = low + softplus(raw)``, capped at the top of the float32-safe range
    ``[low, high] = [1e-3, 1e3]`` of fixed degrees: positive for every ``raw``, smooth,
    and equal to ``raw`` plus ``low`` for large ``raw``.
    """
    low, high = _DEGREE_RANGE
    return torch.clamp(low + F.softplus(raw), max=high)


def _learned_degree_raw(degree):
    """The inverse of :func:`learned_degree`: the raw parameter of a degree (a float)."""
    low, _ = _DEGREE_RANGE
    return math.log(math.expm1(degree - low))


def _poly_at_degree(kernel, degree):
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
        initial = _LEARNED_DEGREE_INITIAL
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
    from ._sparse import sparsemax_weights

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
                f"{', '.join(repr(k) for k in (*KERNEL_NAMES, *SPARSE_KERNEL_NAMES, 'learned_poly'))}, or a callable g(s) "
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
