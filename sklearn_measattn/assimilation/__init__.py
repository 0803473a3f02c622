"""Ensemble data assimilation in the loop: cycled twin experiments, baseline filters and a learned analysis.

A *twin experiment* simulates a true trajectory of the Lorenz-96 model,
observes it with Gaussian or heavy-tailed noise, and runs an ensemble filter
on the observations, cycle after cycle: forecast the ensemble to the next
observation time, turn the forecast and the observation into an analysis
ensemble, start the next forecast from it. The analysis is scored against
the truth at every cycle (RMSE of the mean, spread, CRPS, energy score) and
divergence is detected.

- The experiment: :func:`make_twin_problem` (truth and observations, to share
  between filters), :func:`twin_experiment`, :class:`TwinResult`,
  :class:`ObservationModel`.
- Analysis steps that need no training: :class:`NoUpdate`, :class:`EnKF`,
  :class:`RobustEnKF` (Huber-type clipping), :class:`SerialEnKF` and
  :class:`ParticleFilter` (the Bayes reference with many members), by name
  (:data:`ANALYSIS_NAMES`; their classes by name in :data:`ANALYSIS_STEPS`).
- The Bayes reference for scalar updates: :class:`RankHistogramFilter`, the
  serial filter whose update of each observed variable is Bayes' rule with
  the true likelihood (or an assumed one) and a rank histogram (or kernel
  density) prior, by name too.
- Your own step: subclass :class:`AnalysisStep` and implement ``analyse``,
  or subclass :class:`SerialEnKF` and override ``scalar_update``.
- Noise laws, apart from which variables are observed: :class:`NoiseLaw`
  (draws, scale, tail, symmetry, a density where known), the built-in
  :class:`GaussianNoise`, :class:`StudentTNoise` and :class:`CauchyNoise`;
  a law of your own subclasses :class:`NoiseLaw`. An
  :class:`ObservationModel` observes variables through one
  (``noise=law``), and the training functions take a law as it is.
- Noise known only by a record of errors: :class:`SampledNoise` resamples it
  to simulate and has no density; it fits the densities Bayes' rule needs (a
  Student-t, :class:`KernelDensityNoise`); :class:`SampledObservationModel`
  and :class:`KernelDensityObservationModel` observe through them; two laws
  outside the Student-t family to sample, :func:`contaminated_errors` and
  :func:`skewed_errors`.
- A learned analysis: :func:`fit_learned_analysis` trains one for any noise law
  you can draw from (a record of errors included) and returns it ready;
  :class:`LearnedAnalysis` puts a fitted measure-to-measure
  model in a serial filter, trained on :func:`make_analysis_training_data`
  (priors recorded in a cycled filter) or likelihood-free on
  :func:`make_synthetic_analysis_data` (synthetic priors, any noise law you
  can draw from, a sample of errors included);
  the models of the assimilation pages ship with the package
  (:data:`ANALYSIS_MODELS`): :func:`pretrained_analysis` puts one in a filter,
  :func:`analysis_model_path` gives its file for :func:`~sklearn_measattn.load_model`.
- The local learned analysis, a measure-to-measure LETKF: :class:`LocalLearnedAnalysis`
  maps every grid point's window (:func:`local_analysis_features`) to its
  analysis members, one batched network call per cycle;
  :func:`fit_local_analysis` trains one without the likelihood and without
  the truth (priors from :func:`record_forecasts`, pairs from
  :func:`make_local_analysis_data`); where the forecast model is
  differentiable, :func:`fit_local_analysis_through_cycle` fine-tunes it
  through the cycle, against nature runs or stand-in members of recorded
  forecasts, differentiating :func:`unrolled_local_analysis` and the forecasts
  (of Lorenz-96, or of the user's own system written in torch).
- DAPPER's filters on the same truth and observations: :func:`run_dapper`
  (optional extra ``pip install sklearn-measattn[assimilation]``); the other
  way round, any analysis step as a DAPPER method (an ``xp`` for DAPPER's
  hidden Markov models, ``xpList`` and statistics): :func:`dapper_method`.
"""

