"""Distances between paired measures: Wasserstein (exact, sliced, Sinkhorn), energy distance, MMD."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import ot
from scipy.spatial.distance import cdist
from sklearn.utils import check_random_state

# the distances and their parameters' domains, shared with the training losses
from .._distances import distance_power, energy_distance_batch, sinkhorn_plan, sliced_wasserstein_batch
from .._param_validation import validate_params
from .._validation import BETA, N_JOBS, ORDER, POSITIVE_INT, POSITIVE_REAL, Choices
from ._base import (
    _MULTIOUTPUT,
    _aggregate,
    _binary_scale,
    _per_sample_at_unit_scale,
    _prepare,
    _times_power,
    _weighted_median,
)

# The measures, their point weights and the sample weights are in no table:
# ``_prepare`` checks them (``_validation.check_measure_pair``).


def _wasserstein_one(x, a, y, b, scale, p, method, reg, projections):
    # W_p is homogeneous of degree 1: solved at unit scale, the result scaled back.
    if method == "sliced":
        return float(scale * sliced_wasserstein_batch(x[None], a[None], y[None], b[None], projections, p, root=True)[0])
    distances = distance_power(x[None], y[None], 1)[0]
    if float(distances.max()) == 0.0:
        return 0.0
    # Costs relative to the largest distance (a power of two): for large p the
    # raw |x - y|^p would overflow.
    largest = _binary_scale(distances)
    M = distance_power(x[None] / largest, y[None] / largest, p)[0]
    if method == "exact":
        plan = ot.emd(a, b, M, numItermax=max(100000, 50 * x.shape[0] * y.shape[0]))
        cost = float(np.sum(plan * M))
        if cost <= 0.0 and float(np.sum(plan * distances)) > 0.0:
            raise ValueError(
                f"W_p with p={p:g} underflows float64 on these measures: the transport costs "
                f"(|x - y| / max|x - y|)^p are all below 1e-308. Use a smaller p."
            )
    else:
        cost = _sinkhorn_cost(a, b, M, reg, scale * largest, p)
    return float(scale * largest * max(float(cost), 0.0) ** (1.0 / p))


_SINKHORN_MAX_ITER, _SINKHORN_TOL = 5000, 1e-9


def _sinkhorn_cost(a, b, M, reg, unit, p):
    """``<P_reg, M>`` for the entropic plan of the costs ``M`` measured in ``unit**p``."""
    reg_scaled = reg / unit**p
    if not (np.isfinite(reg_scaled) and reg_scaled > 0):
        raise ValueError(
            f"reg={reg!r} cannot be expressed at the scale of these measures (costs up to "
            f"{unit:.3g}^{p:g}); reg is absolute, in units of |x - y|^p. Use "
            "method='exact' or 'sliced', which work at every scale."
        )
    plan, violation = sinkhorn_plan(
        M[None], a[None], b[None], np.array([reg_scaled]), max_iter=_SINKHORN_MAX_ITER, tol=_SINKHORN_TOL
    )
    cost = float(np.sum(plan * M))
    if not np.isfinite(cost):
        raise ValueError(
            f"Sinkhorn returned a non-finite cost ({cost}) for ground costs up to "
            f"{unit:.3g}^{p:g} with reg={reg!r}; reg is absolute, in units of |x - y|^p. "
            "Raise reg to the scale of the costs, or use method='exact'."
        )
    if float(violation[0]) > _SINKHORN_TOL:
        warnings.warn(
            f"Sinkhorn did not converge in {_SINKHORN_MAX_ITER} iterations (marginals off by "
            f"{float(violation[0]):.2g}); raise reg (absolute, in units of |x - y|^p) or use method='exact'.",
            UserWarning,
            stacklevel=6,  # the caller of wasserstein_distance, above its parameter check
        )
    return cost


@validate_params(
    {
        "p": [ORDER],
        "method": [Choices(("exact", "sliced", "sinkhorn"))],
        "n_projections": [POSITIVE_INT],
        "reg": [POSITIVE_REAL],
        "multioutput": [_MULTIOUTPUT],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def wasserstein_distance(
    y_true,
    y_pred,
    *,
    p=1,
    method="exact",
    n_projections=200,
    reg=0.05,
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
    n_jobs=None,
    random_state=None,
):
    r"""Wasserstein-p distance between paired measures, with POT.

    For each sample ``i`` computes ``W_p(mu_i, nu_i)`` between ``y_true[i]`` and
    ``y_pred[i]`` with Euclidean ground distance:
    ``W_p = (min_P <P, |x - y|^p>)^(1/p)``.

    - ``method="exact"``: network simplex ``ot.emd2`` on the cost
      ``M = |x - y| ** p`` (Euclidean distances from ``scipy.spatial.distance.cdist``,
      exact 0 between equal points), so ``W_2`` is the square root of ``emd2``
      with squared-Euclidean cost. Cost ``O(n^3)`` per sample.
    - ``method="sliced"``: the sliced Wasserstein distance
      ``(E_theta W_p^p(theta#mu, theta#nu))^(1/p)`` over ``n_projections``
      random unit directions, each 1-D distance exact (POT's
      ``ot.wasserstein_1d``). It is a different distance, not an estimate of
      ``W_p``: it is ``<= W_p`` and, e.g. for a translation by ``t`` in
      ``d = 2``, ``SW_1 = (2/pi)|t|`` and ``SW_2 = |t| / sqrt(2)``. In 1-D it
      equals ``W_p`` exactly. The training loss
      :func:`~sklearn_measattn.losses.sliced_wasserstein_loss` computes its
      ``p``-th power with the same code.
    - ``method="sinkhorn"``: entropic OT (POT's log-stabilised Sinkhorn), returning
      ``<P_reg, M>^(1/p)`` for the entropic plan ``P_reg``, the plan that
      :func:`~sklearn_measattn.losses.sinkhorn_loss` computes for the same
      clouds with ``normalize=None``. This is an
      approximation biased *upwards* (``P_reg`` is not optimal for ``M``); the
      bias grows with ``reg``, which is absolute, in units of the cost
      ``|x - y|^p`` -- scale it to your data. A ``UserWarning`` says when
      Sinkhorn does not converge in 5000 iterations; raise ``reg`` then.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    p : float, default=1
        Order of the distance, ``p >= 1``.
    method : {"exact", "sliced", "sinkhorn"}, default="exact"
        Solver; see above.
    n_projections : int, default=200
        Number of random directions for ``method="sliced"``.
    reg : float, default=0.05
        Entropic regularisation for ``method="sinkhorn"`` (absolute, > 0).
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
        ``None`` means uniform weights.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.
    n_jobs : int, default=None
        Number of joblib workers over samples (worth it for ``"exact"`` on many
        samples). ``None`` means 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the projections of ``method="sliced"``.

    Returns
    -------
    distance : float or ndarray of shape (n_samples,)
        Mean distance, or per-sample distances with ``multioutput="raw_values"``.

    Raises
    ------
    ValueError
        For ``p < 1``, an unknown ``method``, invalid measures (wrong rank,
        NaN/inf, empty, mismatched ``n_samples`` or ``n_features``) or invalid
        weights.

    See Also
    --------
    energy_distance, mmd

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import wasserstein_distance
    >>> y_true = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    >>> wasserstein_distance(y_true, y_true + [3.0, 4.0])
    5.0
    >>> wasserstein_distance(y_true, y_true + [3.0, 4.0], p=2, multioutput="raw_values")
    array([5.])
    """
    y_true, y_pred, w_true, w_pred, sw = _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight)
    n_samples, _, n_features = y_true.shape
    projections = [None] * n_samples
    if method == "sliced":
        rng = check_random_state(random_state)
        projections = []
        for _ in range(n_samples):
            theta = rng.standard_normal((n_features, n_projections))
            projections.append(theta / np.linalg.norm(theta, axis=0, keepdims=True))
    values = _per_sample_at_unit_scale(
        _wasserstein_one, y_true, y_pred, w_true, w_pred,
        extras=[(p, method, reg, theta) for theta in projections], n_jobs=n_jobs,
    )
    return _aggregate(values, sw, multioutput)


# --------------------------------------------------------------------------- #
# energy distance and MMD
# --------------------------------------------------------------------------- #
def _energy_one(x, a, y, b, scale, beta):
    # E is homogeneous of degree beta: computed at unit scale, scaled back.
    unit = max(float(energy_distance_batch(x[None], a[None], y[None], b[None], beta)[0]), 0.0)
    return _times_power(unit, scale, beta, "energy distance")


@validate_params({"beta": [BETA], "multioutput": [_MULTIOUTPUT]}, prefer_skip_nested_validation=True)
def energy_distance(
    y_true,
    y_pred,
    *,
    beta=1.0,
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
):
    r"""Squared energy distance ``E`` between paired measures.

    For each sample computes the weighted V-statistic

    ``E(mu, nu) = 2 E|X - Y|^beta - E|X - X'|^beta - E|Y - Y'|^beta``,

    with ``X, X' ~ mu`` and ``Y, Y' ~ nu`` independent, Euclidean norms, and the
    expectations taken exactly under the (weighted) empirical measures
    (``X = X'`` pairs included). ``E >= 0``, ``E = 0`` iff ``mu = nu``, and it
    depends only on the measures (repeating a point ``k`` times equals giving
    it weight ``k``).

    This returns ``E`` itself, *not* its square root: it is the quantity the
    energy loss minimises and it is linear in each measure's weights.
    ``scipy.stats.energy_distance(u, v, u_weights, v_weights)`` is defined as
    ``sqrt(2 E|X-Y| - E|X-X'| - E|Y-Y'|)`` in 1-D, so for 1-D measures and
    ``beta=1``::

        energy_distance(y_true, y_pred) == scipy.stats.energy_distance(u, v) ** 2

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    beta : float, default=1.0
        Exponent of the distance, in the open interval ``(0, 2)``.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.

    Returns
    -------
    energy : float or ndarray of shape (n_samples,)
        Mean of ``E`` over samples, or per-sample ``E`` with
        ``multioutput="raw_values"``. Tiny negative values from rounding are
        clipped to 0.

    Raises
    ------
    ValueError
        For ``beta`` outside ``(0, 2)`` or invalid measures or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import energy_distance
    >>> y_true = np.array([[[0.0], [1.0]]])
    >>> energy_distance(y_true, y_true)
    0.0
    >>> energy_distance(y_true, y_true + 2.0)  # 2*2 - 0.5 - 0.5
    3.0
    """
    y_true, y_pred, w_true, w_pred, sw = _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight)
    values = _per_sample_at_unit_scale(functools.partial(_energy_one, beta=beta), y_true, y_pred, w_true, w_pred)
    return _aggregate(values, sw, multioutput)


def _median_bandwidth(z, c):
    """Weighted lower median of |Z - Z'|, Z, Z' iid from sum c_i delta_{z_i}."""
    d = cdist(z, z).ravel()
    h = _weighted_median(d, np.outer(c, c).ravel())
    return h if h > 0 else 1.0


def _mmd_one(x, a, y, b, scale, bandwidth):
    # The kernel depends on |x - y| / h only: both measures at unit scale.
    if bandwidth == "median":
        log_h = math.log(_median_bandwidth(np.concatenate([x, y]), np.concatenate([a, b]) / 2.0))
    else:
        log_h = math.log(bandwidth) - math.log(scale)

    def gram(u, v):
        # log(0) = -inf on the diagonal gives kernel 1; overflow to inf, kernel 0
        with np.errstate(divide="ignore", over="ignore"):
            return np.exp(-0.5 * np.exp(2.0 * (np.log(cdist(u, v)) - log_h)))

    return max(a @ gram(x, x) @ a + b @ gram(y, y) @ b - 2.0 * (a @ gram(x, y) @ b), 0.0)


@validate_params(
    {
        "bandwidth": [Choices(("median",)), POSITIVE_REAL],
        "multioutput": [_MULTIOUTPUT],
    },
    prefer_skip_nested_validation=True,
)
def mmd(
    y_true,
    y_pred,
    *,
    bandwidth="median",
    weights_true=None,
    weights_pred=None,
    sample_weight=None,
    multioutput="uniform_average",
):
    r"""Squared maximum mean discrepancy ``MMD^2`` with a Gaussian kernel.

    For each sample computes the weighted V-statistic

    ``MMD^2 = E k(X, X') + E k(Y, Y') - 2 E k(X, Y)``,
    ``k(x, y) = exp(-|x - y|^2 / (2 h^2))``,

    with expectations taken exactly under the (weighted) empirical measures,
    diagonal pairs included; so it depends only on the measures (integer
    weights equal repeated points). Returns ``MMD^2``, not ``MMD``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples, n_points_true, n_features) or list
        Target measures (a list of 2-D arrays may be ragged).
    y_pred : array-like of shape (n_samples, n_points_pred, n_features) or list
        Predicted measures.
    bandwidth : float or "median", default="median"
        Kernel bandwidth ``h > 0``. ``"median"`` picks, per sample, the median
        heuristic: the lower weighted median of ``|Z - Z'|`` for ``Z, Z'``
        independent draws from the pooled measure ``(mu + nu) / 2`` (1.0 if
        that median is 0). A fixed float makes values comparable across samples.
    weights_true, weights_pred : array-like of shape (n_samples, n_points), default=None
        Nonnegative per-point weights (0 = absent point); normalised per measure.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the samples in the average.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        Return the (weighted) mean over samples, or one value per sample.

    Returns
    -------
    mmd2 : float or ndarray of shape (n_samples,)
        Mean of ``MMD^2`` over samples, or per-sample values with
        ``multioutput="raw_values"``; in ``[0, 2]``.

    Raises
    ------
    ValueError
        For a non-positive bandwidth, an unknown bandwidth rule, or invalid
        measures or weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import mmd
    >>> y_true = np.array([[[0.0], [1.0]]])
    >>> mmd(y_true, y_true)
    0.0
    >>> round(mmd(y_true, y_true + 100.0, bandwidth=1.0), 6)  # far apart: (1 + exp(-1/2)) / 2 * 2
    1.606531
    """
    y_true, y_pred, w_true, w_pred, sw = _prepare(y_true, y_pred, weights_true, weights_pred, sample_weight)
    values = _per_sample_at_unit_scale(
        functools.partial(_mmd_one, bandwidth=bandwidth), y_true, y_pred, w_true, w_pred
    )
    return _aggregate(values, sw, multioutput)
