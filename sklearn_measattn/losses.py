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
quantile   pinball loss of the sorted points at      d == 1, x's points
           quantile levels (the CRPS for one offset) equally weighted
========== ========================================= ======================

The energy, sliced and entropic distances are computed by the same code as
the metrics of :mod:`sklearn_measattn.metrics` (``energy_loss`` equals
``energy_distance``, ``sliced_wasserstein_loss`` is the ``p``-th power of
``wasserstein_distance(method="sliced")`` for the same directions), and their
parameters have the same ranges.

:func:`get_loss` turns a name (or a callable) into a loss function and
:class:`MeasureLoss` wraps it as a ``torch.nn.Module`` usable as skorch's
``criterion``.
"""

from __future__ import annotations

import functools
from numbers import Integral, Real

import torch
from torch import nn

from ._distances import (
    ENERGY_BACKENDS,
    REDUCTION,
    distance_power,
    energy_distance_batch,
    entropic_transport_value,
    prepare_clouds,
    reduce,
    sinkhorn_plan,
    sliced_wasserstein_batch,
    split_points_weights,
)
from ._param_validation import validate_parameter_constraints, validate_params
from ._validation import (
    BETA,
    ORDER,
    POSITIVE_INT,
    POSITIVE_REAL,
    Choices,
    Described,
    NumberInterval,
    check_keyword_arguments,
)

__all__ = [
    "LOSSES",
    "MeasureLoss",
    "energy_loss",
    "get_loss",
    "mse_loss",
    "quantile_loss",
    "sinkhorn_loss",
    "sliced_wasserstein_loss",
]


# --------------------------------------------------------------------------- #
# losses
# --------------------------------------------------------------------------- #
# Each loss has one table of its keyword parameters and their domains, checked
# by scikit-learn's ``validate_params`` at every call; :func:`get_loss` checks
# the parameters it binds against the same table. The clouds and their weights
# are checked by ``prepare_clouds``.
_HALF_DTYPES = (torch.float16, torch.bfloat16)


@validate_params(
    {"beta": [BETA], "reduction": [REDUCTION], "backend": [Choices(ENERGY_BACKENDS)]},
    prefer_skip_nested_validation=True,
)
def energy_loss(x, y, x_weights=None, y_weights=None, *, beta=1.0, reduction="mean", backend="auto"):
    r"""Energy distance between weighted point clouds, batched.

    .. math::

        \mathcal{E}_\beta(\mu, \nu) = 2\,\mathbb{E}|X - Y|^\beta
        - \mathbb{E}|X - X'|^\beta - \mathbb{E}|Y - Y'|^\beta,

    with ``X, X' ~ mu`` and ``Y, Y' ~ nu`` independent, computed exactly as a
    weighted V-statistic (the diagonal terms ``|x_i - x_i| = 0`` included). It is
    nonnegative, zero only for equal measures when ``0 < beta < 2``, and needs
    no tuning. Gradients are finite even for coincident points.

    No ``N x M`` array is held: one sweep over the pairs computes the value
    and its analytic gradient
    ``dE/dx_i = 2 a_i sum_j (b_j g(x_i - y_j) - a_j g(x_i - x_j))`` with
    ``g(z) = beta |z|^(beta - 2) z`` (``0`` at ``z = 0``), so memory is
    ``O(B (N + M) d)`` and the backward pass is a multiplication. On the CPU
    this runs in C++ (built with the fused attention kernels), elsewhere in
    blocks of plain PyTorch. The gradient is not itself differentiable: for
    second derivatives pass ``backend="reference"``.

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
        Exponent of the distance, in the open interval ``(0, 2)``, where the
        energy distance is a metric between measures (at ``beta = 2`` it would
        only compare means).
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.
    backend : {"auto", "fused", "chunked", "reference"}, default="auto"
        ``"fused"``: C++ on the CPU (float32 and float64); ``"chunked"``: row
        blocks of PyTorch ops, on any device; ``"reference"``: the dense
        formula through autograd, ``O(B N M d)`` memory, twice
        differentiable. ``"auto"`` takes ``"fused"`` where it runs, else
        ``"chunked"``. All give the same value to rounding.

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(B,)`` with ``reduction="none"``. It can be
        slightly negative (``~ -1e-16`` relative) through rounding. Float16
        and bfloat16 clouds are compared in float32 (their gradients flow back
        in their own dtype) and the loss is float32.

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
    if torch.is_tensor(x) and x.dtype in _HALF_DTYPES:
        # Pairwise distances have no half-precision kernels, and half precision would lose the
        # small differences of large terms that the energy distance is: computed in float32.
        x, y, x_weights, y_weights = (
            t.float() if torch.is_tensor(t) and t.is_floating_point() else t for t in (x, y, x_weights, y_weights)
        )
    x, y, a, b = prepare_clouds(x, y, x_weights, y_weights)
    return reduce(energy_distance_batch(x, a, y, b, beta, backend=backend), reduction)


