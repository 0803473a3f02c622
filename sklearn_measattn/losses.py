"""Differentiable training losses between batches of point clouds (torch).

Every loss compares a predicted batch ``x`` of shape ``(B, N, d)`` with a
target batch ``y`` of shape ``(B, M, d)`` sample by sample, optionally with
per-point weights ``x_weights`` ``(B, N)`` and ``y_weights`` ``(B, M)``
(nonnegative; zero means "the point is not there"; each row is normalised to
sum to one). Each returns the mean over the batch (``reduction="mean"``), or the
per-sample values (``reduction="none"``), differentiable with respect to ``x``.

========== ========================================= ======================
name       what it computes (per sample)             needs
========== ========================================= ======================
energy     energy distance (V-statistic)             any N, M
sliced     sliced Wasserstein ``SW_p^p``              any N, M
sinkhorn   (debiased) entropic OT, POT log-Sinkhorn  any N, M
mse        paired mean squared error                 N == M, paired points
========== ========================================= ======================

:func:`get_loss` turns a name (or a callable) into a loss function and
:class:`MeasureLoss` wraps it as a ``torch.nn.Module`` usable as skorch's
``criterion``.
"""

from __future__ import annotations

import functools
import inspect
import numbers

import torch
from torch import nn

from ._validation import check_positive

__all__ = [
    "LOSSES",
    "MeasureLoss",
    "energy_loss",
    "get_loss",
    "mse_loss",
    "sinkhorn_loss",
    "sliced_wasserstein_loss",
]

_REDUCTIONS = ("mean", "sum", "none")


# --------------------------------------------------------------------------- #
# validation helpers
# --------------------------------------------------------------------------- #
def _as_cloud(t, name, like=None):
    if not torch.is_tensor(t):
        try:
            t = torch.as_tensor(t)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{name} must be a tensor of shape (B, n_points, d); {exc}") from None
    if t.ndim != 3:
        raise ValueError(
            f"{name} must be a 3-D tensor (batch, n_points, n_features), got shape "
            f"{tuple(t.shape)}. For a single cloud use {name}[None]."
        )
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype() if like is None else like.dtype)
    if like is not None:
        t = t.to(dtype=like.dtype, device=like.device)
    if t.shape[1] < 1:
        raise ValueError(f"{name} has 0 points (shape {tuple(t.shape)}); each cloud needs at least one.")
    return t


def _normalized_weights(w, cloud, name):
    """Return weights of shape (B, n) that sum to one per row."""
    B, n = cloud.shape[:2]
    if w is None:
        return cloud.new_full((B, n), 1.0 / n)
    if not torch.is_tensor(w):
        w = torch.as_tensor(w)
    w = w.to(dtype=cloud.dtype, device=cloud.device)
    if tuple(w.shape) != (B, n):
        raise ValueError(
            f"{name} must have shape (batch, n_points) = {(B, n)} to match its cloud, "
            f"got {tuple(w.shape)}."
        )
    w = w.detach()
    if bool(torch.any(w < 0)) or not bool(torch.all(torch.isfinite(w))):
        raise ValueError(f"{name} must be finite and >= 0 (0 means the point is absent).")
    total = w.sum(dim=1, keepdim=True)
    if bool(torch.any(total <= 0)):
        raise ValueError(
            f"{name} sums to 0 for some sample; every cloud needs at least one point "
            "with positive weight."
        )
    return w / total


def _prepare(x, y, x_weights, y_weights):
    x = _as_cloud(x, "x")
    y = _as_cloud(y, "y", like=x)
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"x has {x.shape[0]} samples but y has {y.shape[0]}; the clouds are "
            "compared sample by sample."
        )
    if x.shape[2] != y.shape[2]:
        raise ValueError(
            f"x has {x.shape[2]} features per point but y has {y.shape[2]}; both "
            "clouds must live in the same space."
        )
    a = _normalized_weights(x_weights, x, "x_weights")
    b = _normalized_weights(y_weights, y, "y_weights")
    return x, y, a, b


def _reduce(values, reduction):
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}.")


def _check_power(value, name, low, high, low_inclusive):
    check_positive(value, name)
    ok = (value >= low if low_inclusive else value > low) and value <= high
    if not ok:
        bracket = "[" if low_inclusive else "("
        raise ValueError(f"{name} must lie in {bracket}{low}, {high}], got {value!r}.")
    return float(value)


