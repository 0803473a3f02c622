"""Training a local learned analysis through the cycle: the filter unrolled, differentiated end to end.

The likelihood-free recipe (:func:`fit_local_analysis`) scores one analysis
of a calibrated prior against a stand-in member. With the forecast model in
torch, the filter itself can be the model: the ensembles of a batch of twin
runs are forecast by the Lorenz-96 model, the network analyses them, and the
proper score of each analysis against the run's truth (a nature run, or a
stand-in member of a recorded forecast carried forward by the model), over a
few consecutive cycles, is differentiated through the analyses *and* the
forecasts between them, so that a step learns what its analysis does to the
next forecasts. This is how MNMEF (Carey et al. 2025) trains; here it
fine-tunes a step made by :func:`fit_local_analysis`."""

from __future__ import annotations

import copy
import sys
import time
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils import check_random_state

from .._lorenz96 import as_noise_laws, attractor_states, lorenz96_flow
from .._param_validation import validate_params
from .._validation import NumberInterval
from ..estimator import fitted_network
from ..losses import energy_loss
from ._letkf import observation_weights
from ._local import (
    _SPREAD_FLOOR,
    LocalLearnedAnalysis,
    _checked_forecasts,
    _checked_recipe,
    _default_laws,
    _etkf_variance_of,
    _reflection,
    rounds_so_far,
)

__all__ = ["fit_local_analysis_through_cycle", "unrolled_local_analysis"]

_FORCING, _TIME_STEP = 8.0, 0.01


def _lorenz96(states, duration):
    """The default forecast model: Lorenz-96 with forcing 8, Runge-Kutta steps of at most 0.01."""
    return lorenz96_flow(states, duration, forcing=_FORCING, time_step=_TIME_STEP)


def _local_features(forecast, observation, present, *, noise_scale, noise_tail, observation_variance, window_radius,
                    localization_weights, noise_ratio_range, clip, student_t=False):
    """:func:`local_analysis_features` for a batch of ensembles, in torch, differentiable in ``forecast``.

    ``forecast`` (B, N, n); ``observation`` and ``present`` (B, n) (the values where ``present`` is False are
    ignored); ``noise_scale``, ``noise_tail`` and ``observation_variance`` (B,); ``localization_weights`` (n, n) the
    taper of every variable's distance to every other. Returns the features (B, n, N, n_features) and the forecast
    mean and spread (B, n). The perturbation transform of the local ETKF feature (its symmetric square root) is held
    constant in the backward pass: its eigendecomposition has no stable gradient where eigenvalues repeat, as they do
    whenever a window has fewer observations than members. Its mean update is differentiated.
    """
    n_batch, n_members, n_variables = forecast.shape
    mask = present.to(forecast.dtype)
    mean = forecast.mean(dim=1)
    anomalies = forecast - mean[:, None, :]
    spread = anomalies.std(dim=1).clamp_min(_SPREAD_FLOOR)
    observation = torch.where(present, observation, torch.zeros_like(observation))
    innovation = (observation - mean) * mask
    weights = mask
    if student_t:  # the Student-t weights of local_analysis_features
        heavy = noise_tail > 0
        degrees = 1.0 / noise_tail.clamp_min(1e-12)[:, None]
        total = anomalies.var(dim=1) + observation_variance[:, None]
        weights = mask * torch.where(heavy[:, None], (degrees + 1.0) / (degrees + innovation**2 / total), 1.0)
    if clip is not None:
        bound = clip * torch.sqrt(anomalies.var(dim=1) + observation_variance[:, None])
        innovation = torch.minimum(torch.maximum(innovation, -bound), bound)
    precision = localization_weights[None] * (weights / observation_variance[:, None])[:, None, :]  # (B, grid, observed)
    weighted = anomalies[:, None, :, :] * precision[:, :, None, :]  # (B, grid, N, observed)
    system = torch.einsum("bikp,bmp->bikm", weighted, anomalies)
    system = system + (n_members - 1) * torch.eye(n_members, dtype=forecast.dtype)
    mean_weights = torch.linalg.solve(system, torch.einsum("bikp,bp->bik", weighted, innovation))
    with torch.no_grad():
        eigenvalues, eigenvectors = torch.linalg.eigh(system)
        root = torch.einsum("bikj,bij,bimj->bikm", eigenvectors,
                            torch.sqrt((n_members - 1) / eigenvalues.clamp_min(1e-12)), eigenvectors)
    letkf = torch.einsum("bki,bikm->bim", anomalies, root + mean_weights[..., None])  # (B, grid, N)

    window = (torch.arange(n_variables)[:, None] + torch.arange(-window_radius, window_radius + 1)[None, :]) \
        % n_variables
    window_mask = mask[:, window]  # (B, n, width)
    member_anomaly = anomalies[:, :, window].permute(0, 2, 1, 3) / spread[:, :, None, None]
    member_innovation = torch.asinh((observation[:, window][:, :, None, :] - forecast[:, :, window].permute(0, 2, 1, 3))
                                    / noise_scale[:, None, None, None]) * window_mask[:, :, None, :]
    window_innovation = torch.asinh((observation[:, window] - mean[:, window]) / spread[:, :, None]) * window_mask
    log_spread_ratio = torch.log(spread[:, window] / spread[:, :, None])
    ratio = noise_scale[:, None] / spread
    if noise_ratio_range is not None:
        ratio = ratio.clamp(*noise_ratio_range)
    shared = torch.cat([window_innovation, window_mask, log_spread_ratio, torch.log(ratio)[..., None],
                        noise_tail[:, None, None].expand(n_batch, n_variables, 1)], dim=-1)
    features = torch.cat([(letkf / spread[..., None])[..., None], member_anomaly, member_innovation,
                          shared[:, :, None, :].expand(-1, -1, n_members, -1)], dim=-1)
    return features, mean, spread


