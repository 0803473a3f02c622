"""Validation of batches of measures, shared by every public entry point.

A batch of measures is a float array ``(n_samples, n_points, n_features)``, or a
ragged list of ``(n_points_i, n_features)`` arrays, which becomes a zero-padded
3-D array plus per-point weights (zero weight means "not there").
"""

from __future__ import annotations

import functools
import inspect
import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import check_array

from ._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    make_constraint,
    validate_parameter_constraints,
)

__all__ = [
    "check_measures",
    "check_point_weights",
    "check_measure_pair",
    "check_n_features",
    "check_float32_range",
    "check_paired_counts",
    "check_validation_split",
    "combine_weights",
    "is_ragged",
    "NumberInterval",
    "Choices",
    "Described",
    "parameter_constraints",
    "check_keyword_arguments",
    "POSITIVE_INT",
    "POSITIVE_REAL",
    "BETA",
    "ORDER",
    "describe",
    "described_as_array",
    "refuse_array_likes",
    "arrays_described",
]

_FLOAT_DTYPES = (np.float64, np.float32)


def is_ragged(X) -> bool:
    """Whether ``X`` is a list/tuple of 2-D measures (rather than a 3-D array)."""
    if not (isinstance(X, (list, tuple)) and len(X) > 0):
        return False
    try:
        return all(np.ndim(x) == 2 for x in X)
    except (ValueError, TypeError):  # inhomogeneous nesting: not a list of 2-D arrays
        return False


def _from_tensor(X):
    """A torch tensor as a numpy array (detached, on the CPU); anything else as is.

    ``np.asarray`` refuses tensors that require grad or live on a GPU.
    """
    if hasattr(X, "detach") and hasattr(X, "cpu") and hasattr(X, "numpy"):
        return X.detach().cpu().numpy()
    return X


def _reject_bad_dtype(X, input_name):
    dtype = getattr(X, "dtype", None)
    if dtype is not None and dtype.kind in "USV":
        raise TypeError(
            f"{input_name} has dtype {dtype} (strings/bytes); a batch of measures "
            "must be numeric: a float array of shape (n_samples, n_points, n_features)."
        )
    if dtype is not None and dtype.kind == "c":
        raise TypeError(
            f"{input_name} has complex dtype {dtype}; measures must be real. Split "
            "real and imaginary parts into separate features (np.stack([x.real, x.imag], -1))."
        )


def _check_finite(X_arr, input_name, measure=None):
    """Refuse NaN and inf, saying where the first one is and how many there are."""
    if X_arr.dtype.kind != "f" or X_arr.size == 0 or _finite_bounds(X_arr) is not None:
        return
    finite = np.isfinite(X_arr)
    bad = np.argwhere(~finite)
    i, j, k = (int(v) for v in bad[0])
    value = X_arr[i, j, k]
    kind = "NaN" if np.isnan(value) else ("infinity" if value > 0 else "-infinity")
    n_measures = len(np.unique(bad[:, 0]))
    where = f"measure {i if measure is None else measure}, point {j}, feature {k}"
    more = (
        f" ({len(bad)} non-finite values in {n_measures} measure(s))" if len(bad) > 1 and measure is None
        else f" ({len(bad)} non-finite values in it)" if len(bad) > 1 else ""
    )
    raise ValueError(
        f"{input_name} contains {kind} at {where}{more}; measures must be finite. Drop or "
        "impute those points (a list of (n_points_i, n_features) arrays may give measures "
        "different numbers of points)."
    )


