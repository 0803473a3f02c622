"""Analysis steps that need no training: the Kalman family (stochastic, robust, serial) and a particle filter.

Each is a scikit-learn style object (keyword-only parameters, ``get_params``,
``set_params``) that a twin experiment *binds* to its observation model
before the first cycle (which checks the parameters), then calls as
``analysis(forecast, observation) -> analysis_ensemble``.

A NaN entry of an observation is a *missing* observation (a sensor down).
Every step assimilates only the observations present in its cycle, through
one rule in :class:`AnalysisStep`: a cycle with some missing runs the step
with the observation model restricted to the present ones
(:meth:`ObservationModel.restricted`), so the Kalman gain is that of the
present observations, the serial filters skip the missing ones and the
particle filter's likelihood is over the present ones; a cycle with none
returns the forecast unchanged (no inflation, relaxation or resampling:
nothing was observed).
"""

from __future__ import annotations

import contextlib
import copy
import math
from numbers import Real

import numpy as np
from scipy.special import log_softmax
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from .._validation import POSITIVE_REAL, NumberInterval
from ._problem import refuse_array_likes

__all__ = [
    "AnalysisStep", "EnKF", "NoUpdate", "ParticleFilter", "RobustEnKF", "SerialEnKF", "gaspari_cohn", "localization_matrix",
]

INFLATION = NumberInterval(Real, 1, 10, closed="both", why="multiplicative inflation widens the forecast anomalies")
LOCALIZATION = [NumberInterval(Real, 0, None, closed="neither"), None]
RELAXATION = NumberInterval(Real, 0, 1, closed="left", why="the fraction of the way back to the forecast spread")
CLIP = NumberInterval(Real, 0, None, closed="neither", why="in innovation standard deviations")


def gaspari_cohn(distance, radius):
    """The Gaspari-Cohn (1999) compactly supported correlation at ``distance`` for half-width ``radius``.

    A fifth-order piecewise rational function, 1 at distance 0, 0 beyond
    ``2 * radius``, close to ``exp(-distance^2 / (2 (0.73 radius)^2))`` inside.

    Parameters
    ----------
    distance : array-like
        Distances (their absolute values are used).
    radius : float
        Half-width, > 0.

    Returns
    -------
    ndarray
        The correlations, shaped like ``distance``.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import gaspari_cohn
    >>> gaspari_cohn([0.0, 4.0, 8.0], 4.0).round(3)
    array([1.   , 0.208, 0.   ])
    """
    r = np.abs(np.asarray(distance, dtype=np.float64)) / radius
    inner = -0.25 * r**5 + 0.5 * r**4 + 0.625 * r**3 - 5.0 / 3.0 * r**2 + 1.0
    with np.errstate(divide="ignore"):
        outer = r**5 / 12.0 - 0.5 * r**4 + 0.625 * r**3 + 5.0 / 3.0 * r**2 - 5.0 * r + 4.0 - 2.0 / (3.0 * r)
    return np.where(r <= 1.0, inner, np.where(r < 2.0, outer, 0.0))


def localization_matrix(n_variables, radius):
    """Gaspari-Cohn weights between every pair of variables on a ring (the Lorenz-96 geometry).

    The distance between variables ``i`` and ``j`` is the cyclic index
    distance ``min(|i - j|, n_variables - |i - j|)``. ``radius=None`` gives
    all ones (no localisation).

    Parameters
    ----------
    n_variables : int
        Number of variables on the ring.
    radius : float or None
        Gaspari-Cohn half-width in variables.

    Returns
    -------
    ndarray of shape (n_variables, n_variables)

    Examples
    --------
    >>> from sklearn_measattn.assimilation import localization_matrix
    >>> localization_matrix(10, 2.0)[0].round(2)  # variable 0 against 0..9: the ring wraps around
    array([1.  , 0.68, 0.21, 0.02, 0.  , 0.  , 0.  , 0.02, 0.21, 0.68])
    """
    if radius is None:
        return np.ones((n_variables, n_variables))
    index = np.arange(n_variables)
    gap = np.abs(index[:, None] - index[None, :])
    return gaspari_cohn(np.minimum(gap, n_variables - gap), radius)