# --------------------------------------------------------------------------- #
# pairwise distances with finite gradients
# --------------------------------------------------------------------------- #
def _pairwise_sq_dists(x, y):
    """Squared Euclidean distances (B, N, M); exact zeros for equal points."""
    if x.shape[-1] <= 16:
        return (x.unsqueeze(2) - y.unsqueeze(1)).square().sum(-1)
    # |x|^2 + |y|^2 - 2<x, y> uses O(B N M) memory instead of O(B N M d)
    sq = x.square().sum(-1).unsqueeze(2) + y.square().sum(-1).unsqueeze(1) - 2.0 * x @ y.transpose(1, 2)
    return sq.clamp_min(0.0)


def _dist_pow(sq, power):
    """``|x - y|^power`` from squared distances, with zero (not NaN) gradient at 0.

    ``sqrt`` (and ``s ** (power / 2)`` for ``power < 2``) has an infinite
    derivative at ``s = 0``, which autograd turns into NaN for coincident
    points (the diagonal of ``|X - X'|``). Zero distances are masked *inside*
    the power, so both ``torch.where`` branches have finite gradients.
    """
    if power == 2.0:
        return sq
    # Mask exact zeros only: a NaN or inf distance (overflowed predictions) must
    # propagate into the loss, where training stops on it, not be masked to 0.
    zero = sq == 0
    safe = torch.where(zero, torch.ones_like(sq), sq)
    return torch.where(zero, torch.zeros_like(sq), safe.pow(power / 2.0))


def _bilinear(a, D, b):
    """``sum_ij a_i D_ij b_j`` per sample (bmm; much faster than einsum on CPU)."""
    return torch.bmm(a.unsqueeze(1), torch.bmm(D, b.unsqueeze(2))).reshape(-1)


# --------------------------------------------------------------------------- #
# losses
# --------------------------------------------------------------------------- #
def energy_loss(x, y, x_weights=None, y_weights=None, *, beta=1.0, reduction="mean"):
    r"""Energy distance between weighted point clouds, batched.

    .. math::

        \mathcal{E}_\beta(\mu, \nu) = 2\,\mathbb{E}|X - Y|^\beta
        - \mathbb{E}|X - X'|^\beta - \mathbb{E}|Y - Y'|^\beta,

    with ``X, X' ~ mu`` and ``Y, Y' ~ nu`` independent, computed exactly as a
    weighted V-statistic (the diagonal terms ``|x_i - x_i| = 0`` included). It is
    nonnegative, zero only for equal measures when ``0 < beta < 2``, and needs
    no tuning. Gradients are finite even for coincident points.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N, d)
        Predicted clouds (the argument gradients flow into).
    y : torch.Tensor of shape (B, M, d)
        Target clouds; cast to ``x``'s dtype and device.
    x_weights : torch.Tensor of shape (B, N), default=None
        Nonnegative point weights of ``x`` (zero = absent), normalised per
        sample; ``None`` means uniform.
    y_weights : torch.Tensor of shape (B, M), default=None
        Same for ``y``.
    beta : float, default=1.0
        Exponent of the distance, in ``(0, 2]``. ``beta = 2`` only compares
        means.
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(B,)`` with ``reduction="none"``. It can be
        slightly negative (``~ -1e-16`` relative) through rounding.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import energy_loss
    >>> x = torch.tensor([[[0.0], [2.0]]])
    >>> energy_loss(x, x + 1.0)  # 2 * 1.5 - 1 - 1
    tensor(1.)
    >>> energy_loss(x, x)
    tensor(0.)
    """
    beta = _check_power(beta, "beta", 0.0, 2.0, low_inclusive=False)
    _check_reduction(reduction)
    x, y, a, b = _prepare(x, y, x_weights, y_weights)
    e_xy = _bilinear(a, _dist_pow(_pairwise_sq_dists(x, y), beta), b)
    e_xx = _bilinear(a, _dist_pow(_pairwise_sq_dists(x, x), beta), a)
    e_yy = _bilinear(b, _dist_pow(_pairwise_sq_dists(y, y), beta), b)
    return _reduce(2.0 * e_xy - e_xx - e_yy, reduction)


def _random_directions(n_projections, d, generator, like):
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        generator = torch.Generator().manual_seed(int(generator))
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be None, an int seed or a torch.Generator, got {type(generator).__name__}."
        )
    device = generator.device if generator is not None else like.device
    theta = torch.randn(n_projections, d, generator=generator, device=device, dtype=like.dtype)
    theta = theta.to(like.device)
    return theta / theta.norm(dim=1, keepdim=True).clamp_min(torch.finfo(like.dtype).tiny)