def _check_dense(X, input_name, dtype, ensure_min_points, measure=None):
    X = _from_tensor(X)
    X_arr = X if isinstance(X, np.ndarray) else None
    if X_arr is None:
        try:
            X_arr = np.asarray(X)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{input_name} could not be converted to an array ({exc}). Pass a float "
                "array of shape (n_samples, n_points, n_features) or a list of "
                "(n_points_i, n_features) arrays."
            ) from None
    _reject_bad_dtype(X_arr, input_name)
    if X_arr.dtype.kind == "O":
        try:
            X_arr = X_arr.astype(np.float64)
        except (ValueError, TypeError):
            raise TypeError(
                f"{input_name} contains non-numeric entries; a batch of measures must be "
                "a float array of shape (n_samples, n_points, n_features)."
            ) from None
    if X_arr.ndim != 3:
        hint = ""
        if X_arr.ndim == 2:
            hint = (
                " For a single measure use X[np.newaxis] (shape (1, n_points, "
                "n_features)); for 1-D points use X[..., np.newaxis]."
            )
        raise ValueError(
            f"{input_name} must be 3-D (n_samples, n_points, n_features), got an array "
            f"of shape {X_arr.shape} ({X_arr.ndim}-D).{hint}"
        )
    if X_arr.shape[0] < 1:
        raise ValueError(f"{input_name} has 0 samples (shape {X_arr.shape}); at least 1 measure is required.")
    if X_arr.shape[1] < ensure_min_points:
        raise ValueError(
            f"{input_name} has {X_arr.shape[1]} points per measure (shape {X_arr.shape}); "
            f"each measure needs at least {ensure_min_points} point(s)."
        )
    if X_arr.shape[2] < 1:
        raise ValueError(f"{input_name} has 0 features (shape {X_arr.shape}); at least 1 is required.")
    if X_arr.dtype == np.float16:
        X_arr = X_arr.astype(np.float32)
    _check_finite(X_arr, input_name if measure is None else input_name.rsplit("[", 1)[0], measure)
    return check_array(
        X_arr,
        dtype=dtype,
        allow_nd=True,
        ensure_all_finite=True,
        ensure_min_samples=1,
        input_name=input_name,
    )


def check_measures(X, *, input_name="X", dtype=_FLOAT_DTYPES, ensure_min_points=1, n_features=None):
    """Validate a batch of measures; return a 3-D float array and point weights.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_points, n_features) or list of arrays
        The measures. A list of 2-D arrays with different numbers of points is a
        ragged batch: it is zero-padded to the longest and returned with weights.
    input_name : str, default="X"
        Name used in error messages.
    dtype : dtype or tuple of dtypes, default=(float64, float32)
        Accepted dtypes; others are converted to the first one.
    ensure_min_points : int, default=1
        Minimum number of points in each measure.
    n_features : int or None, default=None
        The number of features a fitted estimator takes, refused otherwise
        with the estimator's own message; None: any.

    Returns
    -------
    X : ndarray of shape (n_samples, n_points, n_features)
        Finite floats, C-contiguous (a view with negative or other strides
        is copied once here, so that torch can take it).
    weights : ndarray of shape (n_samples, n_points) or None
        ``None`` for a dense input (uniform measures); for ragged input, 1 for
        real points and 0 for padding.

    Raises
    ------
    ValueError
        On wrong rank, empty measures, NaN or inf, or mismatched feature counts
        inside a ragged list.
    TypeError
        On non-numeric or complex data.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import check_measures
    >>> X, weights = check_measures([np.zeros((3, 2)), np.ones((5, 2))])
    >>> X.shape, weights.sum(axis=1).tolist()
    ((2, 5, 2), [3.0, 5.0])
    """
    checked, weights = _checked_measures(X, input_name, dtype, ensure_min_points)
    if n_features is not None:
        check_n_features(checked, n_features, input_name=input_name)
    return np.ascontiguousarray(checked), weights


def _checked_measures(X, input_name, dtype, ensure_min_points):
    if is_ragged(X):
        arrays = [_check_dense(x[np.newaxis], f"{input_name}[{i}]", dtype, ensure_min_points, measure=i)[0]
                  for i, x in enumerate(_as_arrays(X, input_name))]
        n_features = {a.shape[1] for a in arrays}
        if len(n_features) > 1:
            raise ValueError(
                f"The measures in {input_name} have different numbers of features "
                f"{sorted(n_features)}; every point must live in the same space."
            )
        lengths = [a.shape[0] for a in arrays]
        if len(set(lengths)) == 1:
            return np.stack(arrays), None
        out_dtype = np.result_type(*arrays)
        padded = np.zeros((len(arrays), max(lengths), arrays[0].shape[1]), dtype=out_dtype)
        weights = np.zeros((len(arrays), max(lengths)), dtype=out_dtype)
        for i, a in enumerate(arrays):
            padded[i, : a.shape[0]] = a
            weights[i, : a.shape[0]] = 1.0
        return padded, weights
    return _check_dense(X, input_name, dtype, ensure_min_points), None


