"""The observations of a Lorenz-96 state: observed variables and an additive noise law (Gaussian or heavy-tailed)."""

from __future__ import annotations

import copy
import math
from numbers import Integral

import numpy as np

from .._param_validation import validate_params
from .._validation import POSITIVE_REAL, Choices, NumberInterval, arrays_described, described_as_array
from ._model import MIN_VARIABLES
from ._noise import NoiseLaw, noise_law

__all__ = ["N_VARIABLES", "NOISE", "OBSERVATION_NOISES", "OBSERVED", "ObservationModel"]

#: Observation-noise families accepted by ``observation_noise=`` and ``noise=``.
OBSERVATION_NOISES = ("gaussian", "student_t", "cauchy")

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
    r"""Direct observations of some state variables with additive, independent noise of one law.

    ``o = x[observed] + noise_scale * eps``, the ``eps_j`` iid draws of a
    :class:`NoiseLaw`: standard Gaussian, Student-t with ``df`` degrees of
    freedom, or Cauchy (Student-t with ``df = 1``) by name, or any law passed
    as ``noise`` (a record of errors, :class:`SampledNoise`; a law of your
    own). The model is the observation operator (which variables, the state
    size) and its :attr:`law`, which it reads everything about the noise
    from. Heavy-tailed noise makes an observation now and then
    land far from the truth: Bayes' rule then mostly ignores it, while a
    Kalman update follows it in proportion.

    An observation is an array of ``n_observed`` values, one per observed
    variable in the order of ``observed``; a NaN entry is a *missing*
    observation (a sensor down): :meth:`present` says which are there,
    :meth:`restricted` is the model of those alone, and
    :meth:`log_likelihood` sums over them.

    The law's :meth:`~NoiseLaw.standard_noise` draws the unit-scale errors
    ``eps`` (:meth:`sample` adds ``noise_scale`` times them to the state) and
    its ``log_density``, where the law has one, is the normalised
    log-density of one error, which every likelihood of the package
    (:meth:`log_likelihood`, the particle filter's weights, the rank
    histogram filter's scalar update) is made of. A law known only by a
    record of errors has no density, and neither has the model then
    (``hasattr(model, "log_density")`` is False): the filters that need
    Bayes' rule ask for a fitted one. Pass the model to
    ``make_twin_problem(observation_model=...)``.

    Parameters
    ----------
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables: all, those with even index, or these indices.
    noise : {"gaussian", "student_t", "cauchy"} or NoiseLaw, default="gaussian"
        Family of the noise, or the law itself (which then holds its own
        scale and degrees of freedom: ``df`` and ``noise_scale`` are not
        given beside it).
    df : float, default=1.5
        Degrees of freedom of the Student-t noise (unused otherwise); moments
        of order ``>= df`` are infinite.
    noise_scale : float, default=1.0
        Scale of the noise (the standard deviation for Gaussian noise).

    Attributes
    ----------
    law : NoiseLaw
        The noise law (:class:`GaussianNoise`, :class:`StudentTNoise`,
        :class:`CauchyNoise` for the names).
    noise : str
        The law's family name (``law.name``).
    df : float
        Its degrees of freedom (NaN for a law without them).
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
            "noise": [NOISE, NoiseLaw],
            "df": [POSITIVE_REAL],
            "noise_scale": [POSITIVE_REAL],
        },
        prefer_skip_nested_validation=True,
    )
    def __init__(self, *, n_variables, observed="all", noise="gaussian", df=1.5, noise_scale=1.0):
        if isinstance(noise, NoiseLaw) and (df != 1.5 or noise_scale != 1.0):
            raise ValueError(
                f"noise={noise!r} is a law, which holds its own scale and degrees of freedom: do not pass df or "
                "noise_scale beside it (make the law with the ones you want)."
            )
        self.n_variables = int(n_variables)
        self.observed = _observed_indices(observed, self.n_variables)
        self.law = noise if isinstance(noise, NoiseLaw) else noise_law(noise, df=df, scale=noise_scale)

    @property
    def noise(self):
        return self.law.name

    @property
    def df(self):
        return float(getattr(self.law, "df", math.nan))

    @property
    def noise_scale(self):
        return self.law.scale

    @noise_scale.setter
    def noise_scale(self, value):
        self.law = copy.copy(self.law)  # a law shared with other models keeps its scale
        self.law.scale = float(value)

    @property
    def n_observed(self):
        return self.observed.size

    @property
    def tail(self):
        return self.law.tail

    @property
    def variance(self):
        return self.law.variance

    @property
    def nominal_variance(self):
        return self.noise_scale**2

    @property
    def symmetric(self):
        return self.law.symmetric

    def _law_repr(self):
        if type(self.law).__module__ == __name__.rsplit(".", 1)[0] + "._noise":
            return self.noise if self.noise != "student_t" else f"student_t(df={self.df:g})"
        return repr(self.law)

    def __repr__(self):
        observed = self.observed.tolist() if self.n_observed <= 6 else f"{self.n_observed} of {self.n_variables}"
        return (f"{type(self).__name__}(n_variables={self.n_variables}, observed={observed}, noise={self._law_repr()}, "
                f"scale={self.noise_scale:g})")

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
        """Draws of ``eps`` (unit scale) of the given shape: the law's.

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
        return self.law.standard_noise(size, random_state)

    def sample(self, states, random_state=None):
        """Noisy observations of ``states`` (..., n_variables) -> (..., n_observed).

        ``states[..., observed]`` plus errors of the law (``law.sample``:
        ``noise_scale * eps``; exactly recorded errors for a record).

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
        observed = np.asarray(states, dtype=np.float64)[..., self.observed]
        return observed + self.law.sample(observed.shape, random_state)

    @property
    def log_density(self):
        """``log p(residual)`` of the observation noise, elementwise: the law's normalised log-density of one error.

        ``residual`` is ``observation - state`` in the units of the
        observation (the scale included), any shape. Every likelihood of the
        package is made of it (:meth:`log_likelihood`, the scalar update of
        :class:`RankHistogramFilter`). Absent (an ``AttributeError``, and
        ``hasattr`` False) when the law has no density, as a record of errors.

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
        density = getattr(self.law, "log_density", None)
        if density is None:
            raise AttributeError(
                f"The noise law of this {type(self).__name__}, {self.law!r}, has no density (a law known only by "
                "draws, such as a record of errors): Bayes' rule needs one. Fit one to the record: "
                "law.fit_student_t() or law.kernel_density(), and observe through it."
            )
        return density

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
