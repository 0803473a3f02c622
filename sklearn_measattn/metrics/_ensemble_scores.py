"""Proper scores of an ensemble against one true state: the energy score and the CRPS."""

from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.spatial.distance import cdist

from .._param_validation import validate_params

# Pairwise differences are formed in blocks of at most this many float64 entries (64 MiB).
_BLOCK_ENTRIES = 2**23
_CDIST_MEMBERS = 64  # above it, one ensemble's distances by scipy's cdist beat numpy's broadcast differences


def _as_float_array(value, name, what):
    """``value`` as a finite float64 array; ``what`` names its layout in the messages."""
    if hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be converted to an array ({exc}); pass a float array of shape {what}.") from None
    if arr.dtype.kind in "USV":
        raise TypeError(f"{name} has dtype {arr.dtype} (strings/bytes); it must be a float array of shape {what}.")
    if arr.dtype.kind == "c":
        raise TypeError(
            f"{name} has complex dtype {arr.dtype}; scores need real values. Split real and imaginary parts into "
            "separate features (np.stack([x.real, x.imag], -1)) and use energy_score."
        )
    try:
        arr = arr.astype(np.float64)
    except (ValueError, TypeError):
        raise TypeError(f"{name} contains non-numeric entries; it must be a float array of shape {what}.") from None
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.argwhere(~finite)
        first = tuple(int(i) for i in bad[0])
        value = arr[first]
        kind = "NaN" if np.isnan(value) else ("infinity" if value > 0 else "-infinity")
        more = f" ({len(bad)} non-finite values)" if len(bad) > 1 else ""
        raise ValueError(
            f"{name} contains {kind} at index {first}{more}; scores need finite values. Drop or impute those "
            "members or states (weights=0 leaves a member out)."
        )
    return arr


def _check_weights(weights, ensemble_shape, shape):
    """Nonnegative finite weights of ``shape`` (members on the last axis), normalised per ensemble."""
    w = _as_float_array(weights, "weights", "(..., n_members)")
    if w.shape != shape:
        raise ValueError(
            f"weights has shape {w.shape} but ensemble has shape {ensemble_shape}; weights must have shape "
            f"(..., n_members) = {shape}: one weight per member of each ensemble."
        )
    if np.any(w < 0):
        first = tuple(int(i) for i in np.argwhere(w < 0)[0])
        raise ValueError(f"weights has a negative entry at index {first}; member weights must be >= 0 (0 leaves it out).")
    largest = w.max(axis=-1, keepdims=True)
    empty = largest[..., 0] <= 0
    if np.any(empty):
        first = tuple(int(i) for i in np.argwhere(empty)[0])
        raise ValueError(
            f"weights are all 0 for the ensemble at index {first}; every ensemble needs a member with positive weight."
        )
    # relative to each ensemble's largest weight first, so that a total beyond float64 does not overflow
    w = w / largest
    return w / w.sum(axis=-1, keepdims=True)


def _binary_scales(largest):
    """Per ensemble, a power of two in ``(largest / 2, largest]`` (1 where ``largest`` is 0).

    Dividing by a power of two is exact: the scores are computed on values of
    magnitude below 2 (no overflow of squared distances near 1e200, no
    underflow near 1e-200) and multiplied back, both scores being homogeneous
    of degree 1.
    """
    exponent = np.frexp(largest)[1]
    return np.where(largest > 0, np.ldexp(1.0, exponent - 1), 1.0)


def _scaled_back(values, scales, name):
    with np.errstate(over="ignore"):
        out = values * scales
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"The {name} of these ensembles is beyond the float64 range (values near 1e308 far apart); rescale the "
            "ensemble and the truth together (the score is proportional to their scale)."
        )
    return out