def _quantile_wasserstein_1d(u, v, a, b, p):
    """Exact W_p^p between weighted 1-D measures, batched over leading dims.

    ``u`` (..., N) and ``v`` (..., M) are the atoms, ``a`` and ``b`` their
    weights (rows sum to one). The quantile functions are step functions; both
    are evaluated on the union of their jump levels, where they are constant
    between consecutive levels, so the integral ``int_0^1 |F^-1 - G^-1|^p`` is
    an exact finite sum (as in POT's ``wasserstein_1d``).
    """
    u_sorted, iu = torch.sort(u, dim=-1)
    v_sorted, iv = torch.sort(v, dim=-1)
    cu = torch.cumsum(torch.gather(a, -1, iu), dim=-1)
    cv = torch.cumsum(torch.gather(b, -1, iv), dim=-1)
    levels = torch.sort(torch.cat([cu, cv], dim=-1), dim=-1).values
    steps = torch.diff(levels, dim=-1, prepend=torch.zeros_like(levels[..., :1]))
    # quantile on (previous level, level]: first atom whose cumulative weight >= level
    qu_idx = torch.searchsorted(cu.contiguous(), levels.contiguous()).clamp_max(u.shape[-1] - 1)
    qv_idx = torch.searchsorted(cv.contiguous(), levels.contiguous()).clamp_max(v.shape[-1] - 1)
    diff = torch.gather(u_sorted, -1, qu_idx) - torch.gather(v_sorted, -1, qv_idx)
    return (steps * diff.abs().pow(p)).sum(-1)


def sliced_wasserstein_loss(
    x, y, x_weights=None, y_weights=None, *, n_projections=64, p=2, generator=None, reduction="mean"
):
    r"""Sliced Wasserstein loss ``SW_p^p`` between weighted point clouds, batched.

    .. math::

        SW_p^p(\mu, \nu) = \frac{1}{L} \sum_{l=1}^{L}
        W_p^p(\theta_l {}_\# \mu, \theta_l {}_\# \nu),

    with ``L = n_projections`` directions ``theta_l`` drawn uniformly on the unit
    sphere (shared by the batch, fresh at every call unless ``generator`` is an
    int). The 1-D distances are exact: by sorting when both clouds are uniform
    with ``N == M``, otherwise from the weighted quantile functions evaluated on
    the union of their jump levels. Note it returns the ``p``-th power (smooth
    at zero), not ``SW_p``.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N, d)
        Predicted clouds.
    y : torch.Tensor of shape (B, M, d)
        Target clouds.
    x_weights, y_weights : torch.Tensor of shape (B, N) and (B, M), default=None
        Nonnegative point weights (zero = absent); ``None`` means uniform.
    n_projections : int, default=64
        Number of random directions.
    p : float, default=2
        Order of the Wasserstein distance, ``>= 1``.
    generator : None, int or torch.Generator, default=None
        Source of the directions: the global torch RNG (``None``), a generator,
        or an int seed (the same directions at every call).
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(B,)`` with ``reduction="none"``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import sliced_wasserstein_loss
    >>> x = torch.randn(2, 50, 1, generator=torch.Generator().manual_seed(0))
    >>> loss = sliced_wasserstein_loss(x, x + 3.0, n_projections=4, generator=0)
    >>> round(float(loss), 4)  # in 1-D the projections are +-x: exactly 3^2
    9.0
    """
    n_projections = check_positive(n_projections, "n_projections", integer=True)
    p = _check_power(p, "p", 1.0, float("inf"), low_inclusive=True)
    _check_reduction(reduction)
    x, y, a, b = _prepare(x, y, x_weights, y_weights)
    theta = _random_directions(n_projections, x.shape[-1], generator, x)
    xp = (x @ theta.T).transpose(1, 2)  # (B, L, N)
    yp = (y @ theta.T).transpose(1, 2)  # (B, L, M)
    if x_weights is None and y_weights is None and x.shape[1] == y.shape[1]:
        diff = torch.sort(xp, dim=-1).values - torch.sort(yp, dim=-1).values
        per_direction = diff.abs().pow(p).mean(-1)
    else:
        L = n_projections
        per_direction = _quantile_wasserstein_1d(
            xp, yp, a.unsqueeze(1).expand(-1, L, -1), b.unsqueeze(1).expand(-1, L, -1), p
        )
    return _reduce(per_direction.mean(-1), reduction)


