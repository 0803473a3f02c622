"""The cycled twin experiment: forecast, observe, analyse, score, cycle after cycle."""

from __future__ import annotations

import functools
import inspect
import math
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.utils import check_random_state

from .._param_validation import InvalidParameterError, validate_params
from .._validation import Choices
from ..metrics import crps_ensemble, energy_score
from ._baselines import AnalysisStep, EnKF, NoUpdate, ParticleFilter, RobustEnKF, SerialEnKF
from ._letkf import LETKF
from ._problem import (
    RUN_CONSTRAINTS,
    TwinProblem,
    arrays_described,
    check_problem_for_run,
)
from ._rank_histogram import RankHistogramFilter

__all__ = ["ANALYSIS_NAMES", "ANALYSIS_STEPS", "DIVERGENCE_RULE", "TwinResult", "resolve_analysis", "twin_experiment"]

#: The built-in analysis steps a twin experiment takes by name (each made with its default parameters), by name.
ANALYSIS_STEPS = {
    "none": NoUpdate,
    "enkf": EnKF,
    "letkf": LETKF,
    "robust_enkf": RobustEnKF,
    "serial_enkf": SerialEnKF,
    "rank_histogram": RankHistogramFilter,
    "particle_filter": ParticleFilter,
}


#: The names of the built-in analysis steps a twin experiment takes (their classes: :data:`ANALYSIS_STEPS`).
ANALYSIS_NAMES = tuple(ANALYSIS_STEPS)

#: The keyword arguments a plain callable analysis is given when its signature accepts them.
CALLABLE_KEYWORDS = ("observation_model", "random_state")

_BLOW_UP = 1e4  # |x| on the Lorenz-96 attractor stays below about 15
_LOST_WINDOW = 50

#: The fixed rule by which a twin experiment declares divergence.
DIVERGENCE_RULE = (
    f"diverged: the ensemble became non-finite or left |x| < {_BLOW_UP:g} (the run stops there and the "
    f"remaining cycles score inf), or the analysis RMSE averaged over {_LOST_WINDOW} consecutive cycles after "
    "spin-up exceeded the climatological standard deviation of the truth (the filter lost the truth: it does "
    "worse than a guess from the attractor's statistics)"
)

@dataclass
class TwinResult:
    """The scores of one twin experiment, per cycle and averaged over time after spin-up.

    Every score compares an ensemble with the true state at the same time;
    lower is better. The scores without prefix are those of the *analysis*
    ensemble (after the update of each cycle); beside them, ``forecast_rmse``
    and ``forecast_spread`` are those of the *forecast* ensemble just before
    the update (as it came from the model, before any inflation of the
    step's), as DAPPER reports ``.f`` beside ``.a``. Averages are over cycles
    ``spin_up`` to the end; when the run stopped on divergence they are
    ``inf``. Made by :func:`twin_experiment` and :func:`run_dapper`.

    Parameters
    ----------
    rmse : float
        Time-averaged RMSE of the analysis ensemble mean (root mean square
        over variables).
    spread : float
        Time-averaged analysis ensemble spread: the root of the mean over
        variables of the members' variance (``ddof=1``). A calibrated
        ensemble has spread close to its RMSE.
    crps : float
        Time-averaged CRPS of the analysis, the mean over variables of
        :func:`~sklearn_measattn.metrics.crps_ensemble`.
    energy_score : float
        Time-averaged energy score of the whole analysed state,
        :func:`~sklearn_measattn.metrics.energy_score`.
    rmse_per_cycle, spread_per_cycle, crps_per_cycle, energy_score_per_cycle : ndarray of shape (n_cycles,)
        The same, per cycle (spin-up included).
    diverged : bool
        Whether the run diverged, by :data:`DIVERGENCE_RULE`.
    diverged_at : int or None
        The first cycle at which it did.
    spin_up : int
        Cycles left out of the averages.
    ensemble_size : int
        Members.
    seconds_per_cycle : float
        Mean wall-clock time of one analysis step.
    analysis : str
        What ran the analysis.
    forecast_rmse, forecast_spread : float, default=nan
        Time-averaged RMSE and spread of the forecast ensemble before each
        analysis (NaN where a result was made without them).
    forecast_rmse_per_cycle, forecast_spread_per_cycle : ndarray of shape (n_cycles,) or None, default=None
        The same, per cycle.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=100, random_state=0)
    >>> result = twin_experiment("robust_enkf", problem, spin_up=20,
    ...                          ensemble_size=10, random_state=0)
    >>> sorted(result.summary())[:4]
    ['analysis', 'crps', 'diverged', 'diverged_at']
    >>> bool(result.rmse < result.forecast_rmse)  # the update moves the ensemble toward the truth
    True
    """

    rmse: float
    spread: float
    crps: float
    energy_score: float
    rmse_per_cycle: np.ndarray = field(repr=False)
    spread_per_cycle: np.ndarray = field(repr=False)
    crps_per_cycle: np.ndarray = field(repr=False)
    energy_score_per_cycle: np.ndarray = field(repr=False)
    diverged: bool
    diverged_at: int | None
    spin_up: int
    ensemble_size: int
    seconds_per_cycle: float
    analysis: str
    forecast_rmse: float = math.nan
    forecast_spread: float = math.nan
    forecast_rmse_per_cycle: np.ndarray | None = field(default=None, repr=False)
    forecast_spread_per_cycle: np.ndarray | None = field(default=None, repr=False)

    SCORES = ("rmse", "spread", "crps", "energy_score")
    FORECAST_SCORES = ("forecast_rmse", "forecast_spread")

    def summary(self, *, forecast=False):
        """The time averages, divergence and cost as a flat dict (a table row).

        Parameters
        ----------
        forecast : bool, default=False
            Also the forecast's time averages, ``forecast_rmse`` and
            ``forecast_spread``.

        Returns
        -------
        dict
        """
        row = {name: getattr(self, name) for name in self.SCORES}
        if forecast:
            row.update({name: getattr(self, name) for name in self.FORECAST_SCORES})
        row.update(diverged=self.diverged, diverged_at=self.diverged_at, ensemble_size=self.ensemble_size,
                   seconds_per_cycle=self.seconds_per_cycle, analysis=self.analysis)
        return row