def _mean_pairwise_norm(x, w):
    """``sum_ij w_i w_j |x_i - x_j|`` of each ensemble of ``x`` (B, M, d), in blocks of bounded memory."""
    n_ensembles, n_members, n_features = x.shape
    out = np.zeros(n_ensembles)
    rows = max(1, min(n_members, _BLOCK_ENTRIES // max(1, n_members * n_features)))
    if n_members > _CDIST_MEMBERS:
        # large ensembles (a particle filter's): scipy's compiled distances, without the (rows, M, d) differences
        rows = max(1, min(n_members, _BLOCK_ENTRIES // n_members))
        for b in range(n_ensembles):
            for r0 in range(0, n_members, rows):
                r1 = min(n_members, r0 + rows)
                out[b] += w[b, r0:r1] @ cdist(x[b, r0:r1], x[b]) @ w[b]
        return out
    per_block = max(1, _BLOCK_ENTRIES // max(1, n_members * n_members * n_features)) if rows == n_members else 1
    for start in range(0, n_ensembles, per_block):
        block = slice(start, start + per_block)
        xb, wb = x[block], w[block]
        for r0 in range(0, n_members, rows):
            r1 = min(n_members, r0 + rows)
            distances = np.linalg.norm(xb[:, r0:r1, None, :] - xb[:, None, :, :], axis=-1)
            out[block] += np.einsum("bi,bij,bj->b", wb[:, r0:r1], distances, wb)
    return out


def _scalar_or_array(values, shape):
    values = values.reshape(shape)
    return float(values) if values.ndim == 0 else values


@validate_params(
    {"ensemble": ["array-like"], "truth": ["array-like"], "weights": ["array-like", None]},
    prefer_skip_nested_validation=True,
)
def energy_score(ensemble, truth, *, weights=None):
    r"""Energy score of ensembles of vectors against their true states.

    For an ensemble :math:`x_1, \dots, x_M` with member weights
    :math:`w_i` (normalised to sum to 1; ``1/M`` by default) and the true
    state :math:`y`,

    .. math::

        \mathrm{ES} = \sum_i w_i \|x_i - y\|
        - \frac{1}{2} \sum_{i,j} w_i w_j \|x_i - x_j\|,

    with Euclidean norms: ``E|X - y| - E|X - X'| / 2`` for ``X, X'``
    independent draws from the ensemble's (weighted) empirical measure, the
    ``i = j`` pairs included. Unweighted, the second term is
    ``1 / (2 M^2)`` times the sum over all pairs: scoringrules'
    ``es_ensemble`` with its default ``estimator="nrg"``, not the "fair"
    estimator with ``M (M - 1)``. It is a proper score (lower is better),
    ``>= 0``, zero only when every member of positive weight equals the
    truth, in the units of the data and proportional to their scale.

    Parameters
    ----------
    ensemble : array-like of shape (..., n_members, n_features)
        The ensembles; any leading axes index them.
    truth : array-like of shape (..., n_features)
        One true state per ensemble: ``ensemble.shape[:-2] + (n_features,)``.
    weights : array-like of shape (..., n_members), default=None
        Nonnegative member weights, normalised per ensemble (0 leaves a member
        out). ``None`` means equal weights.

    Returns
    -------
    score : float or ndarray of shape (...)
        The energy score of each ensemble (a float when ``ensemble`` is 2-D).
        Tiny negative values from rounding are clipped to 0.

    Raises
    ------
    ValueError
        For shapes that do not match (the message gives both), NaN or inf
        values, an ensemble without members, or negative weights, or weights
        that are all 0 for an ensemble.
    TypeError
        For non-numeric or complex values.

    See Also
    --------
    crps_ensemble : The same score for scalar variables, computed by sorting.
    energy_distance : With ``y_true`` the point mass at the truth (one point,
        ``truth[:, None, :]``) and ``y_pred`` the ensemble, the package's
        squared energy distance (``beta=1``) is twice the energy score:
        ``2 E|X - y| - E|X - X'| - 0 = 2 ES``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import energy_score
    >>> ensemble = np.array([[0.0, 0.0], [3.0, 4.0]])  # two members in 2-D
    >>> energy_score(ensemble, np.array([0.0, 0.0]))  # (0 + 5) / 2 - (0 + 5 + 5 + 0) / 8
    1.25
    >>> energy_score(ensemble, np.array([0.0, 0.0]), weights=[1.0, 0.0])
    0.0
    >>> energy_score(np.zeros((4, 10, 3)), np.ones((4, 3))).shape  # one score per ensemble
    (4,)
    """
    what = "(..., n_members, n_features)"
    x = _as_float_array(ensemble, "ensemble", what)
    if x.ndim < 2:
        raise ValueError(
            f"ensemble must be at least 2-D {what}, got shape {x.shape}. For scalar variables use crps_ensemble, "
            "or pass ensemble[..., np.newaxis] (one feature)."
        )
    y = _as_float_array(truth, "truth", "(..., n_features)")
    lead, (n_members, n_features) = x.shape[:-2], x.shape[-2:]
    if y.shape != lead + (n_features,):
        raise ValueError(
            f"truth has shape {y.shape} but ensemble has shape {x.shape}; truth must have shape "
            f"ensemble.shape[:-2] + (n_features,) = {lead + (n_features,)}: one true state per ensemble."
        )
    if n_members == 0 or n_features == 0:
        raise ValueError(f"ensemble has shape {x.shape}; every ensemble needs at least 1 member and 1 feature.")
    w = None if weights is None else _check_weights(weights, x.shape, lead + (n_members,))
    x = x.reshape(-1, n_members, n_features)
    y = y.reshape(-1, n_features)
    w = np.full(x.shape[:2], 1.0 / n_members) if w is None else w.reshape(x.shape[:2])
    if x.shape[0] == 0:
        return np.zeros(lead)
    scales = _binary_scales(np.maximum(np.abs(x).max(axis=(1, 2)), np.abs(y).max(axis=1)))
    x = x / scales[:, None, None]
    y = y / scales[:, None]
    to_truth = np.einsum("bi,bi->b", w, np.linalg.norm(x - y[:, None, :], axis=-1))
    values = np.maximum(to_truth - 0.5 * _mean_pairwise_norm(x, w), 0.0)
    return _scalar_or_array(_scaled_back(values, scales, "energy score"), lead)


@validate_params(
    {"ensemble": ["array-like"], "truth": ["array-like", Real], "weights": ["array-like", None]},
    prefer_skip_nested_validation=True,
)
def crps_ensemble(ensemble, truth, *, weights=None):
    r"""CRPS (continuous ranked probability score) of ensembles of scalars against their true values.

    For an ensemble :math:`x_1, \dots, x_M` with member weights :math:`w_i`
    (normalised to sum to 1; ``1/M`` by default) and the true value :math:`y`,

    .. math::

        \mathrm{CRPS} = \sum_i w_i |x_i - y|
        - \frac{1}{2} \sum_{i,j} w_i w_j |x_i - x_j|
        = \int (F(t) - \mathbf{1}\{y \le t\})^2 \, dt,

    with :math:`F` the ensemble's (weighted) empirical distribution function:
    the energy score in one dimension, the ``i = j`` pairs included. It is
    computed in ``O(M log M)`` per ensemble, not over the ``M^2`` pairs: with
    the members sorted, :math:`x_{(1)} \le \dots \le x_{(M)}`, and
    :math:`a_i = \sum_{j \le i} w_{(j)} - w_{(i)} / 2`,

    .. math::

        \mathrm{CRPS} = 2 \sum_i w_{(i)} \big(\mathbf{1}\{x_{(i)} > y\} - a_i\big)
        \big(x_{(i)} - y\big),

    a sum of nonnegative terms (no cancellation, whatever the offset of the
    data). This is scoringrules' ``crps_ensemble`` with its ``"nrg"`` and
    ``"qd"`` estimators (equal for every ensemble; ``"qd"`` is its default
    from version 0.9), not the "fair" or ``"pwm"`` estimators. It is a proper
    score (lower is better), ``>= 0``, zero only when every member of
    positive weight equals the truth, in the units of the data.

    Parameters
    ----------
    ensemble : array-like of shape (..., n_members)
        The ensembles of one scalar variable; any leading axes index them.
    truth : float or array-like of shape (...)
        One true value per ensemble: ``ensemble.shape[:-1]``.
    weights : array-like of shape (..., n_members), default=None
        Nonnegative member weights, normalised per ensemble (0 leaves a member
        out). ``None`` means equal weights.

    Returns
    -------
    score : float or ndarray of shape (...)
        The CRPS of each ensemble (a float when ``ensemble`` is 1-D).

    Raises
    ------
    ValueError
        For shapes that do not match (the message gives both), NaN or inf
        values, an ensemble without members, negative weights, or weights
        that are all 0 for an ensemble.
    TypeError
        For non-numeric or complex values.

    See Also
    --------
    energy_score : The multivariate score; for one feature it equals the CRPS.
    energy_distance : Between the point mass at the truth and the ensemble
        (1-D measures, ``beta=1``) it is twice the CRPS.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.metrics import crps_ensemble
    >>> round(crps_ensemble([0.0, 1.0, 2.0], 1.0), 12)  # 2/3 - (0 + 1 + 2 + 1 + 0 + 1 + 2 + 1 + 0) / 18
    0.222222222222
    >>> crps_ensemble([[1.0, 1.0], [0.0, 4.0]], [1.0, 0.0], weights=[[1.0, 3.0], [1.0, 0.0]])
    array([0., 0.])
    """
    x = _as_float_array(ensemble, "ensemble", "(..., n_members)")
    if x.ndim < 1:
        raise ValueError(f"ensemble must be at least 1-D (..., n_members), got a scalar ({x!r}).")
    y = _as_float_array(truth, "truth", "(...)")
    lead, n_members = x.shape[:-1], x.shape[-1]
    if y.shape != lead:
        raise ValueError(
            f"truth has shape {y.shape} but ensemble has shape {x.shape}; truth must have shape "
            f"ensemble.shape[:-1] = {lead}: one true value per ensemble (members on the last axis of ensemble)."
        )
    if n_members == 0:
        raise ValueError(f"ensemble has shape {x.shape}: 0 members; every ensemble needs at least 1 member.")
    w = None if weights is None else _check_weights(weights, x.shape, x.shape)
    x = x.reshape(-1, n_members)
    y = y.reshape(-1)
    w = np.full(x.shape, 1.0 / n_members) if w is None else w.reshape(x.shape)
    if x.shape[0] == 0:
        return np.zeros(lead)
    scales = _binary_scales(np.maximum(np.abs(x).max(axis=1), np.abs(y)))
    deviation = x / scales[:, None] - (y / scales)[:, None]
    order = np.argsort(deviation, axis=1, kind="stable")
    deviation = np.take_along_axis(deviation, order, axis=1)
    w = np.take_along_axis(w, order, axis=1)
    a = np.cumsum(w, axis=1) - 0.5 * w
    values = 2.0 * np.sum(w * np.where(deviation > 0, 1.0 - a, -a) * deviation, axis=1)
    return _scalar_or_array(_scaled_back(values, scales, "CRPS"), lead)
