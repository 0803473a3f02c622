"""Benchmark generators: maps between (possibly heavy-tailed) probability measures.

Each generator returns a batch of input measures ``X`` and a batch of target
measures ``y``, both float64 arrays of shape ``(n_samples, n_points,
n_features)``. Sample ``i`` is a pair of empirical measures: ``X[i]`` holds
``n_points`` iid draws from the input measure ``mu_i`` and ``y[i]`` holds
``n_points`` iid draws from the target measure ``nu_i``. The map
``mu_i -> nu_i`` depends on a parameter of the *measure* ``mu_i`` (its scatter
matrix, the scales of its marginals), never on a single point, so it cannot be
learnt point by point: a model has to look at the whole ensemble, which is what
attention does.

The base families of the points are in the private module ``_tails``.
"""

from __future__ import annotations

import inspect
import math
from numbers import Real

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._param_validation import validate_params
from .._tails import SIZE_CONSTRAINTS, TAIL, TAIL_INDEX, check_finite_samples, sample_base
from .._validation import POSITIVE_INT, Choices, Described, NumberInterval

__all__ = [
    "BENCHMARK_NAMES",
    "make_matrix_inverse",
    "make_sheared_swap",
    "load_benchmark",
    "sample_target_law",
]

#: Names of the benchmarks accepted by :func:`load_benchmark`.
BENCHMARK_NAMES = ("matrix_inverse", "sheared_swap")


# --------------------------------------------------------------------------- #
# Validation
# --------------------------------------------------------------------------- #

#: The domains of the arguments both benchmarks take.
_BENCHMARK_CONSTRAINTS = {
    **SIZE_CONSTRAINTS,
    "tail": [TAIL],
    "tail_index": [TAIL_INDEX],
    "paired": ["boolean"],
    "return_params": ["boolean"],
    "random_state": ["random_state"],
}


def _check_scale_range(scale_range):
    """The pair ``(low, high)`` as floats; the table has already refused what is not array-like."""
    if len(scale_range) != 2:
        raise ValueError(
            f"scale_range must be a pair (low, high) of positive numbers with low <= high, "
            f"got {scale_range!r}."
        )
    low, high = scale_range
    for value in (low, high):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(
                f"scale_range must hold two real numbers, got {scale_range!r} "
                f"(entry {value!r} is of type {type(value).__name__})."
            )
    if not (np.isfinite(low) and np.isfinite(high)) or low <= 0 or high < low:
        raise ValueError(
            f"scale_range must be a pair (low, high) of finite numbers with "
            f"0 < low <= high, got {scale_range!r}."
        )
    return float(low), float(high)


# --------------------------------------------------------------------------- #
# Benchmarks
# --------------------------------------------------------------------------- #


def _random_spd(n_samples, n_features, condition, rng):
    """Haar-random eigenvectors, log-uniform eigenvalues in [c^-1/2, c^1/2]."""
    gauss = rng.standard_normal((n_samples, n_features, n_features))
    q, r = np.linalg.qr(gauss)
    # Sign fix so that Q is Haar distributed on O(d).
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2))
    signs[signs == 0] = 1.0
    q = q * signs[:, np.newaxis, :]
    half_log = 0.5 * np.log(condition)
    eigenvalues = np.exp(rng.uniform(-half_log, half_log, size=(n_samples, n_features)))
    A = (q * eigenvalues[:, np.newaxis, :]) @ np.swapaxes(q, 1, 2)
    A_inv = (q / eigenvalues[:, np.newaxis, :]) @ np.swapaxes(q, 1, 2)
    # Symmetrize exactly (rounding makes the products asymmetric at 1e-16).
    A = 0.5 * (A + np.swapaxes(A, 1, 2))
    A_inv = 0.5 * (A_inv + np.swapaxes(A_inv, 1, 2))
    return A, A_inv, eigenvalues, q