def _inflated(forecast, inflation):
    """The forecast with its anomalies multiplied by ``inflation`` (before the update: forecast inflation)."""
    if inflation == 1.0:
        return forecast
    mean = forecast.mean(axis=0)
    return mean + inflation * (forecast - mean)


def _relaxed_to_prior_spread(forecast, analysis, relaxation):
    forecast_spread = forecast.std(axis=0, ddof=1)
    mean = analysis.mean(axis=0)
    spread = analysis.std(axis=0, ddof=1)
    target = relaxation * forecast_spread + (1 - relaxation) * spread
    factor = np.divide(target, spread, out=np.ones_like(spread), where=spread > 0)
    return mean + (analysis - mean) * factor


class AnalysisStep(BaseEstimator):
    """Base class of the analysis steps: ``bind`` to an observation model, then call once per cycle.

    Two public methods are there to override, without private names:

    - :meth:`analyse` ``(forecast, observation) -> analysis``: a whole
      analysis. Subclass :class:`AnalysisStep` and implement it.
    - :meth:`SerialEnKF.scalar_update` ``(prior, observation) -> posterior``:
      the update of one observed variable's ensemble inside the serial loop.
      Subclass :class:`SerialEnKF` and override it; localisation, inflation,
      the regression onto the other variables, missing observations and
      relaxation are inherited. An update that is cheaper in batches (a
      network's forward pass) also overrides
      :meth:`SerialEnKF.scalar_updates`, which ``batch_disjoint=True`` calls
      once per group of observations with non-overlapping localisation.

    Inside both, the bound step holds ``observation_model_``, the
    :class:`ObservationModel` (observed variables, noise law and scale: its
    :meth:`~ObservationModel.log_density`, :attr:`~ObservationModel.variance`
    and ``noise_scale``), and ``random_state_``, the step's
    ``numpy.random.RandomState`` (seeded from the twin experiment's
    ``random_state``): draw the step's randomness from it and a run is
    reproducible. Parameters go to ``__init__`` as keyword arguments stored
    under their own names (the scikit-learn convention, which gives
    ``get_params``, ``set_params``, ``clone`` and the ``repr``); a
    ``_parameter_constraints`` table, as scikit-learn's own estimators have,
    makes :meth:`bind` refuse a bad value with a message that names the step.
    ``_prepare()`` may precompute what depends on the observation model. A
    bound step is a copy: the object the user made stays unbound and reusable.

    Missing observations are handled here, once for every step: a NaN entry
    of the observation is a missing observation. ``analyse`` only ever sees
    present ones: when some are missing it is called with the present
    values and, for that call, ``observation_model_`` restricted to their
    variables (:meth:`ObservationModel.restricted`); when none is present it
    is not called, and the analysis is the forecast unchanged. So
    ``_prepare`` may depend on the noise law and scale and on
    ``n_variables``, but not on which variables are observed. An infinite
    observation, or one of the wrong length, is an error.

    Attributes
    ----------
    observation_model_ : ObservationModel
        The observation model of the bound step (restricted to the present
        observations during a call of ``analyse``).
    random_state_ : numpy.random.RandomState
        The bound step's source of randomness.

    Examples
    --------
    A whole analysis: move every member a fixed fraction of the way to the
    observation.

    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import AnalysisStep, SerialEnKF, twin_experiment
    >>> class Nudge(AnalysisStep):
    ...     _parameter_constraints = {"weight": [float]}  # optional: bind checks the parameters by it
    ...
    ...     def __init__(self, *, weight=0.5):
    ...         self.weight = weight
    ...
    ...     def analyse(self, forecast, observation):
    ...         analysis = forecast.copy()
    ...         observed = self.observation_model_.observed
    ...         analysis[:, observed] += self.weight * (observation - forecast[:, observed])
    ...         return analysis
    >>> from sklearn_measattn.assimilation import make_twin_problem
    >>> problem = make_twin_problem(n_variables=8, n_cycles=100, random_state=0)
    >>> small = dict(spin_up=20, ensemble_size=8, random_state=0)
    >>> bool(twin_experiment(Nudge(weight=0.3), problem, **small).rmse < twin_experiment("none", problem, **small).rmse)
    True

    A scalar update in the serial filter: the Kalman update of the observed
    variable with its gain shrunk by a factor (the filter's observation-error
    variance is ``observation_variance_``).

    >>> class ShrunkGain(SerialEnKF):
    ...     def __init__(self, *, shrink=0.9, inflation=1.05):
    ...         super().__init__(inflation=inflation)
    ...         self.shrink = shrink
    ...
    ...     def scalar_update(self, prior, observation):
    ...         variance = prior.var(ddof=1)
    ...         gain = self.shrink * variance / (variance + self.observation_variance_)
    ...         return prior + gain * (observation - prior)
    >>> result = twin_experiment(ShrunkGain(shrink=0.9), problem, **small)
    >>> bool(result.rmse < 0.5 * twin_experiment("none", problem, **small).rmse), result.diverged
    (True, False)
    """

    _parameter_constraints: dict = {}

    def bind(self, observation_model, *, random_state=None):
        """A copy of this step ready for ``observation_model``, its parameters checked.

        Parameters
        ----------
        observation_model : ObservationModel
            The observed variables and the noise law and scale.
        random_state : int, RandomState instance or None, default=None
            Source of the step's randomness (perturbed observations, resampling).

        Returns
        -------
        AnalysisStep
            The bound copy.

        Raises
        ------
        ValueError, TypeError
            When a parameter is outside its domain in ``_parameter_constraints``;
            the message names the step's class.
        """
        self._check_parameters()
        bound = copy.copy(self)
        bound.observation_model_ = observation_model
        bound.random_state_ = check_random_state(random_state)
        bound._prepare()
        return bound

    def _check_parameters(self):
        """Refuse a parameter outside its domain, the message naming this step (an array described, not printed)."""
        refuse_array_likes(self._parameter_constraints, self.get_params(deep=False), type(self).__name__)
        self._validate_params()

    def analyse(self, forecast, observation):
        """The analysis ensemble from a forecast ensemble and the present observations (what a step implements).

        Called by ``step(forecast, observation)`` once per cycle with the
        observations present in it (missing ones are taken out, and
        ``observation_model_`` restricted to the others, before the call).

        Parameters
        ----------
        forecast : ndarray of shape (n_members, n_variables)
            The forecast ensemble (float64).
        observation : ndarray of shape (n_observed,)
            The present observations, of the variables
            ``self.observation_model_.observed`` in that order; finite.

        Returns
        -------
        ndarray of shape (n_members, n_variables)
            The analysis ensemble.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement analyse(self, forecast, observation) -> analysis ensemble "
            "(or subclass SerialEnKF and override scalar_update(self, prior, observation))."
        )

    def _prepare(self):
        pass

    def __call__(self, forecast, observation):
        """The analysis ensemble ``(n_members, n_variables)`` from a forecast ensemble and an observation.

        Parameters
        ----------
        forecast : array-like of shape (n_members, n_variables)
            The forecast ensemble.
        observation : array-like of shape (n_observed,)
            The observation, NaN where missing.

        Returns
        -------
        ndarray of shape (n_members, n_variables)
            The analysis ensemble: the forecast, unchanged, when every
            observation is missing.
        """
        if not hasattr(self, "observation_model_"):
            raise RuntimeError(
                f"{type(self).__name__} is not bound to an observation model: call bind(observation_model) first, "
                "or pass the step to twin_experiment, which binds it."
            )
        forecast = np.asarray(forecast, dtype=np.float64)
        observation = np.asarray(observation, dtype=np.float64)
        model = self.observation_model_
        present = model.present(observation)
        if present.all():
            return self.analyse(forecast, observation)
        if not present.any():
            return forecast.copy()
        self.observation_model_ = model.restricted(present)
        try:
            return self.analyse(forecast, observation[present])
        finally:
            self.observation_model_ = model



class NoUpdate(AnalysisStep):
    """The analysis is the forecast: a free-running ensemble, the floor any filter must beat.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import NoUpdate, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, n_cycles=60, random_state=0)
    >>> result = twin_experiment(NoUpdate(), problem, spin_up=10, ensemble_size=8, random_state=0)
    >>> result.rmse > 1.0
    True
    """

    def analyse(self, forecast, observation):
        return forecast


def _kalman_variance(observation_model, variance_factor):
    """``variance_factor`` times the noise law's variance, or times ``noise_scale ** 2`` when it has none."""
    variance = observation_model.variance
    if variance is None or not math.isfinite(variance):
        variance = observation_model.nominal_variance
    return float(variance_factor * variance)


