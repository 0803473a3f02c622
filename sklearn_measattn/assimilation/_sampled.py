"""Observation noise known only by a record of errors: resampled for simulation, fitted for Bayes' rule.

A sensor's error law is often known only through a record of past errors
(observation minus a reference value). Simulating with it is easy (resample
the record); Bayes' rule needs a density, which the record does not give.
:class:`SampledNoise` does the first and has no density, and fits two
densities from the same record: a Student-t by maximum likelihood
(:meth:`SampledNoise.fit_student_t`) and a kernel density
(:class:`KernelDensityNoise`). :class:`SampledObservationModel` and
:class:`KernelDensityObservationModel` observe variables through them. :func:`contaminated_errors` and
:func:`skewed_errors` draw records of two laws that the package's Gaussian and
Student-t families do not contain.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from scipy import stats
from scipy.special import stdtrit
from sklearn.utils import check_random_state

from .._lorenz96 import NoiseLaw, StudentTNoise
from .._param_validation import validate_params
from .._validation import POSITIVE_INT, POSITIVE_REAL, NumberInterval
from ._problem import N_VARIABLES, OBSERVED, ObservationModel, arrays_described, describe

__all__ = [
    "KernelDensityNoise", "KernelDensityObservationModel", "SampledNoise", "SampledObservationModel", "contaminated_errors",
    "skewed_errors",
]

MIN_ERRORS = 100  # fewer cannot say much about a law's tails, nor fit a density
MAD_TO_SD = 1.4826  # 1 / Phi^{-1}(3/4): the median absolute deviation of a normal law times this is its sd
_MAX_DF = 1000.0  # a fitted Student-t with more degrees of freedom is a normal law to every purpose here
_GRID_STEPS_PER_BANDWIDTH = 8  # the kernel density's grid, in the transformed coordinate
_GRID_MARGIN = 4.0  # bandwidths beyond the outermost transformed errors
_MAX_GRID = 1 << 17
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

_FRACTION = NumberInterval(Real, 0, 1, closed="both", why="the probability that an error is a gross one")
_SKEWNESS = NumberInterval(
    Real, -1, 1, closed="neither", why="the right piece's scale is scale * (1 + skewness), the left's scale * (1 - skewness)"
)


@validate_params(
    {
        "n_errors": [POSITIVE_INT],
        "gross_fraction": [_FRACTION],
        "scale": [POSITIVE_REAL],
        "gross_scale": [POSITIVE_REAL],
        "gross_df": [POSITIVE_REAL],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def contaminated_errors(n_errors, *, gross_fraction=0.05, scale=1.0, gross_scale=10.0, gross_df=1.0, random_state=None):
    r"""Draw observation errors of a contaminated law: mostly small Gaussian errors, a few gross heavy-tailed ones.

    Each error is, independently, with probability ``1 - gross_fraction`` a
    Gaussian error of standard deviation ``scale``, and with probability
    ``gross_fraction`` a *gross* error, ``gross_scale`` times a Student-t
    variable with ``gross_df`` degrees of freedom (Cauchy for the default
    ``gross_df=1``):

    .. math::

        p(e) = (1 - \epsilon)\, \frac{1}{s}\, \varphi\!\left(\frac{e}{s}\right)
             + \epsilon\, \frac{1}{g}\, t_\nu\!\left(\frac{e}{g}\right),

    with ``epsilon = gross_fraction``, ``s = scale``, ``g = gross_scale`` and
    ``nu = gross_df``. The law of a sensor that is right most of the time and
    now and then reports nonsense (a transmission error, a wrong unit, a
    stuck value): symmetric about 0, Gaussian in the bulk, with the tails of
    the gross errors. No Student-t law has both its bulk and its tails.

    Parameters
    ----------
    n_errors : int
        How many errors to draw.
    gross_fraction : float, default=0.05
        The probability of a gross error, in [0, 1].
    scale : float, default=1.0
        The standard deviation of the Gaussian errors, > 0.
    gross_scale : float, default=10.0
        The scale of the gross errors, > 0.
    gross_df : float, default=1.0
        The degrees of freedom of the gross errors' Student-t law, > 0 (1:
        Cauchy, whose mean is undefined and variance infinite).
    random_state : int, RandomState instance or None, default=None
        Source of the draws.

    Returns
    -------
    ndarray of shape (n_errors,)
        The errors.

    See Also
    --------
    skewed_errors : a skewed heavy-tailed law.
    SampledObservationModel : observation noise resampled from such a record.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import contaminated_errors
    >>> errors = contaminated_errors(10_000, gross_fraction=0.05, random_state=0)
    >>> errors.shape
    (10000,)
    >>> bool(0.02 < np.mean(np.abs(errors) > 5.0) < 0.05)  # 5% gross errors, 70% of them beyond 5
    True
    """
    rng = check_random_state(random_state)
    gross = rng.random_sample(n_errors) < gross_fraction
    errors = scale * rng.standard_normal(n_errors)
    n_gross = int(gross.sum())
    errors[gross] = gross_scale * (rng.standard_t(gross_df, n_gross) if gross_df != 1 else rng.standard_cauchy(n_gross))
    return errors


def _two_piece_median(scale, skewness, df):
    """The median of the two-piece Student-t whose mode is 0 (see :func:`skewed_errors`)."""
    a = abs(skewness)
    if a == 0:
        return 0.0
    # P(X < m) = (1 - a) / 2 + (1 + a) (G(m / s_right) - 1/2) = 1/2 for the heavier side's piece
    return math.copysign(scale * (1 + a) * float(stdtrit(df, 0.5 + a / (2 * (1 + a)))), skewness)


@validate_params(
    {
        "n_errors": [POSITIVE_INT],
        "scale": [POSITIVE_REAL],
        "skewness": [_SKEWNESS],
        "df": [POSITIVE_REAL],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def skewed_errors(n_errors, *, scale=1.0, skewness=0.5, df=3.0, random_state=None):
    r"""Draw observation errors of a skewed heavy-tailed law: a two-piece Student-t, centred at its median.

    The two-piece Student-t glues two halves of a Student-t density with
    ``df`` degrees of freedom at their common mode, the right half of scale
    ``s_+ = scale * (1 + skewness)`` and the left half of scale
    ``s_- = scale * (1 - skewness)``, each weighted so that the density is
    continuous:

    .. math::

        p(x) = \frac{2}{s_- + s_+}\, t_\nu\!\left(\frac{x}{s_\pm}\right),
        \quad s_\pm = s_+ \text{ for } x \ge 0,\ s_- \text{ for } x < 0,

    then shifted by its median ``m`` so that the errors have median 0:
    ``e = x - m``. With ``skewness > 0`` the right tail is the longer one,
    and the mass ``(1 + skewness) / 2`` lies right of the mode; the errors
    have median 0 but a positive mean (when ``df > 1``). The law of a sensor
    whose errors are more often and further too high than too low (a
    rain gauge, a radiance with a cloud in view); a symmetric law with the
    same median misplaces the observation it believes.

    Parameters
    ----------
    n_errors : int
        How many errors to draw.
    scale : float, default=1.0
        The mean of the two halves' scales, > 0.
    skewness : float, default=0.5
        In (-1, 1): the right half's scale is ``scale * (1 + skewness)``, the
        left half's ``scale * (1 - skewness)`` (3 times smaller for the
        default); 0 gives the Student-t law.
    df : float, default=3.0
        Degrees of freedom of both halves, > 0: moments of order ``>= df``
        are infinite.
    random_state : int, RandomState instance or None, default=None
        Source of the draws.

    Returns
    -------
    ndarray of shape (n_errors,)
        The errors, of median 0.

    See Also
    --------
    contaminated_errors : a symmetric law with a Gaussian bulk and gross errors.
    SampledObservationModel : observation noise resampled from such a record.

    References
    ----------
    C. Fernández and M. F. J. Steel (1998), "On Bayesian modeling of fat tails
    and skewness", Journal of the American Statistical Association 93, 359-371.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import skewed_errors
    >>> errors = skewed_errors(20_000, skewness=0.5, random_state=0)
    >>> bool(abs(np.median(errors)) < 0.05)
    True
    >>> np.quantile(errors, [0.25, 0.75]).round(1)  # the law's quartiles: -0.71 and 1.01
    array([-0.7,  1. ])
    """
    rng = check_random_state(random_state)
    magnitude = np.abs(rng.standard_t(df, n_errors))
    right = rng.random_sample(n_errors) < (1 + skewness) / 2
    x = np.where(right, scale * (1 + skewness) * magnitude, -scale * (1 - skewness) * magnitude)
    return x - _two_piece_median(scale, skewness, df)


def _checked_errors(errors):
    """``errors`` as a 1-D float64 array of at least ``MIN_ERRORS`` finite values with a positive robust scale."""
    expected = f"a 1-D array of at least {MIN_ERRORS} finite observation errors (observation minus true value)"
    if isinstance(errors, (str, bytes)) or errors is None or isinstance(errors, (bool, np.bool_, Real)):
        raise TypeError(f"errors must be {expected}; got {describe(errors)}.")
    try:
        array = np.asarray(errors)
    except (TypeError, ValueError):  # ragged nesting
        raise TypeError(f"errors must be {expected}; got {describe(errors)}, which is not a rectangular array.") from None
    if array.dtype.kind not in "iuf":
        shown = describe(errors) if isinstance(errors, np.ndarray) else f"{describe(errors)} of dtype {array.dtype}"
        raise TypeError(f"errors must be {expected} (real numbers); got {shown}.")
    if array.ndim != 1:
        raise ValueError(f"errors must be {expected}; got {array.ndim}-D values of shape {array.shape}.")
    if array.size < MIN_ERRORS:
        raise ValueError(
            f"errors holds {array.size} value(s); at least {MIN_ERRORS} are needed to resample the law and fit a "
            "density to it."
        )
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError(
            f"errors holds {int(bad.sum())} non-finite value(s) (the first at position {int(np.argmax(bad))}); "
            "every recorded error must be finite: drop the missing ones."
        )
    scale = MAD_TO_SD * float(np.median(np.abs(array - np.median(array))))
    if not scale > 0:
        raise ValueError(
            "errors has a median absolute deviation of 0 (half of its values or more are equal): the law has no "
            "spread to resample or fit; record the errors with more precision."
        )
    array.setflags(write=False)
    return array, scale


class SampledNoise(NoiseLaw):
    r"""A noise law known only by a record of errors: resampled to simulate, with no density.

    Errors ``e`` drawn with replacement from the recorded ``errors`` (the
    bootstrap): a law that no formula describes, to simulate observations
    with and to train a learned analysis on (``make_twin_problem``, through
    ``ObservationModel(..., noise=law)`` or :class:`SampledObservationModel`;
    :func:`fit_learned_analysis`). Filters that need no density run on it (a
    Kalman step, with :attr:`variance`; a learned analysis). Bayes' rule
    needs the density, which a record does not give: the law has no
    ``log_density`` (``hasattr(law, "log_density")`` is False), and two
    densities fitted to the same record stand in for it:
    :meth:`fit_student_t`, a Student-t by maximum likelihood, and
    :meth:`kernel_density`, a kernel density estimate.

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite; stored as a
        read-only float64 array. They are resampled as they are (not centred).

    Attributes
    ----------
    errors : ndarray of shape (n_errors,)
        The record.
    scale : float
        The robust scale of the record, ``1.4826`` times the median absolute
        deviation from the median (the standard deviation for a Gaussian
        record; 1.48 for a standard Cauchy one): the unit of
        :meth:`standard_noise`, and the nominal scale of filters that need one.
    tail : float
        ``1 / df`` of the Student-t fitted to the record
        (:meth:`fit_student_t`): near 0 for a Gaussian record, about 1 for a
        Cauchy one. The number that describes the law to a learned analysis.
    variance : float or None
        The sample variance (``ddof=1``), the observation-error variance of
        the Kalman steps; None when the fitted Student-t has ``df <= 2``
        (tails too heavy for a variance: the sample variance then grows with
        the record without bound, and the Kalman steps take
        :attr:`nominal_variance`, ``scale ** 2``, instead).
    symmetric : bool
        False: a record does not say that its law is symmetric (a learned
        analysis then does not average its update with the reflected one).

    Raises
    ------
    TypeError
        When ``errors`` is not an array of real numbers.
    ValueError
        When ``errors`` is not 1-D, holds fewer than 100 values, a non-finite
        one, or has no spread (a median absolute deviation of 0).

    See Also
    --------
    KernelDensityNoise : the kernel density of the same record, with a density.
    contaminated_errors, skewed_errors : records of laws outside the Student-t family.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import SampledNoise, skewed_errors
    >>> errors = skewed_errors(5000, random_state=0)
    >>> law = SampledNoise(errors)
    >>> bool(np.isin(law.sample(10, random_state=0), errors).all())  # errors of the record
    True
    >>> hasattr(law, "log_density")
    False
    >>> law.fit_student_t().name, bool(law.fit_student_t().df > 1)  # densities from the same record
    ('student_t', True)
    >>> bool(np.isfinite(law.kernel_density().log_density([0.0, 50.0])).all())
    True
    """

    name = "sampled"

    @arrays_described
    @validate_params({"errors": ["array-like"]}, prefer_skip_nested_validation=True)
    def __init__(self, errors):
        errors, scale = _checked_errors(errors)
        self.errors = errors
        self.scale = self._unit = scale
        self._fits = {}  # shared by rescaled copies: the fits depend on the record alone

    @property
    def n_errors(self):
        return self.errors.size

    def __repr__(self):
        return f"{type(self).__name__}(n_errors={self.n_errors}, scale={self.scale:.4g})"

    def _student_t_fit(self):
        if "student_t" not in self._fits:
            df, _, scale = stats.t.fit(self.errors, floc=0.0)
            if not df <= _MAX_DF:
                df = _MAX_DF
                _, _, scale = stats.t.fit(self.errors, f0=_MAX_DF, floc=0.0)
            self._fits["student_t"] = (float(df), float(scale))
        return self._fits["student_t"]

    @property
    def tail(self):
        return 1.0 / self._student_t_fit()[0]

    @property
    def symmetric(self):
        return False

    @property
    def variance(self):
        if self._student_t_fit()[0] <= 2:
            return None
        return float(np.var(self.errors, ddof=1)) * (self.scale / self._unit) ** 2

    def standard_noise(self, size, random_state=None):
        """Errors resampled with replacement from the record, divided by its robust scale.

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
        return self._errors(size, random_state) / self._unit

    def sample(self, size, random_state=None):
        """Errors resampled with replacement from the record: exactly recorded ones at the record's own scale.

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
        errors = self._errors(size, random_state)
        return errors if self.scale == self._unit else errors * (self.scale / self._unit)

    def _errors(self, size, random_state):
        rng = check_random_state(random_state)
        return self.errors[rng.randint(0, self.n_errors, size)]

    def fit_student_t(self):
        r"""The Student-t law fitted to the record by maximum likelihood.

        Degrees of freedom and scale maximise the likelihood of the errors
        under ``scale * t_df`` centred at 0 (``scipy.stats.t.fit`` with the
        location fixed at 0: the law has no location, so a skewed record is
        fitted by a symmetric law about 0). A fit with more than 1000 degrees
        of freedom (a Gaussian record) is refitted with 1000, a normal law to
        within 0.02 in log-density within three scales of 0. The fit is
        computed once per record.

        Returns
        -------
        StudentTNoise

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import SampledNoise
        >>> fitted = SampledNoise(2.0 * np.random.default_rng(0).standard_t(3.0, 20_000)).fit_student_t()
        >>> round(fitted.df, 1), round(fitted.scale, 1)
        (2.9, 2.0)
        """
        df, scale = self._student_t_fit()
        return StudentTNoise(df=df, scale=scale * self.scale / self._unit)

    def kernel_density(self, *, bandwidth=None):
        """The kernel density estimate of the record: the same law, with a density.

        Parameters
        ----------
        bandwidth : float or None, default=None
            The kernel's standard deviation in the transformed coordinate
            (see :class:`KernelDensityNoise`); None: Silverman's rule.

        Returns
        -------
        KernelDensityNoise

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import SampledNoise
        >>> density = SampledNoise(np.random.default_rng(0).standard_normal(10_000)).kernel_density()
        >>> float(np.exp(density.log_density(0.0)).round(1))  # the normal density at 0 is 0.399
        0.4
        """
        law = KernelDensityNoise(self.errors, bandwidth=bandwidth)
        law._fits = self._fits  # the same record: the same Student-t fit
        law.scale = self.scale  # a rescaled record's density is rescaled alike
        return law


class KernelDensityNoise(SampledNoise):
    r"""The kernel density estimate of a record of errors: a noise law with a density for Bayes' rule.

    The density of the errors ``e`` is a Gaussian kernel density estimate of
    the record in the coordinate ``y = asinh(e / s)``, ``s`` the record's
    robust scale (:attr:`scale`), mapped back to ``e``, with a Cauchy
    density of scale ``s`` and weight ``w = 1 / (n_errors + 1)`` mixed in:

    .. math::

        p(e) = (1 - w)\, \frac{\hat f(\operatorname{asinh}(e / s))}{\sqrt{s^2 + e^2}}
             + w\, \frac{s}{\pi (s^2 + e^2)},
        \qquad
        \hat f(y) = \frac{1}{n h} \sum_{i=1}^{n} \varphi\!\left(\frac{y - y_i}{h}\right).

    Within a few scales of 0 the coordinate is nearly linear and this is the
    usual kernel density with bandwidth ``h s``; in the tails the kernels
    widen in proportion to ``|e|``, which is what a heavy-tailed record
    needs: a fixed bandwidth would leave isolated spikes at the few large
    errors and near-zero density between them, and Bayes' rule would follow
    those spikes. The Cauchy part, of the mass a rank histogram leaves
    beyond the outermost member, gives the density heavy tails beyond the
    largest recorded error, so that an observation further out than any seen
    is trusted little, and keeps the log-density finite everywhere.

    ``h`` is Silverman's rule of thumb on the transformed record,
    ``0.9 min(sd, IQR / 1.34) n ** (-1/5)``, unless given. The kernel
    density is computed once, by linear binning of the transformed record on
    a uniform grid (eight points per bandwidth, four bandwidths beyond the
    outermost values) and a discrete convolution; :meth:`log_density`
    interpolates its logarithm linearly, and beyond the grid continues it
    with the outermost kernel: a fraction of a microsecond per residual,
    vectorised, for records of any size.

    Noise draws are exact draws of this law (a smoothed bootstrap): a
    resampled error, moved by a kernel's width in the transformed
    coordinate, or with probability ``w`` a Cauchy error; :attr:`tail` and
    :attr:`variance` are the record's (see :class:`SampledNoise`).

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite.
    bandwidth : float or None, default=None
        ``h``, the kernels' standard deviation in the coordinate ``y``, > 0
        (in units of ``scale`` near 0); None: Silverman's rule.

    Attributes
    ----------
    bandwidth_ : float
        The bandwidth ``h`` used.
    errors, scale, tail, variance, symmetric
        As for :class:`SampledNoise`.

    References
    ----------
    M. P. Wand, J. S. Marron and D. Ruppert (1991), "Transformations in
    density estimation", Journal of the American Statistical Association 86,
    343-353.

    B. W. Silverman (1986), Density Estimation for Statistics and Data
    Analysis, Chapman and Hall (the rule of thumb, and binned kernel sums).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> from sklearn_measattn.assimilation import KernelDensityNoise, contaminated_errors
    >>> law = KernelDensityNoise(contaminated_errors(20_000, random_state=0))
    >>> residual = np.array([0.0, 1.0, 10.0, 30.0, 1e6])
    >>> true = np.log(0.95 * stats.norm.pdf(residual) + 0.05 * stats.cauchy.pdf(residual, scale=10.0))
    >>> bool(np.abs(law.log_density(residual)[:4] - true[:4]).max() < 0.3)
    True
    >>> bool(np.isfinite(law.log_density(residual)).all())  # beyond every recorded error too
    True
    """

    name = "kernel_density"

    @arrays_described
    @validate_params({"errors": ["array-like"], "bandwidth": [POSITIVE_REAL, None]},
                     prefer_skip_nested_validation=True)
    def __init__(self, errors, *, bandwidth=None):
        super().__init__(errors)
        transformed = np.arcsinh(self.errors / self._unit)
        self.bandwidth_ = float(bandwidth) if bandwidth is not None else _silverman(transformed)
        self._transformed_range = (float(transformed.min()), float(transformed.max()))
        self._start, self._step, self._log_kde = _binned_log_kde(transformed, self.bandwidth_)
        self._log_defensive = -math.log(self.n_errors + 1.0)
        self._log_bulk = math.log1p(-1.0 / (self.n_errors + 1.0))

    def __repr__(self):
        return (f"{type(self).__name__}(n_errors={self.n_errors}, bandwidth={self.bandwidth_:.3g}, "
                f"scale={self.scale:.4g})")

    def kernel_density(self, *, bandwidth=None):
        if bandwidth is None or bandwidth == self.bandwidth_:
            return self
        return super().kernel_density(bandwidth=bandwidth)

    def _errors(self, size, random_state):
        rng = check_random_state(random_state)
        resampled = self.errors[rng.randint(0, self.n_errors, size)]
        transformed = np.arcsinh(resampled / self._unit) + self.bandwidth_ * rng.standard_normal(size)
        errors = self._unit * np.sinh(transformed)
        defensive = rng.random_sample(size) < math.exp(self._log_defensive)
        errors[defensive] = self._unit * rng.standard_cauchy(int(np.sum(defensive)))
        return errors

    def log_density(self, residual):
        """``log p(residual)`` of the kernel density, elementwise, normalised; finite for every finite residual.

        Parameters
        ----------
        residual : array-like of any shape
            Observation errors ``observation - state``, finite or infinite.

        Returns
        -------
        ndarray of the shape of ``residual``
            ``log p(residual)`` entry by entry (``-inf`` at infinite residuals).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import KernelDensityNoise
        >>> law = KernelDensityNoise(np.random.default_rng(0).standard_normal(100_000))
        >>> law.log_density([[-1.0, 0.0, 1.0]]).round(2)  # the normal's: -1.42, -0.92, -1.42
        array([[-1.42, -0.93, -1.42]])
        """
        residual = np.asarray(residual, dtype=np.float64) * (self._unit / self.scale)  # at the record's own scale
        scale = self._unit
        standard = residual / scale
        y = np.arcsinh(standard)
        kde = self._log_kde
        first, last = self._start, self._start + (kde.size - 1) * self._step
        inside = np.clip(y, first, last)
        log_kde = np.interp(inside, first + self._step * np.arange(kde.size), kde)
        # beyond the grid: the Gaussian decay of the outermost kernel, continuous at the grid's ends
        outermost = np.where(y > last, self._transformed_range[1], self._transformed_range[0])
        with np.errstate(invalid="ignore"):
            log_kde = log_kde - ((y - outermost) ** 2 - (inside - outermost) ** 2) / (2.0 * self.bandwidth_**2)
        # log sqrt(s^2 + e^2) without overflow, and the Cauchy part
        with np.errstate(divide="ignore"):
            log_root = math.log(scale) + 0.5 * np.logaddexp(0.0, 2.0 * np.log(np.abs(standard)))
        log_cauchy = math.log(scale / math.pi) - 2.0 * log_root
        density = np.logaddexp(self._log_bulk + log_kde - log_root, self._log_defensive + log_cauchy)
        return density + math.log(self._unit / self.scale)


class SampledObservationModel(ObservationModel):
    """Direct observations whose errors are resampled from a record: ``ObservationModel(noise=SampledNoise(errors))``.

    The observation operator of :class:`ObservationModel` with the law
    :class:`SampledNoise` of ``errors``; everything about the noise is the
    law's (:attr:`~ObservationModel.law`): it simulates, and has no density
    (``hasattr(model, "log_density")`` is False). :meth:`fit_student_t` and
    :meth:`kernel_density` give the same observation operator with a fitted
    density, for Bayes' rule.

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite.
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables.

    Attributes
    ----------
    errors : ndarray of shape (n_errors,)
        The record (``law.errors``).
    law : SampledNoise
        The noise law.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import SampledObservationModel, skewed_errors
    >>> errors = skewed_errors(5000, random_state=0)
    >>> model = SampledObservationModel(errors, n_variables=8, observed="every_other")
    >>> observation = model.sample(np.zeros(8), random_state=0)
    >>> bool(np.isin(observation, errors).all())  # the noise of a zero state: errors of the record
    True
    >>> model.fit_student_t().noise, hasattr(model, "log_density")
    ('student_t', False)
    """

    @arrays_described
    @validate_params(
        {"errors": ["array-like"], "n_variables": [N_VARIABLES], "observed": OBSERVED},
        prefer_skip_nested_validation=True,
    )
    def __init__(self, errors, *, n_variables, observed="all"):
        super().__init__(n_variables=n_variables, observed=observed, noise=SampledNoise(errors))

    @property
    def errors(self):
        return self.law.errors

    @property
    def n_errors(self):
        return self.law.n_errors

    def _with_law(self, law):
        return ObservationModel(n_variables=self.n_variables, observed=self.observed, noise=law)

    def fit_student_t(self):
        """The same observations with the Student-t law fitted to the record (:meth:`SampledNoise.fit_student_t`).

        Returns
        -------
        ObservationModel
        """
        return self._with_law(self.law.fit_student_t())

    def kernel_density(self, *, bandwidth=None):
        """The same observations with the kernel density of the record (:class:`KernelDensityNoise`).

        Parameters
        ----------
        bandwidth : float or None, default=None
            As in :class:`KernelDensityNoise`.

        Returns
        -------
        KernelDensityObservationModel
        """
        law = self.law.kernel_density(bandwidth=bandwidth)
        if law is self.law:
            return self
        model = KernelDensityObservationModel.__new__(KernelDensityObservationModel)
        vars(model).update(vars(self), law=law)
        return model


class KernelDensityObservationModel(SampledObservationModel):
    """Direct observations with the kernel density of a record as their law.

    ``ObservationModel(noise=KernelDensityNoise(errors))``, with the record's
    attributes at hand; it has a density (:meth:`~ObservationModel.log_density`).

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite.
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables.
    bandwidth : float or None, default=None
        As in :class:`KernelDensityNoise`.

    Attributes
    ----------
    bandwidth_ : float
        The bandwidth used (``law.bandwidth_``).
    law : KernelDensityNoise
        The noise law.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import KernelDensityObservationModel
    >>> model = KernelDensityObservationModel(np.random.default_rng(0).standard_normal(10_000), n_variables=4)
    >>> float(np.exp(model.log_density(0.0)).round(1))
    0.4
    """

    @arrays_described
    @validate_params(
        {"errors": ["array-like"], "n_variables": [N_VARIABLES], "observed": OBSERVED,
         "bandwidth": [POSITIVE_REAL, None]},
        prefer_skip_nested_validation=True,
    )
    def __init__(self, errors, *, n_variables, observed="all", bandwidth=None):
        ObservationModel.__init__(self, n_variables=n_variables, observed=observed,
                                  noise=KernelDensityNoise(errors, bandwidth=bandwidth))

    @property
    def bandwidth_(self):
        return self.law.bandwidth_


def _silverman(values):
    """Silverman's rule of thumb, ``0.9 min(sd, IQR / 1.34) n^(-1/5)``, with the sd alone when the IQR is 0."""
    sd = float(np.std(values, ddof=1))
    q25, q75 = np.quantile(values, [0.25, 0.75])
    spread = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
    return 0.9 * spread * values.size ** (-0.2)