def _as_arrays(X, input_name):
    out = []
    for i, x in enumerate(X):
        arr = np.asarray(_from_tensor(x))
        _reject_bad_dtype(arr, f"{input_name}[{i}]")
        out.append(arr)
    return out


def check_point_weights(weights, shape, *, input_name="sample_weight", dtype=np.float64):
    """Validate per-point weights for measures of ``shape[:2]``.

    Parameters
    ----------
    weights : array-like of shape (n_samples, n_points) or None
        Nonnegative finite weights; zero means the point is absent. Each measure
        needs a positive total. ``None`` is returned unchanged (uniform weights).
    shape : tuple
        Shape of the measures the weights belong to.
    input_name : str, default="sample_weight"
        Name used in error messages.
    dtype : dtype, default=float64
        Output dtype.

    Returns
    -------
    weights : ndarray of shape (n_samples, n_points) or None
    """
    if weights is None:
        return None
    arr = np.asarray(weights)
    _reject_bad_dtype(arr, input_name)
    expected = tuple(shape[:2])
    if arr.shape != expected:
        raise ValueError(
            f"{input_name} must have shape (n_samples, n_points) = {expected}, got {arr.shape}."
        )
    arr = check_array(arr, dtype=dtype, ensure_all_finite=True, input_name=input_name)
    if np.any(arr < 0):
        raise ValueError(f"{input_name} has negative entries; point weights must be >= 0 (0 means absent).")
    empty = arr.max(axis=1) <= 0  # not the sum, which may overflow
    if np.any(empty):
        bad = np.flatnonzero(empty)[:5].tolist()
        raise ValueError(
            f"{input_name} sums to 0 for measure(s) {bad}; every measure needs at least "
            "one point with positive weight."
        )
    return arr


def check_n_features(X, n_features_expected, *, input_name="X"):
    """Raise a ``ValueError`` when the last axis of ``X`` has the wrong size."""
    if X.shape[-1] != n_features_expected:
        raise ValueError(
            f"{input_name} has {X.shape[-1]} features per point, but the estimator "
            f"was fitted with {n_features_expected}. Pass measures with {n_features_expected} features."
        )


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _finite_bounds(X):
    """``(min, max)`` of a non-empty float array as Python floats, or None when it holds NaN or inf.

    Two reductions that allocate nothing (NaN propagates through both): an
    elementwise test would write a temporary as large as the data, which, for
    the hundreds of megabytes a large training set holds, costs more in fresh
    pages than the test itself.
    """
    low, high = float(np.min(X)), float(np.max(X))
    return (low, high) if np.isfinite(low) and np.isfinite(high) else None


def check_float32_range(X, input_name, transform):
    """The network runs in float32: reject values it would turn into inf, before it does.

    ``X`` is what the network would see (after the fitted ``transform``, the
    estimator's parameter, named in the messages).
    """
    bounds = _finite_bounds(X) if X.size else (0.0, 0.0)
    if bounds is None:
        kind = "NaN" if np.isnan(np.min(X)) else "inf"
        raise ValueError(
            f"transform={transform!r} produced {kind} values from the finite {input_name}; the "
            "network needs finite inputs. Check the transformer on these data (e.g. a log of "
            "negative values), or use transform='symlog', which is finite everywhere."
        )
    largest = max(-bounds[0], bounds[1])
    if largest > _FLOAT32_MAX:
        where = f"after transform={transform!r}, " if transform is not None else ""
        raise ValueError(
            f"{input_name} has values of magnitude up to {largest:.3g} {where}beyond the float32 range "
            f"({_FLOAT32_MAX:.3g}) the network computes in. Use transform='symlog' (it maps 1e300 to "
            "about 690) or rescale the data."
        )