class _Unrolled:
    """A local step's analysis as a differentiable function of a batch of forecasts (its network, not a copy)."""

    def __init__(self, step, n_variables):
        recipe = _checked_recipe(step.estimator)
        self.module = fitted_network(step.estimator).module
        self.window_radius = recipe["window_radius"]
        radius = recipe["localization_radius"] if step.localization_radius is None else step.localization_radius
        self.localization_weights = torch.as_tensor(observation_weights(n_variables, np.arange(n_variables), radius))
        self.inflation = recipe["inflation"] if step.inflation is None else step.inflation
        self.noise_ratio_range = tuple(recipe["noise_ratio_range"])
        self.clip = recipe["letkf_clip"]
        self.student_t = recipe["letkf_student_t"]
        self.correction_weight = step.correction_weight
        self.reflect = step.reflect
        self.reflection = torch.as_tensor(_reflection(self.window_radius), dtype=torch.float32)

    def __call__(self, forecast, observation, present, *, noise_scale, noise_tail, observation_variance, symmetric):
        if self.inflation != 1.0:
            centre = forecast.mean(dim=1, keepdim=True)
            forecast = centre + self.inflation * (forecast - centre)
        features, mean, spread = _local_features(
            forecast, observation, present, noise_scale=noise_scale, noise_tail=noise_tail,
            observation_variance=observation_variance, window_radius=self.window_radius,
            localization_weights=self.localization_weights, noise_ratio_range=self.noise_ratio_range, clip=self.clip,
            student_t=self.student_t)
        n_batch, n_variables, n_members, n_features = features.shape
        flat = features.reshape(n_batch * n_variables, n_members, n_features).to(torch.float32)
        reflect = symmetric if self.reflect == "auto" else self.reflect
        out = self.module(torch.cat([flat, flat * self.reflection]) if reflect else flat)[..., 0].to(torch.float64)
        if reflect:
            out = 0.5 * (out[:len(flat)] - out[len(flat):])
        if self.correction_weight != 1.0:
            letkf = flat[..., 0].to(torch.float64)
            out = letkf + self.correction_weight * (out - letkf)
        analysis = mean[..., None] + spread[..., None] * out.reshape(n_batch, n_variables, n_members)
        return analysis.permute(0, 2, 1)