class _KalmanStep(AnalysisStep):
    def _prepare(self):
        model = self.observation_model_
        self.localization_ = localization_matrix(model.n_variables, self.localization_radius)
        self.observation_variance_ = _kalman_variance(model, self.variance_factor)

    def _gain_and_innovation_std(self, forecast):
        observed = self.observation_model_.observed
        n_members = forecast.shape[0]
        anomalies = forecast - forecast.mean(axis=0)
        observed_anomalies = anomalies[:, observed]
        cross = anomalies.T @ observed_anomalies / (n_members - 1) * self.localization_[:, observed]
        innovation_cov = observed_anomalies.T @ observed_anomalies / (n_members - 1)
        innovation_cov = innovation_cov * self.localization_[np.ix_(observed, observed)]
        innovation_cov[np.diag_indices_from(innovation_cov)] += self.observation_variance_
        gain = np.linalg.solve(innovation_cov, cross.T).T
        return gain, np.sqrt(np.diag(innovation_cov))

    def _perturbed_innovations(self, forecast, observation):
        n_members, n_observed = forecast.shape[0], observation.size
        perturbations = self.random_state_.standard_normal((n_members, n_observed))
        perturbations -= perturbations.mean(axis=0)
        perturbations *= np.sqrt(self.observation_variance_)
        return observation + perturbations - forecast[:, self.observation_model_.observed]