def _random_directions(n_projections, d, generator, like):
    if isinstance(generator, Integral):
        generator = torch.Generator().manual_seed(int(generator))
    device = generator.device if generator is not None else like.device
    theta = torch.randn(n_projections, d, generator=generator, device=device, dtype=like.dtype)
    theta = theta.to(like.device)
    return theta / theta.norm(dim=1, keepdim=True).clamp_min(torch.finfo(like.dtype).tiny)


@validate_params(
    {
        "n_projections": [POSITIVE_INT],
        "p": [ORDER],
        "generator": [
            None,
            Described(NumberInterval(Integral, None, None, closed="neither"), "an int seed"),
            Described(torch.Generator, "a torch.Generator"),
        ],
        "reduction": [REDUCTION],
    },
    prefer_skip_nested_validation=True,
)
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
    with ``N == M``, otherwise POT's ``ot.wasserstein_1d`` (weighted quantile
    functions). Note it returns the ``p``-th power (smooth at zero), not
    ``SW_p``; :func:`sklearn_measattn.metrics.wasserstein_distance` with
    ``method="sliced"`` computes the same distance (its ``p``-th root) with
    the same code.

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
    x, y, a, b = prepare_clouds(x, y, x_weights, y_weights)
    theta = _random_directions(n_projections, x.shape[-1], generator, x)
    return reduce(sliced_wasserstein_batch(x, a, y, b, theta.T, p), reduction)


def _cost_scale(cost, a, b, normalize):
    """Per-sample scale of the detached cost that ``reg`` is relative to."""
    cost = cost.detach()
    if normalize == "median":
        support = (a.unsqueeze(2) > 0) & (b.unsqueeze(1) > 0)
        masked = torch.where(support, cost, torch.full_like(cost, float("nan")))
        scale = torch.nanmedian(masked.flatten(1), dim=1).values
    elif normalize == "max":
        scale = cost.flatten(1).amax(dim=1)
    else:
        scale = torch.ones(cost.shape[0], dtype=cost.dtype, device=cost.device)
    # identical clouds have an all-zero cost: any positive scale then works
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def _entropic_value(cost, a, b, eps, max_iter, tol):
    plan, _ = sinkhorn_plan(cost, a, b, eps, max_iter=max_iter, tol=tol)
    return entropic_transport_value(cost, plan, a, b, eps)


@validate_params(
    {
        "reg": [POSITIVE_REAL],
        "p": [ORDER],
        "debias": ["boolean"],
        "normalize": [Choices(("median", "max")), None],
        "max_iter": [POSITIVE_INT],
        "tol": [POSITIVE_REAL],
        "reduction": [REDUCTION],
    },
    prefer_skip_nested_validation=True,
)
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
        Exponent of the ground cost, ``p >= 1``.
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
    x, y, a, b = prepare_clouds(x, y, x_weights, y_weights)
    cost = distance_power(x, y, p)
    eps = reg * _cost_scale(cost, a, b, normalize)
    value = _entropic_value(cost, a, b, eps, max_iter, tol)
    if debias:  # the three terms must share eps, hence the scale of the x-y cost
        value = value - 0.5 * (_entropic_value(distance_power(x, x, p), a, a, eps, max_iter, tol)
                               + _entropic_value(distance_power(y, y, p), b, b, eps, max_iter, tol))
    return reduce(value, reduction)


@validate_params({"reduction": [REDUCTION]}, prefer_skip_nested_validation=True)
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
    x, y, a, b = prepare_clouds(x, y, x_weights, y_weights)
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"mse loss needs paired targets with the same number of points; got "
            f"{x.shape[1]} and {y.shape[1]} points per cloud. Use loss='energy', "
            "'sliced' or 'sinkhorn', which compare measures of any size."
        )
    w = a * b
    if bool(torch.any(w.sum(dim=1) <= 0)):
        raise ValueError(
            "x_weights * y_weights is zero for every point of some sample; paired "
            "points need a positive weight on both sides."
        )
    w = w / w.sum(dim=1, keepdim=True)
    per_point = (x - y).square().mean(-1)
    return reduce((w * per_point).sum(-1), reduction)


