"""The local learned analysis: every grid point's window of the forecast ensemble is one measure, one batched call a cycle.

For grid point ``i`` the members' local window (the forecast within
``window_radius`` variables of ``i``, the observations inside it as
innovations, which of them are present, the noise scale and tail, and the
member's local ETKF analysis at ``i``) is one measure of ``N`` points; the
network maps it to the ``N`` analysis members at ``i``. The local analyses are
independent given the forecast, as in the LETKF, so all grid points go through
the network together: one forward pass per cycle.
"""

from __future__ import annotations

import copy
import sys
import time
from numbers import Integral, Real

import numpy as np
import torch
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils import check_random_state, gen_even_slices
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._lorenz96 import CauchyNoise, GaussianNoise, StudentTNoise, as_noise_laws
from .._param_validation import HasMethods, validate_parameter_constraints, validate_params
from .._threads import torch_threads
from .._validation import N_JOBS, Choices, NumberInterval
from ..estimator import MeasureTransformerRegressor, fitted_network
from ._baselines import INFLATION, AnalysisStep, _inflated, _kalman_variance
from ._letkf import (
    LETKF,
    clipped_innovation,
    local_transform,
    observation_weights,
    student_t_variance,
    student_t_weights,
)
from ._problem import make_twin_problem
from ._twin import twin_experiment

__all__ = ["LOCAL_ANALYSIS_FEATURES", "LocalLearnedAnalysis", "fit_local_analysis", "local_analysis_features",
           "make_local_analysis_data", "record_forecasts"]

#: The per-position feature groups of a local window, in order after ``letkf`` (one column per window position each).
_WINDOW_GROUPS = ("anomaly", "member_innovation", "innovation", "observed", "log_spread_ratio")
#: The features of every member of a local window, in order: its local ETKF analysis at the grid point, then for
#: each of the ``2 w + 1`` window positions (offsets ``-w .. w``) the member's anomaly, its own innovation
#: ``asinh((o - x) / noise_scale)``, the ensemble's innovation ``asinh((o - mean) / s)``, whether the position is
#: observed, ``log(s_position / s)``; then ``log(noise_scale / s)`` and the noise tail (``s`` is the forecast spread
#: at the grid point; unobserved positions have innovations 0).
LOCAL_ANALYSIS_FEATURES = ("letkf", *(f"{group}[offset]" for group in _WINDOW_GROUPS), "log_noise_ratio", "noise_tail")

#: What x -> -x does to each column group: the member terms change sign, the rest do not.
_REFLECTED_GROUPS = {"letkf": -1.0, "anomaly": -1.0, "member_innovation": -1.0, "innovation": -1.0, "observed": 1.0,
                     "log_spread_ratio": 1.0, "log_noise_ratio": 1.0, "noise_tail": 1.0}

_SPREAD_FLOOR = 1e-8


def n_local_features(window_radius):
    """The number of features of a local window of half-width ``window_radius``."""
    return 3 + len(_WINDOW_GROUPS) * (2 * window_radius + 1)


def _reflection(window_radius):
    width = 2 * window_radius + 1
    signs = [_REFLECTED_GROUPS["letkf"]]
    for group in _WINDOW_GROUPS:
        signs += [_REFLECTED_GROUPS[group]] * width
    return np.array(signs + [1.0, 1.0])