def check_paired_counts(X, x_weights, y, y_weights):
    """loss='mse' pairs the i-th output point with the i-th target point of each measure."""
    x_counts = np.full(X.shape[0], X.shape[1]) if x_weights is None else (x_weights > 0).sum(axis=1)
    y_counts = np.full(y.shape[0], y.shape[1]) if y_weights is None else (y_weights > 0).sum(axis=1)
    differ = np.flatnonzero(x_counts != y_counts)
    if differ.size:
        i = int(differ[0])
        raise ValueError(
            f"loss='mse' needs paired targets with as many points as their inputs, but measure {i} "
            f"has {x_counts[i]} input and {y_counts[i]} target points ({differ.size} measure(s) "
            "differ); use loss='energy', 'sliced' or 'sinkhorn', which compare unpaired ensembles."
        )


def check_validation_split(n_samples, fraction):
    """early_stopping needs at least one measure on each side of the split."""
    n_valid = math.ceil(n_samples * fraction)
    if n_samples * fraction < 1 or n_samples - n_valid < 1:
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} splits {n_samples} measure(s) into "
            f"{n_samples - n_valid} for training and {n_valid} held out; each side needs at least one. "
            "Pass more measures or change validation_fraction."
        )


def check_comparable(a, b, names):
    """Two batches of shape ``(n_samples, n_points, n_features)`` compared sample by sample.

    They must agree in ``n_samples`` and ``n_features``; ``n_points`` may differ.
    Works on numpy arrays and torch tensors alike; ``names`` name them in the error.
    """
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{names[0]} has {a.shape[0]} measures but {names[1]} has {b.shape[0]}; "
            "they are compared sample by sample and must have the same n_samples."
        )
    if a.shape[2] != b.shape[2]:
        raise ValueError(
            f"{names[0]} has {a.shape[2]} features per point but {names[1]} has "
            f"{b.shape[2]}; the measures must live in the same space."
        )


def check_measure_pair(y_true, y_pred, *, weights_true=None, weights_pred=None):
    """Validate two batches of measures to compare sample by sample.

    Returns ``(y_true, y_pred, w_true, w_pred)``: two 3-D float64 arrays with the
    same ``n_samples`` and ``n_features`` (``n_points`` may differ) and their
    normalised per-point weights (each row sums to 1).
    """
    y_true, ragged_w_true = check_measures(y_true, input_name="y_true", dtype=np.float64)
    y_pred, ragged_w_pred = check_measures(y_pred, input_name="y_pred", dtype=np.float64)
    check_comparable(y_true, y_pred, ("y_true", "y_pred"))
    w_true = combine_weights(weights_true, ragged_w_true, y_true.shape, "weights_true")
    w_pred = combine_weights(weights_pred, ragged_w_pred, y_pred.shape, "weights_pred")
    return y_true, y_pred, w_true, w_pred


def _pad_ragged_weights(weights, ragged_weights, shape, input_name):
    """Per-measure weight vectors of a ragged batch, zero-padded like the measures."""
    counts = [shape[1]] * shape[0] if ragged_weights is None else (ragged_weights > 0).sum(axis=1).tolist()
    if len(weights) != shape[0]:
        raise ValueError(f"{input_name} has {len(weights)} weight vectors for {shape[0]} measures.")
    padded = np.zeros(shape[:2])
    for i, (w, count) in enumerate(zip(weights, counts)):
        w = np.asarray(w)
        _reject_bad_dtype(w, f"{input_name}[{i}]")
        if w.ndim != 1 or w.shape[0] != count:
            raise ValueError(
                f"{input_name}[{i}] must be a 1-D array with one weight per point of measure {i} "
                f"({count} points), got shape {w.shape}."
            )
        padded[i, :count] = check_array(w[np.newaxis], dtype=np.float64, input_name=f"{input_name}[{i}]")[0]
    return padded