def _entropic_ot(x, y, a, b, *, reg, p, normalize, max_iter, tol, scale=None):
    """Per-sample entropic OT value <T, C> + eps KL(T | a x b), envelope gradient.

    ``eps = reg * scale``; ``scale`` (B,) is computed from this cost by
    ``normalize`` unless given. Returns ``(value, scale)``.
    """
    import ot.batch

    C = _dist_pow(_pairwise_sq_dists(x, y), p)
    Cd = C.detach()
    if scale is not None:
        pass
    elif normalize == "median":
        support = (a.unsqueeze(2) > 0) & (b.unsqueeze(1) > 0)
        masked = torch.where(support, Cd, torch.full_like(Cd, float("nan")))
        scale = torch.nanmedian(masked.flatten(1), dim=1).values
    elif normalize == "max":
        scale = Cd.flatten(1).amax(dim=1)
    else:
        scale = torch.ones(C.shape[0], dtype=C.dtype, device=C.device)
    # identical clouds have an all-zero cost: any positive scale then works
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    Cn = Cd / scale[:, None, None]
    res = ot.batch.solve_batch(
        Cn, reg=reg, a=a, b=b, method="log_sinkhorn", max_iter=max_iter, tol=tol, grad="detach"
    )
    plan = res.plan.detach()
    ab = a.unsqueeze(2) * b.unsqueeze(1)
    pos = plan > 0
    kl_terms = torch.where(
        pos, plan * (torch.log(torch.where(pos, plan, 1.0)) - torch.log(torch.where(pos, ab, 1.0))), 0.0
    )
    kl = kl_terms.sum(dim=(1, 2))
    # d/dC of min_T <T, C> + eps KL is the optimal plan T (envelope theorem)
    return (plan * C).sum(dim=(1, 2)) + reg * scale * kl, scale


def sinkhorn_loss(
    x,
    y,
    x_weights=None,
    y_weights=None,
    *,
    reg=0.05,
    p=2,
    debias=True,
    normalize="median",
    max_iter=1000,
    tol=1e-6,
    reduction="mean",
):
    r"""Entropic optimal transport loss (Sinkhorn divergence), batched through POT.

    With cost ``C_ij = |x_i - y_j|^p`` and
    ``OT_eps(mu, nu) = min_T <T, C> + eps KL(T | a b^T)`` over couplings ``T`` of
    the weights ``a`` and ``b``, the loss is the Sinkhorn divergence
    ``OT_eps(mu, nu) - (OT_eps(mu, mu) + OT_eps(nu, nu)) / 2`` (``debias=True``;
    zero for equal clouds, no shrinking bias), or ``OT_eps(mu, nu)`` itself.
    As ``reg -> 0`` both tend to the exact ``W_p^p``.

    The plans come from POT's batched log-domain Sinkhorn
    (``ot.batch.solve_batch(..., method="log_sinkhorn")``) on the detached
    cost; gradients use the envelope theorem (the gradient of ``OT_eps`` with
    respect to ``C`` is the optimal plan), so no graph is kept through the
    iterations. The cost scale that ``reg`` is relative to is also detached,
    and the three terms of the divergence share the ``eps`` of the ``x``-``y``
    cost, as they must.

    Small ``reg`` needs more iterations: Sinkhorn converges at a rate that
    degrades like ``exp(-cost / eps)``, and a run that hits ``max_iter`` returns
    a plan whose marginals are off (raise ``max_iter`` or ``reg``). With
    heavy-tailed clouds prefer ``normalize="median"``: one far outlier makes the
    ``"max"`` scale, hence ``eps``, huge and the plan blurry for the bulk.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N, d)
        Predicted clouds.
    y : torch.Tensor of shape (B, M, d)
        Target clouds.
    x_weights, y_weights : torch.Tensor of shape (B, N) and (B, M), default=None
        Nonnegative point weights (zero = absent); ``None`` means uniform.
    reg : float, default=0.05
        Entropic regularisation, relative to the cost scale chosen by
        ``normalize`` (``eps = reg * scale``).
    p : float, default=2
        Exponent of the ground cost, in ``[1, 2]``.
    debias : bool, default=True
        Subtract the self-transport terms (Sinkhorn divergence).
    normalize : {"median", "max"} or None, default="median"
        Per-sample cost scale that ``reg`` is relative to: the median cost
        (robust to heavy-tailed outliers), the largest cost, or ``None`` for an
        absolute ``reg`` in cost units.
    max_iter : int, default=1000
        Maximum number of Sinkhorn iterations.
    tol : float, default=1e-6
        Stopping tolerance on the marginal violation.
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(B,)`` with ``reduction="none"``.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import sinkhorn_loss
    >>> x = torch.tensor([[[0.0], [1.0]]], dtype=torch.float64)
    >>> round(float(sinkhorn_loss(x, x + 2.0)), 3)  # W_2^2 = 2^2
    4.0
    >>> round(float(sinkhorn_loss(x, x + 2.0, debias=False)), 3)  # entropic bias
    4.137
    """
    reg = check_positive(reg, "reg")
    p = _check_power(p, "p", 1.0, 2.0, low_inclusive=True)
    if normalize not in ("median", "max", None):
        raise ValueError(f"normalize must be 'median', 'max' or None, got {normalize!r}.")
    max_iter = check_positive(max_iter, "max_iter", integer=True)
    tol = check_positive(tol, "tol")
    _check_reduction(reduction)
    x, y, a, b = _prepare(x, y, x_weights, y_weights)
    kw = dict(reg=reg, p=p, normalize=normalize, max_iter=max_iter, tol=tol)
    value, scale = _entropic_ot(x, y, a, b, **kw)
    if debias:  # the three terms must share eps, hence the scale of the x-y cost
        value_xx, _ = _entropic_ot(x, x, a, a, scale=scale, **kw)
        value_yy, _ = _entropic_ot(y, y, b, b, scale=scale, **kw)
        value = value - 0.5 * (value_xx + value_yy)
    return _reduce(value, reduction)


