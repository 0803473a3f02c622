"""Observation noise known only by a sample of errors: resampled for simulation, fitted for Bayes' rule.

A sensor's error law is often known only through a record of past errors
(observation minus a reference value). Simulating with it is easy (resample
the record); Bayes' rule needs a density, which the record does not give.
:class:`SampledObservationModel` does the first and refuses the second, and
fits two densities from the same record: a Student-t by maximum likelihood
(:meth:`SampledObservationModel.fit_student_t`) and a kernel density
(:class:`KernelDensityObservationModel`). :func:`contaminated_errors` and
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

from .._param_validation import validate_params
from .._validation import POSITIVE_INT, POSITIVE_REAL, NumberInterval
from ._problem import N_VARIABLES, OBSERVED, ObservationModel, arrays_described, describe

__all__ = ["KernelDensityObservationModel", "SampledObservationModel", "contaminated_errors", "skewed_errors"]

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


class SampledObservationModel(ObservationModel):
    r"""Observation noise known only by a sample of errors: resampled to simulate, with no density.

    Direct observations ``o = x[observed] + e`` whose errors ``e`` are drawn
    with replacement from the recorded ``errors`` (the bootstrap): the model
    simulates observations (:meth:`sample`, a twin problem with
    ``make_twin_problem(observation_model=...)``) of a law that no formula
    describes, and filters that need no density run on them (a Kalman step,
    with :attr:`variance`; a learned analysis). Bayes' rule needs the
    density, which a sample does not give: :meth:`log_density` (and hence
    :meth:`log_likelihood`) raises, and two densities fitted to the same
    sample stand in for it: :meth:`fit_student_t`, a Student-t by maximum
    likelihood, and :meth:`kernel_density`, a kernel density estimate.

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite; stored as a
        read-only float64 array. They are resampled as they are (not centred).
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables.

    Attributes
    ----------
    errors : ndarray of shape (n_errors,)
        The sample.
    noise_scale : float
        The robust scale of the sample, ``1.4826`` times the median absolute
        deviation from the median (the standard deviation for a Gaussian
        sample; 1.48 for a standard Cauchy one): the unit of
        :meth:`standard_noise`, and the nominal scale of filters that need one.
    noise : str
        ``"sampled"``.
    df : float
        NaN: the law has no degrees of freedom (see :attr:`tail`).
    tail : float
        ``1 / df`` of the Student-t fitted to the sample
        (:meth:`fit_student_t`): near 0 for a Gaussian sample, about 1 for a
        Cauchy one. The number that describes the law to a learned analysis.
    variance : float or None
        The sample variance (``ddof=1``), the observation-error variance of
        the Kalman steps; None when the fitted Student-t has ``df <= 2``
        (tails too heavy for a variance: the sample variance then grows with
        the sample without bound, and the Kalman steps take
        :attr:`nominal_variance`, ``noise_scale ** 2``, instead).
    symmetric : bool
        False: a sample does not say that its law is symmetric (a learned
        analysis then does not average its update with the reflected one).
    observed, n_observed, nominal_variance
        As for :class:`ObservationModel`.

    Raises
    ------
    TypeError
        When ``errors`` is not an array of real numbers.
    ValueError
        When ``errors`` is not 1-D, holds fewer than 100 values, a non-finite
        one, or has no spread (a median absolute deviation of 0).

    See Also
    --------
    KernelDensityObservationModel : the kernel density of the same sample, with a density.
    contaminated_errors, skewed_errors : samples of laws outside the Student-t family.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import SampledObservationModel, skewed_errors
    >>> errors = skewed_errors(5000, random_state=0)
    >>> model = SampledObservationModel(errors, n_variables=8, observed="every_other")
    >>> observation = model.sample(np.zeros(8), random_state=0)
    >>> bool(np.isin(observation, errors).all())  # the noise of a zero state: errors of the sample
    True
    >>> student_t = model.fit_student_t()  # densities from the same sample, for Bayes' rule
    >>> student_t.noise, bool(student_t.df > 1)
    ('student_t', True)
    >>> bool(np.isfinite(model.kernel_density().log_density(observation)).all())
    True
    """

    @arrays_described
    @validate_params(
        {"errors": ["array-like"], "n_variables": [N_VARIABLES], "observed": OBSERVED},
        prefer_skip_nested_validation=True,
    )
    def __init__(self, errors, *, n_variables, observed="all"):
        errors, scale = _checked_errors(errors)
        super().__init__(n_variables=n_variables, observed=observed, noise="gaussian", noise_scale=scale)
        self.noise = "sampled"
        self.df = math.nan
        self.errors = errors
        self._fits = {}  # shared by the restricted copies: the fits depend on the sample alone

    @property
    def n_errors(self):
        return self.errors.size

    def _law(self):
        return f"sampled(n_errors={self.n_errors})"

    def __repr__(self):
        observed = self.observed.tolist() if self.n_observed <= 6 else f"{self.n_observed} of {self.n_variables}"
        return (f"{type(self).__name__}(n_variables={self.n_variables}, observed={observed}, noise={self._law()}, "
                f"scale={self.noise_scale:.4g})")

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
        return float(np.var(self.errors, ddof=1))

    def standard_noise(self, size, random_state=None):
        """Errors resampled with replacement from the sample, divided by ``noise_scale``.

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
        return self._errors(size, random_state) / self.noise_scale

    def _errors(self, size, random_state):
        rng = check_random_state(random_state)
        return self.errors[rng.randint(0, self.n_errors, size)]

    def sample(self, states, random_state=None):
        """Noisy observations of ``states`` (..., n_variables) -> (..., n_observed): errors resampled from the sample.

        ``states[..., observed]`` plus errors drawn with replacement from
        ``errors``, exactly (the same draws as :meth:`standard_noise` times
        ``noise_scale``, without its rounding).

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
        return observed + self._errors(observed.shape, random_state)

    def log_density(self, residual):
        """Refused: a law known only by a sample of errors has no density; fit one.

        Raises
        ------
        NotImplementedError
            Always, saying which densities fitted to the sample stand in:
            :meth:`fit_student_t` and :meth:`kernel_density` (pass one as the
            ``likelihood`` of :class:`RankHistogramFilter`).
        """
        raise NotImplementedError(
            f"{type(self).__name__} knows its noise law only by a sample of {self.n_errors} errors, which has no "
            "density: Bayes' rule needs one. Fit one to the same sample: model.fit_student_t() (a Student-t, maximum "
            "likelihood) or model.kernel_density() (a kernel density estimate), and pass it where a likelihood is "
            "needed, e.g. RankHistogramFilter(likelihood=model.kernel_density())."
        )

    def fit_student_t(self):
        r"""The Student-t law fitted to the sample by maximum likelihood, as an :class:`ObservationModel`.

        Degrees of freedom and scale maximise the likelihood of the errors
        under ``scale * t_df`` centred at 0 (``scipy.stats.t.fit`` with the
        location fixed at 0: an :class:`ObservationModel` has no location,
        so a skewed law is fitted by a symmetric one about 0). A fit with
        more than 1000 degrees of freedom (a Gaussian sample) is refitted with
        1000, a normal law to within 0.02 in log-density within three scales of 0.
        The fit is computed once per sample.

        Returns
        -------
        ObservationModel
            ``noise="student_t"`` with the fitted ``df`` and ``noise_scale``,
            observing the same variables.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import SampledObservationModel
        >>> errors = 2.0 * np.random.default_rng(0).standard_t(3.0, 20_000)
        >>> fitted = SampledObservationModel(errors, n_variables=4).fit_student_t()
        >>> round(fitted.df, 1), round(fitted.noise_scale, 1)
        (2.9, 2.0)
        """
        df, scale = self._student_t_fit()
        return ObservationModel(
            n_variables=self.n_variables, observed=self.observed, noise="student_t", df=df, noise_scale=scale
        )

    def kernel_density(self, *, bandwidth=None):
        """The kernel density estimate of the sample, as an observation model with a density.

        Parameters
        ----------
        bandwidth : float or None, default=None
            The kernel's standard deviation in the transformed coordinate
            (see :class:`KernelDensityObservationModel`); None: Silverman's rule.

        Returns
        -------
        KernelDensityObservationModel
            Observing the same variables.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn.assimilation import SampledObservationModel
        >>> errors = np.random.default_rng(0).standard_normal(10_000)
        >>> density = SampledObservationModel(errors, n_variables=4).kernel_density()
        >>> float(np.exp(density.log_density(0.0)).round(1))  # the normal density at 0 is 0.399
        0.4
        """
        model = KernelDensityObservationModel(
            self.errors, n_variables=self.n_variables, observed=self.observed, bandwidth=bandwidth
        )
        model._fits = self._fits  # the same sample: the same Student-t fit
        return model


class KernelDensityObservationModel(SampledObservationModel):
    r"""Observation noise with the kernel density estimate of a sample of errors: a density for Bayes' rule.

    The density of the errors ``e`` is a Gaussian kernel density estimate of
    the sample in the coordinate ``y = asinh(e / s)``, ``s`` the sample's
    robust scale (:attr:`noise_scale`), mapped back to ``e``, with a Cauchy
    density of scale ``s`` and weight ``w = 1 / (n_errors + 1)`` mixed in:

    .. math::

        p(e) = (1 - w)\, \frac{\hat f(\operatorname{asinh}(e / s))}{\sqrt{s^2 + e^2}}
             + w\, \frac{s}{\pi (s^2 + e^2)},
        \qquad
        \hat f(y) = \frac{1}{n h} \sum_{i=1}^{n} \varphi\!\left(\frac{y - y_i}{h}\right).

    Within a few scales of 0 the coordinate is nearly linear and this is the
    usual kernel density with bandwidth ``h s``; in the tails the kernels
    widen in proportion to ``|e|``, which is what a heavy-tailed sample
    needs: a fixed bandwidth would leave isolated spikes at the few large
    errors and near-zero density between them, and Bayes' rule would follow
    those spikes. The Cauchy part, of the mass a rank histogram leaves
    beyond the outermost member, gives the density heavy tails beyond the
    largest recorded error, so that an observation further out than any seen
    is trusted little, and keeps the log-density finite everywhere.

    ``h`` is Silverman's rule of thumb on the transformed sample,
    ``0.9 min(sd, IQR / 1.34) n ** (-1/5)``, unless given. The kernel
    density is computed once, by linear binning of the transformed sample on
    a uniform grid (eight points per bandwidth, four bandwidths beyond the
    outermost values) and a discrete convolution; :meth:`log_density`
    interpolates its logarithm linearly, and beyond the grid continues it
    with the outermost kernel: a fraction of a microsecond per residual, vectorised,
    for samples of any size.

    Noise draws are exact draws of this law (a smoothed bootstrap): a
    resampled error, moved by a kernel's width in the transformed
    coordinate, or with probability ``w`` a Cauchy error; :attr:`tail` and
    :attr:`variance` are the sample's (see :class:`SampledObservationModel`).

    Parameters
    ----------
    errors : array-like of shape (n_errors,)
        Recorded observation errors, at least 100, finite.
    n_variables : int
        Dimension of the state (at least 4 for Lorenz-96).
    observed : {"all", "every_other"} or array-like of int, default="all"
        The observed variables.
    bandwidth : float or None, default=None
        ``h``, the kernels' standard deviation in the coordinate ``y``, > 0
        (in units of ``noise_scale`` near 0); None: Silverman's rule.

    Attributes
    ----------
    bandwidth_ : float
        The bandwidth ``h`` used.
    noise : str
        ``"kernel_density"``.
    errors, noise_scale, df, tail, variance, symmetric, observed, n_observed, nominal_variance
        As for :class:`SampledObservationModel`.

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
    >>> from sklearn_measattn.assimilation import KernelDensityObservationModel, contaminated_errors
    >>> errors = contaminated_errors(20_000, random_state=0)
    >>> model = KernelDensityObservationModel(errors, n_variables=4)
    >>> residual = np.array([0.0, 1.0, 10.0, 30.0, 1e6])
    >>> true = np.log(0.95 * stats.norm.pdf(residual) + 0.05 * stats.cauchy.pdf(residual, scale=10.0))
    >>> bool(np.abs(model.log_density(residual)[:4] - true[:4]).max() < 0.3)
    True
    >>> bool(np.isfinite(model.log_density(residual)).all())  # beyond every recorded error too
    True
    """

    @arrays_described
    @validate_params(
        {
            "errors": ["array-like"],
            "n_variables": [N_VARIABLES],
            "observed": OBSERVED,
            "bandwidth": [POSITIVE_REAL, None],
        },
        prefer_skip_nested_validation=True,
    )
    def __init__(self, errors, *, n_variables, observed="all", bandwidth=None):
        super().__init__(errors, n_variables=n_variables, observed=observed)
        self.noise = "kernel_density"
        transformed = np.arcsinh(self.errors / self.noise_scale)
        self.bandwidth_ = float(bandwidth) if bandwidth is not None else _silverman(transformed)
        self._transformed_range = (float(transformed.min()), float(transformed.max()))
        self._start, self._step, self._log_kde = _binned_log_kde(transformed, self.bandwidth_)
        self._log_defensive = -math.log(self.n_errors + 1.0)
        self._log_bulk = math.log1p(-1.0 / (self.n_errors + 1.0))

    def _law(self):
        return f"kernel_density(n_errors={self.n_errors}, bandwidth={self.bandwidth_:.3g})"

    def kernel_density(self, *, bandwidth=None):
        if bandwidth is None or bandwidth == self.bandwidth_:
            return self
        return super().kernel_density(bandwidth=bandwidth)

    def _errors(self, size, random_state):
        rng = check_random_state(random_state)
        resampled = self.errors[rng.randint(0, self.n_errors, size)]
        transformed = np.arcsinh(resampled / self.noise_scale) + self.bandwidth_ * rng.standard_normal(size)
        errors = self.noise_scale * np.sinh(transformed)
        defensive = rng.random_sample(size) < math.exp(self._log_defensive)
        errors[defensive] = self.noise_scale * rng.standard_cauchy(int(np.sum(defensive)))
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
        >>> from sklearn_measattn.assimilation import KernelDensityObservationModel
        >>> errors = np.random.default_rng(0).standard_normal(100_000)
        >>> model = KernelDensityObservationModel(errors, n_variables=4)
        >>> model.log_density([[-1.0, 0.0, 1.0]]).round(2)  # the normal's: -1.42, -0.92, -1.42
        array([[-1.42, -0.93, -1.42]])
        """
        residual = np.asarray(residual, dtype=np.float64)
        scale = self.noise_scale
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
        return np.logaddexp(self._log_bulk + log_kde - log_root, self._log_defensive + log_cauchy)


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
