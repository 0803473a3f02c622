"""Distances between weighted point clouds, written once for numpy and torch.

Every function here takes a batch of clouds ``x`` of shape ``(B, N, d)`` and
``y`` of shape ``(B, M, d)`` with weights ``a`` ``(B, N)`` and ``b`` ``(B, M)``
whose rows sum to one (zero = the point is absent), as numpy arrays or torch
tensors alike (POT's backends, ``ot.backend.get_backend``), and returns one
value per sample. The numpy metrics of :mod:`sklearn_measattn.metrics` call them
on one measure at a time, brought to unit scale first; the torch losses of
:mod:`sklearn_measattn.losses` call them on a training batch, through autograd.

The domains of their parameters, shared by both sides, are scikit-learn
constraints in ``_validation.py`` (``BETA``, ``ORDER``, ...).
"""

from __future__ import annotations

import numpy as np
import ot
import ot.batch
from ot.backend import get_backend
from scipy.spatial.distance import cdist


# --------------------------------------------------------------------------- #
# ground distances
# --------------------------------------------------------------------------- #
def distance_power(x, y, power):
    """``|x_i - y_j| ** power`` per sample, shape ``(B, N, M)``.

    Equal points are at distance exactly 0 (no ``|x|^2 + |y|^2 - 2<x, y>``
    cancellation for clouds of few features), so identical clouds have
    distance 0. numpy goes through scipy's ``cdist``; torch through
    broadcasting, with a zero (not NaN) gradient at coincident points.
    """
    if isinstance(x, np.ndarray):
        metric = "sqeuclidean" if power == 2 else "euclidean"
        distances = np.empty((x.shape[0], x.shape[1], y.shape[1]))
        for u, v, out in zip(x, y, distances):
            cdist(u, v, metric, out=out)
        if power not in (1, 2):
            np.power(distances, power, out=distances)
        return distances
    return _torch_distance_power(x, y, power)


def _torch_distance_power(x, y, power):
    import torch

    if x.shape[-1] <= 16:
        sq = (x.unsqueeze(2) - y.unsqueeze(1)).square().sum(-1)
    else:  # |x|^2 + |y|^2 - 2<x, y>: O(B N M) memory instead of O(B N M d)
        sq = x.square().sum(-1).unsqueeze(2) + y.square().sum(-1).unsqueeze(1) - 2.0 * x @ y.transpose(1, 2)
        sq = sq.clamp_min(0.0)
    if power == 2:
        return sq
    # sqrt has an infinite derivative at 0, which autograd turns into NaN on the
    # diagonal of |X - X'|: mask exact zeros inside the power, so both branches of
    # torch.where have finite gradients. NaN and inf distances (overflowed
    # predictions) are not masked: they must reach the loss.
    zero = sq == 0
    safe = torch.where(zero, torch.ones_like(sq), sq)
    return torch.where(zero, torch.zeros_like(sq), safe.pow(power / 2.0))


# --------------------------------------------------------------------------- #
# energy distance
# --------------------------------------------------------------------------- #
# --------------------------------------------------------------------------- #
# sliced Wasserstein
# --------------------------------------------------------------------------- #
def sliced_wasserstein_batch(x, a, y, b, projections, p, *, root=False):
    r"""Sliced Wasserstein ``SW_p^p`` (or ``SW_p`` with ``root``) per sample.

    ``SW_p^p = (1/L) sum_l W_p^p(theta_l # mu, theta_l # nu)`` over the
    ``L`` unit directions, the columns of ``projections`` ``(d, L)``. Each 1-D
    distance is exact: POT's ``ot.wasserstein_1d`` (weighted quantile
    functions), or sorted projections paired in order when both clouds are
    uniform with ``N == M`` (the same value, several times faster). On that
    path ``root=True`` computes relative to the largest gap, so that no power
    of a gap overflows or underflows however large ``p`` is.
    """
    nx = get_backend(x, y)
    x_proj, y_proj = x @ projections, y @ projections  # (B, N, L), (B, M, L)
    if x.shape[1] == y.shape[1] and _is_uniform(a) and _is_uniform(b):
        gaps = nx.abs(nx.sort(x_proj, axis=1) - nx.sort(y_proj, axis=1))
        if not root:
            return nx.mean(nx.reshape(gaps**p, (gaps.shape[0], -1)), axis=1)
        largest = nx.max(nx.reshape(nx.detach(gaps), (gaps.shape[0], -1)), axis=1)
        positive = largest > 0
        unit = nx.where(positive, largest, nx.ones(largest.shape, type_as=largest))
        relative = nx.mean(nx.reshape((gaps / unit[:, None, None]) ** p, (gaps.shape[0], -1)), axis=1)
        return nx.where(positive, unit * relative ** (1.0 / p), nx.zeros(largest.shape, type_as=largest))
    # POT's 1-D solver batches over one trailing axis: lay (sample, direction) pairs along it
    n_samples, n_directions = x.shape[0], projections.shape[1]

    def columns(values, weights):
        n = values.shape[1]
        values = nx.reshape(nx.transpose(values, (1, 0, 2)), (n, n_samples * n_directions))
        weights = nx.reshape(nx.repeat(nx.transpose(weights)[:, :, None], n_directions, axis=2), values.shape)
        return values, weights

    (u, u_weights), (v, v_weights) = columns(_park_absent(x_proj, a, nx), a), columns(_park_absent(y_proj, b, nx), b)
    per_direction = ot.wasserstein_1d(u, v, u_weights, v_weights, p=p)
    value = nx.mean(nx.reshape(per_direction, (n_samples, n_directions)), axis=1)
    return value ** (1.0 / p) if root else value


