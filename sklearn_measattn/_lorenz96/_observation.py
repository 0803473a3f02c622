"""The observations of a Lorenz-96 state: observed variables and an additive noise law (Gaussian or heavy-tailed)."""

from __future__ import annotations

import copy
import math
from numbers import Integral

import numpy as np
from scipy.special import gammaln
from sklearn.utils import check_random_state

from .._param_validation import validate_params
from .._validation import POSITIVE_REAL, Choices, NumberInterval, arrays_described, described_as_array
from ._model import MIN_VARIABLES

__all__ = ["N_VARIABLES", "NOISE", "OBSERVATION_NOISES", "OBSERVED", "ObservationModel"]

#: Observation-noise families accepted by ``observation_noise=`` and ``noise=``.
OBSERVATION_NOISES = ("gaussian", "student_t", "cauchy")

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

NOISE = Choices(OBSERVATION_NOISES, why="'student_t' uses df degrees of freedom; 'cauchy' is Student-t with df=1")
OBSERVED = [Choices(("all", "every_other")), "array-like"]
N_VARIABLES = NumberInterval(Integral, MIN_VARIABLES, None, closed="left", why="each tendency couples four neighbours")


def _observed_indices(observed, n_variables):
    if isinstance(observed, str):
        return np.arange(n_variables) if observed == "all" else np.arange(0, n_variables, 2)
    indices = np.asarray(observed)
    if indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu":
        raise TypeError(
            "observed must be 'all', 'every_other' or a non-empty 1-D list of integer variable indices, "
            f"got {described_as_array(observed, indices)}."
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
        observation : array-like of shape (n_observed,) or (..., n_observed)
            An observation, NaN where missing; several along leading axes
            broadcast against those of ``states``.
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
