"""DAPPER's filters as a peer: run on the same truth and observations as :func:`twin_experiment`, scored the same way.

DAPPER (Raanes et al., ``pip install dapper``) is the field's reference
implementation of twin experiments. :func:`run_dapper` builds the DAPPER
hidden Markov model equivalent to a :class:`TwinProblem`, hands DAPPER the
problem's truth and observations (so that both packages assimilate the very
same data), records DAPPER's forecast and analysis ensembles at every
observation time and scores them with the package's own per-cycle scores and
divergence rule.

DAPPER's conventions, and how they map onto the package's:

- **Time.** ``Chronology(dt=dt_obs, dko=1, Ko=n_cycles - 1)``: DAPPER steps
  from ``xx[k - 1]`` to ``xx[k]`` and, there being no observation at time 0,
  assimilates ``yy[ko]`` at ``k = (ko + 1) * dko``. With ``dko = 1``,
  ``yy[ko]`` observes ``xx[ko + 1]``: the pairing of
  ``problem.observations[k]`` with ``problem.truth[k + 1]`` exactly. The model
  step over one observation interval is the problem's own integrator
  (``problem.forecast``, Runge-Kutta sub-steps of at most ``time_step``), so
  DAPPER's forecasts are bit for bit those of :func:`twin_experiment`.
- **Inflation.** DAPPER multiplies the *analysis* anomalies by ``infl``
  (after the update, with an optional random mean-preserving rotation,
  ``rot``); the package's steps inflate the *forecast*. The analysis that
  DAPPER reports, and that is scored here, is the inflated one.
- **Localisation.** DAPPER's ``loc_rad`` is the distance at which the
  taper equals ``exp(-1/2)``: its Gaspari-Cohn half-width is ``1.82 *
  loc_rad`` (the package's ``localization_radius`` is the half-width
  itself). Its LETKF tapers the observation precision (R-localisation) and
  makes one local analysis for each batch of ``loc_batch`` neighbouring
  variables, at the batch's centre: two by default, as DAPPER's
  ``Lorenz96.sakov2008`` sets up; with ``loc_batch=1`` (one analysis per
  variable), ``rot=False`` and ``infl=1`` its analysis is the package's
  ``LETKF(localization_radius=1.82 * loc_rad)``'s.
- **Particle filter.** DAPPER's analysis is the weighted particles before
  resampling; it is scored with those weights (weighted mean, spread, CRPS
  and energy score), as DAPPER scores it.
- **Observation noise.** DAPPER's filters assume Gaussian noise with the
  variance the package's Kalman steps take: the law's variance where it has
  one (Student-t with more than 2 degrees of freedom: ``scale ** 2 * df /
  (df - 2)``), ``noise_scale ** 2`` otherwise: under heavier Student-t or
  Cauchy noise that is the misspecification being compared.
- **Missing observations.** DAPPER's filters take no NaN. A cycle with some
  observations missing gets an observation operator (and LETKF's
  localisation) of the present ones alone, DAPPER's time-dependent
  operator, and only their values; a cycle with none is, for DAPPER, a time
  without observation: the ensemble is forecast on, with no analysis (no
  inflation), as the package's steps do. The forecast is scored as that
  cycle's analysis.
"""

from __future__ import annotations

import contextlib
import functools
import io
import time
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._param_validation import InvalidParameterError, validate_parameter_constraints, validate_params
from .._validation import Choices, NumberInterval, check_keyword_arguments
from ._baselines import AnalysisStep, _kalman_variance
from ._problem import ObservationModel, TwinProblem, arrays_described, describe, refuse_array_likes
from ._twin import (
    ANALYSIS_NAMES,
    ANALYSIS_ROWS,
    FORECAST_ROWS,
    N_SCORES,
    _blew_up,
    _cycle_scores,
    _forecast_scores,
    _lost_truth,
    _summarize,
    resolve_analysis,
)

__all__ = ["DAPPER_METHODS", "dapper_method", "run_dapper"]

#: The DAPPER filters :func:`run_dapper` runs, by name.
DAPPER_METHODS = ("EnKF", "EnKF_sqrt", "EnKF_N", "LETKF", "iEnKS", "PartFilt")