def local_analysis_features(forecast, observation, observed, *, noise_scale, noise_tail, window_radius=4,
                            localization_radius=4.0, observation_variance=None, noise_ratio_range=(0.05, 20.0),
                            clip=3.0, student_t=False):
    """The local windows of every grid point of a forecast ensemble, as measures for a learned local analysis.

    Parameters
    ----------
    forecast : ndarray of shape (n_members, n_variables)
        The forecast ensemble on the ring of variables (inflated already, if at all).
    observation : ndarray of shape (n_observed,)
        The observations of ``observed``, finite (missing ones left out).
    observed : ndarray of int of shape (n_observed,)
        Their variables.
    noise_scale : float
        Scale of the observation noise.
    noise_tail : float
        Tail of the noise law (``ObservationModel.tail``: 0 Gaussian, 1 Cauchy).
    window_radius : int, default=4
        Half-width ``w`` of the window: the variables ``i - w .. i + w``.
    localization_radius : float or None, default=4.0
        Gaspari-Cohn half-width of the local ETKF analysis of the ``letkf`` feature.
    observation_variance : float or None, default=None
        The variance that analysis assumes (with ``student_t`` and a heavy
        tail, the square of the scale of the Student-t errors the weights
        assume); None: ``noise_scale ** 2``.
    noise_ratio_range : (float, float) or None, default=(0.05, 20.0)
        ``noise_scale / s`` is clipped to it in ``log_noise_ratio``.
    clip : float or None, default=3.0
        The local ETKF analysis of the ``letkf`` feature clips each
        innovation at this many innovation standard deviations (as
        ``LETKF(clip=...)``), so that one gross observation error does not
        throw the analysis the network corrects far off; None: no clipping.
    student_t : bool, default=False
        Weight each observation's precision in that analysis by the
        Student-t expectation of its error's precision given its innovation
        (as ``LETKF(student_t=True)``, with ``df = 1 / noise_tail`` and the
        variance ``observation_variance``), so that a gross error's pull
        fades; no change under Gaussian noise (``noise_tail=0``).

    Returns
    -------
    features : ndarray of shape (n_variables, n_members, n_features)
        One measure per grid point, the columns of :data:`LOCAL_ANALYSIS_FEATURES`.
    centre, scale : ndarray of shape (n_variables,)
        The forecast mean and spread at each grid point: a standardised output ``u`` means ``centre + scale * u``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import local_analysis_features
    >>> forecast = np.random.default_rng(0).standard_normal((10, 40))
    >>> features, centre, scale = local_analysis_features(forecast, np.zeros(10), np.arange(0, 40, 4),
    ...                                                   noise_scale=1.0, noise_tail=0.0, window_radius=2)
    >>> features.shape, centre.shape
    ((40, 10, 28), (40,))
    """
    n_members, n_variables = forecast.shape
    mean = forecast.mean(axis=0)
    anomalies = forecast - mean
    spread = np.maximum(anomalies.std(axis=0, ddof=1), _SPREAD_FLOOR)
    heavy = student_t and noise_tail > 0
    variance = noise_scale**2 if observation_variance is None else observation_variance
    innovation = observation - mean[observed]
    precision = observation_weights(n_variables, observed, localization_radius)
    if heavy:
        precision = precision * student_t_weights(anomalies[:, observed], innovation, variance, noise_tail)
    precision = precision / variance
    innovation = clipped_innovation(anomalies[:, observed], innovation, variance, clip)
    letkf = local_transform(anomalies, anomalies[:, observed], innovation, precision)
    window = (np.arange(n_variables)[:, None] + np.arange(-window_radius, window_radius + 1)[None, :]) % n_variables
    present = np.zeros(n_variables, dtype=bool)
    present[observed] = True
    full_observation = np.zeros(n_variables)
    full_observation[observed] = observation
    mask = present[window].astype(np.float64)  # (n_variables, width)
    window_spread = spread[:, None]
    member_anomaly = np.transpose(anomalies[:, window], (1, 0, 2)) / window_spread[:, :, None]  # (n, N, width)
    member_innovation = np.arcsinh((full_observation[window][:, None, :] - forecast[:, window].transpose(1, 0, 2))
                                   / noise_scale) * mask[:, None, :]
    innovation = np.arcsinh((full_observation[window] - mean[window]) / window_spread) * mask
    log_spread_ratio = np.log(spread[window] / window_spread)
    ratio = noise_scale / spread
    if noise_ratio_range is not None:
        ratio = np.clip(ratio, *noise_ratio_range)
    shared = np.concatenate([innovation, mask, log_spread_ratio, np.log(ratio)[:, None],
                             np.full((n_variables, 1), float(noise_tail))], axis=1)
    features = np.concatenate([
        (letkf.T / spread[:, None])[:, :, None], member_anomaly, member_innovation,
        np.broadcast_to(shared[:, None, :], (n_variables, n_members, shared.shape[1])),
    ], axis=2)
    return features, mean, spread


def _checked_recipe(estimator):
    recipe = getattr(estimator, "analysis_recipe_", None)
    if not isinstance(recipe, dict) or recipe.get("kind") != "local":
        raise ValueError(
            "LocalLearnedAnalysis needs a model trained for it, which records how to read it (its window, "
            "localisation and noise-ratio range) in analysis_recipe_: train one with fit_local_analysis(...), or "
            "load one saved from it with load_model; this estimator has "
            f"{'no recipe' if recipe is None else f'the recipe {recipe!r}'}."
        )
    n_in = getattr(estimator, "n_features_in_", None)
    expected = n_local_features(recipe["window_radius"])
    if n_in != expected or getattr(estimator, "n_features_out_", 1) != 1:
        raise ValueError(
            f"The model's recipe has window_radius={recipe['window_radius']}, which makes {expected} features and "
            f"one output, but the model has n_features_in_={n_in}, n_features_out_="
            f"{getattr(estimator, 'n_features_out_', None)}: the recipe does not belong to this model."
        )
    return {"letkf_student_t": False, **recipe}  # recipes written before the Student-t weights have no such key