def unrolled_local_analysis(step, forecast, observation, observed, *, noise_scale, noise_tail, symmetric=True,
                            observation_variance=None):
    """A local step's analysis of a batch of forecasts, as torch tensors the gradient flows through.

    The same analysis as ``step.analyse`` for every ensemble of the batch
    (up to float rounding), written in torch so that a loss on the analysis
    can be differentiated with respect to the forecast and the network's
    parameters (:func:`fit_local_analysis_through_cycle` trains through it).

    Parameters
    ----------
    step : LocalLearnedAnalysis
        The step (its network is used, not copied: gradients reach it).
    forecast : torch.Tensor of shape (n_batch, n_members, n_variables)
        Forecast ensembles, float64.
    observation : torch.Tensor of shape (n_batch, n_variables)
        The observation of every variable (any value where not observed).
    observed : torch.Tensor of bool of shape (n_batch, n_variables)
        Which variables are observed in each ensemble's cycle.
    noise_scale, noise_tail : float or torch.Tensor of shape (n_batch,)
        The noise law's scale and tail.
    symmetric : bool, default=True
        Whether the noise law is symmetric (the step's ``reflect="auto"`` reflects then).
    observation_variance : float, torch.Tensor of shape (n_batch,) or None, default=None
        The variance the local ETKF feature assumes (with the recipe's
        Student-t weights and a heavy tail, the square of the scale of the
        Student-t errors they assume); None: ``noise_scale ** 2``.

    Returns
    -------
    torch.Tensor of shape (n_batch, n_members, n_variables)

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn_measattn.assimilation import (ObservationModel, pretrained_analysis, unrolled_local_analysis)
    >>> step = pretrained_analysis("local")
    >>> forecast = torch.tensor(np.random.default_rng(0).normal(2.0, 1.0, (1, 10, 40)), requires_grad=True)
    >>> observed = torch.zeros(1, 40, dtype=torch.bool)
    >>> observed[:, ::4] = True
    >>> analysis = unrolled_local_analysis(step, forecast, torch.full((1, 40), 2.5), observed,
    ...                                    noise_scale=1.0, noise_tail=0.0)
    >>> analysis.mean().backward()
    >>> forecast.grad.shape
    torch.Size([1, 10, 40])
    >>> model = ObservationModel(n_variables=40, observed=range(0, 40, 4))
    >>> reference = step.bind(model).analyse(forecast[0].detach().numpy(), np.full(10, 2.5))
    >>> bool(np.allclose(analysis[0].detach().numpy(), reference, atol=1e-4))
    True
    """
    if not isinstance(step, LocalLearnedAnalysis):
        raise TypeError(f"step must be a LocalLearnedAnalysis; got {type(step).__name__}.")
    if forecast.ndim != 3 or observation.shape != (forecast.shape[0], forecast.shape[2]) \
            or observed.shape != observation.shape:
        raise ValueError(
            "forecast must be (n_batch, n_members, n_variables) and observation and observed (n_batch, n_variables); "
            f"got {tuple(forecast.shape)}, {tuple(observation.shape)} and {tuple(observed.shape)}."
        )
    n_batch = forecast.shape[0]

    def per_ensemble(value):
        value = torch.as_tensor(value, dtype=torch.float64)
        return value.expand(n_batch).clone() if value.ndim == 0 else value

    scale = per_ensemble(noise_scale)
    variance = scale**2 if observation_variance is None else per_ensemble(observation_variance)
    return _Unrolled(step, forecast.shape[2])(forecast, observation, observed.to(torch.bool), noise_scale=scale,
                                              noise_tail=per_ensemble(noise_tail), observation_variance=variance,
                                              symmetric=symmetric)