def mse_loss(x, y, x_weights=None, y_weights=None, *, reduction="mean"):
    """Paired mean squared error: point ``i`` of ``x`` against point ``i`` of ``y``.

    Only meaningful when the points are paired (e.g. a particle system where
    output particle ``i`` is input particle ``i`` moved); it is not a distance
    between measures (it changes when the points are permuted). Point weights,
    if any, multiply (``x_weights * y_weights``) and are normalised per sample.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N, d)
        Predicted clouds.
    y : torch.Tensor of shape (B, N, d)
        Paired targets with the same number of points.
    x_weights, y_weights : torch.Tensor of shape (B, N), default=None
        Nonnegative point weights (zero = absent); ``None`` means uniform.
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.

    Returns
    -------
    loss : torch.Tensor
        The weighted mean over points of the mean over features of
        ``(x - y)^2``: a scalar, or shape ``(B,)`` with ``reduction="none"``.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` have different numbers of points.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import mse_loss
    >>> round(float(mse_loss(torch.zeros(1, 3, 2), torch.ones(1, 3, 2))), 6)
    1.0
    """
    _check_reduction(reduction)
    x = _as_cloud(x, "x")
    y = _as_cloud(y, "y", like=x)
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"mse loss needs paired targets with the same number of points; got "
            f"{x.shape[1]} and {y.shape[1]} points per cloud. Use loss='energy', "
            "'sliced' or 'sinkhorn', which compare measures of any size."
        )
    x, y, a, b = _prepare(x, y, x_weights, y_weights)
    w = a * b
    if bool(torch.any(w.sum(dim=1) <= 0)):
        raise ValueError(
            "x_weights * y_weights is zero for every point of some sample; paired "
            "points need a positive weight on both sides."
        )
    w = w / w.sum(dim=1, keepdim=True)
    per_point = (x - y).square().mean(-1)
    return _reduce((w * per_point).sum(-1), reduction)


# --------------------------------------------------------------------------- #
# registry
# --------------------------------------------------------------------------- #
LOSSES = {
    "energy": energy_loss,
    "sliced": sliced_wasserstein_loss,
    "sinkhorn": sinkhorn_loss,
    "mse": mse_loss,
}
"""Built-in losses by name: ``"energy"``, ``"sliced"``, ``"sinkhorn"``, ``"mse"``."""

_PARAM_CHECKS = {
    "beta": lambda v: _check_power(v, "beta", 0.0, 2.0, low_inclusive=False),
    "n_projections": lambda v: check_positive(v, "n_projections", integer=True),
    "reg": lambda v: check_positive(v, "reg"),
    "max_iter": lambda v: check_positive(v, "max_iter", integer=True),
    "tol": lambda v: check_positive(v, "tol"),
    "reduction": _check_reduction,
}