_INFL = NumberInterval(Real, 0, None, closed="neither", why="DAPPER's multiplicative inflation of the analysis anomalies")
_ROT = ["boolean"]
_ENKF_PARAMS = {"infl": [_INFL], "rot": _ROT}
#: The keyword arguments each method passes to DAPPER's constructor, with their domains.
_METHOD_PARAMS = {
    "EnKF": _ENKF_PARAMS,
    "EnKF_sqrt": _ENKF_PARAMS,
    "EnKF_N": {
        **_ENKF_PARAMS,
        "xN": [NumberInterval(Real, 0, None, closed="neither", why="the confidence in the prior's inflation")],
    },
    "LETKF": {
        **_ENKF_PARAMS,
        "loc_rad": [NumberInterval(Real, 0, None, closed="neither", why="the taper is exp(-1/2) at this distance")],
        "taper": [Choices(("GC", "Gauss", "Exp", "Cubic", "Quadro", "Step"))],
        "xN": [NumberInterval(Real, 0, None, closed="neither"), None],
        "loc_batch": [NumberInterval(Integral, 1, None, closed="left",
                                     why="the neighbouring variables that share one local analysis")],
    },
    "iEnKS": {
        **_ENKF_PARAMS,
        "Lag": [NumberInterval(Integral, 0, None, closed="left", why="the length of the window, in cycles")],
        "nIter": [NumberInterval(Integral, 1, None, closed="left", why="the most Gauss-Newton iterations")],
        "wtol": [NumberInterval(Real, 0, None, closed="left", why="the relative tolerance that ends the iterations")],
        "xN": [NumberInterval(Real, 0, None, closed="neither"), None],
    },
    "PartFilt": {
        "reg": [NumberInterval(Real, 0, None, closed="left", why="jitter, in units of the bandwidth-scaled posterior spread")],
        "NER": [NumberInterval(Real, 0, 1, closed="right", why="resample when N_eff <= NER * N")],
        "resampl": [Choices(("Sys", "Systematic", "Res", "Residual", "Stoch", "Stochastic"))],
        "nuj": ["boolean"],
        "wroot": [NumberInterval(Real, 0, None, closed="neither")],
    },
}
_DEFAULTS = {"EnKF_sqrt": {"rot": True}, "LETKF": {"rot": True}}
#: The method parameters that set up the run rather than DAPPER's constructor.
_RUN_PARAMS = {"LETKF": ("loc_batch",)}
#: DAPPER's Lorenz-96 set-up (``Lorenz96.sakov2008``) makes one local analysis per pair of neighbouring variables.
_DAPPER_LOCALIZATION_BATCH = 2
_INSTALL = "pip install sklearn-measattn[assimilation]"


class _Stop(Exception):
    """Raised from inside DAPPER's loop to end a run that diverged (DAPPER re-raises any exception)."""


class _Required:
    """The value of a required method parameter that was not given: no constraint accepts it."""

    def __init__(self, example):
        self.example = example

    def __repr__(self):
        return f"no value (it is required, e.g. {self.example})"


#: The method parameters DAPPER's filters require, with an example each.
_REQUIRED = {"LETKF": {"loc_rad": _Required("loc_rad=4 for Lorenz-96")}}


def _keyword_table(method):
    """DAPPER's ``method`` as scikit-learn's machinery sees a function: the keyword arguments it takes, and their domains."""

    def parameters(**method_params):
        """Never called: its name and table say what ``run_dapper`` passes on to DAPPER's constructor."""

    parameters.__qualname__ = f"DAPPER's {method}"  # the domain errors name the method
    parameters.__name__ = f"DAPPER's {method} (whose N is run_dapper's ensemble_size)"  # so do unknown parameters
    return validate_params(_METHOD_PARAMS[method], prefer_skip_nested_validation=True)(parameters)


_KEYWORD_TABLES = {method: _keyword_table(method) for method in DAPPER_METHODS}


def _check_method_params(method, method_params):
    """Refuse a method parameter DAPPER's ``method`` does not take here, a required one missing, or one out of its domain."""
    caller = f"run_dapper (DAPPER's {method})"
    refuse_array_likes(_METHOD_PARAMS[method], method_params, caller)
    check_keyword_arguments(_KEYWORD_TABLES[method], {**_REQUIRED.get(method, {}), **method_params}, caller=caller)


@contextlib.contextmanager
def _dapper_imports(caller):
    """Import DAPPER's modules inside, quietly; without DAPPER, an ImportError that says how to install it."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # DAPPER prints a liveplotting notice on import
            yield
    except ImportError as error:
        raise ImportError(
            f"{caller} needs DAPPER (the optional dependency of the assimilation extra): {_INSTALL}"
        ) from error


def _import_dapper():
    with _dapper_imports("run_dapper"):
        import dapper.mods as modelling
        from dapper.da_methods.ensemble import LETKF, EnKF, EnKF_N
        from dapper.da_methods.particle import PartFilt
        from dapper.da_methods.variational import iEnKS
        from dapper.tools import progressbar, seeding
        from dapper.tools.localization import nd_Id_localization
    classes = {"EnKF": EnKF, "EnKF_N": EnKF_N, "LETKF": LETKF, "iEnKS": iEnKS, "PartFilt": PartFilt}
    return modelling, classes, progressbar, seeding, nd_Id_localization


def _make_method(classes, method, ensemble_size, method_params):
    params = {**_DEFAULTS.get(method, {}), **{k: v for k, v in method_params.items()
                                             if k not in _RUN_PARAMS.get(method, ())}}
    if method == "EnKF":
        return classes["EnKF"]("PertObs", ensemble_size, **params)
    if method == "EnKF_sqrt":
        return classes["EnKF"]("Sqrt", ensemble_size, **params)
    if method == "EnKF_N":
        return classes["EnKF_N"](ensemble_size, **params)
    if method == "LETKF":
        return classes["LETKF"](ensemble_size, **params)
    if method == "iEnKS":
        return classes["iEnKS"]("Sqrt", ensemble_size, **params)
    return classes["PartFilt"](ensemble_size, **params)


class _TickerWithout:
    """DAPPER's ticker, ``(k, ko, t, dt)`` at every model step, with no observation (``ko=None``) at ``cycles``."""

    def __init__(self, ticker, cycles):
        self.ticker, self.cycles = ticker, cycles

    def __len__(self):
        return len(self.ticker)

    def __iter__(self):
        return self

    def __next__(self):
        k, ko, t, dt = next(self.ticker)
        return k, (None if ko in self.cycles else ko), t, dt


def _chronology_without(chronology, cycles):
    """A subclass of DAPPER's ``chronology`` class whose ticker has no observation at ``cycles``.

    DAPPER's filters loop over ``HMM.tseq.ticker`` and analyse where it gives
    an observation index: elsewhere they only forecast.
    """

    class Chronology(chronology):
        @property
        def ticker(self):
            return _TickerWithout(super().ticker, cycles)

    return Chronology