class _Runs:
    """A batch of twin runs of one setting (ensemble size, interval, observation network, noise law and scale).

    Without ``records`` the truth is a nature run and the ensemble starts as the truth plus unit Gaussian noise; with
    ``records`` (recorded forecasts of ``n_members + 1`` members) every run starts from one of them, a member drawn at
    random the stand-in truth and the others the ensemble.
    """

    def __init__(self, *, n_runs, n_members, n_variables, dt_obs, spacing, law, scale, missing_fraction, rng,
                 student_t=False, records=None, forecast_model=None):
        self.n_members, self.dt_obs, self.law, self.scale = n_members, dt_obs, law, scale
        self.forecast_model = _lorenz96 if forecast_model is None else forecast_model
        self.missing_fraction, self.rng = missing_fraction, rng
        self.network = torch.zeros(n_variables, dtype=torch.bool)
        self.network[rng.randint(spacing)::spacing] = True
        if records is None:
            truth = attractor_states((n_runs, n_variables), forcing=_FORCING, time_step=_TIME_STEP, perturbation=1.0,
                                     random_state=rng)
            self.truth = torch.as_tensor(truth)
            self.ensemble = self.truth[:, None, :] + torch.as_tensor(
                rng.standard_normal((n_runs, n_members, n_variables)))
        else:
            chosen = records[rng.randint(len(records), size=n_runs)]  # (n_runs, n_members + 1, n_variables)
            stand_in = rng.randint(n_members + 1, size=n_runs)
            others = np.ones(chosen.shape[:2], dtype=bool)
            others[np.arange(n_runs), stand_in] = False
            self.truth = torch.as_tensor(chosen[np.arange(n_runs), stand_in])
            self.ensemble = torch.as_tensor(chosen[others].reshape(n_runs, n_members, n_variables))
        n = torch.ones(n_runs, dtype=torch.float64)
        self.noise_scale, self.noise_tail = scale * n, law.tail * n
        self.observation_variance = _etkf_variance_of(law, scale, student_t=student_t) * n
        self.age = 0

    def cycle(self, analyse, ensemble):
        """Forecast ``ensemble`` and the truth one interval, observe, analyse; returns (analysis, truth)."""
        self.truth = self.forecast_model(self.truth, self.dt_obs)
        forecast = self.forecast_model(ensemble, self.dt_obs)
        shape = tuple(self.truth.shape)
        observation = self.truth + self.scale * torch.as_tensor(self.law.standard_noise(shape, self.rng))
        present = self.network[None, :] & torch.as_tensor(self.rng.uniform(size=shape) >= self.missing_fraction)
        analysis = analyse(forecast, observation, present, noise_scale=self.noise_scale, noise_tail=self.noise_tail,
                           observation_variance=self.observation_variance, symmetric=self.law.symmetric)
        return analysis, self.truth


