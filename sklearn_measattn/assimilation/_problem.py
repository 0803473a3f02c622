"""The twin experiment's truth and observations: a Lorenz-96 trajectory observed with Gaussian or heavy-tailed noise."""

from __future__ import annotations

import copy
import functools
import inspect
import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.special import gammaln
from sklearn.utils import check_random_state

from .._param_validation import InvalidParameterError, make_constraint, validate_params
from .._validation import POSITIVE_INT, POSITIVE_REAL, Choices, NumberInterval
from ..datasets import OBSERVATION_NOISES, integrate_lorenz96

__all__ = ["ObservationModel", "TwinProblem", "make_twin_problem"]

_SPIN_UP_TIME = 10.0  # model time units: long enough to reach the attractor from F + small noise
_MIN_VARIABLES = 4  # the tendency couples x_{i-2}, x_{i-1}, x_i and x_{i+1}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

NOISE = Choices(OBSERVATION_NOISES, why="'student_t' uses df degrees of freedom; 'cauchy' is Student-t with df=1")
OBSERVED = [Choices(("all", "every_other")), "array-like"]
N_VARIABLES = NumberInterval(Integral, _MIN_VARIABLES, None, closed="left", why="each tendency couples four neighbours")


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


def _is_array_like(value):
    return isinstance(value, (list, tuple, np.ndarray)) or hasattr(value, "__array__") or hasattr(value, "shape")