def _time_dependent(modelling, operator_at):
    """DAPPER's time-dependent observation operator ``ko -> Operator`` (its constructor changed after 1.7)."""
    try:
        return modelling.TimeDependentOperator(time_dependent=operator_at)  # DAPPER 1.7
    except TypeError:
        return modelling.TimeDependentOperator(operator_at)


def _observations_for_dapper(modelling, nd_Id_localization, problem, localization_batch):
    """DAPPER's observation operator and observations ``yy`` for ``problem``, and the cycles it observes nothing.

    Without missing observations: one operator for all cycles and the
    observations as they are. With some: at each cycle an operator of the
    present observations alone (cached by which are present) and their
    values (``yy`` an object array, as DAPPER's own ``simulate`` makes).
    """
    n_variables, model = problem.n_variables, problem.observation_model

    def operator(indices):
        spec = modelling.partial_Id_Obs(n_variables, indices)
        # R-localisation, one local analysis per batch of neighbouring variables
        localizer = nd_Id_localization((n_variables,), (localization_batch,), obs_inds=indices)
        return {**spec, "noise": _kalman_variance(model, 1.0), "localizer": localizer}

    present = ~np.isnan(problem.observations)
    if present.all():
        return operator(model.observed), problem.observations, frozenset()
    silent = frozenset(int(k) for k in _unobserved_cycles(problem))
    full = modelling.Operator(**operator(model.observed))
    operators = {}

    def operator_at(ko):
        # never analysed: the ticker gives no ko there (the iEnKS asks for those of the cycles after the last)
        if ko in silent or ko >= problem.n_cycles:
            return full
        key = present[ko].tobytes()
        if key not in operators:
            operators[key] = modelling.Operator(**operator(model.observed[present[ko]]))
        return operators[key]

    yy = np.empty(problem.n_cycles, dtype=object)
    for ko in range(problem.n_cycles):
        yy[ko] = problem.observations[ko, present[ko]]
    return _time_dependent(modelling, operator_at), yy, silent


def _unobserved_cycles(problem):
    """The cycles of ``problem`` whose observations are all missing."""
    return np.flatnonzero(np.isnan(problem.observations).all(axis=1))


def _make_hmm(modelling, obs, silent, problem, sample_initial, spin_up):
    """DAPPER's hidden Markov model of ``problem``, with observation operator ``obs`` and none at ``silent``."""
    n_variables = problem.n_variables
    # one model step per observation interval (dko=1): yy[ko] then observes xx[ko + 1], the package's pairing
    # BurnIn (model time; DAPPER averages over observation times strictly after it) leaves out the spin-up cycles
    chronology = _chronology_without(modelling.Chronology, silent) if silent else modelling.Chronology
    tseq = chronology(dt=problem.dt_obs, dko=1, K=problem.n_cycles, BurnIn=spin_up * problem.dt_obs, Tplot=0)
    dyn = {"M": n_variables, "model": lambda states, t, dt: problem.forecast(states), "noise": 0}
    x0 = modelling.RV(M=n_variables, func=sample_initial)
    return modelling.HiddenMarkovModel(dyn, obs, tseq, x0)


@contextlib.contextmanager
def _stats_recorded(xp, recorder):
    """Inside, ``xp`` wraps the ``assess`` of every ``stats`` DAPPER gives it with ``recorder(stats)``.

    DAPPER's ``da_method`` makes ``xp.stats`` at the start of
    ``xp.assimilate``, then the method assesses its ensembles through
    ``xp.stats.assess``. Inside, ``xp``'s class is a subclass (of the same
    name, so its ``repr`` is DAPPER's) whose ``stats`` is a property: its
    setter puts the recorder in front of ``assess`` whenever DAPPER sets it,
    whatever the method does first. The class is restored on the way out.
    """
    cls = type(xp)

    class Recording(cls):
        @property
        def stats(self):
            return self.__dict__["stats"]

        @stats.setter
        def stats(self, stats):
            stats.assess = recorder(stats)
            self.__dict__["stats"] = stats

    Recording.__name__, Recording.__qualname__, Recording.__module__ = cls.__name__, cls.__qualname__, cls.__module__
    xp.__class__ = Recording
    try:
        yield
    finally:
        xp.__class__ = cls


