"""Additive observation-error laws, apart from which variables are observed: draws, scale, tail, and a density where known."""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from scipy.special import gammaln
from sklearn.utils import check_random_state

from .._param_validation import Interval, validate_params
from .._validation import POSITIVE_REAL

__all__ = ["CauchyNoise", "GaussianNoise", "NoiseLaw", "StudentTNoise", "as_noise_laws", "noise_law"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class NoiseLaw:
    """The law of one additive observation error ``scale * eps``: what every filter and training recipe reads of it.

    A law draws unit-scale errors (:meth:`standard_noise`; :meth:`sample`
    multiplies them by :attr:`scale`) and describes itself by a few numbers:
    :attr:`tail` (``1 / df``: 0 Gaussian, 1 Cauchy), the input of a learned
    analysis; :attr:`variance`, the variance a Kalman update takes (None when
    the law has none); :attr:`symmetric`, whether Bayes' rule commutes with
    ``x -> -x``. A law whose density is known also has
    :meth:`log_density`, the normalised log-density of one error, which
    Bayes' rule (the rank histogram and particle filters) needs; a law known
    only by a record of errors has none (``hasattr(law, "log_density")`` is
    False), and a fitted density stands in for it.

    The built-in laws are :class:`GaussianNoise`, :class:`StudentTNoise` and
    :class:`CauchyNoise`, with their exact densities, and
    :class:`~sklearn_measattn.assimilation.SampledNoise` (a record, no
    density) and :class:`~sklearn_measattn.assimilation.KernelDensityNoise`
    (its kernel density). A law of your own subclasses this one and
    implements :meth:`standard_noise`, :attr:`tail` and, where known,
    ``log_density``; an :class:`~sklearn_measattn.assimilation.ObservationModel`
    observes variables through it (``ObservationModel(..., noise=law)``), and
    the training functions of the learned analyses take it as it is.

    Parameters
    ----------
    scale : float, default=1.0
        The scale of the errors, > 0.

    Examples
    --------
    >>> from sklearn.utils import check_random_state
    >>> from sklearn_measattn.assimilation import NoiseLaw
    >>> class Laplace(NoiseLaw):
    ...     tail = 0.0
    ...     def standard_noise(self, size, random_state=None):
    ...         return check_random_state(random_state).laplace(size=size)
    >>> Laplace(scale=2.0).sample(3, random_state=0).shape
    (3,)
    >>> hasattr(Laplace(), "log_density")
    False
    """

    @validate_params({"scale": [POSITIVE_REAL]}, prefer_skip_nested_validation=True)
    def __init__(self, *, scale=1.0):
        self.scale = float(scale)

    #: ``1 / df`` of the law (0 Gaussian, 1 Cauchy): a subclass sets it.
    tail = math.nan

    @property
    def variance(self):
        """The variance of ``scale * eps``; None when the law has none (the Kalman steps then take ``scale ** 2``)."""
        return None

    @property
    def nominal_variance(self):
        """``scale ** 2``: the variance of the Gaussian law of the same scale."""
        return self.scale**2

    @property
    def symmetric(self):
        """Whether the law is symmetric about 0 (True unless a subclass says otherwise)."""
        return True

    @property
    def name(self):
        """A short name of the law's family, for tables and messages."""
        return type(self).__name__

    def standard_noise(self, size, random_state=None):
        """Draws of ``eps`` (unit scale) of the given shape; a subclass implements it.

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
        raise NotImplementedError(f"{type(self).__name__} must implement standard_noise(size, random_state).")

    def sample(self, size, random_state=None):
        """Errors ``scale * eps`` of the given shape.

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
        return self.scale * self.standard_noise(size, random_state)

    def __repr__(self):
        return f"{type(self).__name__}(scale={self.scale:g})"


class GaussianNoise(NoiseLaw):
    """Gaussian errors of standard deviation ``scale``.

    Parameters
    ----------
    scale : float, default=1.0
        The standard deviation, > 0.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import GaussianNoise
    >>> law = GaussianNoise(scale=2.0)
    >>> law.tail, law.variance
    (0.0, 4.0)
    >>> bool(np.isclose(law.log_density(0.0), -np.log(2.0 * np.sqrt(2.0 * np.pi))))
    True
    """

    tail = 0.0
    name = "gaussian"

    @property
    def variance(self):
        return self.scale**2

    def standard_noise(self, size, random_state=None):
        return check_random_state(random_state).standard_normal(size)

    def log_density(self, residual):
        """``log p(residual)`` of one error, elementwise, normalised.

        Parameters
        ----------
        residual : array-like of any shape
            Errors ``observation - state``, finite or infinite.

        Returns
        -------
        ndarray of the shape of ``residual``
        """
        standard = np.asarray(residual, dtype=np.float64) / self.scale
        return -0.5 * standard**2 - _HALF_LOG_2PI - math.log(self.scale)


class StudentTNoise(NoiseLaw):
    """Student-t errors with ``df`` degrees of freedom, times ``scale``: moments of order ``>= df`` are infinite.

    Parameters
    ----------
    df : float, default=1.5
        Degrees of freedom, > 0 (1: Cauchy).
    scale : float, default=1.0
        The scale, > 0.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import StudentTNoise
    >>> law = StudentTNoise(df=4.0)
    >>> law.tail, law.variance
    (0.25, 2.0)
    >>> StudentTNoise(df=2.0).variance is None
    True
    """

    name = "student_t"

    @validate_params({"df": [Interval(Real, 0, None, closed="neither")], "scale": [POSITIVE_REAL]},
                     prefer_skip_nested_validation=True)
    def __init__(self, *, df=1.5, scale=1.0):
        super().__init__(scale=scale)
        self.df = float(df)

    @property
    def tail(self):
        return 1.0 / self.df

    @property
    def variance(self):
        return self.scale**2 * self.df / (self.df - 2) if self.df > 2 else None

    def standard_noise(self, size, random_state=None):
        return check_random_state(random_state).standard_t(self.df, size)

    def log_density(self, residual):
        """``log p(residual)`` of one error, elementwise, normalised.

        Parameters
        ----------
        residual : array-like of any shape
            Errors ``observation - state``, finite or infinite.

        Returns
        -------
        ndarray of the shape of ``residual``
        """
        standard = np.asarray(residual, dtype=np.float64) / self.scale
        df = self.df
        constant = gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * math.log(df * math.pi) - math.log(self.scale)
        return constant - 0.5 * (df + 1) * np.log1p(standard**2 / df)

    def __repr__(self):
        return f"{type(self).__name__}(df={self.df:g}, scale={self.scale:g})"


class CauchyNoise(StudentTNoise):
    """Cauchy errors of scale ``scale``: Student-t with one degree of freedom, no mean, no variance.

    Parameters
    ----------
    scale : float, default=1.0
        The scale (half the interquartile range), > 0.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import CauchyNoise
    >>> CauchyNoise().log_density([0.0, 1.0]).round(4)
    array([-1.1447, -1.8379])
    """

    name = "cauchy"

    @validate_params({"scale": [POSITIVE_REAL]}, prefer_skip_nested_validation=True)
    def __init__(self, *, scale=1.0):
        super().__init__(df=1.0, scale=scale)

    def standard_noise(self, size, random_state=None):
        return check_random_state(random_state).standard_cauchy(size)

    def __repr__(self):
        return f"{type(self).__name__}(scale={self.scale:g})"


def noise_law(noise, *, df=1.5, scale=1.0):
    """The built-in law of a family name: ``"gaussian"``, ``"student_t"`` (with ``df``) or ``"cauchy"``."""
    if noise == "gaussian":
        return GaussianNoise(scale=scale)
    if noise == "cauchy":
        return CauchyNoise(scale=scale)
    return StudentTNoise(df=df, scale=scale)


def as_noise_laws(noise, *, caller):
    """``noise`` as a non-empty list of laws: a law, an observation model (its law) or a list of either.

    Raises
    ------
    TypeError
        When an entry is neither, or the list is empty.
    """
    entries = list(noise) if isinstance(noise, (list, tuple)) else [noise]
    laws = [getattr(entry, "law", entry) for entry in entries]
    if not laws or not all(isinstance(law, NoiseLaw) for law in laws):
        raise TypeError(
            f"noise of {caller} must be a noise law (GaussianNoise(), StudentTNoise(df=...), CauchyNoise(), "
            "SampledNoise(errors), a NoiseLaw of your own), an ObservationModel (its law is taken), or a non-empty "
            f"list of them; got {[type(entry).__name__ for entry in entries] or 'an empty list'}."
        )
    return laws
