"""The twin experiment's truth and observations: a Lorenz-96 trajectory observed with Gaussian or heavy-tailed noise."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.special import gammaln
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import validate_params

from .._validation import POSITIVE_INT, POSITIVE_REAL, Choices, NumberInterval
from ..datasets import OBSERVATION_NOISES, integrate_lorenz96

__all__ = ["ObservationModel", "TwinProblem", "make_twin_problem"]

_SPIN_UP_TIME = 10.0  # model time units: long enough to reach the attractor from F + small noise
_MIN_VARIABLES = 4  # the tendency couples x_{i-2}, x_{i-1}, x_i and x_{i+1}

NOISE = Choices(OBSERVATION_NOISES, why="'student_t' uses df degrees of freedom; 'cauchy' is Student-t with df=1")
OBSERVED = [Choices(("all", "every_other")), "array-like"]
N_VARIABLES = NumberInterval(Integral, _MIN_VARIABLES, None, closed="left", why="each tendency couples four neighbours")


def _observed_indices(observed, n_variables):
    if isinstance(observed, str):
        return np.arange(n_variables) if observed == "all" else np.arange(0, n_variables, 2)
    indices = np.asarray(observed)
    if indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu":
        raise TypeError(
            f"observed must be 'all', 'every_other' or a non-empty 1-D list of integer variable indices, got {observed!r}."
        )
    if np.any(indices < 0) or np.any(indices >= n_variables) or np.unique(indices).size != indices.size:
        raise ValueError(
            f"observed must hold distinct variable indices in [0, {n_variables - 1}] (n_variables={n_variables}), "
            f"got {indices.tolist()}."
        )
    return indices.astype(np.intp)


class ObservationModel:
    r"""Direct observations of some state variables with additive, independent noise.

    ``o = x[observed] + noise_scale * eps``, the ``eps_j`` iid standard
    Gaussian, Student-t with ``df`` degrees of freedom, or Cauchy (Student-t
    with ``df = 1``). Heavy-tailed noise makes an observation now and then
    land far from the truth: Bayes' rule then mostly ignores it, while a
    Kalman update follows it in proportion.

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
    nominal_variance : float
        ``noise_scale ** 2``: the observation-error variance a Kalman update
        assumes (heavy-tailed laws with ``df <= 2`` have none).

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
    def nominal_variance(self):
        return self.noise_scale**2

    def __repr__(self):
        observed = self.observed.tolist() if self.n_observed <= 6 else f"{self.n_observed} of {self.n_variables}"
        law = self.noise if self.noise != "student_t" else f"student_t(df={self.df:g})"
        return f"ObservationModel(n_variables={self.n_variables}, observed={observed}, noise={law}, scale={self.noise_scale:g})"

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

    def log_likelihood(self, observation, states):
        """``log p(observation | state)`` of each state (..., n_variables), summed over the observations.

        Normalised: the densities integrate to one, so values of different
        noise laws can be compared.

        Parameters
        ----------
        observation : array-like of shape (n_observed,)
            An observation.
        states : array-like of shape (..., n_variables)
            Candidate states (members, particles).

        Returns
        -------
        ndarray of shape (...)
        """
        residual = (np.asarray(observation) - np.asarray(states)[..., self.observed]) / self.noise_scale
        n = self.n_observed
        if self.noise == "gaussian":
            log_density = -0.5 * np.sum(residual**2, axis=-1) - 0.5 * n * math.log(2 * math.pi)
        else:
            df = self.df
            constant = gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * math.log(df * math.pi)
            log_density = n * constant - 0.5 * (df + 1) * np.sum(np.log1p(residual**2 / df), axis=-1)
        return log_density - n * math.log(self.noise_scale)


@dataclass(frozen=True)
class TwinProblem:
    """A true Lorenz-96 trajectory and its noisy observations, the fixed part of a twin experiment.

    Made by :func:`make_twin_problem`. Cycle ``k`` (0-based) forecasts from
    time ``k * dt_obs`` to ``(k + 1) * dt_obs`` and assimilates
    ``observations[k]``, an observation of ``truth[k + 1]``.

    Parameters
    ----------
    truth : ndarray of shape (n_cycles + 1, n_variables)
        The true state at every observation time, ``truth[0]`` the start.
    observations : ndarray of shape (n_cycles, n_observed)
        The observations.
    observation_model : ObservationModel
        How they were made (observed variables, noise law and scale).
    dt_obs : float
        Model time between observations.
    forcing : float
        The Lorenz-96 forcing.
    time_step : float
        The largest Runge-Kutta step.

    Attributes
    ----------
    climatological_std : float
        Standard deviation of the truth over time and variables (about 3.6
        for ``forcing=8``): an analysis whose error exceeds it has lost the truth.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem
    >>> problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    >>> problem.forecast(problem.truth[:1]).shape  # one observation interval of the true model
    (1, 8)
    """

    truth: np.ndarray
    observations: np.ndarray
    observation_model: ObservationModel
    dt_obs: float
    forcing: float
    time_step: float

    @property
    def n_cycles(self):
        return self.observations.shape[0]

    @property
    def n_variables(self):
        return self.truth.shape[1]

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


@validate_params(
    {
        **SIMULATION_CONSTRAINTS,
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
    random_state=None,
):
    """Simulate the truth and the observations of a Lorenz-96 twin experiment.

    The truth starts from ``forcing`` plus small noise, is spun up for 10 time
    units onto the attractor, then runs ``n_cycles * dt_obs`` time units with
    an observation every ``dt_obs``. The defaults are the standard
    configuration of Sakov and Oke (2008): 40 variables, all observed every
    0.05 time units with unit noise.

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
    random_state : int, RandomState instance or None, default=None
        Seeds the initial state and the noise.

    Returns
    -------
    TwinProblem

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem
    >>> problem = make_twin_problem(n_variables=10, noise="cauchy", n_cycles=50, random_state=0)
    >>> problem.truth.shape, problem.observations.shape
    ((51, 10), (50, 10))
    """
    rng = check_random_state(random_state)
    observation_model = ObservationModel(
        n_variables=n_variables, observed=observed, noise=noise, df=df, noise_scale=noise_scale
    )
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