class _Recorder:
    """Wraps ``xp.stats.assess``: scores each forecast and analysis, checks divergence, times the analysis steps.

    At a cycle without observation (in ``silent``) DAPPER only forecasts and
    assesses the ensemble at model step ``k = cycle + 1`` without an
    observation index: that forecast is the cycle's analysis.
    """

    def __init__(self, assess, problem, spin_up, silent=frozenset()):
        self.assess, self.problem, self.spin_up, self.silent = assess, problem, spin_up, silent
        self.scores = np.full((N_SCORES, problem.n_cycles), np.inf)
        self.threshold = problem.climatological_std
        self.cycle = None  # the cycle whose forecast was last assessed
        self.scored = -1  # the last cycle whose analysis was scored
        self.diverged_at = None
        self.stopped = False
        self.seconds = 0.0
        self._mark = None  # end of the last assessment of the cycle in progress (analysis time runs from there)

    def __call__(self, k, ko=None, faus=None, E=None, w=None, **kwargs):
        entered = time.perf_counter()
        if self._mark is not None:
            self.seconds += entered - self._mark
            self._mark = None
        parts = faus if faus is not None else ("u" if ko is None else "au")
        if ko is not None and "f" in parts:
            self.cycle = ko
            self.scores[FORECAST_ROWS, ko] = _forecast_scores(E, self.problem.truth[ko + 1])
            if _blew_up(E):
                self._stop(ko)
        if ko is not None and "a" in parts and ko > self.scored:
            self._score(ko, E, w)
        if ko is None and k - 1 in self.silent and k - 1 > self.scored:
            self.cycle = k - 1
            self.scores[FORECAST_ROWS, k - 1] = _forecast_scores(E, self.problem.truth[k])
            self._score(k - 1, E, w)
        out = self.assess(k, ko, faus, E=E, w=w, **kwargs)
        if ko is not None and "u" not in parts:  # the analysis of this cycle is still under way
            self._mark = time.perf_counter()
        return out

    def _score(self, ko, E, w):
        if _blew_up(E):
            self._stop(ko)
        self.scores[ANALYSIS_ROWS, ko] = _cycle_scores(E, self.problem.truth[ko + 1], w)
        self.scored = ko
        if self.diverged_at is None and _lost_truth(self.scores[0], ko, self.spin_up, self.threshold):
            self.diverged_at = ko

    def _stop(self, ko):
        self.diverged_at, self.stopped = ko, True
        raise _Stop(f"diverged at cycle {ko}")