@validate_params(
    {
        **_BENCHMARK_CONSTRAINTS,
        "condition": [
            NumberInterval(Real, 1, math.inf, closed="left",
                           why="the largest allowed condition number of A; 1 gives A = I"),
        ],
    },
    prefer_skip_nested_validation=True,
)
def make_matrix_inverse(
    n_samples=100,
    n_points=100,
    n_features=2,
    *,
    tail="student_t",
    tail_index=1.5,
    paired=False,
    condition=4.0,
    return_params=False,
    random_state=None,
):
    r"""Generate the matrix-inverse benchmark: ``law(A Z) -> law(A^-1 Z)``.

    Each sample ``i`` draws a random symmetric positive definite matrix

    .. math:: A_i = Q_i \operatorname{diag}(\lambda_{i1}, \dots, \lambda_{id}) Q_i^\top,

    with ``Q_i`` Haar-distributed on the orthogonal group and
    ``log(lambda_ij) ~ U[-log(condition) / 2, log(condition) / 2]``, so that the
    eigenvalues lie in ``[condition^-1/2, condition^1/2]`` and the condition
    number of ``A_i`` is at most ``condition``. With ``Z_{i1}, ..., Z_{in}`` and
    ``Z'_{i1}, ..., Z'_{in}`` iid draws of the base family ``tail`` in
    ``R^n_features``,

    .. math::

        X_{ik} = A_i Z_{ik}, \qquad y_{ik} = A_i^{-1} Z'_{ik}.

    The input measure is ``mu_i = law(A_i Z)`` and the target is
    ``nu_i = law(A_i^-1 Z) = (A_i^-2)_# mu_i``: the map inverts the scatter
    matrix of the input measure (for ``tail="gaussian"`` the covariance of
    ``mu_i`` is ``A_i^2`` and that of ``nu_i`` is ``A_i^-2``), which no
    pointwise function can do. With ``paired=True``, ``Z' = Z`` and the target
    points are exactly ``y_ik = A_i^-1 Z_ik = A_i^-2 X_ik``.

    Parameters
    ----------
    n_samples : int, default=100
        Number of (input, target) pairs of measures.
    n_points : int, default=100
        Number of points in each measure.
    n_features : int, default=2
        Dimension ``d`` of each point.
    tail : {"gaussian", "student_t", "pareto"}, default="student_t"
        Base family of ``Z`` (see the module docstring): Gaussian control,
        elliptical multivariate Student-t with ``df = tail_index``, or
        independent mirrored Pareto-II coordinates with
        ``P(|Z_j| > t) = (1 + t)^-tail_index``.
    tail_index : float, default=1.5
        Tail exponent ``alpha > 0`` of the heavy-tailed families (ignored, but
        still validated, for ``tail="gaussian"``).
    paired : bool, default=False
        If True, the target uses the same base draws as the input
        (``Z' = Z``), so ``y[i, k]`` is the image of ``X[i, k]``. If False, the
        target points are independent of the input points (only their laws
        are related). ``X`` is the same in both cases for a given seed.
    condition : float, default=4.0
        Upper bound (``>= 1``) on the condition number of each ``A_i``;
        ``condition=1`` gives ``A_i = I``.
    return_params : bool, default=False
        If True, also return a dict of the per-sample parameters.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for reproducible output (see
        :func:`sklearn.utils.check_random_state`).

    Returns
    -------
    X : ndarray of shape (n_samples, n_points, n_features)
        Input measures, float64.
    y : ndarray of shape (n_samples, n_points, n_features)
        Target measures, float64.
    params : dict
        Only when ``return_params=True``: ``"A"`` and ``"A_inv"`` of shape
        ``(n_samples, n_features, n_features)`` (symmetric), ``"eigenvalues"``
        of shape ``(n_samples, n_features)`` (the ``lambda_ij``) and
        ``"eigenvectors"`` (the ``Q_i``, same shape as ``"A"``).

    Raises
    ------
    TypeError
        If a size is not an integer (floats, bools, strings), ``tail_index`` or
        ``condition`` is not a real number, or ``paired``/``return_params`` is
        not a bool.
    ValueError
        If a size is ``<= 0``, ``tail`` is unknown, ``tail_index`` is not finite
        and ``> 0``, ``condition`` is not finite and ``>= 1``, or the tails are
        so heavy that samples overflow float64.

    See Also
    --------
    make_sheared_swap : The other heavy-tailed measure-to-measure benchmark.
    load_benchmark : Both benchmarks as a :class:`~sklearn.utils.Bunch`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> X, y, params = make_matrix_inverse(
    ...     n_samples=3, n_points=50, n_features=2, tail="pareto", paired=True,
    ...     return_params=True, random_state=0)
    >>> X.shape, y.shape, params["A"].shape
    ((3, 50, 2), (3, 50, 2), (3, 2, 2))
    >>> expected = X @ params["A_inv"] @ params["A_inv"]  # y = A^-2 X, A symmetric
    >>> bool(np.allclose(y, expected))
    True
    """
    rng = check_random_state(random_state)

    A, A_inv, eigenvalues, eigenvectors = _random_spd(n_samples, n_features, condition, rng)
    shape = (n_samples, n_points, n_features)
    Z = sample_base(shape, tail, tail_index, rng)
    Z_target = Z if paired else sample_base(shape, tail, tail_index, rng)
    with np.errstate(over="ignore", invalid="ignore"):
        # Points are rows, so A z becomes z @ A.T = z @ A (A symmetric).
        X = Z @ A
        y = _matrix_inverse_target(Z_target, A_inv)
    check_finite_samples(X, y, tail, tail_index)
    if return_params:
        params = {"A": A, "A_inv": A_inv, "eigenvalues": eigenvalues, "eigenvectors": eigenvectors}
        return X, y, params
    return X, y