class EnKF(_KalmanStep):
    """The stochastic (perturbed-observation) ensemble Kalman filter, with inflation and localisation.

    Each member moves toward its own Gaussian perturbation of the observation
    with the Kalman gain of the inflated forecast's sample covariance, tapered
    by :func:`localization_matrix` when ``localization_radius`` is set. The
    observation-error variance ``R`` is ``variance_factor`` times the noise
    law's variance (:attr:`ObservationModel.variance`: ``noise_scale ** 2``
    for Gaussian noise, ``noise_scale ** 2 * df / (df - 2)`` for Student-t
    noise with ``df > 2``), or times ``noise_scale ** 2``, a nominal variance,
    for laws that have none (``df <= 2``, Cauchy). With missing (NaN) observations the gain is that of the
    present ones; with none the forecast is the analysis (not inflated).

    Parameters
    ----------
    inflation : float, default=1.05
        Multiplicative inflation of the forecast anomalies, in [1, 10],
        applied to the forecast before the update (DAPPER's ``infl``
        multiplies the analysis anomalies after it). The
        default holds the truth in the standard Lorenz-96 setting (40
        variables, all observed every 0.05 with unit Gaussian noise, 40
        members: RMSE about 0.21); without inflation a stochastic EnKF loses
        it there within a few hundred cycles.
    localization_radius : float or None, default=None
        Gaspari-Cohn half-width in variables (covariances vanish beyond twice
        it); None: no localisation (the ensemble must then outnumber the
        model's unstable directions, 13 for 40 Lorenz-96 variables; set one
        with fewer members).
    variance_factor : float, default=1.0
        Multiplies the observation-error variance (above).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import EnKF, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, n_cycles=200, random_state=0)
    >>> result = twin_experiment(EnKF(inflation=1.1), problem, spin_up=50, ensemble_size=16, random_state=0)
    >>> result.rmse < 0.6 and not result.diverged
    True
    """

    _parameter_constraints: dict = {
        "inflation": [INFLATION],
        "localization_radius": LOCALIZATION,
        "variance_factor": [POSITIVE_REAL],
    }

    def __init__(self, *, inflation=1.05, localization_radius=None, variance_factor=1.0):
        self.inflation = inflation
        self.localization_radius = localization_radius
        self.variance_factor = variance_factor

    def analyse(self, forecast, observation):
        forecast = _inflated(forecast, self.inflation)
        gain, _ = self._gain_and_innovation_std(forecast)
        return forecast + self._perturbed_innovations(forecast, observation) @ gain.T