def _park_absent(values, weights, nx):
    """Move zero-weight points onto the largest present value of their column.

    Cumulative weights that end at ``1 + 2e-16`` on one side make POT's quantile
    functions reach past the last present point, by a step of ``2e-16``: an
    absent point far away (padding) would then add ``2e-16 |gap|^p``.
    """
    present = weights[:, :, None] > 0
    if bool(present.all()):
        return values
    lowest = nx.min(values, axis=1, keepdims=True)
    top = nx.max(nx.where(present, values, lowest), axis=1, keepdims=True)
    return nx.where(present, values, top)


def _is_uniform(weights):
    return bool((weights == weights[:, :1]).all())


# --------------------------------------------------------------------------- #
# entropic optimal transport
# --------------------------------------------------------------------------- #
def sinkhorn_plan(cost, a, b, eps, *, max_iter, tol):
    """Entropic optimal plan ``argmin_T <T, C> + eps KL(T | a b^T)`` per sample.

    Computed by POT on the detached cost, with one ``eps`` per sample (shape
    ``(B,)``): torch batches go through its batched log-domain Sinkhorn
    (``ot.batch.solve_batch``, one pass for the whole batch, on any device);
    numpy measures through its log-stabilised Sinkhorn (``ot.sinkhorn``), one
    at a time, several times faster on the CPU for the same plan. Returns the
    plan ``(B, N, M)`` and, per sample, the largest violation of its marginals
    (below ``tol`` once Sinkhorn has converged).
    """
    nx = get_backend(cost, a, b)
    cost = nx.detach(cost)
    if isinstance(cost, np.ndarray):
        plan = np.zeros(cost.shape)
        for plan_i, cost_i, a_i, b_i, eps_i in zip(plan, cost, a, b, eps):
            rows, cols = a_i > 0, b_i > 0  # zero weights: absent points, no log(0)
            plan_i[np.ix_(rows, cols)] = ot.sinkhorn(
                a_i[rows], b_i[cols], cost_i[np.ix_(rows, cols)], float(eps_i), method="sinkhorn_stabilized",
                numItermax=max_iter, stopThr=tol, warn=False,
            )
    else:
        result = ot.batch.solve_batch(
            cost / eps[:, None, None], reg=1.0, a=a, b=b, method="log_sinkhorn", max_iter=max_iter, tol=tol,
            grad="detach",
        )
        plan = nx.detach(result.plan)
    violation = nx.maximum(
        nx.max(nx.abs(nx.sum(plan, axis=2) - a), axis=1), nx.max(nx.abs(nx.sum(plan, axis=1) - b), axis=1)
    )
    return plan, violation


def entropic_transport_value(cost, plan, a, b, eps):
    """``<T, C> + eps KL(T | a b^T)`` per sample, for a plan from :func:`sinkhorn_plan`.

    Its gradient with respect to ``cost`` is the plan (envelope theorem), so
    no graph is kept through the Sinkhorn iterations.
    """
    nx = get_backend(cost, plan)
    product = a[:, :, None] * b[:, None, :]
    positive = plan > 0
    ones = nx.ones(plan.shape, type_as=plan)
    log_ratio = nx.log(nx.where(positive, plan, ones)) - nx.log(nx.where(positive, product, ones))
    kl = nx.sum(nx.where(positive, plan * log_ratio, 0.0 * ones), axis=(1, 2))
    return nx.sum(plan * cost, axis=(1, 2)) + eps * kl