@validate_params(
    {
        **_BENCHMARK_CONSTRAINTS,
        "scale_range": [Described("array-like", "a pair (low, high) of finite numbers with 0 < low <= high")],
    },
    prefer_skip_nested_validation=True,
)
def make_sheared_swap(
    n_samples=100,
    n_points=100,
    n_features=2,
    *,
    tail="student_t",
    tail_index=1.5,
    paired=False,
    scale_range=(0.5, 2.0),
    return_params=False,
    random_state=None,
):
    r"""Generate the sheared-swap benchmark: swap coordinates, shear by ``s1 / s2``.

    Coordinates come in pairs ``(x_1, x_2) = (x[2m], x[2m + 1])``,
    ``m = 0, ..., n_features / 2 - 1``; every pair is handled independently
    as below. Each sample ``i`` draws per-coordinate scales ``s_1, s_2``
    log-uniformly in ``scale_range`` (``log s ~ U[log low, log high]``). With
    ``Z`` and ``Z'`` iid draws of the base family ``tail``, the input points are

    .. math:: X = (x_1, x_2) = (s_1 Z_1,\ s_2 Z_2),

    and the target points are the image of ``X' = (s_1 Z'_1, s_2 Z'_2)``
    under the measure-dependent map

    .. math::

        T_\mu(x_1, x_2) = (x_2,\ x_1 + c\, x_2), \qquad c = s_1 / s_2,

    i.e. ``y = (s_2 Z'_2, s_1 (Z'_1 + Z'_2))``: swap the coordinates, then
    shear the new second coordinate by ``c``. The shear ``c`` is the ratio of
    the scale parameters of the two marginals of the input measure ``mu`` (a
    property of the measure, not of any point: for heavy tails with
    ``tail_index <= 2`` it is a ratio of scales, not of standard deviations,
    which are infinite), so the map cannot be learnt pointwise. With
    ``paired=True``, ``Z' = Z`` and ``y = T_mu(X)`` exactly:
    ``y[..., 0::2] = X[..., 1::2]`` and
    ``y[..., 1::2] = X[..., 0::2] + c * X[..., 1::2]``.

    Parameters
    ----------
    n_samples : int, default=100
        Number of (input, target) pairs of measures.
    n_points : int, default=100
        Number of points in each measure.
    n_features : int, default=2
        Dimension of each point; must be even (pairs of coordinates).
    tail : {"gaussian", "student_t", "pareto"}, default="student_t"
        Base family of ``Z`` (see the module docstring). For ``"student_t"``
        all coordinates of a point share one chi-square draw.
    tail_index : float, default=1.5
        Tail exponent ``alpha > 0`` of the heavy-tailed families (ignored, but
        still validated, for ``tail="gaussian"``).
    paired : bool, default=False
        If True, the target uses the same base draws as the input
        (``Z' = Z``), so ``y[i, k] = T(X[i, k])``. ``X`` is the same in both
        cases for a given seed.
    scale_range : tuple of two floats, default=(0.5, 2.0)
        ``(low, high)`` with ``0 < low <= high``: the range of the scales
        ``s_1, s_2``; the shear ``c`` then lies in ``[low/high, high/low]``.
    return_params : bool, default=False
        If True, also return a dict of the per-sample parameters.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for reproducible output (see
        :func:`sklearn.utils.check_random_state`).

    Returns
    -------
    X : ndarray of shape (n_samples, n_points, n_features)
        Input measures, float64.
    y : ndarray of shape (n_samples, n_points, n_features)
        Target measures, float64.
    params : dict
        Only when ``return_params=True``: ``"scales"`` of shape
        ``(n_samples, n_features)`` (``scales[i, 2m] = s_1``,
        ``scales[i, 2m + 1] = s_2`` of pair ``m``) and ``"shear"`` of shape
        ``(n_samples, n_features // 2)`` (``c = s_1 / s_2`` of each pair).

    Raises
    ------
    TypeError
        If a size is not an integer (floats, bools, strings), ``tail_index`` or
        an entry of ``scale_range`` is not a real number, or
        ``paired``/``return_params`` is not a bool.
    ValueError
        If a size is ``<= 0``, ``n_features`` is odd, ``tail`` is unknown,
        ``tail_index`` is not finite and ``> 0``, ``scale_range`` is not a
        pair ``0 < low <= high``, or samples overflow float64.

    See Also
    --------
    make_matrix_inverse : The other heavy-tailed measure-to-measure benchmark.
    load_benchmark : Both benchmarks as a :class:`~sklearn.utils.Bunch`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import make_sheared_swap
    >>> X, y, params = make_sheared_swap(
    ...     n_samples=4, n_points=30, tail="gaussian", paired=True,
    ...     return_params=True, random_state=0)
    >>> X.shape, y.shape, params["shear"].shape
    ((4, 30, 2), (4, 30, 2), (4, 1))
    >>> c = params["shear"][:, np.newaxis, :]
    >>> bool(np.allclose(y[..., 0::2], X[..., 1::2]))
    True
    >>> bool(np.allclose(y[..., 1::2], X[..., 0::2] + c * X[..., 1::2]))
    True
    """
    if n_features % 2:
        raise ValueError(
            f"make_sheared_swap needs an even n_features (coordinates come in pairs "
            f"(x1, x2)), got n_features={n_features}. Use n_features="
            + (f"{n_features - 1} or " if n_features > 1 else "")
            + f"{n_features + 1}."
        )
    low, high = _check_scale_range(scale_range)
    rng = check_random_state(random_state)

    scales = np.exp(rng.uniform(np.log(low), np.log(high), size=(n_samples, n_features)))
    shear = scales[:, 0::2] / scales[:, 1::2]
    shape = (n_samples, n_points, n_features)
    with np.errstate(over="ignore", invalid="ignore"):
        X = scales[:, np.newaxis, :] * sample_base(shape, tail, tail_index, rng)
        y = _sheared_swap_target(X if paired else sample_base(shape, tail, tail_index, rng), scales, shear, paired)
    check_finite_samples(X, y, tail, tail_index)
    if return_params:
        return X, y, {"scales": scales, "shear": shear}
    return X, y