class LocalLearnedAnalysis(AnalysisStep):
    """The local learned analysis: a measure-to-measure network maps each grid point's window to its analysis.

    For every grid point ``i``, the forecast members restricted to the window
    ``i - w .. i + w`` (``w`` the model's ``window_radius``), the present
    observations inside it as innovations, their noise scale and tail, and
    each member's local ETKF analysis at ``i`` make one measure of ``N``
    points (:func:`local_analysis_features`); the network returns the ``N``
    analysis members at ``i``, each as a correction of that member's local
    ETKF analysis (the network is residual on it, so an untrained correction
    is the LETKF). The analyses of all grid points are independent given the
    forecast and go through the network in one batch: a cycle costs one
    forward pass of ``n_variables`` measures. The features are in units of
    the forecast spread, so one weight set serves any ensemble size, number
    of variables, observation density, noise scale and (through the tail
    feature) noise law; missing (NaN) observations are left out of the
    window, and a cycle without any keeps the forecast.

    Parameters
    ----------
    estimator : MeasureTransformerRegressor
        A model trained by :func:`fit_local_analysis` (or loaded from its
        file with :func:`~sklearn_measattn.load_model`): its
        ``analysis_recipe_`` says how to read it.
    inflation : float or None, default=None
        Multiplicative inflation of the forecast anomalies before the
        analysis, in [1, 10]; None: the recipe's (1.0).
    localization_radius : float or None, default=None
        Gaspari-Cohn half-width of the local ETKF analysis the network
        corrects; None: the one it was trained with.
    reflect : bool or "auto", default="auto"
        Average each member's analysis with the reflected problem's (``x ->
        -x``, in the same batch): exact for Bayes' rule under a symmetric
        noise law. ``"auto"``: when the observation model's law is symmetric.
    correction_weight : float, default=1.0
        How much of the network's correction of each member's local ETKF
        analysis is applied, in [0, 1]: the analysis is that member's local
        ETKF analysis plus ``correction_weight`` times the correction. 1
        takes the network's analysis as it is, 0 gives the LETKF (with the
        recipe's innovation clipping or Student-t weights). Tuned like the inflation: the network
        is trained on one step from calibrated forecasts, and in a cycle its
        correction can add more spread than the filter's errors need, most
        where the LETKF is already close to right (observations dense and
        frequent); a weight below 1 damps that.

    Attributes
    ----------
    recipe_ : dict
        The model's recipe (window radius, localisation, noise-ratio range, how it was trained).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import LocalLearnedAnalysis, make_twin_problem, twin_experiment
    >>> from sklearn_measattn.assimilation import pretrained_analysis
    >>> step = pretrained_analysis("local")
    >>> isinstance(step, LocalLearnedAnalysis)
    True
    >>> problem = make_twin_problem(n_variables=40, observed="every_other", n_cycles=60, random_state=0)
    >>> result = twin_experiment(step, problem, spin_up=20, ensemble_size=10, random_state=0)
    >>> bool(result.rmse < 1.0)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["predict"])],
        "inflation": [INFLATION, None],
        "localization_radius": [NumberInterval(Real, 0, None, closed="neither"), None],
        "reflect": ["boolean", Choices(("auto",))],
        "correction_weight": [NumberInterval(Real, 0, 1, closed="both",
                                             why="the share of the network's correction applied")],
    }

    def __init__(self, estimator, *, inflation=None, localization_radius=None, reflect="auto", correction_weight=1.0):
        self.estimator = estimator
        self.inflation = inflation
        self.localization_radius = localization_radius
        self.reflect = reflect
        self.correction_weight = correction_weight

    def _prepare(self):
        if not isinstance(self.estimator, MeasureTransformerRegressor):
            raise TypeError(
                f"LocalLearnedAnalysis runs a MeasureTransformerRegressor's network; got {type(self.estimator).__name__}."
            )
        check_is_fitted(self.estimator)
        self.recipe_ = recipe = _checked_recipe(self.estimator)
        model = self.observation_model_
        self.inflation_ = recipe["inflation"] if self.inflation is None else self.inflation
        self.localization_radius_ = recipe["localization_radius"] if self.localization_radius is None \
            else self.localization_radius
        self.reflect_ = model.symmetric if self.reflect == "auto" else self.reflect
        self.noise_tail_ = model.tail
        self.observation_variance_ = _etkf_variance_of(model.law, model.noise_scale,
                                                       student_t=self.recipe_["letkf_student_t"])
        self._reflection = _reflection(recipe["window_radius"])
        self._network = fitted_network(self.estimator)

    def analyse(self, forecast, observation):
        forecast = _inflated(forecast, self.inflation_)
        model = self.observation_model_
        features, centre, scale = local_analysis_features(
            forecast, observation, model.observed, noise_scale=model.noise_scale, noise_tail=self.noise_tail_,
            window_radius=self.recipe_["window_radius"], localization_radius=self.localization_radius_,
            observation_variance=self.observation_variance_,
            noise_ratio_range=tuple(self.recipe_["noise_ratio_range"]), clip=self.recipe_["letkf_clip"],
            student_t=self.recipe_["letkf_student_t"],
        )
        n_variables = features.shape[0]
        batch = np.concatenate([features, features * self._reflection]) if self.reflect_ else features
        with torch_threads(1), torch.inference_mode():
            out = self._network.run(batch)[..., 0]
        if self.reflect_:
            out = 0.5 * (out[:n_variables] - out[n_variables:])
        if self.correction_weight != 1.0:
            letkf = features[:, :, 0]
            out = letkf + self.correction_weight * (out - letkf)
        return (centre[:, None] + scale[:, None] * out).T


@validate_params(
    {
        "ensemble_sizes": [list, tuple],
        "n_variables": [NumberInterval(Integral, 8, None, closed="left")],
        "dt_obs": [list, tuple],
        "observation_spacings": [list, tuple],
        "n_cycles": [NumberInterval(Integral, 1, None, closed="left")],
        "spin_up": [NumberInterval(Integral, 0, None, closed="left")],
        "every": [NumberInterval(Integral, 1, None, closed="left")],
        "analysis": [HasMethods(["analyse", "bind"]), None],
        "noise": "no_validation",
        "return_truth": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    },
    prefer_skip_nested_validation=True,
)
def record_forecasts(*, ensemble_sizes=(10, 20, 40), n_variables=40, dt_obs=(0.05, 0.1, 0.15),
                     observation_spacings=(1, 2, 4), n_cycles=800, spin_up=100, every=3, analysis=None, noise=None,
                     return_truth=False, random_state=None, n_jobs=None):
    """Forecast ensembles of ``N + 1`` members recorded from cycled runs of a filter, the priors of local training pairs.

    For every ensemble size ``N``, observation interval, spacing of the
    observed variables (every ``k``-th) and noise law, a Lorenz-96 twin
    problem is run by ``analysis`` (a :class:`LETKF` by default) with ``N +
    1`` members, and every ``every``-th forecast after ``spin_up`` is kept.
    The recipe does not use their truth: one member of each ensemble
    becomes the stand-in truth (:func:`make_local_analysis_data`); with
    ``return_truth`` the truth comes too, to train against it where it is
    known. Recording from the
    cycle of a trained :class:`LocalLearnedAnalysis` under heavy-tailed
    noise gives the priors it meets in its own cycle, which a LETKF under
    Gaussian noise does not reach; :func:`fit_local_analysis` can train
    further on them (``warm_start``).

    Parameters
    ----------
    ensemble_sizes : sequence of int, default=(10, 20, 40)
        The ``N`` of the training pairs (each run has ``N + 1`` members).
    n_variables : int, default=40
        Lorenz-96 variables.
    dt_obs : sequence of float, default=(0.05, 0.1, 0.15)
        Observation intervals.
    observation_spacings : sequence of int, default=(1, 2, 4)
        Every ``k``-th variable observed in the recorded runs.
    n_cycles, spin_up, every : int
        Cycles per run, cycles before the first recorded forecast, and the
        recording period.
    analysis : AnalysisStep or None, default=None
        The filter that cycles; None: ``LETKF(inflation=1.1, localization_radius=4.0)``.
    noise : NoiseLaw, ObservationModel, list of them or None, default=None
        The observation-noise laws of the runs (one run per law and
        setting); None: Gaussian of scale 1.
    return_truth : bool, default=False
        Return the truth at each kept forecast too.
    random_state : int, RandomState instance or None, default=None
        Seeds the runs.
    n_jobs : int or None, default=None
        The runs go through :class:`joblib.Parallel` with this many workers
        (joblib's convention: None is 1 unless a backend context says
        otherwise, -1 all cores). Every run's seeds are drawn before any
        run, and every run does its linear algebra on one thread, in a
        worker or not, so the forecasts do not depend on ``n_jobs``.

    Returns
    -------
    forecasts : list of ndarray
        The forecasts, each ``(N + 1, n_variables)``, run by run in the
        order of the loops above (a run that blows up stops adding them).
    truths : list of ndarray
        With ``return_truth`` only: the truth ``(n_variables,)`` at each forecast.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import CauchyNoise, GaussianNoise, record_forecasts
    >>> forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
    ...                              n_cycles=30, spin_up=10, every=5, random_state=0)
    >>> len(forecasts), forecasts[0].shape
    (4, (7, 12))
    >>> len(record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
    ...                      n_cycles=30, spin_up=10, every=5, noise=[GaussianNoise(), CauchyNoise()], random_state=0))
    8
    >>> forecasts, truths = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,),
    ...                                      observation_spacings=(2,), n_cycles=30, spin_up=10, every=5,
    ...                                      return_truth=True, random_state=0)
    >>> len(truths), truths[0].shape
    (4, (12,))
    """
    laws = [GaussianNoise()] if noise is None else as_noise_laws(noise, caller="record_forecasts")
    analysis = LETKF(inflation=1.1, localization_radius=4.0) if analysis is None else analysis
    rng = check_random_state(random_state)
    runs = []
    for size in ensemble_sizes:
        for dt in dt_obs:
            for spacing in observation_spacings:
                for law in laws:
                    problem = dict(n_variables=n_variables, observed=np.arange(0, n_variables, spacing), dt_obs=dt,
                                   noise=law, n_cycles=n_cycles, random_state=rng.randint(2**31))
                    runs.append((problem, int(size) + 1, rng.randint(2**31)))
    recorded = Parallel(n_jobs=n_jobs)(
        delayed(_recorded_run)(analysis, problem, size, seed, spin_up=spin_up, every=every)
        for problem, size, seed in runs
    )
    forecasts = [forecast for run_forecasts, _ in recorded for forecast in run_forecasts]
    truths = [truth for _, run_truths in recorded for truth in run_truths]
    return (forecasts, truths) if return_truth else forecasts


def _recorded_run(analysis, problem, ensemble_size, random_state, *, spin_up, every):
    """One run of :func:`record_forecasts`: its kept forecasts and the truth at each."""
    forecasts, truths = [], []

    def keep(cycle, forecast, analysed, truth):
        if cycle >= spin_up and (cycle - spin_up) % every == 0 and np.isfinite(forecast).all():
            forecasts.append(forecast.copy())
            truths.append(np.array(truth, dtype=np.float64))

    with threadpool_limits(1):  # as in a joblib worker, so that the rounding (and the chaotic run) is the same
        twin_experiment(analysis, make_twin_problem(**problem), ensemble_size=ensemble_size,
                        spin_up=min(spin_up, problem["n_cycles"] - 1), random_state=random_state, callback=keep)
    return forecasts, truths


def make_local_analysis_data(forecasts, noise, *, truths=None, window_radius=4, localization_radius=4.0,
                             observation_spacings=(1, 2, 4), missing_fraction=0.1, scale_range=(0.5, 2.0),
                             n_draws=1, noise_ratio_range=(0.05, 20.0), clip=3.0, student_t=False, random_state=None,
                             n_jobs=None):
    """Training pairs of a local learned analysis, without the likelihood and without the truth.

    From each forecast of ``N + 1`` members (:func:`record_forecasts`), one
    member drawn at random is the stand-in truth and the other ``N`` the
    prior; observations of the stand-in are simulated with a noise law drawn
    from ``noise`` (its own scale times a factor log-uniform in
    ``scale_range``) on an observation network of every ``k``-th variable
    (``k`` from ``observation_spacings``, a random offset, each observation
    missing with probability ``missing_fraction``). Every grid point then
    gives one pair: its window of the prior (:func:`local_analysis_features`)
    and the stand-in's value there, standardised by the prior's mean and
    spread. Drawing from a law is all that is needed of it, so a noise known
    only by a record of errors (:class:`SampledNoise`) serves.

    Where the truth is known (``truths``, e.g. from
    ``record_forecasts(return_truth=True)``), it can be the target instead:
    one member is still drawn and left out, so that the prior has the same
    ``N`` members and the draws are the same as without it, but the
    observations are of the truth and the pairs' targets are its values.
    Training on both from the same forecasts measures what the stand-in
    costs. Against the truth, the network also learns how far the forecasts
    are from calibrated: forecasts wider than their error (a LETKF with much
    inflation) teach it to shrink, which in a cycle whose forecasts are
    calibrated makes them too narrow; a stand-in member is calibrated by
    construction.

    Parameters
    ----------
    forecasts : list of ndarray of shape (N + 1, n_variables)
        The prior ensembles (any ``N``, equal within one call's arrays or not).
    noise : NoiseLaw, ObservationModel or list of them
        The noise laws (their draws, scale and tail; an observation model stands for its law).
    truths : list of ndarray of shape (n_variables,) or None, default=None
        The truth at each forecast, the target in place of the stand-in member; None: the stand-in.
    window_radius : int, default=4
        Half-width of the windows.
    localization_radius : float, default=4.0
        Localisation of the local ETKF analysis feature.
    observation_spacings : sequence of int, default=(1, 2, 4)
        The observation networks drawn from.
    missing_fraction : float, default=0.1
        Probability that an observation is missing.
    scale_range : (float, float), default=(0.5, 2.0)
        Range of the factor on the noise scale.
    n_draws : int, default=1
        Stand-ins and observation draws per forecast.
    noise_ratio_range : (float, float), default=(0.05, 20.0)
        Clipping of ``noise_scale / s`` in the features.
    clip : float or None, default=3.0
        Innovation clipping of the local ETKF analysis feature (see
        :func:`local_analysis_features`).
    student_t : bool, default=False
        Student-t weights of the observations in that analysis (see
        :func:`local_analysis_features`).
    random_state : int, RandomState instance or None, default=None
        Seeds the draws.
    n_jobs : int or None, default=None
        The windows are computed by :class:`joblib.Parallel` with this many
        workers (joblib's convention). The draws are made first, in one
        stream, and the windows on one thread, in a worker or not, so the
        pairs do not depend on ``n_jobs``.

    Returns
    -------
    X : dict of int to ndarray of shape (n_pairs, N, n_features)
        The windows, by ensemble size ``N``.
    y : dict of int to ndarray of shape (n_pairs, 1, 1)
        The stand-in's (or the truth's) standardised value at each window's grid point.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import CauchyNoise, make_local_analysis_data
    >>> forecasts = [np.random.default_rng(0).standard_normal((11, 40))]
    >>> X, y = make_local_analysis_data(forecasts, CauchyNoise(), random_state=0)
    >>> X[10].shape, y[10].shape
    ((40, 10, 48), (40, 1, 1))
    """
    validate_parameter_constraints({"n_jobs": N_JOBS, "student_t": ["boolean"]},
                                   {"n_jobs": n_jobs, "student_t": student_t}, caller_name="make_local_analysis_data")
    laws = as_noise_laws(noise, caller="make_local_analysis_data")
    forecasts = _checked_forecasts(forecasts)
    truths = _checked_truths(truths, forecasts)
    rng = check_random_state(random_state)
    low, high = np.log(scale_range[0]), np.log(scale_range[1])
    draws = []  # (prior, truth, observation, observed, law, scale): everything random, drawn in one stream
    for k, forecast in enumerate(forecasts):
        n_members, n_variables = forecast.shape
        for _ in range(n_draws):
            stand_in = rng.randint(n_members)
            truth = forecast[stand_in] if truths is None else truths[k]
            law = laws[rng.randint(len(laws))]
            scale = law.scale * np.exp(rng.uniform(low, high))
            spacing = observation_spacings[rng.randint(len(observation_spacings))]
            observed = np.arange(rng.randint(spacing), n_variables, spacing)
            observed = observed[rng.uniform(size=observed.size) >= missing_fraction]
            if observed.size == 0:
                continue
            observation = truth[observed] + scale * law.standard_noise(observed.size, rng)
            draws.append((np.delete(forecast, stand_in, axis=0), truth, observation, observed, law, scale))
    settings = dict(window_radius=window_radius, localization_radius=localization_radius,
                    noise_ratio_range=noise_ratio_range, clip=clip, student_t=student_t)
    n_chunks = 8 * effective_n_jobs(n_jobs)  # a few per worker, so that one slow chunk does not hold the rest up
    pairs = Parallel(n_jobs=n_jobs)(delayed(_windows)(draws[chunk], **settings)
                                    for chunk in gen_even_slices(len(draws), n_chunks))
    X, y = {}, {}
    for features, target in (pair for chunk in pairs for pair in chunk):
        X.setdefault(features.shape[1], []).append(features)
        y.setdefault(features.shape[1], []).append(target)
    return ({size: np.concatenate(parts) for size, parts in X.items()},
            {size: np.concatenate(parts) for size, parts in y.items()})


def _windows(draws, **settings):
    """The training pairs of :func:`make_local_analysis_data`'s draws: each prior's windows and the target there."""
    pairs = []
    with threadpool_limits(1):  # the same BLAS rounding in a worker and in this process
        for prior, truth, observation, observed, law, scale in draws:
            features, centre, spread = local_analysis_features(
                prior, observation, observed, noise_scale=scale, noise_tail=law.tail,
                observation_variance=_etkf_variance_of(law, scale, student_t=settings["student_t"]), **settings)
            pairs.append((features, ((truth - centre) / spread)[:, None, None]))
    return pairs


def _checked_forecasts(forecasts):
    """The forecasts as float64 arrays, or a ValueError before any pair is made."""
    checked = [np.asarray(forecast, dtype=np.float64) for forecast in forecasts]
    for k, forecast in enumerate(checked):
        if forecast.ndim != 2 or forecast.shape[0] < 3 or not np.isfinite(forecast).all():
            raise ValueError(
                f"forecasts[{k}] must be a finite array (N + 1, n_variables) with N + 1 >= 3 members (one becomes "
                f"the stand-in truth); got shape {forecast.shape}{'' if np.isfinite(forecast).all() else ', not finite'}."
            )
    if not checked:
        raise ValueError("forecasts is empty: pass the ensembles of record_forecasts(...).")
    return checked


def _checked_truths(truths, forecasts):
    """The truths as float64 arrays, one per forecast with its number of variables, or a ValueError."""
    if truths is None:
        return None
    checked = [np.asarray(truth, dtype=np.float64) for truth in truths]
    if len(checked) != len(forecasts):
        raise ValueError(
            f"truths must hold one truth per forecast; got {len(checked)} truths for {len(forecasts)} forecasts "
            "(record both with record_forecasts(return_truth=True))."
        )
    for k, (truth, forecast) in enumerate(zip(checked, forecasts)):
        if truth.shape != forecast.shape[1:] or not np.isfinite(truth).all():
            raise ValueError(
                f"truths[{k}] must be a finite array of shape {forecast.shape[1:]} (the variables of forecasts[{k}]); "
                f"got shape {truth.shape}{'' if np.isfinite(truth).all() else ', not finite'}."
            )
    return checked


def _etkf_variance_of(law, scale, *, student_t=False):
    """The variance the local ETKF analysis takes for ``law`` at another scale (the Kalman one, or the Student-t one).

    The Kalman variance (the law's variance over its scale squared, times the scale squared), or with ``student_t``
    and a heavy-tailed law the square of the scale of the Student-t the weights assume (``scale ** 2`` for a Student-t
    or Cauchy law; for a record, its fitted Student-t's scale at this scale).
    """
    if student_t and law.tail > 0:
        return student_t_variance(law, scale)
    return _kalman_variance(law, 1.0) * (scale / law.scale) ** 2


def _default_laws():
    return [GaussianNoise(), StudentTNoise(df=1.5), StudentTNoise(df=4.0), CauchyNoise()]


def fit_local_analysis(noise=None, *, forecasts=None, truths=None, window_radius=4, localization_radius=4.0, clip=3.0,
                       student_t=False, n_draws=2, d_model=32, n_heads=4, n_layers=2, max_epochs=10, lr=2e-3, batch_size=256,
                       warm_start=None, random_state=0, verbose=0, n_jobs=None, **estimator_params):
    """Train a local learned analysis for the noise laws you can draw from; returns a ready :class:`LocalLearnedAnalysis`.

    The recipe, likelihood-free and truth-free: forecasts of ``N + 1``
    members from cycled LETKF runs (:func:`record_forecasts`, or yours), one
    member as the stand-in truth and observations of it simulated with the
    laws of ``noise`` (:func:`make_local_analysis_data`), and a residual
    :class:`~sklearn_measattn.MeasureTransformerRegressor` fitted with the
    energy loss against the stand-in's value (the CRPS of the analysis
    members at the grid point, a proper score), one ensemble size after the
    other in every epoch (sizes 10, 20 and 40 by default: one weight set for
    all). Its recipe (window, localisation, noise-ratio range, the
    parameters of this call) is stored in ``analysis_recipe_``, which
    :func:`~sklearn_measattn.save_model` writes into the model file, so a
    loaded model needs nothing passed beside it.

    Time, with the defaults and the forecasts recorded first: about 12
    minutes on 2 Intel Xeon cores, 16 on 2 AMD EPYC cores (the forecasts 2-3
    minutes of it); ``benchmarks/local_analysis_training.py`` measures it.

    Parameters
    ----------
    noise : NoiseLaw, ObservationModel, list of them or None, default=None
        The noise laws to train for (their law and scale); None: the
        shipped model's, Gaussian, Student-t with 1.5 and 4 degrees of
        freedom and Cauchy, of scale 1 (times 0.5-2 in every draw).
    forecasts : list of ndarray or None, default=None
        Prior ensembles of ``N + 1`` members; None: :func:`record_forecasts`
        with its defaults and this ``random_state``.
    truths : list of ndarray or None, default=None
        The truth at each of ``forecasts`` (``record_forecasts(return_truth=True)``):
        train against it instead of a stand-in member (see
        :func:`make_local_analysis_data`), where the truth is known; the
        recipe records the target. None: the stand-in.
    window_radius : int, default=4
        Half-width of the windows.
    localization_radius : float, default=4.0
        Localisation of the local ETKF analysis the network corrects.
    clip : float or None, default=3.0
        Innovation clipping of that analysis, in innovation standard deviations.
    student_t : bool, default=False
        Weight that analysis's observations by the Student-t expectation of
        their precision given their innovations (``df = 1 / tail`` of the
        law of each training pair; see :func:`local_analysis_features`).
    n_draws : int, default=2
        Stand-ins and observation draws per forecast.
    d_model, n_heads, n_layers, max_epochs, lr, batch_size :
        The network and its training (see
        :class:`~sklearn_measattn.MeasureTransformerRegressor`); the epochs
        count passes over all ensemble sizes.
    warm_start : LocalLearnedAnalysis or None, default=None
        A step made by this function (or loaded from its file) whose network
        is trained further, for ``max_epochs`` more at ``lr``, instead of a
        new one; ``window_radius``, ``localization_radius``, ``clip`` and
        ``student_t`` must be its recipe's, and its network's size is kept (``d_model``,
        ``n_heads``, ``n_layers`` and ``estimator_params`` are refused).
        With forecasts from its own cycle (``record_forecasts(analysis=step,
        ...)``), it learns the priors it makes itself. The step passed is
        not changed.
    random_state : int, default=0
        Seeds the data and the network.
    verbose : int, default=0
        With 1, a line per epoch and ensemble size on stderr (the loss and the time so far).
    n_jobs : int or None, default=None
        Workers for recording the forecasts and making the windows
        (:func:`record_forecasts`, :func:`make_local_analysis_data`; joblib's
        convention); the network trains in this process. The step does not
        depend on it.
    **estimator_params
        Other parameters of the regressor (``kernel``, ``dim_feedforward``, ...).

    Returns
    -------
    LocalLearnedAnalysis

    Examples
    --------
    >>> from sklearn_measattn.assimilation import GaussianNoise, fit_local_analysis, record_forecasts
    >>> forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
    ...                              n_cycles=30, spin_up=10, every=5, random_state=0)
    >>> step = fit_local_analysis(GaussianNoise(), forecasts=forecasts, window_radius=2,
    ...                           d_model=8, n_heads=2, n_layers=1, max_epochs=1)
    >>> step.estimator.analysis_recipe_["window_radius"]
    2
    >>> own = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
    ...                        n_cycles=30, spin_up=10, every=5, analysis=step, random_state=1)
    >>> further = fit_local_analysis(GaussianNoise(), forecasts=own + forecasts, window_radius=2, warm_start=step,
    ...                              max_epochs=1, lr=5e-4)
    >>> len(further.estimator.analysis_recipe_["trained_by"]["earlier"])
    1
    """
    validate_parameter_constraints({"student_t": ["boolean"]}, {"student_t": student_t},
                                   caller_name="fit_local_analysis")
    laws = _default_laws() if noise is None else as_noise_laws(noise, caller="fit_local_analysis")
    if truths is not None and forecasts is None:
        raise ValueError("truths needs the forecasts they belong to: pass forecasts=..., truths=... (e.g. from "
                         "record_forecasts(return_truth=True)).")
    if warm_start is not None:
        network = {"d_model": d_model, "n_heads": n_heads, "n_layers": n_layers}
        _check_warm_start(warm_start, window_radius=window_radius, localization_radius=localization_radius, clip=clip,
                          student_t=student_t, network_changed=bool(estimator_params) or any(
                              value != fit_local_analysis.__kwdefaults__[name] for name, value in network.items()))
    start = time.perf_counter()
    rng = check_random_state(random_state)
    if forecasts is None:
        forecasts = record_forecasts(random_state=rng.randint(2**31), n_jobs=n_jobs)
    noise_ratio_range = (0.05, 20.0)
    X, y = make_local_analysis_data(forecasts, laws, truths=truths, window_radius=window_radius,
                                    localization_radius=localization_radius, clip=clip, student_t=student_t,
                                    n_draws=n_draws,
                                    noise_ratio_range=noise_ratio_range, random_state=rng.randint(2**31),
                                    n_jobs=n_jobs)
    if warm_start is None:
        params = dict(kernel="softmax", residual=True, loss="energy", d_model=d_model, n_heads=n_heads,
                      n_layers=n_layers, dim_feedforward=2 * d_model, lr=lr, batch_size=batch_size, max_epochs=1,
                      random_state=random_state)
        params.update(estimator_params)
        estimator = MeasureTransformerRegressor(**params, warm_start=True)
        earlier = []
    else:
        estimator = copy.deepcopy(warm_start.estimator).set_params(lr=lr, batch_size=batch_size, max_epochs=1,
                                                                  warm_start=True, verbose=0)
        params = {key: value for key, value in estimator.get_params().items()
                  if key in warm_start.estimator.analysis_recipe_["trained_by"]["estimator"]}
        params.update(lr=lr, batch_size=batch_size)
        earlier = rounds_so_far(warm_start.estimator.analysis_recipe_)
    sizes = sorted(X)
    # The network reads float32: the windows are converted once here, one size at a time (each float64 array
    # freed as it goes), rather than copied by every epoch's fit.
    for size in sizes:
        X[size] = X[size].astype(np.float32)
    for epoch in range(max_epochs):
        for size in sizes:
            estimator.fit(X[size], y[size])
            if verbose:
                print(f"fit_local_analysis: epoch {epoch + 1}/{max_epochs}, N={size}: energy loss "
                      f"{estimator.history_[-1, 'train_loss']:.4f} ({time.perf_counter() - start:.0f} s)",
                      file=sys.stderr, flush=True)
    estimator.analysis_recipe_ = {
        "kind": "local",
        "features": list(LOCAL_ANALYSIS_FEATURES),
        "window_radius": int(window_radius),
        "localization_radius": float(localization_radius),
        "letkf_clip": None if clip is None else float(clip),
        "letkf_student_t": bool(student_t),
        "inflation": 1.0,
        "noise_ratio_range": list(noise_ratio_range),
        "trained_by": {
            "function": "fit_local_analysis",
            "noise": [repr(law) for law in laws],
            "target": "stand-in member" if truths is None else "truth",
            "ensemble_sizes": sizes,
            "n_pairs": {str(size): int(len(X[size])) for size in sizes},
            "n_draws": int(n_draws),
            "max_epochs": int(max_epochs),
            "estimator": {key: value for key, value in params.items() if isinstance(value, (int, float, str, bool))},
            "seconds": round(time.perf_counter() - start, 1),
            **({"earlier": earlier} if earlier else {}),
        },
    }
    return LocalLearnedAnalysis(estimator)


def rounds_so_far(recipe):
    """Every training round of a recipe, oldest first: its ``earlier`` rounds, then its last (``trained_by``)."""
    trained_by = recipe["trained_by"]
    return [*trained_by.get("earlier", []), {key: value for key, value in trained_by.items() if key != "earlier"}]


def _check_warm_start(step, *, window_radius, localization_radius, clip, student_t, network_changed):
    """Refuse a warm start that is not a trained local step, or whose features or network the call would change."""
    if not isinstance(step, LocalLearnedAnalysis):
        raise TypeError(
            f"warm_start must be a LocalLearnedAnalysis (from fit_local_analysis, pretrained_analysis('local') or "
            f"a loaded model file); got {type(step).__name__}."
        )
    recipe = _checked_recipe(step.estimator)
    wanted = {"window_radius": (window_radius, recipe["window_radius"]),
              "localization_radius": (localization_radius, recipe["localization_radius"]),
              "clip": (clip, recipe["letkf_clip"])}
    differ = [f"{name}={mine!r} (its recipe: {theirs!r})" for name, (mine, theirs) in wanted.items()
              if (mine is None) != (theirs is None) or (mine is not None and float(mine) != float(theirs))]
    if bool(student_t) != recipe["letkf_student_t"]:
        differ.append(f"student_t={student_t!r} (its recipe: {recipe['letkf_student_t']!r})")
    if differ:
        raise ValueError(
            f"warm_start's network reads windows made with other settings: {', '.join(differ)}. Pass its "
            "recipe's values (step.estimator.analysis_recipe_), or train a new step without warm_start."
        )
    if network_changed:
        raise ValueError(
            "warm_start keeps its network: d_model, n_heads, n_layers and other estimator parameters cannot be "
            "passed with it. Leave them out, or train a new step without warm_start."
        )