class RobustEnKF(_KalmanStep):
    """The stochastic EnKF with Huber-type clipping of every member's innovation.

    As :class:`EnKF`, but each member's perturbed innovation is clipped at
    ``clip`` innovation standard deviations (``sqrt(diag(H P H^T + R))``) before
    the gain is applied: an observation far from the forecast moves the
    ensemble by at most ``clip`` standard deviations' worth instead of in
    proportion. The usual safeguard against heavy-tailed observation errors.
    ``R`` is that of :class:`EnKF` (the noise law's variance); the clipping
    threshold is in standard deviations of the innovation it implies.
    Missing (NaN) observations are left out, as in :class:`EnKF`.

    Parameters
    ----------
    inflation : float, default=1.05
        Multiplicative inflation of the forecast anomalies, in [1, 10],
        applied to the forecast before the update (DAPPER's ``infl``
        multiplies the analysis anomalies after it). RMSE about 0.21 in the
        standard Lorenz-96 setting, as :class:`EnKF`.
    clip : float, default=1.5
        Clipping threshold, in innovation standard deviations.
    localization_radius : float or None, default=None
        Gaspari-Cohn half-width in variables; None: no localisation.
    variance_factor : float, default=1.0
        Multiplies the observation-error variance (above).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import RobustEnKF, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=200, random_state=0)
    >>> result = twin_experiment(RobustEnKF(), problem, spin_up=50, ensemble_size=16, random_state=0)
    >>> not result.diverged
    True
    """

    _parameter_constraints: dict = {
        "inflation": [INFLATION],
        "clip": [CLIP],
        "localization_radius": LOCALIZATION,
        "variance_factor": [POSITIVE_REAL],
    }

    def __init__(self, *, inflation=1.05, clip=1.5, localization_radius=None, variance_factor=1.0):
        self.inflation = inflation
        self.clip = clip
        self.localization_radius = localization_radius
        self.variance_factor = variance_factor

    def analyse(self, forecast, observation):
        forecast = _inflated(forecast, self.inflation)
        gain, innovation_std = self._gain_and_innovation_std(forecast)
        innovations = self._perturbed_innovations(forecast, observation)
        bound = self.clip * innovation_std
        return forecast + np.clip(innovations, -bound, bound) @ gain.T


def _greedy_disjoint_groups(supports):
    """Rows of a boolean (n_observations, n_variables) support matrix, each put in the first group it does not meet."""
    groups, covered = [], []
    for j, support in enumerate(supports):
        for group, cover in zip(groups, covered):
            if not (cover & support).any():
                group.append(j)
                cover |= support
                break
        else:
            groups.append([j])
            covered.append(support.copy())
    return groups