def _matrix_inverse_target(Z, A_inv):
    """Target points ``A^-1 z`` of base draws ``Z`` ``(n_samples, n_points, d)``."""
    return Z @ A_inv


def _sheared_swap_target(base, scales, shear, scaled):
    """Target points ``T(s * z)`` of base draws (or of input points when ``scaled``)."""
    X_target = base if scaled else scales[:, np.newaxis, :] * base
    y = np.empty_like(X_target)
    y[..., 0::2] = X_target[..., 1::2]
    y[..., 1::2] = X_target[..., 0::2] + shear[:, np.newaxis, :] * X_target[..., 1::2]
    return y


@validate_params(
    {"n_points": [None, POSITIVE_INT], "random_state": ["random_state"]},
    prefer_skip_nested_validation=True,
)
def sample_target_law(bunch, *, n_points=None, random_state=None):
    """Draw a fresh, independent sample of each target measure of a benchmark.

    The target measure ``nu_i`` of sample ``i`` is a law (``law(A_i^-1 Z)``
    for the matrix inverse, ``law(T(s Z))`` for the sheared swap); the
    benchmark's ``target`` holds one empirical sample of it. This draws
    another, from the per-sample parameters in ``bunch.params`` and new base
    draws ``Z``, independent of ``bunch.data`` and ``bunch.target``. Scored
    against ``bunch.target``, it gives the two-sample level of a distance: what
    random draws of ``n_points`` points from the true target law score.

    Parameters
    ----------
    bunch : :class:`~sklearn.utils.Bunch`
        A benchmark from :func:`load_benchmark` (its ``params`` name the
        generator's arguments and per-sample parameters).
    n_points : int, default=None
        Points per measure; ``None`` means as many as ``bunch.target`` has.
    random_state : int, RandomState instance or None, default=None
        Seed of the new base draws. Use one that differs from the benchmark's
        own seed, or the draws repeat those of the benchmark.

    Returns
    -------
    y_law : ndarray of shape (n_samples, n_points, n_features)
        Float64 draws of the target measures, in the order of ``bunch.target``.

    Raises
    ------
    ValueError
        If ``bunch`` does not come from :func:`load_benchmark`, or ``n_points``
        is not a positive integer.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import load_benchmark, sample_target_law
    >>> bunch = load_benchmark("matrix_inverse", n_samples=2, n_points=20000, tail="gaussian", random_state=0)
    >>> fresh = sample_target_law(bunch, random_state=1)
    >>> fresh.shape
    (2, 20000, 2)
    >>> np.allclose(np.cov(fresh[0].T), bunch.params["A_inv"][0] @ bunch.params["A_inv"][0], atol=0.05)
    True
    """
    params = getattr(bunch, "params", None)
    target = getattr(bunch, "target", None)
    if not isinstance(params, dict) or target is None or not ({"A_inv", "scales"} & set(params)):
        raise ValueError(
            "bunch must be a benchmark returned by load_benchmark (with .target and .params holding the "
            f"per-sample parameters), got {type(bunch).__name__}."
        )
    n_samples, default_points, n_features = np.shape(target)
    n_points = default_points if n_points is None else n_points
    rng = check_random_state(random_state)
    shape = (n_samples, n_points, n_features)
    with np.errstate(over="ignore", invalid="ignore"):
        base = sample_base(shape, params["tail"], params["tail_index"], rng)
        if "A_inv" in params:
            y = _matrix_inverse_target(base, params["A_inv"])
        else:
            y = _sheared_swap_target(base, params["scales"], params["shear"], False)
    check_finite_samples(y, y, params["tail"], params["tail_index"])
    return y