from .._lorenz96 import CauchyNoise, GaussianNoise, NoiseLaw, StudentTNoise
from ._baselines import (
    AnalysisStep,
    EnKF,
    NoUpdate,
    ParticleFilter,
    RobustEnKF,
    SerialEnKF,
    gaspari_cohn,
    localization_matrix,
)
from ._dapper import DAPPER_METHODS, dapper_method, run_dapper
from ._fit_learned import fit_learned_analysis
from ._learned import (
    ANALYSIS_FEATURE_SETS,
    ANALYSIS_FEATURES,
    KALMAN_ANALYSIS_FEATURES,
    RANKED_ANALYSIS_FEATURES,
    LearnedAnalysis,
    analysis_features,
    make_analysis_training_data,
)
from ._letkf import LETKF
from ._local import (
    LOCAL_ANALYSIS_FEATURES,
    LocalLearnedAnalysis,
    fit_local_analysis,
    local_analysis_features,
    make_local_analysis_data,
    record_forecasts,
)
from ._pretrained import ANALYSIS_MODELS, analysis_model_path, pretrained_analysis
from ._problem import ObservationModel, TwinProblem, make_twin_problem
from ._rank_histogram import RankHistogramFilter
from ._sampled import (
    KernelDensityNoise,
    KernelDensityObservationModel,
    SampledNoise,
    SampledObservationModel,
    contaminated_errors,
    skewed_errors,
)
from ._synthetic import PRIOR_KINDS, make_synthetic_analysis_data
from ._through_cycle import fit_local_analysis_through_cycle, unrolled_local_analysis
from ._twin import ANALYSIS_NAMES, ANALYSIS_STEPS, DIVERGENCE_RULE, TwinResult, resolve_analysis, twin_experiment
from ._workflow import TUNING_RULE, TuningResult, compare_analyses, tune_analysis

__all__ = [
    "ANALYSIS_FEATURE_SETS",
    "ANALYSIS_FEATURES",
    "ANALYSIS_MODELS",
    "ANALYSIS_NAMES",
    "ANALYSIS_STEPS",
    "DAPPER_METHODS",
    "DIVERGENCE_RULE",
    "KALMAN_ANALYSIS_FEATURES",
    "LOCAL_ANALYSIS_FEATURES",
    "PRIOR_KINDS",
    "RANKED_ANALYSIS_FEATURES",
    "AnalysisStep",
    "CauchyNoise",
    "EnKF",
    "GaussianNoise",
    "KernelDensityNoise",
    "KernelDensityObservationModel",
    "LETKF",
    "LocalLearnedAnalysis",
    "LearnedAnalysis",
    "NoUpdate",
    "NoiseLaw",
    "ObservationModel",
    "ParticleFilter",
    "RankHistogramFilter",
    "RobustEnKF",
    "SampledNoise",
    "SampledObservationModel",
    "SerialEnKF",
    "StudentTNoise",
    "TUNING_RULE",
    "TuningResult",
    "TwinProblem",
    "TwinResult",
    "analysis_features",
    "analysis_model_path",
    "compare_analyses",
    "contaminated_errors",
    "dapper_method",
    "fit_learned_analysis",
    "fit_local_analysis",
    "fit_local_analysis_through_cycle",
    "gaspari_cohn",
    "local_analysis_features",
    "localization_matrix",
    "make_analysis_training_data",
    "make_local_analysis_data",
    "make_synthetic_analysis_data",
    "make_twin_problem",
    "pretrained_analysis",
    "record_forecasts",
    "resolve_analysis",
    "run_dapper",
    "skewed_errors",
    "tune_analysis",
    "twin_experiment",
    "unrolled_local_analysis",
]