def combine_weights(weights, ragged_weights, shape, input_name):
    """Per-point weights of a validated batch, each row normalised to sum to 1.

    ``weights`` are the user's (``None``, an array, or ragged per-measure
    vectors) and ``ragged_weights`` the 0/1 padding weights that
    :func:`check_measures` returned for a ragged batch (or ``None``).
    """
    if isinstance(weights, (list, tuple)) and len({np.shape(w) for w in weights}) > 1:
        weights = _pad_ragged_weights(weights, ragged_weights, shape, input_name)
    weights = check_point_weights(weights, shape, input_name=input_name)
    if weights is None:
        weights = np.ones(shape[:2]) if ragged_weights is None else ragged_weights.astype(np.float64)
    elif ragged_weights is not None:
        weights = weights * ragged_weights
        check_point_weights(weights, shape, input_name=f"{input_name} (after removing padding)")
    # relative to each measure's largest weight first, so a total beyond float64 does not overflow
    weights = weights / weights.max(axis=1, keepdims=True)
    return weights / weights.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------- #
# Hyper-parameter domains: scikit-learn constraints that can say why
# --------------------------------------------------------------------------- #
def _explained(domain, why):
    return domain if why is None else f"{domain}: {why}"


class NumberInterval(Interval):
    """A scikit-learn parameter constraint for numbers in an interval, refusing booleans.

    scikit-learn's ``Interval`` accepts ``True`` as the integer 1; a flag passed
    where a size or a rate belongs is a mistake worth reporting. An open bound
    at ``math.inf`` refuses infinity. ``why``, when given, follows the domain in
    the error message: the reason the domain is what it is.
    """

    def __init__(self, type, left, right, *, closed, why=None):
        super().__init__(type, left, right, closed=closed)
        self.why = why

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)

    def __str__(self):
        return _explained(super().__str__(), self.why)


class Choices(StrOptions):
    """scikit-learn's ``StrOptions``, listed in the order given (so messages do not vary), with an optional why."""

    def __init__(self, options, *, why=None):
        self.order = tuple(options)
        super().__init__(set(self.order))
        self.why = why

    def __str__(self):
        return _explained(f"a str among {{{', '.join(map(repr, self.order))}}}", self.why)


class Described(HasMethods):
    """Any scikit-learn constraint, worded in error messages as given (e.g. a callable and its call).

    A subclass of ``HasMethods`` only because scikit-learn's ``make_constraint``
    accepts instances of its own constraint classes alone.
    """

    def __init__(self, constraint, description):
        super().__init__([])
        self.constraint = make_constraint(constraint)
        self.description = description

    def is_satisfied_by(self, val):
        return self.constraint.is_satisfied_by(val)

    def __str__(self):
        return self.description


#: A size, a count or a number of iterations.
POSITIVE_INT = NumberInterval(Integral, 1, None, closed="left")
#: A finite positive number: a rate, a tolerance, a bandwidth, a regularisation.
POSITIVE_REAL = NumberInterval(Real, 0, math.inf, closed="neither")
#: joblib's ``n_jobs``: None, a number of workers, or -1, -2, ... for all cores, all but one, ...
N_JOBS = [
    None,
    NumberInterval(Integral, None, -1, closed="right"),
    NumberInterval(Integral, 1, None, closed="left", why="-1 means all cores, as in joblib"),
]

# The exponents of the distances between measures, one domain each, shared by
# the numpy metrics and the torch training losses (both compute the distances
# with the cores of the ``_distances`` package).
#: Exponent of the energy distance.
BETA = NumberInterval(
    Real, 0, 2, closed="neither",
    why="only there is the energy distance a metric between measures (at beta=2 it compares means only; "
    "beta=1 is the usual choice)",
)
#: Order of a Wasserstein distance (exact, sliced or entropic), or of a transport cost.
ORDER = NumberInterval(Real, 1, math.inf, closed="left", why="W_p is not a metric below 1")


def parameter_constraints(func):
    """The constraint table of a function decorated with scikit-learn's ``validate_params``."""
    return func._skl_parameter_constraints