@validate_params(
    {"level_offset": [NumberInterval(Real, 0, 1, closed="left")], "reduction": [REDUCTION]},
    prefer_skip_nested_validation=True,
)
def quantile_loss(x, y, x_weights=None, y_weights=None, *, level_offset=0.5, reduction="mean"):
    """Pinball loss of one-dimensional predicted points read as quantiles of the target's law.

    The ``N`` predicted points of a sample, sorted, are taken as the
    quantiles of the target's law at the levels ``(k - a) / (N + 1 - 2a)``,
    ``k = 1..N``, ``a = level_offset``; the loss is the mean over the points
    and over the target points of the pinball loss ``rho_tau(u) = u (tau -
    1[u < 0])`` of ``u = target - quantile``. It is minimised when each point
    sits at its quantile of the law the targets are drawn from, so a model
    trained with it against single draws (one target point per sample)
    learns a calibrated ensemble, point by point.

    ``a = 0.5`` gives the levels ``(2k - 1) / (2N)``: then, against one
    target point, the loss is exactly half the CRPS of the predicted
    ensemble, a quarter of :func:`energy_loss`. ``a = 0`` gives ``k / (N + 1)``, the levels at which a
    rank histogram places the members; ``a = 0.3`` gives ``(k - 0.3) / (N +
    0.4)``, between them, at which the ``N`` points of a Gaussian sample
    have about the spread of the law they are drawn from.

    Parameters
    ----------
    x : torch.Tensor of shape (B, N, 1)
        Predicted clouds of one feature.
    y : torch.Tensor of shape (B, M, 1)
        Target clouds (often ``M = 1``: one draw of the law per sample).
    x_weights : torch.Tensor of shape (B, N), default=None
        Must be uniform within each sample (levels are defined for equally
        weighted points); ``None`` means uniform.
    y_weights : torch.Tensor of shape (B, M), default=None
        Nonnegative target weights (zero = absent); ``None`` means uniform.
    level_offset : float in [0, 1), default=0.5
        ``a`` in the levels ``(k - a) / (N + 1 - 2a)``.
    reduction : {"mean", "sum", "none"}, default="mean"
        How to combine the ``B`` per-sample values.

    Returns
    -------
    loss : torch.Tensor
        A scalar, or shape ``(B,)`` with ``reduction="none"``.

    Raises
    ------
    ValueError
        If the clouds have more than one feature or ``x_weights`` are not
        uniform within a sample.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import quantile_loss
    >>> x = torch.tensor([[[-1.0], [0.0], [1.0]]])
    >>> round(float(quantile_loss(x, torch.zeros(1, 1, 1))), 6)  # levels 1/6, 1/2, 5/6
    0.111111
    >>> round(float(quantile_loss(x, torch.zeros(1, 1, 1), level_offset=0.0)), 6)  # 1/4, 1/2, 3/4
    0.166667
    """
    x, y, a, b = prepare_clouds(x, y, x_weights, y_weights)
    if x.shape[-1] != 1:
        raise ValueError(
            f"quantile loss compares one-dimensional points (quantiles of a scalar law); got {x.shape[-1]} "
            "features per point. Use loss='energy' or 'sliced' for several features."
        )
    if x_weights is not None and bool(torch.any((a - a[:, :1]).abs() > 1e-6 * a[:, :1])):
        raise ValueError(
            "quantile loss reads the predicted points as quantiles at fixed levels, which needs them equally "
            "weighted; got x_weights that differ within a sample. Pass x_weights=None."
        )
    n = x.shape[1]
    k = torch.arange(1, n + 1, dtype=x.dtype, device=x.device)
    levels = (k - level_offset) / (n + 1 - 2 * level_offset)
    quantiles = torch.sort(x[..., 0], dim=1).values
    u = y[..., 0][:, None, :] - quantiles[:, :, None]  # (B, N, M)
    pinball = u * (levels[None, :, None] - (u < 0).to(u.dtype))
    return reduce((pinball.mean(dim=1) * b).sum(dim=1), reduction)


# --------------------------------------------------------------------------- #
# registry
# --------------------------------------------------------------------------- #
LOSSES = {
    "energy": energy_loss,
    "sliced": sliced_wasserstein_loss,
    "sinkhorn": sinkhorn_loss,
    "mse": mse_loss,
    "quantile": quantile_loss,
}
"""Built-in losses by name: ``"energy"``, ``"sliced"``, ``"sinkhorn"``, ``"mse"``, ``"quantile"``."""

# get_loss's own table; the parameters it binds are checked against the table of the loss they are for.
_GET_LOSS_PARAMETERS = {
    "name": [Choices(LOSSES), Described(callable, "a callable loss(x, y, x_weights=None, y_weights=None) -> torch.Tensor")],
}


def get_loss(name, **params):
    """Return a loss function ``loss(x, y, x_weights=None, y_weights=None)``.

    Parameters
    ----------
    name : str or callable
        A key of :data:`LOSSES` (``"energy"``, ``"sliced"``, ``"sinkhorn"``,
        ``"mse"``, ``"quantile"``), or a user callable with the same signature, returned as is
        (with ``params`` bound as keywords).
    **params
        Keyword parameters of the loss (e.g. ``beta=1.5`` for ``"energy"``,
        ``n_projections=128`` for ``"sliced"``); for a named loss, checked now
        against the loss's own table of parameters and domains, not at the
        first call.

    Returns
    -------
    loss : callable
        ``loss(x, y, x_weights=None, y_weights=None) -> torch.Tensor``.

    Raises
    ------
    ValueError
        For an unknown name, a parameter the loss does not take, or a value
        outside its domain. The error is also a ``TypeError``: catch either.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.losses import get_loss
    >>> loss = get_loss("energy", beta=1.0)
    >>> x = torch.zeros(1, 4, 2)
    >>> float(loss(x, x))
    0.0
    """
    validate_parameter_constraints(_GET_LOSS_PARAMETERS, {"name": name}, caller_name="get_loss")
    if isinstance(name, str):
        fn = LOSSES[name]
        check_keyword_arguments(fn, params, caller=f"get_loss({name!r})")
    else:
        fn = name
    return functools.partial(fn, **params) if params else fn


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
        y_pred, w_pred = split_points_weights(y_pred, "y_pred")
        y_true, w_true = split_points_weights(y_true, "y_true")
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