@validate_params(
    {
        "step": "no_validation",
        "noise": "no_validation",
        "forecasts": [list, tuple, None],
        "forecast_model": [callable, None],
        "ensemble_sizes": [list, tuple, None],
        "n_variables": [NumberInterval(Integral, 8, None, closed="left")],
        "dt_obs": [list, tuple],
        "observation_spacings": [list, tuple],
        "n_runs": [NumberInterval(Integral, 1, None, closed="left")],
        "unroll": [NumberInterval(Integral, 1, None, closed="left")],
        "n_iterations": [NumberInterval(Integral, 1, None, closed="left")],
        "spin_up": [NumberInterval(Integral, 0, None, closed="left")],
        "lifetime": [NumberInterval(Integral, 1, None, closed="left")],
        "missing_fraction": [NumberInterval(Real, 0, 1, closed="left")],
        "scale_range": [tuple, list],
        "lr": [NumberInterval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "verbose": [NumberInterval(Integral, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def fit_local_analysis_through_cycle(step, noise=None, *, forecasts=None, forecast_model=None, ensemble_sizes=None,
                                     n_variables=40, dt_obs=(0.05, 0.1, 0.15), observation_spacings=(1, 2, 4), n_runs=4,
                                     unroll=4, n_iterations=300, spin_up=20, lifetime=8, missing_fraction=0.1,
                                     scale_range=(0.5, 2.0), lr=2e-4, random_state=0, verbose=0):
    """Fine-tune a local learned analysis through the cycle, differentiating through the forecasts between analyses.

    Where the forecast model is known, the filter can be trained as a whole
    (MNMEF's way, Carey et al. 2025): in every iteration a batch of ``n_runs`` twin
    runs of one setting (an ensemble size, an observation interval, every
    ``k``-th variable observed from a random offset, a noise law from
    ``noise`` at its scale times a factor log-uniform in ``scale_range``,
    each observation missing with probability ``missing_fraction``) goes
    ``unroll`` cycles on: forecast by the model (Lorenz-96 in torch, or ``forecast_model``), the
    step's analysis (:func:`unrolled_local_analysis`), and the CRPS of every
    variable's analysis members against the truth (the energy score in one
    dimension). The mean over the cycles is differentiated through the
    analyses and the forecasts between them, so the network learns what its
    analysis does to the later forecasts, which one-step training on
    recorded priors cannot see. The runs then carry on from where they
    stopped (detached); a batch is replaced by a new setting after
    ``lifetime`` uses or when it loses the truth, and a new batch first runs
    ``spin_up`` cycles without gradients. Batches of every ensemble size take
    turns, so one weight set serves them all.

    Where the runs start decides what the network is scored against. By
    default the truth is a nature run of the model and the ensemble starts
    around it (MNMEF's training against the truth). With ``forecasts``
    (recorded ensembles of ``N + 1`` members, :func:`record_forecasts`),
    every run starts from a recorded ensemble instead: one member drawn at
    random is the stand-in truth, the other ``N`` the ensemble, and the
    stand-in is carried forward by the same model, as
    :func:`fit_local_analysis` scores one analysis against a stand-in (with
    ``lifetime=1`` every batch is a fresh draw, so the scores cover the
    first ``unroll`` cycles after a recorded prior). Either way the training
    needs the forecast model and draws of the noise, and not the likelihood
    nor the truth of the recorded runs.

    The forecast model is Lorenz-96 unless ``forecast_model`` is given: any
    function of a float64 torch tensor of states ``(..., n_variables)`` and
    a duration that returns the states forecast that long, written in torch
    operations so that the gradient flows through it (a model of the user's
    system; the runs then start from ``forecasts`` of that system, recorded
    by the user's own filter).

    Parameters
    ----------
    step : LocalLearnedAnalysis
        The step to start from (its network is copied; the step is not
        changed). Its inflation, localisation, reflection and correction
        weight are used in the cycle and kept by the step returned.
    noise : NoiseLaw, ObservationModel, list of them or None, default=None
        The noise laws; None: Gaussian, Student-t with 1.5 and 4 degrees of
        freedom and Cauchy, of scale 1.
    forecasts : list of ndarray of shape (N + 1, n_variables) or None, default=None
        Recorded forecast ensembles the runs start from, one member the
        stand-in truth (:func:`record_forecasts`); None: nature runs.
    forecast_model : callable or None, default=None
        ``forecast_model(states, duration)``: the states (a float64
        ``torch.Tensor`` of shape ``(..., n_variables)``) forecast
        ``duration`` (an interval of ``dt_obs``) on, differentiable in torch;
        it needs ``forecasts``. None: Lorenz-96 with forcing 8 (Runge-Kutta
        steps of at most 0.01).
    ensemble_sizes : sequence of int or None, default=None
        Ensemble sizes of the runs, in turn; None: 10, 20 and 40, or with
        ``forecasts`` every ``N`` they hold (a size given must be among them).
    n_variables : int, default=40
        Lorenz-96 variables (forcing 8); with ``forecasts``, theirs.
    dt_obs : sequence of float, default=(0.05, 0.1, 0.15)
        Observation intervals drawn from.
    observation_spacings : sequence of int, default=(1, 2, 4)
        Observation networks drawn from (every ``k``-th variable).
    n_runs : int, default=4
        Twin runs per batch.
    unroll : int, default=4
        Cycles differentiated through in every iteration.
    n_iterations : int, default=300
        Optimiser steps.
    spin_up : int, default=20
        Cycles a new batch runs before it trains (from the truth plus unit
        Gaussian noise, or from the recorded forecasts).
    lifetime : int, default=8
        Iterations a batch serves before a new setting replaces it.
    missing_fraction : float, default=0.1
        Probability that an observation is missing.
    scale_range : (float, float), default=(0.5, 2.0)
        Range of the factor on each law's scale.
    lr : float, default=2e-4
        Adam's learning rate (gradients clipped to norm 1).
    random_state : int, RandomState instance or None, default=0
        Seeds the runs and the draws.
    verbose : int, default=0
        With 1, a line every 25 iterations on stderr (the mean CRPS and the time so far).

    Returns
    -------
    LocalLearnedAnalysis
        A new step with the fine-tuned network, the same settings, and its
        recipe extended (``trained_by``: this call's parameters; the earlier
        rounds under ``earlier``), so that its file needs nothing passed beside it.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import (GaussianNoise, fit_local_analysis, fit_local_analysis_through_cycle,
    ...                                            record_forecasts)
    >>> forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
    ...                              n_cycles=30, spin_up=10, every=5, random_state=0)
    >>> step = fit_local_analysis(GaussianNoise(), forecasts=forecasts, window_radius=2,
    ...                           d_model=8, n_heads=2, n_layers=1, max_epochs=1)
    >>> tuned = fit_local_analysis_through_cycle(step, GaussianNoise(), ensemble_sizes=(6,), n_variables=12,
    ...                                          n_runs=2, unroll=2, n_iterations=3, spin_up=2)
    >>> tuned.estimator.analysis_recipe_["trained_by"]["function"]
    'fit_local_analysis_through_cycle'

    Against stand-in members of the recorded forecasts instead of nature runs:

    >>> tuned = fit_local_analysis_through_cycle(step, GaussianNoise(), forecasts=forecasts, n_variables=12,
    ...                                          n_runs=2, unroll=2, n_iterations=3, lifetime=1, spin_up=0)
    >>> tuned.estimator.analysis_recipe_["trained_by"]["target"]
    'stand-ins from recorded forecasts through the cycle'

    With a forecast model of one's own (here a damped Lorenz-96 written in
    torch, five Euler steps per interval; ``forecasts`` would come from that
    system):

    >>> def damped_lorenz96(states, duration, n_steps=5):
    ...     for _ in range(n_steps):
    ...         tendency = (states.roll(-1, -1) - states.roll(2, -1)) * states.roll(1, -1) - 1.5 * states + 8.0
    ...         states = states + duration / n_steps * tendency
    ...     return states
    >>> tuned = fit_local_analysis_through_cycle(step, GaussianNoise(), forecasts=forecasts,
    ...                                          forecast_model=damped_lorenz96, n_variables=12, n_runs=2,
    ...                                          unroll=2, n_iterations=3, lifetime=1, spin_up=0)
    >>> tuned.estimator.analysis_recipe_["trained_by"]["forecast_model"]
    'damped_lorenz96'
    """
    if not isinstance(step, LocalLearnedAnalysis):
        raise TypeError(
            f"step must be a LocalLearnedAnalysis (from fit_local_analysis, pretrained_analysis('local') or a loaded "
            f"model file); got {type(step).__name__}."
        )
    recipe = _checked_recipe(step.estimator)
    laws = _default_laws() if noise is None else as_noise_laws(noise, caller="fit_local_analysis_through_cycle")
    records = None
    if forecasts is not None:
        checked = _checked_forecasts(forecasts)
        if any(forecast.shape[1] != n_variables for forecast in checked):
            raise ValueError(f"forecasts must have n_variables={n_variables} variables; got "
                             f"{sorted({forecast.shape[1] for forecast in checked})} (pass n_variables to match).")
        by_size = {}
        for forecast in checked:
            by_size.setdefault(forecast.shape[0] - 1, []).append(forecast)
        records = {size: np.stack(group) for size, group in sorted(by_size.items())}
    if ensemble_sizes is None:
        ensemble_sizes = (10, 20, 40) if records is None else list(records)
    sizes = _positive_integers(ensemble_sizes, "ensemble_sizes", minimum=2)
    if records is not None and not set(sizes) <= set(records):
        raise ValueError(f"ensemble_sizes {sizes} must be among the sizes the forecasts hold ({list(records)}, one "
                         "member each the stand-in truth); record them or leave ensemble_sizes at None.")
    spacings = _positive_integers(observation_spacings, "observation_spacings", minimum=1)
    intervals = [float(dt) for dt in dt_obs]
    if not intervals or any(not np.isfinite(dt) or dt <= 0 for dt in intervals):
        raise ValueError(f"dt_obs must be positive observation intervals; got {list(dt_obs)}.")
    if max(spacings) > n_variables:
        raise ValueError(f"observation_spacings must be at most n_variables={n_variables}; got {spacings}.")
    if len(scale_range) != 2 or not 0 < scale_range[0] <= scale_range[1]:
        raise ValueError(f"scale_range must be (low, high) with 0 < low <= high; got {scale_range!r}.")
    if forecast_model is not None:
        if records is None:
            raise ValueError("forecast_model needs forecasts= (recorded ensembles of its system for the runs to "
                             "start from): without them the runs are nature runs of Lorenz-96.")
        _check_forecast_model(forecast_model, next(iter(records.values()))[:2], min(intervals))
    start = time.perf_counter()
    rng = check_random_state(random_state)
    estimator = copy.deepcopy(step.estimator)
    tuned = LocalLearnedAnalysis(estimator, **{key: value for key, value in step.get_params(deep=False).items()
                                               if key != "estimator"})
    analyse = _Unrolled(tuned, n_variables)
    module = analyse.module
    optimiser = torch.optim.Adam(module.parameters(), lr=lr)
    if forecast_model is None:
        threshold = 2.0 * float(np.std(attractor_states((64, n_variables), forcing=_FORCING, time_step=_TIME_STEP,
                                                       perturbation=1.0, random_state=0)))
    else:  # the system's own spread: the records' values about their mean, pooled
        threshold = 2.0 * float(np.std(np.concatenate([group.reshape(-1, n_variables) for group in records.values()])))
    low, high = np.log(scale_range[0]), np.log(scale_range[1])

    def new_runs(size):
        law = laws[rng.randint(len(laws))]
        runs = _Runs(n_runs=n_runs, n_members=size, n_variables=n_variables,
                     dt_obs=intervals[rng.randint(len(intervals))], spacing=spacings[rng.randint(len(spacings))],
                     law=law, scale=law.scale * float(np.exp(rng.uniform(low, high))),
                     missing_fraction=missing_fraction, rng=rng, student_t=analyse.student_t,
                     records=None if records is None else records[size],
                     forecast_model=forecast_model)
        with torch.no_grad():
            for _ in range(spin_up):
                runs.ensemble, _ = runs.cycle(analyse, runs.ensemble)
        return runs

    batches = [None] * len(sizes)
    losses, replaced = [], 0
    module.train()
    try:
        for iteration in range(n_iterations):
            slot = iteration % len(sizes)
            runs = batches[slot]
            if runs is None or runs.age >= lifetime or not _tracking(runs, threshold):
                replaced += runs is not None and runs.age < lifetime
                runs = batches[slot] = new_runs(sizes[slot])
            ensemble, loss = runs.ensemble, 0.0
            for _ in range(unroll):
                ensemble, truth = runs.cycle(analyse, ensemble)
                loss = loss + energy_loss(ensemble.permute(0, 2, 1).reshape(-1, ensemble.shape[1], 1),
                                          truth.reshape(-1, 1, 1)) / (2 * unroll)
            runs.ensemble, runs.age = ensemble.detach(), runs.age + 1
            if not torch.isfinite(loss):
                batches[slot] = None
                continue
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            optimiser.step()
            losses.append(loss.item())
            if verbose and (iteration + 1) % 25 == 0:
                print(f"fit_local_analysis_through_cycle: iteration {iteration + 1}/{n_iterations}: CRPS "
                      f"{np.mean(losses[-25:]):.4f} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    finally:
        module.eval()
    estimator.analysis_recipe_ = {**recipe, "trained_by": {
        "function": "fit_local_analysis_through_cycle",
        "target": "truth through the cycle" if records is None else
                  "stand-ins from recorded forecasts through the cycle",
        "n_forecasts": None if records is None else {str(size): len(group) for size, group in records.items()},
        "noise": [repr(law) for law in laws],
        "forecast_model": "Lorenz-96, forcing 8" if forecast_model is None else
                          getattr(forecast_model, "__qualname__", type(forecast_model).__qualname__),
        "ensemble_sizes": sizes,
        "dt_obs": intervals,
        "observation_spacings": spacings,
        "n_runs": int(n_runs), "unroll": int(unroll), "n_iterations": int(n_iterations), "spin_up": int(spin_up),
        "lifetime": int(lifetime), "lr": float(lr),
        "batches_replaced_for_losing_the_truth": int(replaced),
        "final_crps": round(float(np.mean(losses[-25:])), 5) if losses else None,
        "seconds": round(time.perf_counter() - start, 1),
        "earlier": rounds_so_far(recipe),
    }}
    return tuned


def _check_forecast_model(forecast_model, states, duration):
    """Refuse a forecast model that does not return finite float64 states of the shape it was given."""
    given = torch.as_tensor(states, dtype=torch.float64)
    try:
        with torch.no_grad():
            forecast = forecast_model(given.clone(), duration)
    except Exception as error:
        raise ValueError(f"forecast_model(states, duration) failed on recorded states of shape {tuple(given.shape)} "
                         f"and duration {duration}: {type(error).__name__}: {error}") from error
    if not isinstance(forecast, torch.Tensor):
        raise TypeError(f"forecast_model must return a torch.Tensor (the states forecast, written in torch so that "
                        f"the gradient flows through it); got {type(forecast).__name__}.")
    if forecast.shape != given.shape or forecast.dtype != torch.float64 or not bool(torch.isfinite(forecast).all()):
        raise ValueError(f"forecast_model must return finite float64 states of the shape it is given "
                         f"{tuple(given.shape)}; got {tuple(forecast.shape)}, {forecast.dtype}, "
                         f"{'finite' if bool(torch.isfinite(forecast).all()) else 'not finite'}.")


def _tracking(runs, threshold):
    """Whether every run's ensemble mean is finite and within ``threshold`` RMSE of its truth."""
    error = runs.ensemble.mean(dim=1) - runs.truth
    return bool(torch.isfinite(error).all()) and bool((error.pow(2).mean(dim=1).sqrt() < threshold).all())


def _positive_integers(values, name, *, minimum):
    checked = list(values)
    if not checked or any(isinstance(v, bool) or not isinstance(v, Integral) or v < minimum for v in checked):
        raise ValueError(f"{name} must be a non-empty sequence of integers >= {minimum}; got {list(values)!r}.")
    return [int(v) for v in checked]