class SerialEnKF(AnalysisStep):
    """The serial ensemble adjustment Kalman filter (Anderson 2001, 2003), optionally robust.

    Observations are assimilated one at a time. For each, the observed
    variable's ensemble is updated first (deterministically: its mean by the
    scalar Kalman update, its anomalies shrunk by the posterior-to-prior
    standard-deviation ratio), then every variable moves by its ensemble
    regression on the observed one, tapered by :func:`localization_matrix`.
    With ``clip``, the innovation is clipped at ``clip`` innovation standard
    deviations first (Huber-type). The observation-error variance is that of
    :class:`EnKF` (the noise law's variance, times ``variance_factor``).
    Missing (NaN) observations are skipped; a cycle with none leaves the
    forecast as it is (not inflated or relaxed).

    This two-step structure, an update of one scalar ensemble followed by a
    linear regression, is what :class:`LearnedAnalysis` and
    :class:`RankHistogramFilter` keep while they replace the scalar update:
    override :meth:`scalar_update` in a subclass for an update of your own
    (see :class:`AnalysisStep`), and the loop, localisation, inflation,
    missing observations and relaxation are inherited.

    Parameters
    ----------
    inflation : float, default=1.02
        Multiplicative inflation of the forecast anomalies, in [1, 10],
        applied to the forecast before the update (DAPPER's ``infl``
        multiplies the analysis anomalies after it). The
        default holds the truth in the standard Lorenz-96 setting (40
        variables, all observed every 0.05 with unit Gaussian noise, 40
        members: RMSE about 0.18, the spread a little above it).
    clip : float or None, default=None
        Huber clipping threshold in innovation standard deviations; None: none.
    localization_radius : float or None, default=None
        Gaspari-Cohn half-width in variables; None: no localisation.
    relaxation : float, default=0.0
        Relaxation to prior spread (Whitaker and Hamill 2012), in [0, 1):
        after the update, each variable's analysis spread is moved this
        fraction of the way back to its forecast spread, which keeps repeated
        over-confident updates from shrinking the ensemble cycle after cycle.
    variance_factor : float, default=1.0
        Multiplies the observation-error variance (above).
    batch_disjoint : bool, default=False
        With localisation, assimilate together the observations whose
        localisation supports (the variables their regression reaches) do
        not overlap: their updates touch disjoint variables and commute, so
        the result is exactly that of the serial filter taking the
        observations group by group (groups formed greedily in the order of
        ``observed``), a different order of the same filter. Each group is
        one call of :meth:`scalar_updates`, which a learned update runs as
        one batch (:class:`LearnedAnalysis`: several times faster with a
        short radius). Without localisation every group holds one
        observation and nothing changes.

    Attributes
    ----------
    observation_model_ : ObservationModel
        The observation model of the bound step.
    random_state_ : numpy.random.RandomState
        The bound step's source of randomness.
    localization_ : ndarray of shape (n_variables, n_variables)
        The Gaspari-Cohn localisation weights of the regression.
    observation_variance_ : float
        The observation-error variance of the Kalman scalar update.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import SerialEnKF, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=200, random_state=0)
    >>> result = twin_experiment(SerialEnKF(inflation=1.05, clip=2.0), problem, spin_up=50, ensemble_size=16,
    ...                          random_state=0)
    >>> not result.diverged
    True
    """

    _parameter_constraints: dict = {
        "inflation": [INFLATION],
        "clip": [CLIP, None],
        "localization_radius": LOCALIZATION,
        "relaxation": [RELAXATION],
        "variance_factor": [POSITIVE_REAL],
        "batch_disjoint": ["boolean"],
    }
    #: The parameters the serial loop reads: a subclass sets them in its ``__init__`` (or calls this one).
    _LOOP_PARAMETERS = ("inflation", "localization_radius", "relaxation", "batch_disjoint")
    _records = None  # the list the loop appends its scalar priors to, inside ``recording()``

    def __init__(self, *, inflation=1.02, clip=None, localization_radius=None, relaxation=0.0, variance_factor=1.0,
                 batch_disjoint=False):
        self.inflation = inflation
        self.clip = clip
        self.localization_radius = localization_radius
        self.relaxation = relaxation
        self.variance_factor = variance_factor
        self.batch_disjoint = batch_disjoint

    def _prepare(self):
        self._declared_loop_parameters()
        model = self.observation_model_
        self.localization_ = localization_matrix(model.n_variables, self.localization_radius)
        self._groups = {}

    def _declared_loop_parameters(self):
        """Refuse a subclass that does not set what the loop reads."""
        parameters = vars(self)
        missing = [name for name in self._LOOP_PARAMETERS if name not in parameters]
        if missing:
            raise TypeError(
                f"{type(self).__name__} does not set {missing}, which SerialEnKF's loop reads: set them in its "
                "__init__ (or call SerialEnKF.__init__ there)."
            )

    @property
    def observation_variance_(self):
        """The observation-error variance of the Kalman scalar update: the noise law's, times ``variance_factor``."""
        if "variance_factor" not in vars(self):
            raise AttributeError(
                f"{type(self).__name__} has no variance_factor: observation_variance_ is the variance of "
                "SerialEnKF's Kalman scalar update, which needs it (call SerialEnKF.__init__ from __init__)."
            )
        return _kalman_variance(self.observation_model_, self.variance_factor)

    @contextlib.contextmanager
    def recording(self):
        """Record the scalar priors of the serial loop while inside: ``with step.recording() as records:``.

        Every scalar update inside appends ``(prior, observation, variable)``
        to ``records``: the members of the observed variable just before
        its update (the array :meth:`scalar_update` is given), the
        observation and the variable's index. A step bound inside the block
        (by :func:`twin_experiment`) shares the list, so the step you made
        records the cycles of an experiment it runs.

        Yields
        ------
        list
            The records, in the order of the updates.

        Examples
        --------
        >>> from sklearn_measattn.assimilation import SerialEnKF, make_twin_problem, twin_experiment
        >>> problem = make_twin_problem(n_variables=8, observed="every_other", n_cycles=5, random_state=0)
        >>> step = SerialEnKF()
        >>> with step.recording() as records:
        ...     _ = twin_experiment(step, problem, ensemble_size=6, spin_up=0, random_state=0)
        >>> len(records), records[0][0].shape  # 4 observations in each of 5 cycles
        (20, (6,))
        """
        self._records = records = []
        try:
            yield records
        finally:
            del self._records

    def scalar_update(self, prior, observation):
        """The posterior members of one observed variable (what a serial filter's subclass overrides).

        Called inside the serial loop of :meth:`analyse` once per present
        observation, on the inflated ensemble of the observed variable as
        the earlier observations of the cycle left it; a variable whose
        members are all equal is skipped before the call. The increments
        ``posterior - prior`` are then spread to every variable by the
        localised ensemble regression. :class:`SerialEnKF`'s is the Kalman
        update of the ensemble adjustment filter (clipped with ``clip``).

        Parameters
        ----------
        prior : ndarray of shape (n_members,)
            The members of the observed variable (a copy: yours to change).
        observation : float
            Its observation, finite; the noise law is
            ``self.observation_model_``'s.

        Returns
        -------
        ndarray of shape (n_members,)
            The posterior members, in the order of ``prior`` (member ``k``'s
            increment is ``posterior[k] - prior[k]``).
        """
        mean, variance = prior.mean(), prior.var(ddof=1)
        noise_variance = self.observation_variance_
        innovation = observation - mean
        if self.clip is not None:
            bound = self.clip * np.sqrt(variance + noise_variance)
            innovation = np.clip(innovation, -bound, bound)
        shrink = np.sqrt(noise_variance / (variance + noise_variance))
        return mean + variance / (variance + noise_variance) * innovation + shrink * (prior - mean)

    def scalar_updates(self, priors, observations):
        """The posterior members of several observed variables updated together (one group of :meth:`analyse`).

        With ``batch_disjoint=True``, :meth:`analyse` calls this once per
        group of observations whose updates commute; the default calls
        :meth:`scalar_update` on each row. Override it when the updates are
        cheaper in one batch (a network's forward pass); keep it equal to
        :meth:`scalar_update` row by row.

        Parameters
        ----------
        priors : ndarray of shape (n_updates, n_members)
            The members of each observed variable (a copy: yours to change);
            none of them has all members equal.
        observations : ndarray of shape (n_updates,)
            Their observations, finite.

        Returns
        -------
        ndarray of shape (n_updates, n_members)
            The posterior members, row by row in the order of ``priors``.
        """
        return np.stack([self.scalar_update(prior, value) for prior, value in zip(priors, observations)])

    def _disjoint_groups(self, observed):
        """Positions in ``observed`` in groups of observations whose localisation supports do not overlap.

        Round robin (observation ``j`` in group ``j mod k``) with the fewest
        groups ``k`` that keeps every group disjoint, from the most
        observations that reach one variable (no grouping has fewer) up to
        the number of groups the greedy grouping in the order of
        ``observed`` takes, which is kept if no round robin does better. On a
        ring of evenly spaced observations the round robin is optimal.
        """
        key = tuple(observed)
        if key not in self._groups:
            supports = self.localization_[observed] > 0
            greedy = _greedy_disjoint_groups(supports)
            positions = np.arange(len(observed))
            self._groups[key] = greedy
            for k in range(int(supports.sum(axis=0).max()), len(greedy)):
                groups = [positions[g::k] for g in range(k)]
                if all(supports[group].sum(axis=0).max() <= 1 for group in groups):
                    self._groups[key] = [group.tolist() for group in groups]
                    break
        return self._groups[key]

    def analyse(self, forecast, observation):
        if self.batch_disjoint and self.localization_radius is not None:
            return self._analyse_in_groups(forecast, observation)
        ensemble = _inflated(forecast, self.inflation).copy()
        recorder = self._records
        for j, i in enumerate(self.observation_model_.observed):
            prior = ensemble[:, i].copy()
            prior_anomaly = prior - prior.mean()
            variance = prior_anomaly @ prior_anomaly
            if not variance > 0:
                continue
            if recorder is not None:
                recorder.append((prior, observation[j], i))
            increment = self.scalar_update(prior, observation[j]) - prior
            regression = (ensemble - ensemble.mean(axis=0)).T @ prior_anomaly / variance * self.localization_[i]
            ensemble += increment[:, None] * regression[None, :]
        if self.relaxation > 0:
            ensemble = _relaxed_to_prior_spread(forecast, ensemble, self.relaxation)
        return ensemble

    def _analyse_in_groups(self, forecast, observation):
        ensemble = _inflated(forecast, self.inflation).copy()
        observed = self.observation_model_.observed
        recorder = self._records
        for group in self._disjoint_groups(observed):
            variables = observed[group]
            priors = ensemble[:, variables].T.copy()
            prior_anomalies = priors - priors.mean(axis=1, keepdims=True)
            variances = np.einsum("ij,ij->i", prior_anomalies, prior_anomalies)
            updated = variances > 0
            if not updated.any():
                continue
            variables, values = variables[updated], observation[group][updated]
            priors, prior_anomalies, variances = priors[updated], prior_anomalies[updated], variances[updated]
            if recorder is not None:
                recorder.extend(zip(priors.copy(), values, variables))
            increments = self.scalar_updates(priors.copy(), values) - priors
            # the supports are disjoint: every variable takes the regression of at most one observation of the group
            regressions = prior_anomalies @ (ensemble - ensemble.mean(axis=0)) / variances[:, None]
            ensemble += increments.T @ (regressions * self.localization_[variables])
        if self.relaxation > 0:
            ensemble = _relaxed_to_prior_spread(forecast, ensemble, self.relaxation)
        return ensemble