@arrays_described
@validate_params(
    {
        "method": [Choices(DAPPER_METHODS)],
        "problem": [TwinProblem],
        "ensemble_size": [NumberInterval(Integral, 2, None, closed="left", why="a spread needs two members")],
        "spin_up": [NumberInterval(Integral, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def run_dapper(method, problem, *, ensemble_size=40, spin_up=100, random_state=None, **method_params):
    """Run one of DAPPER's filters on a twin problem and score it as :func:`twin_experiment` scores the package's.

    DAPPER assimilates ``problem.observations`` against ``problem.truth``,
    the very data a :func:`twin_experiment` on the same ``problem`` uses, with
    the same model (the problem's Lorenz-96 integrator), the same pairing
    (``observations[k]`` at the time of ``truth[k + 1]``) and the same kind of
    initial ensemble (the initial truth plus unit Gaussian noise). Its analysis
    ensemble at every cycle is scored against the truth with the package's
    RMSE, spread, CRPS and energy score, and divergence is judged by
    :data:`DIVERGENCE_RULE`. DAPPER's filters assume Gaussian observation
    noise with the variance the package's Kalman steps take (the law's, or
    ``noise_scale ** 2`` for a law without one); under heavy-tailed noise they are misspecified, which is the point of the
    comparison. A run that DAPPER aborts (for instance "Ensemble not finite"
    under Cauchy noise) is reported diverged at that cycle, not raised.

    Missing (NaN) observations are assimilated as the package's steps do:
    DAPPER assimilates the present observations of each cycle (an
    observation operator of those alone), and a cycle with none is a pure
    forecast (no analysis, no inflation); every cycle is scored. The iEnKS
    analyses every cycle, so it refuses a problem with a cycle that
    observes nothing.

    Parameters
    ----------
    method : {"EnKF", "EnKF_sqrt", "EnKF_N", "LETKF", "iEnKS", "PartFilt"}
        DAPPER's filter: ``"EnKF"`` is ``EnKF('PertObs', N)`` (perturbed
        observations), ``"EnKF_sqrt"`` is ``EnKF('Sqrt', N, rot=True)`` (the
        symmetric square-root ETKF), ``"EnKF_N"`` is ``EnKF_N(N)`` (Bocquet's
        finite-size EnKF, which estimates its own inflation), ``"LETKF"`` is ``LETKF(N, rot=True,
        loc_rad=...)``, ``"iEnKS"`` is ``iEnKS('Sqrt', N)`` (the iterative
        ensemble Kalman smoother of Bocquet and Sakov, scored by its filter
        analysis at each observation time; with ``Lag=1``, DAPPER's
        default, the iterative EnKF) and ``"PartFilt"`` is the bootstrap
        particle filter ``PartFilt(N)``. All are listed in
        :data:`DAPPER_METHODS`.
    problem : TwinProblem
        The truth and observations, from :func:`make_twin_problem` (NaN
        where an observation is missing).
    ensemble_size : int, default=40
        DAPPER's ``N``: members (particles).
    spin_up : int, default=100
        Cycles left out of the time averages (below ``problem.n_cycles``).
    random_state : int, RandomState instance or None, default=None
        Seeds the initial ensemble (drawn as :func:`twin_experiment` draws
        its own, so an integer seed gives both the same initial ensemble) and
        DAPPER's global random generator for the run (restored afterwards).
    **method_params : dict
        Passed to DAPPER's constructor. ``EnKF`` and ``EnKF_sqrt``: ``infl``
        (inflation of the analysis anomalies, default 1) and ``rot``.
        ``EnKF_N``: those and ``xN`` (the confidence in the prior, default 1).
        ``LETKF``: those, ``loc_rad`` (required; the taper is ``exp(-1/2)``
        at this distance, a Gaspari-Cohn half-width of ``1.82 * loc_rad``),
        ``taper``, ``xN`` and ``loc_batch`` (not DAPPER's constructor's:
        how many neighbouring variables share one local analysis, made at
        their centre; default 2, as DAPPER's ``Lorenz96.sakov2008``; 1 gives
        every variable its own, as the package's :class:`LETKF` does). ``iEnKS``: ``infl``, ``rot``, ``xN``, ``Lag``
        (the window, in cycles; default 1), ``nIter`` (the most Gauss-Newton
        iterations; default 10) and ``wtol`` (their tolerance; default 0,
        every iteration runs). ``PartFilt``: ``reg`` (jitter, default 0),
        ``NER`` (resample when the effective size falls to ``NER * N``,
        default 1), ``resampl``, ``nuj`` and ``wroot``. Settings tuned by
        DAPPER for the standard 40-variable problem (``dapper.mods.Lorenz96.
        sakov2008``): ``EnKF`` with ``N=40, infl=1.06`` (RMSE 0.22),
        ``EnKF_sqrt`` with ``N=24, infl=1.013`` (0.18), ``LETKF`` with
        ``N=7, infl=1.04, loc_rad=4`` (0.22), ``PartFilt`` with ``N=3000,
        reg=0.7, NER=0.5`` (0.26).

    Returns
    -------
    TwinResult
        Time-averaged and per-cycle scores of DAPPER's analysis (and RMSE and
        spread of its forecast, before each analysis), divergence, and the
        mean time of DAPPER's analysis step (inflation, rotation and
        resampling included).

    Raises
    ------
    ValueError, TypeError
        Before any work, for an unknown method, a parameter outside its
        domain, a method parameter DAPPER's filter does not take here, a
        missing ``loc_rad`` for ``LETKF``, ``spin_up >= problem.n_cycles``,
        or a cycle without observations for ``iEnKS``.
    ImportError
        When DAPPER is not installed: ``pip install sklearn-measattn[assimilation]``.

    See Also
    --------
    twin_experiment : The package's filters on the same problem.

    Examples
    --------
    DAPPER is an optional dependency (``pip install sklearn-measattn[assimilation]``);
    the lines that need it are not run here.

    >>> from sklearn_measattn.assimilation import make_twin_problem, run_dapper, twin_experiment
    >>> problem = make_twin_problem(n_variables=10, n_cycles=300, random_state=0)
    >>> ours = twin_experiment("enkf", problem, ensemble_size=20, random_state=0)
    >>> theirs = run_dapper("EnKF", problem, ensemble_size=20, infl=1.02, random_state=0)  # doctest: +SKIP
    >>> bool(abs(theirs.rmse - ours.rmse) < 0.5 * ours.rmse)  # doctest: +SKIP
    True
    """
    problem._check_data()  # checked when made; its arrays may have been changed in place since
    if spin_up >= problem.n_cycles:
        raise InvalidParameterError(
            f"spin_up={spin_up} leaves no cycle to score: it must be below problem.n_cycles ({problem.n_cycles})."
        )
    _check_method_params(method, method_params)
    if method == "iEnKS":
        silent = _unobserved_cycles(problem)
        if silent.size:
            raise ValueError(
                f"DAPPER's iEnKS analyses every cycle, but {silent.size} cycle(s) of this problem observe nothing "
                f"(the first: {silent[0]}): give each cycle at least one observation, or run a filter that "
                f"forecasts through such cycles ({', '.join(m for m in DAPPER_METHODS if m != 'iEnKS')})."
            )
    return _run_dapper(method, problem, ensemble_size=ensemble_size, spin_up=spin_up, random_state=random_state,
                       method_params=method_params)[0]


def _run_dapper(method, problem, *, ensemble_size, spin_up, random_state, method_params):
    """The work of :func:`run_dapper` (arguments checked): its result and DAPPER's ``xp`` (with ``xp.stats``)."""
    modelling, classes, progressbar, seeding, nd_Id_localization = _import_dapper()
    xp = _make_method(classes, method, ensemble_size, method_params)

    rng = check_random_state(random_state)
    initial = problem.truth[0] + rng.standard_normal((ensemble_size, problem.n_variables))  # as twin_experiment
    obs, yy, silent = _observations_for_dapper(
        modelling, nd_Id_localization, problem,
        localization_batch=method_params.get("loc_batch", _DAPPER_LOCALIZATION_BATCH))
    recorders = []

    def recorder(stats):
        recorders.append(_Recorder(stats.assess, problem, spin_up, silent))
        return recorders[-1]

    def sample_initial(n_members):
        return initial.copy()

    hmm = _make_hmm(modelling, obs, silent, problem, sample_initial, spin_up)
    saved_state, saved_progbar = seeding.rng.bit_generator.state, progressbar.disable_progbar
    seeding.set_seed(int(rng.randint(1, 2**31 - 1)))  # DAPPER's global generator (it refuses the seed 0)
    progressbar.disable_progbar = True
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"), _stats_recorded(xp, recorder):
            xp.assimilate(hmm, problem.truth, yy)
    except _Stop:
        pass
    except (RuntimeError, ArithmeticError, ValueError, np.linalg.LinAlgError):
        # DAPPER gave up in an analysis ("Ensemble not finite", a singular or non-finite matrix): diverged there
        if not recorders or recorders[0].cycle is None:
            raise
        recorders[0].diverged_at, recorders[0].stopped = recorders[0].cycle, True
    finally:
        seeding.rng.bit_generator.state = saved_state
        progressbar.disable_progbar = saved_progbar
    recorder = recorders[0]
    if recorder.stopped:
        recorder.scores[ANALYSIS_ROWS, recorder.diverged_at :] = np.inf  # no forecast ran after it
    result = _summarize(recorder.scores, diverged_at=recorder.diverged_at, spin_up=spin_up,
                        ensemble_size=ensemble_size, seconds=recorder.seconds, name=f"DAPPER {xp!r}")
    return result, xp


# --------------------------------------------------------------------------- #
# The package's analysis steps as DAPPER methods
# --------------------------------------------------------------------------- #
#: The name of the DAPPER method class :func:`dapper_method` makes (its ``da_method`` in DAPPER's tables).
_METHOD_CLASS = "AnalysisStepMethod"
_MIN_VARIABLES = 4  # ObservationModel's least state dimension


def _import_da_method():
    with _dapper_imports("dapper_method"):
        from dapper.da_methods import da_method
        from dapper.da_methods.ensemble import add_noise
        from dapper.tools import seeding
        from dapper.tools.progressbar import progbar
        from dapper.tools.randvars import GaussRV
    return da_method, add_noise, seeding, progbar, GaussRV


def _direct_indices(operator, n_variables, ko):
    """The state indices a DAPPER observation operator observes, when it observes them directly; else an error.

    Probed on the unit vectors and on random states: a direct observation
    ``x -> x[indices]`` (DAPPER's ``partial_Id_Obs`` and ``Id_Obs``) gives
    back the observed entries exactly.
    """
    size = getattr(operator, "M", None)
    refusal = (
        f"HMM.Obs({ko}) is not a direct observation of state variables (x -> x[indices], as DAPPER's "
        "partial_Id_Obs and Id_Obs make): the package's analysis steps take observations of that kind only"
    )
    states = np.random.default_rng(0).standard_normal((3, n_variables))
    try:
        with np.errstate(all="ignore"):
            units = np.asarray(operator(np.eye(n_variables)), dtype=np.float64)
            probed = np.asarray(operator(states), dtype=np.float64)
    except Exception as error:  # an operator of another state dimension, or not of ensembles
        raise ValueError(f"{refusal}; probing it on ensembles of {n_variables} variables failed ({error}).") from error
    if not isinstance(size, Integral) or size < 1 or units.shape != (n_variables, size) or probed.shape != (3, size):
        raise ValueError(f"{refusal}; it maps an ensemble of shape ({n_variables}, {n_variables}) to one of shape "
                         f"{units.shape} (M={size!r}).")
    indices = np.argmax(units, axis=0)
    if (len(set(indices.tolist())) != size or not np.allclose(units, np.eye(n_variables)[:, indices], rtol=0, atol=1e-12)
            or not np.allclose(probed, states[:, indices], rtol=1e-12, atol=1e-12)):
        raise ValueError(f"{refusal}. Pass observation_model= (an ObservationModel of your own) to say what it observes "
                         "if the observations are direct after all.")
    return indices


def _gaussian_scale(noise, ko, gaussian):
    """``noise_scale`` of a DAPPER observation noise that is centred, Gaussian and of one variance; else an error."""
    advice = "; pass observation_model= to assimilate with a noise law of the package's (and simulate yy from it)."
    if not isinstance(noise, gaussian):
        raise ValueError(f"HMM.Obs({ko}).noise is a {type(noise).__name__}: the package's Gaussian observation model "
                         f"takes a GaussRV only{advice}")
    if np.any(np.asarray(noise.mu) != 0):
        raise ValueError(f"HMM.Obs({ko}).noise has a non-zero mean: the package's observation noise is centred{advice}")
    covariance = 0.0 if np.isscalar(noise.C) else np.atleast_2d(np.asarray(noise.C.full, dtype=np.float64))
    variance = float(np.ravel(covariance)[0]) if np.size(covariance) else 0.0
    if not (variance > 0 and np.allclose(covariance, variance * np.eye(noise.M), rtol=1e-12, atol=0)):
        raise ValueError(f"HMM.Obs({ko}).noise is not independent with one positive variance for every observation "
                         f"(covariance {_describe_covariance(covariance)}): the package's observation model has one "
                         f"noise_scale{advice}")
    return float(np.sqrt(variance))


def _describe_covariance(covariance):
    covariance = np.atleast_2d(covariance)
    if covariance.size == 1:
        return repr(float(covariance.ravel()[0]))
    diagonal = np.diag(covariance)
    off = np.abs(covariance - np.diag(diagonal)).max()
    return f"diagonal from {diagonal.min():g} to {diagonal.max():g}, largest off-diagonal {off:g}"


def _observation_models(xp, HMM, xx, yy, gaussian):
    """The package's observation model at every observation time ``ko``, all checked before any cycle.

    Returns a list, one :class:`ObservationModel` per ``ko`` (the same
    object where DAPPER's operator is the same).
    """
    n_variables = int(HMM.Nx)
    xx = np.asarray(xx)
    if xx.ndim != 2 or xx.shape != (HMM.tseq.K + 1, n_variables):
        raise ValueError(f"xx must be the truth of shape (HMM.tseq.K + 1, HMM.Nx) = ({HMM.tseq.K + 1}, {n_variables}) "
                         f"(HMM.simulate() makes it); got {describe(xx)}.")
    if not hasattr(yy, "__len__") or len(yy) != HMM.tseq.Ko + 1:
        raise ValueError(f"yy must hold HMM.tseq.Ko + 1 = {HMM.tseq.Ko + 1} observations, one per observation time "
                         f"(HMM.simulate() makes it); got {describe(yy)}.")
    given = xp.observation_model
    if given is not None and given.n_variables != n_variables:
        raise ValueError(f"observation_model has n_variables={given.n_variables}, the HMM's state has "
                         f"HMM.Nx={n_variables} variables.")
    if given is None and n_variables < _MIN_VARIABLES:
        raise ValueError(f"The package's observation model needs at least {_MIN_VARIABLES} state variables; the HMM "
                         f"has {n_variables}.")
    models, by_operator = [], {}
    for ko in range(len(yy)):
        if given is not None:
            model = given
        else:
            operator = HMM.Obs(ko)
            # the operator kept with its model: a time-dependent HMM.Obs may make a new one at every ko, and the id
            # of one that was let go could be another's
            _, model = by_operator.get(id(operator), (None, None))
            if model is None:
                model = ObservationModel(n_variables=n_variables, observed=_direct_indices(operator, n_variables, ko),
                                         noise="gaussian", noise_scale=_gaussian_scale(operator.noise, ko, gaussian))
                by_operator[id(operator)] = operator, model
        try:
            model.present(np.asarray(yy[ko], dtype=np.float64))
        except (TypeError, ValueError) as error:
            raise ValueError(f"yy[{ko}] does not fit the observation model {model!r}: {error}") from error
        models.append(model)
    return models


@functools.cache
def _method_class():
    """The DAPPER method class, made with DAPPER's ``da_method`` decorator the first time it is asked for."""
    da_method, add_noise, seeding, progbar, gaussian = _import_da_method()

    class AnalysisStepMethod:
        """One of the package's analysis steps as a DAPPER method: made by :func:`dapper_method`."""

        step: object
        N: int = 40
        observation_model: object = None
        random_state: object = None

        def __post_init__(self):
            _check_method_arguments(self.step, self.N, self.observation_model, self.random_state)

        def assimilate(self, HMM, xx, yy):
            models = _observation_models(self, HMM, xx, yy, gaussian)
            E = HMM.X0.sample(self.N)  # first, as DAPPER's ensemble methods: the same seed, the same ensemble
            random_state = self.random_state
            if random_state is None:  # from DAPPER's generator, after the initial ensemble: set_seed reproduces a run
                random_state = int(seeding.rng.integers(1, 2**31 - 1))
            random_state = check_random_state(random_state)
            steps = {}
            self.stats.assess(0, E=E)
            for k, ko, t, dt in progbar(HMM.tseq.ticker):  # named by DAPPER after xp.da_method
                E = HMM.Dyn(E, t - dt, dt)
                E = add_noise(E, dt, HMM.Dyn.noise, "Stoch")
                if ko is not None:
                    self.stats.assess(k, ko, "f", E=E)
                    model = models[ko]
                    step = steps.get(id(model))
                    if step is None:
                        step = steps[id(model)] = resolve_analysis(self.step, model, random_state=random_state)
                    analysis = np.asarray(step(E, np.asarray(yy[ko], dtype=np.float64)), dtype=np.float64)
                    if analysis.shape != E.shape:
                        raise ValueError(f"The analysis step returned an ensemble of shape {analysis.shape}; the "
                                         f"forecast's is {E.shape}.")
                    E = analysis
                self.stats.assess(k, ko, E=E)

    cls = da_method()(AnalysisStepMethod)
    cls.__module__, cls.__qualname__ = __name__, _METHOD_CLASS  # pickled by name (module __getattr__ below)
    return cls


def __getattr__(name):
    if name == _METHOD_CLASS:  # the DAPPER method class, made when DAPPER is there (unpickling asks for it)
        return _method_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_STEP = [Choices(tuple(ANALYSIS_NAMES)), callable, AnalysisStep]
_METHOD_CONSTRAINTS = {
    "step": _STEP,
    "ensemble_size": [NumberInterval(Integral, 2, None, closed="left", why="a spread needs two members")],
    "observation_model": [ObservationModel, None],
    "random_state": ["random_state"],
}


def _check_method_arguments(step, ensemble_size, observation_model, random_state):
    arguments = {"step": step, "ensemble_size": ensemble_size, "observation_model": observation_model,
                 "random_state": random_state}
    refuse_array_likes(_METHOD_CONSTRAINTS, arguments, "dapper_method")
    validate_parameter_constraints(_METHOD_CONSTRAINTS, arguments, caller_name="dapper_method")
    if isinstance(step, AnalysisStep):
        step._check_parameters()


def dapper_method(step, *, ensemble_size=40, observation_model=None, random_state=None):
    """One of the package's analysis steps as a DAPPER method (an ``xp``, as DAPPER's ``EnKF(...)`` is).

    The returned object is made with DAPPER's own ``da_method`` decorator, so
    that ``xp.assimilate(HMM, xx, yy)``, ``xp.stats``,
    ``xp.stats.average_in_time()``, ``xp.avrgs``, ``xpList`` (its tables and
    ``launch``) and DAPPER's plots take it as they take DAPPER's filters. Its
    ``da_method`` is ``"AnalysisStepMethod"`` and its fields, in DAPPER's
    tables, are ``step``, ``N`` (the ensemble size), ``observation_model`` and
    ``random_state``.

    ``assimilate`` runs DAPPER's ensemble loop: the initial ensemble is
    ``HMM.X0.sample(N)`` (DAPPER's first draw, as in its ``EnKF``: under the
    same seed both start from the same ensemble); at every model step the
    ensemble is forecast with ``HMM.Dyn`` (and DAPPER's model noise, if any,
    added stochastically); at every observation time ``ko`` the forecast is
    assessed (``xp.stats.assess(k, ko, "f", E=E)``), the step makes the
    analysis ``step(forecast, yy[ko])``, and the analysis is assessed
    (``"a"``, and ``"u"``), as DAPPER's filters are. The step's own
    inflation and localisation apply (DAPPER's ``infl`` and ``rot`` are not
    there: a step inflates the forecast itself). NaN entries of ``yy[ko]``
    are missing observations, as in the package.

    The observation model the step is bound to comes from ``HMM.Obs(ko)``: it
    must be a direct observation of state variables (``x -> x[indices]``, as
    DAPPER's ``partial_Id_Obs`` and ``Id_Obs`` make; ``Lorenz96.sakov2008``
    observes all 40) with Gaussian, centred, independent noise of one
    variance ``sigma ** 2`` (``ObservationModel(noise="gaussian",
    noise_scale=sigma)``). Other operators and noises are refused, before any
    cycle. A time-dependent ``HMM.Obs`` gives one bound step per operator.

    ``observation_model`` overrides all of that: the step is bound to it at
    every observation time, whatever ``HMM.Obs`` says. That is how a step
    learns a law DAPPER's hidden Markov models do not have (its observation
    noise is Gaussian), such as Cauchy noise for
    :class:`RankHistogramFilter`. The observations ``yy`` must then be drawn
    from that law, not by ``HMM.simulate()``: for instance
    ``yy[ko] = observation_model.sample(xx[HMM.tseq.kko[ko]], rng)``, or a
    :class:`TwinProblem`'s, or your own.

    Parameters
    ----------
    step : AnalysisStep, str or callable
        The analysis step (:class:`SerialEnKF`, :class:`RankHistogramFilter`,
        :class:`LearnedAnalysis`, a subclass of :class:`AnalysisStep` of your
        own...), a name in :data:`ANALYSIS_NAMES`, or a callable
        ``(forecast_ensemble, observation) -> analysis_ensemble`` (given
        ``observation_model`` and ``random_state`` if its signature takes
        them), as :func:`twin_experiment` takes. Its parameters are checked
        here; it is bound (a copy) at the start of each ``assimilate``.
    ensemble_size : int, default=40
        DAPPER's ``N``: members, at least 2.
    observation_model : ObservationModel or None, default=None
        The observed variables and noise law the step works with, instead of
        those of ``HMM.Obs`` (above); ``n_variables`` must be ``HMM.Nx``.
    random_state : int, RandomState instance or None, default=None
        The step's randomness (perturbed observations, resampling). None:
        seeded from DAPPER's global generator after the initial ensemble is
        drawn, so that DAPPER's ``set_seed`` (and ``xp.seed`` in
        ``xpList.launch``) reproduces a run.

    Returns
    -------
    AnalysisStepMethod
        The DAPPER method: a dataclass made by DAPPER's ``da_method``, with
        ``assimilate(HMM, xx, yy, desc=None, fail_gently=False, **stat_kwargs)``.

    Raises
    ------
    ValueError, TypeError
        For a step, ensemble size, observation model or random state outside
        its domain, or a step parameter outside its own (checked before DAPPER
        is imported).
    ImportError
        When DAPPER is not installed: ``pip install sklearn-measattn[assimilation]``.
    ValueError
        From ``assimilate``, before the first cycle: for an observation
        operator that is not a direct observation of state variables, a noise
        that is not centred Gaussian with one variance, or ``xx``, ``yy`` or
        ``observation_model`` that do not fit ``HMM``.

    See Also
    --------
    run_dapper : DAPPER's filters on the package's twin problems.

    Examples
    --------
    DAPPER is an optional dependency (``pip install sklearn-measattn[assimilation]``);
    the lines that need it are not run here. The serial filter and the rank
    histogram filter on DAPPER's standard Lorenz-96 setting, shortened, beside
    DAPPER's square-root EnKF, on the same truth and observations:

    >>> import dapper  # doctest: +SKIP
    >>> import dapper.mods as modelling  # doctest: +SKIP
    >>> from dapper.da_methods import EnKF  # doctest: +SKIP
    >>> from dapper.mods.Lorenz96.sakov2008 import HMM  # doctest: +SKIP
    >>> from dapper.tools.seeding import set_seed  # doctest: +SKIP
    >>> from sklearn_measattn.assimilation import RankHistogramFilter, SerialEnKF, dapper_method
    >>> HMM = HMM.copy()  # doctest: +SKIP
    >>> HMM.tseq = modelling.Chronology(0.05, dko=1, Ko=60, BurnIn=1, Tplot=1)  # doctest: +SKIP
    >>> set_seed(3)  # doctest: +SKIP
    >>> xx, yy = HMM.simulate()  # doctest: +SKIP
    >>> xps = dapper.xpList([EnKF("Sqrt", N=20, infl=1.02),  # doctest: +SKIP
    ...                         dapper_method(SerialEnKF(inflation=1.02), ensemble_size=20),
    ...                         dapper_method(RankHistogramFilter(), ensemble_size=20)])
    >>> for xp in xps:  # doctest: +SKIP
    ...     set_seed(3)
    ...     xp.assimilate(HMM, xx, yy)
    ...     xp.stats.average_in_time()
    >>> [bool(xp.avrgs.err.rms.a.val < 0.5) for xp in xps]  # doctest: +SKIP
    [True, True, True]
    >>> print(xps.tabulate_avrgs(["rmse.a", "rmv.a"], colorize=False))  # doctest: +SKIP
    """
    _check_method_arguments(step, ensemble_size, observation_model, random_state)
    _import_da_method()  # DAPPER there now (the class, once made, is kept)
    return _method_class()(step=step, N=ensemble_size, observation_model=observation_model, random_state=random_state)