def _binned_log_kde(values, bandwidth):
    """The log of the Gaussian kernel density of ``values`` on a uniform grid: ``(start, step, log_density)``.

    Linear binning (each value split between its two neighbouring grid
    points, in proportion to its distance to the other) and a discrete
    convolution with the kernel sampled on the grid, normalised to integrate
    to one (trapezoids). Where the density underflows (gaps of many
    bandwidths between isolated values) its logarithm is floored at that of
    the smallest normal double.
    """
    low, high = values.min() - _GRID_MARGIN * bandwidth, values.max() + _GRID_MARGIN * bandwidth
    step = bandwidth / _GRID_STEPS_PER_BANDWIDTH
    n_points = int(math.ceil((high - low) / step)) + 1
    if n_points > _MAX_GRID:  # a bandwidth tiny against the range: a coarser grid still resolves the kernels
        n_points = _MAX_GRID
        step = (high - low) / (n_points - 1)
    position = (values - low) / step
    index = np.minimum(np.floor(position).astype(np.intp), n_points - 2)
    fraction = position - index
    counts = np.bincount(index, weights=1.0 - fraction, minlength=n_points)
    counts += np.bincount(index + 1, weights=fraction, minlength=n_points)
    half = int(math.ceil(12.0 * bandwidth / step))  # beyond 12 bandwidths the kernel is below 1e-31 of its peak
    offsets = np.arange(-half, half + 1) * step
    kernel = np.exp(-0.5 * (offsets / bandwidth) ** 2)
    density = np.convolve(counts, kernel)[half : half + n_points]  # direct: no rounding noise where it is tiny
    density /= np.sum(density) * step - 0.5 * step * (density[0] + density[-1])
    return float(low), float(step), np.log(np.maximum(density, np.finfo(np.float64).tiny))