def check_keyword_arguments(func, kwargs, *, caller, refused=()):
    """Check keyword arguments meant for ``func`` (bound now, passed at each later call) against its table.

    ``func`` is decorated with scikit-learn's ``validate_params``; its table
    names the keyword arguments it takes (those in ``refused`` excepted) and
    their domains. Raises an error that is both a ``ValueError`` and a
    ``TypeError`` (catch either) for an argument ``func`` does not take, or for a value
    outside its domain, naming ``func``: so a bad value fails when ``caller``
    builds a loss or a scorer, not at its first call.
    """
    table = parameter_constraints(func)
    accepted = [name for name in table if name not in refused]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        takes = f"the keyword arguments it takes are {', '.join(accepted)}" if accepted else "it takes none"
        raise InvalidParameterError(
            f"{caller} got unexpected keyword argument(s) {unknown}; for {func.__name__} {takes}."
        )
    validate_parameter_constraints(table, kwargs, caller_name=func.__qualname__)


# --------------------------------------------------------------------------- #
# Arguments described, never printed
# --------------------------------------------------------------------------- #
def describe(value):
    """A value as an error message shows it: scalars as they are, anything else by its type and shape.

    An array is never printed: its repr could run to thousands of numbers.
    """
    if value is None or isinstance(value, (bool, np.bool_, Real, str)):
        text = repr(value)
        return text if len(text) <= 80 else f"a str of length {len(value)}"
    shape = getattr(value, "shape", None)
    if shape is not None and not callable(shape):
        dtype = getattr(value, "dtype", None)
        kind = "an array" if isinstance(value, np.ndarray) else _article(type(value).__name__)
        return f"{kind} of shape {tuple(shape)}" + (f" and dtype {dtype}" if dtype is not None else "")
    if isinstance(value, (list, tuple, dict, set)):
        return f"a {type(value).__name__} of length {len(value)}"
    return _article(type(value).__name__)


def _article(name):
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def described_as_array(value, array):
    """``describe(value)``, with the shape and dtype numpy gives it when it is not an array already."""
    if isinstance(value, np.ndarray):
        return describe(value)
    return f"{describe(value)}, an array of shape {array.shape} and dtype {array.dtype}"


def _is_array_like(value):
    return isinstance(value, (list, tuple, np.ndarray)) or hasattr(value, "__array__") or hasattr(value, "shape")


def refuse_array_likes(constraints, arguments, caller, *, hints=None):
    """Refuse an array-like argument outside its domain, described by type and shape rather than printed.

    scikit-learn's parameter validation prints the ``repr`` of a refused
    value; for an array passed where a number, a name or an object belongs
    that is the whole array. Run this first: the other refusals are left to it.

    Parameters
    ----------
    constraints : dict
        The table of scikit-learn parameter constraints.
    arguments : dict
        The arguments, by name.
    caller : str
        The name the error message gives the function or class.
    hints : dict or None, default=None
        ``{type: sentence}``: what to do, said after the refusal of an array
        where an object of that type (a constraint of the table) belongs.

    Raises
    ------
    ValueError, TypeError
        For the first array-like argument that no constraint of its table
        accepts (one error that is both: catch either).
    """
    hints = hints or {}
    for name, value in arguments.items():
        table = constraints.get(name)
        if table is None or isinstance(table, str) or not _is_array_like(value):
            continue
        allowed = [make_constraint(constraint) for constraint in table]
        if any(constraint.is_satisfied_by(value) for constraint in allowed):
            continue
        shown = [str(constraint) for constraint in allowed if not constraint.hidden]
        domain = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        hint = "".join(hints.get(constraint, "") for constraint in table if isinstance(constraint, type))
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be {domain}. Got {describe(value)} instead.{hint}"
        )


def arrays_described(func, *, hints=None, check=None):
    """Put in front of scikit-learn's ``validate_params``: an array-like argument it would refuse is described.

    The decorated function keeps its constraint table; an array-like value
    outside its domain is refused with its type and shape (see
    :func:`refuse_array_likes`, with ``hints``) before scikit-learn's own
    message, which would print it, is made. ``check``, when given, is then
    called with the arguments by name (a further check before any work).
    """
    constraints = parameter_constraints(func)
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError:  # a missing or unknown argument: Python's own message says which
            return func(*args, **kwargs)
        refuse_array_likes(constraints, arguments, func.__qualname__, hints=hints)
        if check is not None:
            check(arguments)
        return func(*args, **kwargs)

    return wrapper