def refuse_array_likes(constraints, arguments, caller):
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

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        For the first array-like argument that no constraint of its table accepts.
    """
    for name, value in arguments.items():
        table = constraints.get(name)
        if table is None or isinstance(table, str) or not _is_array_like(value):
            continue
        allowed = [make_constraint(constraint) for constraint in table]
        if any(constraint.is_satisfied_by(value) for constraint in allowed):
            continue
        shown = [str(constraint) for constraint in allowed if not constraint.hidden]
        domain = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        hint = "".join(_HINTS.get(constraint, "") for constraint in table if isinstance(constraint, type))
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller} must be {domain}. Got {describe(value)} instead.{hint}"
        )


def arrays_described(func):
    """Put in front of scikit-learn's ``validate_params``: an array-like argument it would refuse is described.

    The decorated function keeps its constraint table; an array-like value
    outside its domain is refused with its type and shape (see
    :func:`refuse_array_likes`) before scikit-learn's own message, which
    would print it, is made.

    An analysis step passed as an argument (anything with a
    ``_check_parameters`` method, as :class:`AnalysisStep` has) has its own
    parameters checked here too, outside ``validate_params``: inside it, an
    error of the step's would be renamed after the function
    (``validate_params`` rewrites "parameter of X must be" with the
    function's name), where it should name the step.
    """
    constraints = func._skl_parameter_constraints
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError:  # a missing or unknown argument: Python's own message says which
            return func(*args, **kwargs)
        refuse_array_likes(constraints, arguments, func.__qualname__)
        for value in arguments.values():
            check = getattr(value, "_check_parameters", None)
            if callable(check) and not isinstance(value, type):
                check()
        return func(*args, **kwargs)

    return wrapper


def _described_as_array(value, array):
    """``describe(value)``, with the shape and dtype numpy gives it when it is not an array already."""
    if isinstance(value, np.ndarray):
        return describe(value)
    return f"{describe(value)}, an array of shape {array.shape} and dtype {array.dtype}"


def _observed_indices(observed, n_variables):
    if isinstance(observed, str):
        return np.arange(n_variables) if observed == "all" else np.arange(0, n_variables, 2)
    indices = np.asarray(observed)
    if indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu":
        raise TypeError(
            "observed must be 'all', 'every_other' or a non-empty 1-D list of integer variable indices, "
            f"got {_described_as_array(observed, indices)}."
        )
    outside = indices[(indices < 0) | (indices >= n_variables)]
    values, counts = np.unique(indices, return_counts=True)
    if outside.size or np.any(counts > 1):
        problem = (f"{outside.size} outside it (the first: {outside[0]})" if outside.size
                   else f"index {values[counts > 1][0]} more than once")
        raise ValueError(
            f"observed must hold distinct variable indices in [0, {n_variables - 1}] (n_variables={n_variables}); "
            f"it holds {problem}."
        )
    return indices.astype(np.intp)


class ObservationModel:
    r"""Direct observations of some state variables with additive, independent noise.

    ``o = x[observed] + noise_scale * eps``, the ``eps_j`` iid standard
    Gaussian, Student-t with ``df`` degrees of freedom, or Cauchy (Student-t
    with ``df = 1``). Heavy-tailed noise makes an observation now and then
    land far from the truth: Bayes' rule then mostly ignores it, while a
    Kalman update follows it in proportion.

    An observation is an array of ``n_observed`` values, one per observed
    variable in the order of ``observed``; a NaN entry is a *missing*
    observation (a sensor down): :meth:`present` says which are there,
    :meth:`restricted` is the model of those alone, and
    :meth:`log_likelihood` sums over them.

    The noise law lives in two methods: :meth:`standard_noise` draws the
    unit-scale errors ``eps`` (:meth:`sample` adds ``noise_scale`` times them
    to the state) and :meth:`log_density` is the normalised log-density of
    one error ``noise_scale * eps``, which every likelihood of the package
    (:meth:`log_likelihood`, the particle filter's weights, the rank
    histogram filter's scalar update) is made of. A subclass that overrides
    both (and :attr:`variance`, the variance a Kalman update assumes) brings
    another law to every filter; pass an instance to
    ``make_twin_problem(observation_model=...)``.

    Parameters
    ----------
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables: all, those with even index, or these indices.
    noise : {"gaussian", "student_t", "cauchy"}, default="gaussian"
        Family of the noise.
    df : float, default=1.5
        Degrees of freedom of the Student-t noise (unused otherwise); moments
        of order ``>= df`` are infinite.
    noise_scale : float, default=1.0
        Scale of the noise (the standard deviation for Gaussian noise).

    Attributes
    ----------
    observed : ndarray of int
        The observed indices.
    n_observed : int
        Their number.
    tail : float
        ``1 / df`` of the noise law: 0 for Gaussian, 1 for Cauchy. A number
        that describes the law to a learned analysis.
    variance : float or None
        The variance of the noise, ``noise_scale ** 2`` for Gaussian noise and
        ``noise_scale ** 2 * df / (df - 2)`` for Student-t noise with
        ``df > 2``; None when the law has none (``df <= 2``, Cauchy). The
        Kalman steps take it as the observation-error variance.
    nominal_variance : float
        ``noise_scale ** 2``: the variance of the Gaussian law of the same
        scale, which the Kalman steps take when the law has no variance.
    symmetric : bool
        Whether the noise law is symmetric about 0 (True for the built-in
        laws): Bayes' rule then commutes with the reflection ``x -> -x``,
        which a learned analysis uses (:class:`LearnedAnalysis`, ``reflect``).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import ObservationModel
    >>> model = ObservationModel(n_variables=8, observed="every_other", noise="cauchy")
    >>> model.observed
    array([0, 2, 4, 6])
    >>> model.sample(np.zeros(8), random_state=0).shape
    (4,)
    """

    @arrays_described
    @validate_params(
        {
            "n_variables": [N_VARIABLES],
            "observed": OBSERVED,
            "noise": [NOISE],
            "df": [POSITIVE_REAL],
            "noise_scale": [POSITIVE_REAL],
        },
        prefer_skip_nested_validation=True,
    )
    def __init__(self, *, n_variables, observed="all", noise="gaussian", df=1.5, noise_scale=1.0):
        self.n_variables = int(n_variables)
        self.observed = _observed_indices(observed, self.n_variables)
        self.noise = noise
        self.df = 1.0 if noise == "cauchy" else float(df)
        self.noise_scale = float(noise_scale)

    @property
    def n_observed(self):
        return self.observed.size

    @property
    def tail(self):
        return 0.0 if self.noise == "gaussian" else 1.0 / self.df

    @property
    def variance(self):
        if self.noise == "gaussian":
            return self.noise_scale**2
        if self.df > 2:
            return self.noise_scale**2 * self.df / (self.df - 2)
        return None

    @property
    def nominal_variance(self):
        return self.noise_scale**2

    @property
    def symmetric(self):
        return True

    def __repr__(self):
        observed = self.observed.tolist() if self.n_observed <= 6 else f"{self.n_observed} of {self.n_variables}"
        law = self.noise if self.noise != "student_t" else f"student_t(df={self.df:g})"
        return f"ObservationModel(n_variables={self.n_variables}, observed={observed}, noise={law}, scale={self.noise_scale:g})"

    def present(self, observation):
        """Which entries of an observation are present: a NaN entry is a missing observation.

        Parameters
        ----------
        observation : array-like of shape (..., n_observed)
            One observation, or several along the leading axes, with NaN
            where an observation is missing.

        Returns
        -------
        ndarray of bool, of the shape of ``observation``
            True where the observation is present.

        Raises
        ------
        ValueError
            When the last axis does not hold ``n_observed`` values, or an
            entry is infinite (a missing observation is NaN, not inf).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import ObservationModel
        >>> ObservationModel(n_variables=4).present([0.5, np.nan, -1.0, np.nan])
        array([ True, False,  True, False])
        """
        observation = np.asarray(observation, dtype=np.float64)
        if observation.shape[-1:] != (self.n_observed,):
            raise ValueError(
                f"An observation must hold n_observed={self.n_observed} values (one per observed variable, NaN "
                f"where missing); got an array of shape {observation.shape}."
            )
        infinite = np.isinf(observation)
        if infinite.any():
            raise ValueError(
                f"An observation holds {int(infinite.sum())} infinite value(s) (the first at position "
                f"{tuple(int(i) for i in np.argwhere(infinite)[0])}); an observation must be finite, or NaN "
                "where it is missing."
            )
        return ~np.isnan(observation)

    def restricted(self, present):
        """The same noise law and scale, observing only the variables of the present entries.

        Parameters
        ----------
        present : array-like of bool of shape (n_observed,)
            Which observed variables to keep (:meth:`present` of an observation).

        Returns
        -------
        ObservationModel
            A model with ``observed = self.observed[present]`` (possibly empty).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import ObservationModel
        >>> model = ObservationModel(n_variables=8, observed="every_other")
        >>> model.restricted(model.present([0.1, np.nan, 2.0, np.nan])).observed
        array([0, 4])
        """
        present = np.asarray(present, dtype=bool)
        if present.shape != (self.n_observed,):
            raise ValueError(
                f"present must be a boolean mask of shape ({self.n_observed},), one entry per observed variable; "
                f"got shape {present.shape}."
            )
        model = copy.copy(self)
        model.observed = self.observed[present]
        return model

    def standard_noise(self, size, random_state=None):
        """Draws of ``eps`` (unit scale) of the given shape.

        Parameters
        ----------
        size : int or tuple of int
            Shape of the draws.
        random_state : int, RandomState instance or None, default=None
            Source of the draws.

        Returns
        -------
        ndarray
        """
        rng = check_random_state(random_state)
        if self.noise == "gaussian":
            return rng.standard_normal(size)
        if self.noise == "cauchy":
            return rng.standard_cauchy(size)
        return rng.standard_t(self.df, size)

    def sample(self, states, random_state=None):
        """Noisy observations of ``states`` (..., n_variables) -> (..., n_observed).

        ``states[..., observed] + noise_scale * standard_noise(...)``: a
        subclass that overrides :meth:`standard_noise` samples its own law.

        Parameters
        ----------
        states : array-like of shape (..., n_variables)
            True states.
        random_state : int, RandomState instance or None, default=None
            Source of the noise.

        Returns
        -------
        ndarray of shape (..., n_observed)
        """
        states = np.asarray(states, dtype=np.float64)
        return states[..., self.observed] + self.noise_scale * self.standard_noise(
            states[..., self.observed].shape, random_state
        )

    def log_density(self, residual):
        """``log p(residual)`` of the observation noise, elementwise: the normalised log-density of one error.

        ``residual`` is ``observation - state`` in the units of the
        observation (the scale included), any shape; the density is that of
        ``noise_scale * eps`` for the noise law (Gaussian, Student-t with
        ``df`` degrees of freedom, Cauchy), so it integrates to one over each
        entry. Every likelihood of the package is made of it
        (:meth:`log_likelihood`, the scalar update of
        :class:`RankHistogramFilter`): a subclass with another noise law
        overrides this method and :meth:`standard_noise`, and the rest follows.

        Parameters
        ----------
        residual : array-like of any shape
            Observation errors ``observation - state``, finite or infinite.

        Returns
        -------
        ndarray of the shape of ``residual``
            ``log p(residual)`` entry by entry.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import ObservationModel
        >>> model = ObservationModel(n_variables=4, noise_scale=2.0)
        >>> bool(np.isclose(model.log_density(0.0), -np.log(2.0 * np.sqrt(2.0 * np.pi))))
        True
        >>> ObservationModel(n_variables=4, noise="cauchy").log_density([[0.0, 1.0]]).round(4)
        array([[-1.1447, -1.8379]])
        """
        scale = self.noise_scale
        standard = np.asarray(residual, dtype=np.float64) / scale
        if self.noise == "gaussian":
            return -0.5 * standard**2 - _HALF_LOG_2PI - math.log(scale)
        df = self.df
        constant = gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * math.log(df * math.pi) - math.log(scale)
        return constant - 0.5 * (df + 1) * np.log1p(standard**2 / df)

    def log_likelihood(self, observation, states):
        """``log p(observation | state)`` of each state (..., n_variables), summed over the present observations.

        The sum of :meth:`log_density` of the residuals ``observation -
        state[observed]``. Normalised: the densities integrate to one, so
        values of different noise laws can be compared. A NaN entry of
        ``observation`` is a missing observation: the sum runs over the
        present ones only, so that it is the log-likelihood under the
        :meth:`restricted` model; with none present it is 0.

        Parameters
        ----------
        observation : array-like of shape (n_observed,)
            An observation, NaN where missing.
        states : array-like of shape (..., n_variables)
            Candidate states (members, particles).

        Returns
        -------
        ndarray of shape (...)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import ObservationModel
        >>> model = ObservationModel(n_variables=4, observed=[0, 2])
        >>> states = np.zeros((3, 4))
        >>> bool(np.allclose(model.log_likelihood([1.0, np.nan], states), model.log_density(1.0)))
        True
        """
        observation = np.asarray(observation, dtype=np.float64)
        present = ~np.isnan(observation)
        residual = np.where(present, observation - np.asarray(states, dtype=np.float64)[..., self.observed], 0.0)
        return np.sum(np.where(present, self.log_density(residual), 0.0), axis=-1)


@dataclass(frozen=True)
class TwinProblem:
    """A true Lorenz-96 trajectory and its noisy observations, the fixed part of a twin experiment.

    Made by :func:`make_twin_problem`, or directly from a trajectory and its
    observations. Cycle ``k`` (0-based) forecasts from time ``k * dt_obs`` to
    ``(k + 1) * dt_obs`` and assimilates ``observations[k]``, an observation
    of ``truth[k + 1]``.

    A NaN in ``observations`` is a *missing* observation (a sensor down):
    every analysis step assimilates only the observations present in its
    cycle, and a cycle with none is a pure forecast (see
    :func:`twin_experiment`). The truth is always known, so every cycle is
    scored. Every construction is checked (also through
    :func:`dataclasses.replace`), before any cycle runs.

    Parameters
    ----------
    truth : array-like of shape (n_cycles + 1, n_variables)
        The true state at every observation time, ``truth[0]`` the start;
        finite. Stored as a float64 array.
    observations : array-like of shape (n_cycles, n_observed)
        The observations, ``observations[k, j]`` of variable
        ``observation_model.observed[j]`` at the time of ``truth[k + 1]``;
        finite, or NaN where missing. Stored as a float64 array.
    observation_model : ObservationModel
        How they were made (observed variables, noise law and scale); its
        ``n_variables`` and ``n_observed`` are the widths of ``truth`` and
        ``observations``.
    dt_obs : float
        Model time between observations, > 0.
    forcing : float
        The Lorenz-96 forcing, finite.
    time_step : float
        The largest Runge-Kutta step, > 0.

    Attributes
    ----------
    n_cycles : int
        Number of cycles (rows of ``observations``).
    n_variables : int
        State dimension (columns of ``truth``).
    n_missing : int
        Number of missing (NaN) observations.
    climatological_std : float
        Standard deviation of the truth over time and variables (about 3.6
        for ``forcing=8``): an analysis whose error exceeds it has lost the truth.

    Raises
    ------
    TypeError
        When ``observation_model`` is not an :class:`ObservationModel`, an
        array is not numeric, or a scalar is not a real number.
    ValueError
        When a shape disagrees with the observation model or with the other
        array, ``truth`` is not finite, an observation is infinite, or a
        scalar is out of its range.

    Examples
    --------
    >>> import dataclasses
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import make_twin_problem
    >>> problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    >>> problem.forecast(problem.truth[:1]).shape  # one observation interval of the true model
    (1, 8)
    >>> observations = problem.observations.copy()
    >>> observations[5] = np.nan  # no observation at cycle 5
    >>> observations[6, :3] = np.nan  # three missing at cycle 6
    >>> dataclasses.replace(problem, observations=observations).n_missing
    11
    """

    truth: np.ndarray
    observations: np.ndarray
    observation_model: ObservationModel
    dt_obs: float
    forcing: float
    time_step: float

    def __post_init__(self):
        model = self.observation_model
        if not isinstance(model, ObservationModel):
            raise TypeError(
                f"observation_model must be an ObservationModel (e.g. ObservationModel(n_variables=..., "
                f"observed=...), the model that made the observations); got {describe(model)}."
            )
        set_field = functools.partial(object.__setattr__, self)  # the dataclass is frozen
        set_field("dt_obs", _real("dt_obs", self.dt_obs, positive=True))
        set_field("forcing", _real("forcing", self.forcing, positive=False))
        set_field("time_step", _real("time_step", self.time_step, positive=True))
        set_field("truth", _float_matrix("truth", self.truth, "(n_cycles + 1, n_variables)"))
        set_field("observations", _float_matrix("observations", self.observations, "(n_cycles, n_observed)"))
        self._check_data()

    def _check_data(self):
        """Check the arrays against the observation model and each other (again, by any function that takes one)."""
        model, truth, observations = self.observation_model, self.truth, self.observations
        if truth.shape[1] != model.n_variables:
            raise ValueError(
                f"truth has {truth.shape[1]} columns but observation_model has n_variables={model.n_variables}: "
                "truth holds the whole state at every observation time, one column per variable."
            )
        if observations.shape[1] != model.n_observed:
            raise ValueError(
                f"observations have {observations.shape[1]} columns but observation_model observes "
                f"n_observed={model.n_observed} variables: observations[k, j] is the observation of variable "
                "observation_model.observed[j] (NaN where it is missing)."
            )
        if observations.shape[0] == 0:
            raise ValueError("observations have no row: a twin problem needs at least one cycle (one row per cycle).")
        if truth.shape[0] != observations.shape[0] + 1:
            raise ValueError(
                f"truth has {truth.shape[0]} rows and observations {observations.shape[0]}: truth must have exactly "
                f"one more row (truth[0] is the initial state, truth[k + 1] the state observations[k] observes), "
                f"{observations.shape[0] + 1} for {observations.shape[0]} cycles."
            )
        _refuse_where(~np.isfinite(truth), "truth", "non-finite",
                      "the true trajectory must be finite: every analysis is scored against it")
        _refuse_where(np.isinf(observations), "observations", "infinite",
                      "an observation must be finite; mark a missing one with NaN")

    def __repr__(self):
        missing = f", missing={self.n_missing} of {self.observations.size}" if self.n_missing else ""
        return (
            f"TwinProblem(n_cycles={self.n_cycles}, n_variables={self.n_variables}, "
            f"observation_model={self.observation_model!r}, dt_obs={self.dt_obs:g}, forcing={self.forcing:g}, "
            f"time_step={self.time_step:g}{missing})"
        )

    @property
    def n_cycles(self):
        return self.observations.shape[0]

    @property
    def n_variables(self):
        return self.truth.shape[1]

    @property
    def n_missing(self):
        return int(np.isnan(self.observations).sum())

    @property
    def climatological_std(self):
        return float(self.truth.std())

    def forecast(self, states):
        """Propagate states (..., n_variables) over one observation interval with the true model.

        Parameters
        ----------
        states : array-like of shape (..., n_variables)
            States at an observation time.

        Returns
        -------
        ndarray of shape (..., n_variables)
            The states ``dt_obs`` later.
        """
        return integrate_lorenz96(states, self.dt_obs, forcing=self.forcing, time_step=self.time_step)


def _real(name, value, *, positive):
    """A scalar field of a :class:`TwinProblem` as a float, checked: finite, and > 0 when ``positive``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number; got {describe(value)}.")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{name} must be a finite {'positive ' if positive else ''}number; got {value!r}.")
    return value


def _float_matrix(name, value, shape):
    """An array field of a :class:`TwinProblem` as a 2-D float64 array, or a TypeError / ValueError naming it."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a 2-D array of real numbers of shape {shape}; got {describe(value)}.")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        raise TypeError(
            f"{name} must be a 2-D array of real numbers of shape {shape}; got {describe(value)}, which numpy "
            "cannot make a rectangular array of."
        ) from None
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be a 2-D array of real numbers of shape {shape}; got {_described_as_array(value, array)}."
        )
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape {shape}; got {_described_as_array(value, array)}.")
    return array.astype(np.float64, copy=False)


def _refuse_where(bad, name, what, why):
    """Refuse an array with ``bad`` entries, saying how many and where the first is (never their values)."""
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} holds {int(bad.sum())} {what} value(s) (the first at {name}[{first[0]}, {first[1]}]); {why}."
        )


#: What to do, said after the refusal of an array where an object of the key's type belongs.
_HINTS = {
    TwinProblem: (
        " Pass make_twin_problem(...), or TwinProblem(truth=..., observations=..., observation_model=..., "
        "dt_obs=..., forcing=..., time_step=...) to wrap arrays of your own."
    ),
}

#: The domains of the simulation's parameters, shared by every function that simulates a problem.
SIMULATION_CONSTRAINTS = {
    "n_variables": [N_VARIABLES],
    "observed": OBSERVED,
    "noise": [NOISE],
    "df": [POSITIVE_REAL],
    "noise_scale": [POSITIVE_REAL],
    "dt_obs": [POSITIVE_REAL],
    "n_cycles": [POSITIVE_INT],
}
#: The domains of a cycled run's own parameters, shared by the twin experiment and the training pairs.
RUN_CONSTRAINTS = {
    "ensemble_size": [NumberInterval(Integral, 2, None, closed="left", why="a spread needs two members")],
    "spin_up": [NumberInterval(Integral, 0, None, closed="left")],
    "initial_spread": [POSITIVE_REAL],
}


#: The parameters of make_twin_problem that build its observation model, when none is given.
_MODEL_PARAMETERS = ("n_variables", "observed", "noise", "df", "noise_scale")


def _model_or_its_parameters(func):
    """Refuse an observation model given together with the parameters that would build one (before any work)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        given = [name for name in _MODEL_PARAMETERS if name in kwargs]
        if kwargs.get("observation_model") is not None and given:
            raise InvalidParameterError(
                f"{func.__name__} got an observation_model and {given}: the model fixes the observed variables, "
                "the noise law and scale and n_variables. Pass one or the other: "
                "ObservationModel(n_variables=..., observed=..., noise=..., ...) holds them all."
            )
        return func(*args, **kwargs)

    return wrapper


@_model_or_its_parameters
@arrays_described
@validate_params(
    {
        **SIMULATION_CONSTRAINTS,
        "observation_model": [ObservationModel, None],
        "forcing": [NumberInterval(Real, None, None, closed="neither")],
        "time_step": [POSITIVE_REAL],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_twin_problem(
    *,
    n_variables=40,
    observed="all",
    noise="gaussian",
    df=1.5,
    noise_scale=1.0,
    dt_obs=0.05,
    n_cycles=1000,
    forcing=8.0,
    time_step=0.01,
    observation_model=None,
    random_state=None,
):
    """Simulate the truth and the observations of a Lorenz-96 twin experiment.

    The truth starts from ``forcing`` plus small noise, is spun up for 10 time
    units onto the attractor, then runs ``n_cycles * dt_obs`` time units with
    an observation every ``dt_obs``. The defaults are the standard
    configuration of Sakov and Oke (2008): 40 variables, all observed every
    0.05 time units with unit noise.

    The observations are drawn by an :class:`ObservationModel` built from
    ``n_variables``, ``observed``, ``noise``, ``df`` and ``noise_scale``, or
    by ``observation_model`` when it is given (a subclass with a noise law of
    its own, see :class:`ObservationModel`); the two are exclusive.

    Parameters
    ----------
    n_variables : int, default=40
        State dimension (at least 4).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables.
    noise : {"gaussian", "student_t", "cauchy"}, default="gaussian"
        Observation-noise law.
    df : float, default=1.5
        Degrees of freedom of the Student-t noise.
    noise_scale : float, default=1.0
        Scale of the noise.
    dt_obs : float, default=0.05
        Model time between observations.
    n_cycles : int, default=1000
        Number of observations (assimilation cycles).
    forcing : float, default=8.0
        Lorenz-96 forcing.
    time_step : float, default=0.01
        Largest Runge-Kutta step.
    observation_model : ObservationModel or None, default=None
        The model that makes the observations (its ``sample``), instead of
        one built from the five parameters above, which must then not be
        passed; its ``n_variables`` is the state dimension.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial state and the noise.

    Returns
    -------
    TwinProblem

    Raises
    ------
    sklearn.utils._param_validation.InvalidParameterError
        On a parameter outside its domain, or ``observation_model`` given
        with any of ``n_variables``, ``observed``, ``noise``, ``df`` and
        ``noise_scale``.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import ObservationModel, make_twin_problem
    >>> problem = make_twin_problem(n_variables=10, noise="cauchy", n_cycles=50, random_state=0)
    >>> problem.truth.shape, problem.observations.shape
    ((51, 10), (50, 10))
    >>> model = ObservationModel(n_variables=6, observed=[0, 3], noise="student_t", df=4.0)
    >>> make_twin_problem(observation_model=model, n_cycles=20, random_state=0).observations.shape
    (20, 2)
    """
    rng = check_random_state(random_state)
    if observation_model is None:
        observation_model = ObservationModel(
            n_variables=n_variables, observed=observed, noise=noise, df=df, noise_scale=noise_scale
        )
    n_variables = observation_model.n_variables
    state = forcing + 0.01 * rng.standard_normal(n_variables)
    state = integrate_lorenz96(state, _SPIN_UP_TIME, forcing=forcing, time_step=time_step)
    truth = np.empty((n_cycles + 1, n_variables))
    truth[0] = state
    for k in range(n_cycles):
        truth[k + 1] = integrate_lorenz96(truth[k], dt_obs, forcing=forcing, time_step=time_step)
    if not np.all(np.isfinite(truth)):
        raise ValueError(f"The Lorenz-96 integration overflowed (time_step={time_step}); use a smaller time_step.")
    observations = observation_model.sample(truth[1:], rng)
    return TwinProblem(
        truth=truth, observations=observations, observation_model=observation_model,
        dt_obs=float(dt_obs), forcing=float(forcing), time_step=float(time_step),
    )