class ParticleFilter(AnalysisStep):
    """A bootstrap particle filter with the true likelihood: the Bayes reference when members are many.

    Every member is weighted by the likelihood of the observation under the
    true noise law (:meth:`ObservationModel.log_likelihood`), the ensemble is
    resampled systematically by the weights, and Gaussian jitter with
    ``jitter`` times the weighted ensemble covariance (its unbiased estimate,
    as DAPPER's ``PartFilt`` uses) regularises the copies. DAPPER's ``reg``
    corresponds to ``jitter = reg * n_members ** (-1 / (n_variables + 4))``.
    As the number of members grows, the analysis approaches Bayes' rule for
    any noise law; in many dimensions it needs thousands of members. The
    likelihood is that of the present observations (missing ones are NaN); a
    cycle with none keeps the forecast (no resampling, no jitter).

    Parameters
    ----------
    jitter : float, default=0.2
        Standard deviation of the regularisation, as a fraction of the
        posterior's (in every direction of its covariance), >= 0.

    Attributes
    ----------
    ess_ : float
        Effective sample size of the last weights, as a fraction of the
        members (a cycle without any observation leaves it as it was).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import ParticleFilter, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, observed="every_other", noise="cauchy", n_cycles=100,
    ...                             random_state=0)
    >>> result = twin_experiment(ParticleFilter(), problem, spin_up=20, ensemble_size=500, random_state=0)
    >>> not result.diverged
    True
    """

    _parameter_constraints: dict = {"jitter": [NumberInterval(Real, 0, None, closed="left")]}

    def __init__(self, *, jitter=0.2):
        self.jitter = jitter

    def analyse(self, forecast, observation):
        n_members = forecast.shape[0]
        weights = np.exp(log_softmax(self.observation_model_.log_likelihood(observation, forecast)))
        self.ess_ = 1.0 / (n_members * np.sum(weights**2))
        positions = (self.random_state_.uniform() + np.arange(n_members)) / n_members
        chosen = np.minimum(np.searchsorted(np.cumsum(weights), positions), n_members - 1)
        analysis = forecast[chosen]
        if self.jitter > 0:
            # the unbiased weighted covariance, 1 / (1 - sum w^2) times the biased one: with few effective
            # particles the biased one is near zero and the jitter could not restore the spread
            mean = weights @ forecast
            unbiased = 1.0 / max(1.0 - np.sum(weights**2), 1e-12)
            anomalies = (forecast - mean) * np.sqrt(unbiased * weights)[:, None]
            # draws with the weighted covariance A^T A = V S^2 V^T, from the SVD of the weighted anomalies
            _, singular, vt = np.linalg.svd(anomalies, full_matrices=False)
            draws = self.random_state_.standard_normal((n_members, singular.size))
            analysis = analysis + self.jitter * (draws * singular) @ vt
        return analysis
