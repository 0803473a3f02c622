"""The twin experiment's truth and observations: a Lorenz-96 trajectory observed with Gaussian or heavy-tailed noise."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._lorenz96 import (
    FORCING,
    N_VARIABLES,
    NOISE,
    OBSERVED,
    NoiseLaw,
    ObservationModel,
    attractor_states,
    integrate_lorenz96,
)
from .._param_validation import InvalidParameterError, validate_params
from .._validation import POSITIVE_INT, POSITIVE_REAL, NumberInterval, describe, described_as_array
from .._validation import arrays_described as _described
from .._validation import refuse_array_likes as _refuse_array_likes

__all__ = ["ObservationModel", "TwinProblem", "make_twin_problem"]

_INITIAL_PERTURBATION = 0.01  # the initial truth: forcing plus this much noise, spun up onto the attractor

#: What to do, said after the refusal of an array where an object of the key's type belongs (filled below).
_HINTS = {}


def refuse_array_likes(constraints, arguments, caller):
    """The package's refusal of an array-like argument outside its domain, with the twin problem's hint."""
    _refuse_array_likes(constraints, arguments, caller, hints=_HINTS)


def _check_steps(arguments):
    """An analysis step passed as an argument has its own parameters checked (the error naming the step)."""
    for value in arguments.values():
        check = getattr(value, "_check_parameters", None)
        if callable(check) and not isinstance(value, type):
            check()


def arrays_described(func):
    """Put in front of scikit-learn's ``validate_params``: an array-like argument it would refuse is described.

    The decorated function keeps its constraint table; an array-like value
    outside its domain is refused with its type and shape before
    scikit-learn's own message, which would print it, is made.

    An analysis step passed as an argument has its own parameters checked
    here too, outside ``validate_params``: inside it, an error of the step's
    would be renamed after the function (``validate_params`` rewrites
    "parameter of X must be" with the function's name), where it should name
    the step.
    """
    return _described(func, hints=_HINTS, check=_check_steps)


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
            f"{name} must be a 2-D array of real numbers of shape {shape}; got {described_as_array(value, array)}."
        )
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape {shape}; got {described_as_array(value, array)}.")
    return array.astype(np.float64, copy=False)


def _refuse_where(bad, name, what, why):
    """Refuse an array with ``bad`` entries, saying how many and where the first is (never their values)."""
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} holds {int(bad.sum())} {what} value(s) (the first at {name}[{first[0]}, {first[1]}]); {why}."
        )


_HINTS[TwinProblem] = (
    " Pass make_twin_problem(...), or TwinProblem(truth=..., observations=..., observation_model=..., "
    "dt_obs=..., forcing=..., time_step=...) to wrap arrays of your own."
)

#: The domains of the simulation's parameters, shared by every function that simulates a problem.
SIMULATION_CONSTRAINTS = {
    "n_variables": [N_VARIABLES],
    "observed": OBSERVED,
    "noise": [NOISE, NoiseLaw],
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
        "forcing": [FORCING],
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
    noise : {"gaussian", "student_t", "cauchy"} or NoiseLaw, default="gaussian"
        Observation-noise law, by name or the law itself (then without
        ``df`` and ``noise_scale``, which it holds).
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
    ValueError, TypeError
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
    if observation_model is None:
        observation_model = ObservationModel(
            n_variables=n_variables, observed=observed, noise=noise, df=df, noise_scale=noise_scale
        )
    n_variables = observation_model.n_variables
    rng = check_random_state(random_state)
    state = attractor_states(n_variables, forcing=forcing, time_step=time_step,
                             perturbation=_INITIAL_PERTURBATION, random_state=rng)
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


def check_problem_for_run(problem, *, spin_up):
    """Check, before any cycle runs, that ``problem`` is still valid and that ``spin_up`` leaves cycles to score.

    Its arrays are checked again: they may have been changed in place since
    it was made.

    Parameters
    ----------
    problem : TwinProblem
        The problem passed.
    spin_up : int
        Cycles left out of the averages.

    Raises
    ------
    ValueError
        If the problem's arrays are no longer valid, or ``spin_up`` is not
        below its number of cycles.
    """
    problem._check_data()
    if spin_up >= problem.n_cycles:
        raise InvalidParameterError(
            f"spin_up={spin_up} leaves no cycle to score: it must be below n_cycles ({problem.n_cycles})."
        )