# --------------------------------------------------------------------------- #
# Loader
# --------------------------------------------------------------------------- #

_GENERATORS = {"matrix_inverse": make_matrix_inverse, "sheared_swap": make_sheared_swap}

_DESCR = {
    "matrix_inverse": """\
.. _matrix_inverse_benchmark:

Matrix-inverse benchmark
------------------------

Each sample draws a random symmetric positive definite matrix
A = Q diag(lambda) Q^T (Haar Q, log-uniform eigenvalues in
[condition^-1/2, condition^1/2]). The input measure is the law of A Z and the
target measure the law of A^-1 Z', with Z, Z' iid draws of the base family
(gaussian, elliptical student_t with df = tail_index, or mirrored Pareto-II
with P(|Z_j| > t) = (1 + t)^-tail_index). The target is the push-forward of the
input by A^-2, where A is the square root of the input's scatter matrix: the
map depends on the whole measure, not on single points. With paired=True,
Z' = Z and y = A^-2 X exactly.

:Shapes: data and target (n_samples, n_points, n_features), float64.
:Parameters: params["A"], params["A_inv"] (n_samples, d, d),
  params["eigenvalues"] (n_samples, d), params["eigenvectors"] (n_samples, d, d).
""",
    "sheared_swap": """\
.. _sheared_swap_benchmark:

Sheared-swap benchmark
----------------------

Coordinates come in pairs (x1, x2). Each sample draws scales s1, s2
log-uniformly in scale_range; input points are (s1 Z1, s2 Z2) and target points
are T(s1 Z'1, s2 Z'2) with T(x1, x2) = (x2, x1 + c x2), c = s1 / s2: swap the
coordinates and shear by the ratio of the scales of the input's two marginals,
a property of the measure, not of any point. Z, Z' are iid draws of the base
family (gaussian, elliptical student_t with df = tail_index, or mirrored
Pareto-II). With paired=True, Z' = Z and y = T(X) exactly.

:Shapes: data and target (n_samples, n_points, n_features), float64;
  n_features is even.
:Parameters: params["scales"] (n_samples, n_features), params["shear"]
  (n_samples, n_features // 2).
""",
}