def get_loss(name, **params):
    """Return a loss function ``loss(x, y, x_weights=None, y_weights=None)``.

    Parameters
    ----------
    name : str or callable
        A key of :data:`LOSSES` (``"energy"``, ``"sliced"``, ``"sinkhorn"``,
        ``"mse"``), or a user callable with the same signature, returned as is
        (with ``params`` bound as keywords).
    **params
        Keyword parameters of the loss (e.g. ``beta=1.5`` for ``"energy"``,
        ``n_projections=128`` for ``"sliced"``); checked now, not at the first
        call.

    Returns
    -------
    loss : callable
        ``loss(x, y, x_weights=None, y_weights=None) -> torch.Tensor``.

    Raises
    ------
    ValueError
        For an unknown name or an invalid parameter value.
    TypeError
        For a parameter the loss does not take.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import get_loss
    >>> loss = get_loss("energy", beta=1.0)
    >>> x = torch.zeros(1, 4, 2)
    >>> float(loss(x, x))
    0.0
    """
    if callable(name) and not isinstance(name, str):
        return functools.partial(name, **params) if params else name
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(
            f"Unknown loss {name!r}. Valid choices are {sorted(LOSSES)} or a callable "
            "loss(x, y, x_weights=None, y_weights=None)."
        )
    fn = LOSSES[name]
    allowed = [
        prm.name for prm in inspect.signature(fn).parameters.values() if prm.kind is prm.KEYWORD_ONLY
    ]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise TypeError(f"Loss {name!r} got unexpected parameter(s) {unknown}; it accepts {allowed}.")
    for key, value in params.items():
        if key in _PARAM_CHECKS:
            _PARAM_CHECKS[key](value)
    if "p" in params:
        high = 2.0 if name == "sinkhorn" else float("inf")
        _check_power(params["p"], "p", 1.0, high, low_inclusive=True)
    return functools.partial(fn, **params) if params else fn


def _split_points_weights(value, name):
    """Accept a tensor, a (points, weights) pair or a {"points", "weights"} dict."""
    if isinstance(value, dict):
        keys = set(value)
        points_key = next((k for k in ("points", "y", "X") if k in value), None)
        if points_key is None or not keys <= {points_key, "weights"}:
            raise ValueError(
                f"{name} as a dict must have keys 'points' and optionally 'weights', got {sorted(keys)}."
            )
        return value[points_key], value.get("weights")
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} as a tuple must be (points, weights), got {len(value)} items.")
        return value[0], value[1]
    return value, None


class MeasureLoss(nn.Module):
    """A point-cloud loss as a ``torch.nn.Module``, e.g. skorch's ``criterion``.

    Parameters
    ----------
    name : str or callable, default="energy"
        Loss name (see :data:`LOSSES`) or a callable, resolved by :func:`get_loss`.
    **params
        Keyword parameters of the loss.

    Notes
    -----
    Call convention: ``criterion(y_pred, y_true)`` (as skorch's ``get_loss``
    does) or ``criterion(y_pred, y_true, pred_weights, true_weights)``.
    ``y_pred`` and ``y_true`` are tensors ``(B, N, d)`` and ``(B, M, d)``; either
    may instead carry its point weights as a pair ``(points, weights)`` or a
    dict ``{"points": points, "weights": weights}``. Giving weights both ways
    is an error.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import MeasureLoss
    >>> criterion = MeasureLoss("energy")
    >>> y_pred = torch.zeros(2, 3, 1, requires_grad=True)
    >>> y_true = torch.ones(2, 5, 1)
    >>> loss = criterion(y_pred, y_true)
    >>> loss.backward()
    >>> round(loss.item(), 6)
    2.0
    >>> weights = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    >>> round(criterion(y_pred, {"points": y_true, "weights": weights}).item(), 6)
    2.0
    """

    def __init__(self, name="energy", **params):
        super().__init__()
        self.name = name
        self.params = params
        self.loss_fn = get_loss(name, **params)

    def forward(self, y_pred, y_true, pred_weights=None, true_weights=None):
        """Return the loss between ``y_pred`` and ``y_true`` (see class Notes)."""
        y_pred, w_pred = _split_points_weights(y_pred, "y_pred")
        y_true, w_true = _split_points_weights(y_true, "y_true")
        if w_pred is not None and pred_weights is not None:
            raise ValueError("pred_weights were given both inside y_pred and as an argument; give them once.")
        if w_true is not None and true_weights is not None:
            raise ValueError("true_weights were given both inside y_true and as an argument; give them once.")
        w_pred = pred_weights if w_pred is None else w_pred
        w_true = true_weights if w_true is None else w_true
        return self.loss_fn(y_pred, y_true, w_pred, w_true)

    def extra_repr(self):
        args = [repr(self.name)] + [f"{k}={v!r}" for k, v in self.params.items()]
        return ", ".join(args)