#: The rows of a run's per-cycle score array: the analysis scores of :class:`TwinResult`, then the forecast's.
N_SCORES = len(TwinResult.SCORES) + len(TwinResult.FORECAST_SCORES)
ANALYSIS_ROWS = slice(0, len(TwinResult.SCORES))
FORECAST_ROWS = slice(len(TwinResult.SCORES), N_SCORES)


def _cycle_scores(ensemble, truth, weights=None):
    """RMSE of the mean, spread, mean CRPS and energy score of one analysis; ``weights`` for weighted particles."""
    if weights is None:
        mean = ensemble.mean(axis=0)
        spread = np.sqrt(np.mean(ensemble.var(axis=0, ddof=1)))
        crps = np.mean(crps_ensemble(ensemble.T, truth))
        return np.sqrt(np.mean((mean - truth) ** 2)), spread, crps, float(energy_score(ensemble, truth))
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    mean = w @ ensemble
    unbias = 1.0 / (1.0 - w @ w) if w @ w < 1.0 else np.inf  # N / (N - 1) for equal weights, as ddof=1
    spread = np.sqrt(np.mean(unbias * (w @ (ensemble - mean) ** 2)))
    crps = np.mean(crps_ensemble(ensemble.T, truth, weights=np.broadcast_to(w, ensemble.T.shape)))
    return np.sqrt(np.mean((mean - truth) ** 2)), spread, crps, float(energy_score(ensemble, truth, weights=w))


def _forecast_scores(ensemble, truth):
    """RMSE of the mean and spread of one forecast ensemble (equal weights), as :func:`_cycle_scores` has them."""
    if not np.all(np.isfinite(ensemble)):
        return np.inf, np.inf
    mean = ensemble.mean(axis=0)
    return np.sqrt(np.mean((mean - truth) ** 2)), np.sqrt(np.mean(ensemble.var(axis=0, ddof=1)))


def _blew_up(ensemble):
    """The first half of the divergence rule: non-finite, or off the attractor by orders of magnitude."""
    return not (np.all(np.isfinite(ensemble)) and np.max(np.abs(ensemble)) < _BLOW_UP)


def _lost_truth(rmse_per_cycle, k, spin_up, threshold):
    """The second half: the RMSE over the last ``_LOST_WINDOW`` cycles after spin-up is worse than climatology."""
    return k + 1 - spin_up >= _LOST_WINDOW and rmse_per_cycle[k + 1 - _LOST_WINDOW : k + 1].mean() > threshold


def _summarize(scores, *, diverged_at, spin_up, ensemble_size, seconds, name):
    """The :class:`TwinResult` of per-cycle ``scores`` (:data:`N_SCORES`, n_cycles), inf after a blow-up."""
    averages = scores[:, spin_up:].mean(axis=1)
    completed = (diverged_at + 1) if diverged_at is not None and not np.isfinite(averages[0]) else scores.shape[1]
    forecast = dict(zip(TwinResult.FORECAST_SCORES, range(N_SCORES)[FORECAST_ROWS]))
    return TwinResult(
        *map(float, averages[ANALYSIS_ROWS]), *scores[ANALYSIS_ROWS],
        diverged=diverged_at is not None, diverged_at=diverged_at, spin_up=spin_up, ensemble_size=ensemble_size,
        seconds_per_cycle=seconds / max(completed, 1), analysis=name,
        **{score: float(averages[row]) for score, row in forecast.items()},
        **{f"{score}_per_cycle": scores[row] for score, row in forecast.items()},
    )