# The generator checks ``params``: its validation must not be skipped as nested.
@validate_params({"name": [Choices(BENCHMARK_NAMES)]}, prefer_skip_nested_validation=False)
def load_benchmark(name, **params):
    """Generate a named benchmark and return it as a :class:`~sklearn.utils.Bunch`.

    Parameters
    ----------
    name : {"matrix_inverse", "sheared_swap"}
        Which generator to call: :func:`make_matrix_inverse` or
        :func:`make_sheared_swap`.
    **params
        Keyword arguments of that generator (``n_samples``, ``n_points``,
        ``n_features``, ``tail``, ``tail_index``, ``paired``,
        ``random_state``, and ``condition`` or ``scale_range``).
        ``return_params`` is not accepted: the parameters are always returned.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys ``data`` (the input measures ``X``), ``target`` (the target
        measures ``y``), ``params`` (every generator argument, defaults
        included, plus the per-sample parameters the generator returns with
        ``return_params=True``) and ``DESCR`` (a description of the benchmark).
        ``data`` and ``target`` equal the generator's output for the same
        arguments.

    Raises
    ------
    ValueError
        If ``name`` is not a known benchmark or ``return_params`` is passed;
        otherwise as the generator.
    TypeError
        If ``params`` holds an argument the generator does not take, or as the
        generator.

    Examples
    --------
    >>> from sklearn_measattn.datasets import load_benchmark
    >>> bunch = load_benchmark("sheared_swap", n_samples=5, n_points=20, random_state=0)
    >>> bunch.data.shape, bunch.target.shape
    ((5, 20, 2), (5, 20, 2))
    >>> bunch.params["tail"], bunch.params["shear"].shape
    ('student_t', (5, 1))
    """
    if "return_params" in params:
        raise ValueError(
            "load_benchmark always returns the generator's parameters in bunch.params; "
            "do not pass return_params."
        )
    generator = _GENERATORS[name]
    signature = inspect.signature(generator)
    try:
        bound = signature.bind(**params)
    except TypeError as exc:
        valid = [p for p in signature.parameters if p != "return_params"]
        raise TypeError(f"load_benchmark({name!r}): {exc}. Valid parameters are {valid}.") from None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    del arguments["return_params"]
    X, y, sample_params = generator(**arguments, return_params=True)
    return Bunch(data=X, target=y, params={**arguments, **sample_params}, DESCR=_DESCR[name])
