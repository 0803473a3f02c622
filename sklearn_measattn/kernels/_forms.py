"""The kernel record, :class:`AttentionKernel`, and the built-in log-weights and their derivatives.

Every built-in ``g`` below is written so that it is finite, with finite gradient, for scores as large
as ``|s| = 1e4`` in float32, and is branch-free or clamped inside each branch
(``torch.where`` evaluates both branches, and a NaN in the unused one would
still poison the gradient).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ._factorization import KappaFactorization, _SoftplusFactorization
from ._sparsemax import sparsemax_weights


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
        return torch.log(sparsemax_weights(s, None))

    def __repr__(self):
        return "sparsemax"


#: Degrees of the poly kernel for which ``g`` and ``g'`` are finite in float32.


_BUILTIN_LOG_WEIGHTS = (_g_softmax, _g_log, _g_sigmoid, _g_softplus)
_BUILTIN_LOG_WEIGHT_TYPES = (_PolyLogWeight, _CompactLogWeight, _SparsemaxLogWeight)