def _accepted_keywords(analysis):
    """Which of :data:`CALLABLE_KEYWORDS` the signature of ``analysis`` takes by keyword (all with ``**kwargs``)."""
    try:
        parameters = inspect.signature(analysis).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some builtins): called with the two arrays only
        return ()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return CALLABLE_KEYWORDS
    by_keyword = {parameter.name for parameter in parameters
                  if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return tuple(name for name in CALLABLE_KEYWORDS if name in by_keyword)


def resolve_analysis(analysis, observation_model, *, random_state=None):
    """The callable a twin experiment runs: a name made into its built-in step, a step bound, a callable completed.

    Parameters
    ----------
    analysis : str, AnalysisStep or callable
        A name in :data:`ANALYSIS_NAMES`, an :class:`AnalysisStep` (bound here
        to ``observation_model``, which checks its parameters), or any
        callable ``(forecast_ensemble, observation) -> analysis_ensemble``.
        A callable whose signature accepts the keyword argument
        ``observation_model`` or ``random_state`` (by name, or through
        ``**kwargs``) is given them: the observation model, and the
        ``numpy.random.RandomState`` of ``random_state``.
    observation_model : ObservationModel
        The observed variables and the noise law and scale the step works with.
    random_state : int, RandomState instance or None, default=None
        Source of the step's randomness.

    Returns
    -------
    callable
        ``(forecast_ensemble, observation) -> analysis_ensemble``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import ObservationModel, resolve_analysis
    >>> model = ObservationModel(n_variables=8)
    >>> resolve_analysis("robust_enkf", model, random_state=0)
    RobustEnKF()
    >>> def jitter(forecast, observation, *, random_state):
    ...     return forecast + 0.1 * random_state.standard_normal(forecast.shape)
    >>> step = resolve_analysis(jitter, model, random_state=0)
    >>> step(np.zeros((3, 8)), np.zeros(8)).shape
    (3, 8)
    """
    if isinstance(analysis, str):
        if analysis not in ANALYSIS_NAMES:
            raise InvalidParameterError(
                f"The 'analysis' parameter must be one of {list(ANALYSIS_NAMES)}, an AnalysisStep or a callable "
                f"(forecast_ensemble, observation) -> analysis_ensemble. Got {analysis!r} instead."
            )
        analysis = ANALYSIS_STEPS[analysis]()
    if isinstance(analysis, AnalysisStep) or callable(getattr(analysis, "bind", None)):
        return analysis.bind(observation_model, random_state=random_state)
    given = {"observation_model": observation_model, "random_state": check_random_state(random_state)}
    keywords = _accepted_keywords(analysis)
    if keywords:
        return functools.partial(analysis, **{name: given[name] for name in keywords})
    return analysis


def _describe(analysis):
    if isinstance(analysis, str):
        return analysis
    if isinstance(analysis, AnalysisStep):
        return repr(analysis)
    return getattr(analysis, "__name__", type(analysis).__name__)


@arrays_described
@validate_params(
    {
        "analysis": [Choices(tuple(ANALYSIS_NAMES)), callable, AnalysisStep],
        "problem": [TwinProblem],
        **RUN_CONSTRAINTS,
        "random_state": ["random_state"],
        "callback": [callable, None],
    },
    prefer_skip_nested_validation=True,
)
def twin_experiment(
    analysis,
    problem,
    *,
    ensemble_size=40,
    spin_up=100,
    initial_spread=1.0,
    random_state=None,
    callback=None,
):
    """Run a cycled Lorenz-96 twin experiment with an ensemble filter and score it against the truth.

    A true trajectory of the Lorenz-96 model (forcing 8) is observed every
    ``dt_obs`` with Gaussian, Student-t or Cauchy noise. An ensemble starts
    from the initial truth plus ``initial_spread`` Gaussian noise; each cycle
    forecasts it to the next observation time with the same model, then
    ``analysis`` turns the forecast and the observation into the analysis
    ensemble, which starts the next forecast. Errors feed back: an update that
    is fine once may drift or diverge over many cycles.

    Missing observations: a NaN entry of ``problem.observations`` is a
    missing observation (a sensor down). The built-in steps and every
    :class:`AnalysisStep` assimilate only the observations present in each
    cycle (the Kalman gain of the present ones, the serial filters skipping
    the missing ones, the particle filter's likelihood over the present
    ones); a cycle with none present is a pure forecast: its analysis is the
    forecast unchanged, not inflated. A plain callable receives the
    observation as it is, NaN where missing: ``numpy.isfinite(observation)``
    tells which are present. Every cycle is scored all the same, the truth
    being known at every cycle.

    Parameters
    ----------
    analysis : str, AnalysisStep or callable
        The analysis step: ``"none"`` (free-running ensemble), ``"enkf"``
        (:class:`EnKF`), ``"letkf"`` (:class:`LETKF`), ``"robust_enkf"`` (:class:`RobustEnKF`),
        ``"serial_enkf"`` (:class:`SerialEnKF`), ``"rank_histogram"``
        (:class:`RankHistogramFilter`), ``"particle_filter"``
        (:class:`ParticleFilter`), each with its default parameters; an
        :class:`AnalysisStep` with chosen parameters (e.g. a
        :class:`LearnedAnalysis`, or a subclass of your own, see
        :class:`AnalysisStep`); or any callable
        ``(forecast, observation) -> analysis`` taking the forecast
        ``(ensemble_size, n_variables)`` and the observation
        ``(n_observed,)`` (a NaN entry is a missing observation) and
        returning an array shaped like the forecast. A callable whose
        signature accepts the keyword argument ``observation_model`` (by
        name, or through ``**kwargs``) is also given the problem's
        :class:`ObservationModel`, and one that accepts ``random_state`` the
        experiment's ``numpy.random.RandomState``, seeded from
        ``random_state`` (the generator of the run: the same seed gives the
        same draws).
    problem : TwinProblem
        The truth and observations (:func:`make_twin_problem`, or a
        :class:`TwinProblem` of your own, NaN where an observation is
        missing); the same problem runs several filters on the same data.
    ensemble_size : int, default=40
        Members.
    spin_up : int, default=100
        Cycles left out of the time averages (must be below ``n_cycles``).
    initial_spread : float, default=1.0
        Standard deviation of the initial ensemble around the initial truth.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial ensemble and the analysis step's own randomness.
    callback : callable, default=None
        Called as ``callback(cycle, forecast, analysis, truth)`` after every
        cycle (to record ensembles or training pairs).

    Returns
    -------
    TwinResult
        Time-averaged and per-cycle RMSE, spread, CRPS and energy score of
        the analysis, RMSE and spread of the forecast before it, and
        divergence by :data:`DIVERGENCE_RULE`.

    Raises
    ------
    ValueError, TypeError
        Before any work, on a parameter outside its domain (also the analysis
        step's own parameters, the message naming the step's class; an array
        where none belongs is described by its type and shape).
    ValueError
        Before any work, when the arrays of ``problem`` were changed in place
        into an invalid problem (an infinite observation, a non-finite
        truth); when a callable analysis returns an array of the wrong shape.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=10, n_cycles=300, random_state=0)
    >>> enkf = twin_experiment("enkf", problem, ensemble_size=20, random_state=0)
    >>> free = twin_experiment("none", problem, ensemble_size=20, random_state=0)
    >>> bool(enkf.rmse < 0.5 * free.rmse)
    True
    >>> enkf.rmse_per_cycle.shape
    (300,)
    """
    rng = check_random_state(random_state)
    check_problem_for_run(problem, spin_up=spin_up)
    step = resolve_analysis(analysis, problem.observation_model, random_state=rng)
    return _run(step, problem, ensemble_size=ensemble_size, spin_up=spin_up, initial_spread=initial_spread,
                rng=rng, callback=callback, name=_describe(analysis))


def _run(step, problem, *, ensemble_size, spin_up, initial_spread, rng, callback, name):
    n_cycles, n_variables = problem.n_cycles, problem.n_variables
    scores = np.full((N_SCORES, n_cycles), np.inf)
    ensemble = problem.truth[0] + initial_spread * rng.standard_normal((ensemble_size, n_variables))
    threshold = problem.climatological_std
    diverged_at, seconds = None, 0.0
    for k in range(n_cycles):
        forecast = problem.forecast(ensemble)
        scores[FORECAST_ROWS, k] = _forecast_scores(forecast, problem.truth[k + 1])
        if _blew_up(forecast):
            diverged_at = k
            break
        start = time.perf_counter()
        ensemble = np.asarray(step(forecast, problem.observations[k]), dtype=np.float64)
        seconds += time.perf_counter() - start
        if ensemble.shape != forecast.shape:
            raise ValueError(
                f"The analysis step returned shape {ensemble.shape} for a forecast of shape {forecast.shape}; "
                "it must return one analysis member per forecast member."
            )
        if _blew_up(ensemble):
            diverged_at = k
            break
        scores[ANALYSIS_ROWS, k] = _cycle_scores(ensemble, problem.truth[k + 1])
        if callback is not None:
            callback(k, forecast, ensemble, problem.truth[k + 1])
        if diverged_at is None and _lost_truth(scores[0], k, spin_up, threshold):
            diverged_at = k
    return _summarize(scores, diverged_at=diverged_at, spin_up=spin_up, ensemble_size=ensemble_size, seconds=seconds,
                      name=name)
