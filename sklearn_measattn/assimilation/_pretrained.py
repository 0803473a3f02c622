"""Learned analysis models shipped with the package, ready to put in a filter."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ._learned import LearnedAnalysis
from ._local import LocalLearnedAnalysis

__all__ = ["ANALYSIS_MODELS", "analysis_model_path", "pretrained_analysis"]


@dataclass(frozen=True)
class _ShippedModel:
    description: str
    noise_ratio_range: tuple | None
    trained_by: str
    level_offset: float | None = None
    local: bool = False  # a LocalLearnedAnalysis model, whose file holds its own reading settings


# how every model of the residual recipe is read: the noise-to-prior ratios it was trained on, and the quantile
# levels (k - 0.45) / (N + 0.1) at which its members sit best in the cycle
_READ_AS_RESIDUAL = {"noise_ratio_range": (0.1, 100.0), "level_offset": 0.45}

_SHIPPED = {
    "local": _ShippedModel(
        description=(
            "the local learned analysis: each grid point's window (radius 4) of the forecast ensemble, its "
            "observations and each member's local ETKF analysis in, a correction of that analysis out, for all "
            "grid points in one batched call per cycle; trained likelihood-free and truth-free on LETKF forecasts "
            "of 10, 20 and 40 members (one member the stand-in truth) with Gaussian, Student-t (df 1.5, 4) and "
            "Cauchy noise of scales 0.5-2 on every first, second or fourth variable; the assimilation page's "
            "local rows"
        ),
        noise_ratio_range=None,
        trained_by="fit_local_analysis(random_state=0) (python benchmarks/local_analysis_training.py --out <file>)",
        local=True,
    ),
    "quantile_residual_fit": _ShippedModel(
        description=(
            "the residual recipe of quantile_residual trained by the package alone: make_synthetic_analysis_data "
            "with Student-t priors among the synthetic ones (far observations under light-tailed noise) and "
            "MeasureTransformerRegressor.fit (residual, quantile loss, one-cycle schedule); members read at the "
            "levels (k - 0.45) / (N + 0.1); the assimilation page's second held-out learned row"
        ),
        noise_ratio_range=None,  # its file holds its recipe
        trained_by="fit_learned_analysis(random_state=0)",
    ),
    "quantile_residual_fit_1layer": _ShippedModel(
        description=(
            "quantile_residual_fit with one attention block instead of two: about two thirds of its time per cycle, "
            "a few percent further from Bayes' rule (held out at 0.96-0.99 of the rank histogram filter under "
            "Cauchy noise where quantile_residual_fit is at 0.88-0.90); the assimilation page's cost table"
        ),
        **_READ_AS_RESIDUAL,
        trained_by=(
            "python studies/learned_bayes.py --fit-residual <model file> --t-priors 0.25 --layers 1 --diagnostic \"\""
        ),
    ),
    "sampled_contaminated": _ShippedModel(
        description=(
            "the recipe of quantile_residual_fit trained on one noise law known only by a record of 10^4 errors, "
            "resampled (no density fitted or evaluated): contaminated_errors(10_000, gross_fraction=0.05, "
            "gross_scale=10.0, random_state=0), Gaussian errors of sd 1 with 5% gross Cauchy errors of scale 10; "
            "bind it to SampledObservationModel(errors) of that law; the assimilation page's contaminated rows"
        ),
        **_READ_AS_RESIDUAL,
        trained_by="python studies/sampled_noise.py --laws contaminated --train-only --models <folder>",
    ),
    "sampled_skewed": _ShippedModel(
        description=(
            "as sampled_contaminated, trained on the record skewed_errors(10_000, skewness=0.5, df=3.0, "
            "random_state=10), a two-piece Student-t with 3 degrees of freedom whose right half is 3 times wider "
            "than its left, median 0; the page's skewed rows"
        ),
        **_READ_AS_RESIDUAL,
        trained_by="python studies/sampled_noise.py --laws skewed --train-only --models <folder>",
    ),
    "quantile_residual": _ShippedModel(
        description=(
            "softmax attention, residual (the network moves each member; an uninformative observation leaves it "
            "where it is), 7 Kalman features, trained likelihood-free with the quantile loss on synthetic priors "
            "(Gaussian, skewed, bimodal) with noise laws from Gaussian to Cauchy and noise-to-prior scale ratios "
            "0.1-100, members read at the levels (k - 0.45) / (N + 0.1); the assimilation page's held-out learned "
            "row"
        ),
        **_READ_AS_RESIDUAL,
        trained_by=(
            "python studies/learned_bayes.py --train-residual --residual <file> --export <model file> "
            "--diagnostic \"\""
        ),
    ),
    "quantile_softmax": _ShippedModel(
        description=(
            "softmax attention on symlog features, 5 ranked features, trained likelihood-free on synthetic priors "
            "(Gaussian, skewed, bimodal) with noise laws from Gaussian to Cauchy and noise-to-prior scale ratios "
            "0.2-30; the reference page's learned row"
        ),
        noise_ratio_range=(0.2, 30.0),
        trained_by="python studies/learned_bayes.py --train --epochs 5 --model <file> --diagnostic \"\"",
    ),
    "softmax_symlog": _ShippedModel(
        description=(
            "softmax attention on symlog features, 4 features, trained on cycled-filter priors (Gaussian, "
            "Student-t 1.5 and Cauchy noise at scales 0.5, 1, 2); the assimilation study's softmax/symlog row"
        ),
        noise_ratio_range=None,
        trained_by="python studies/assimilation_study.py --learned softmax/symlog (model cached in --cache)",
    ),
    "softmax_none": _ShippedModel(
        description="as softmax_symlog without the symlog transform; the study's softmax/none row",
        noise_ratio_range=None,
        trained_by="python studies/assimilation_study.py --learned softmax/none",
    ),
    "log_symlog": _ShippedModel(
        description="as softmax_symlog with the log attention kernel, on all the pairs; the study's log/symlog row",
        noise_ratio_range=None,
        trained_by="python studies/assimilation_study.py --learned log/symlog",
    ),
}

#: The shipped learned analysis models: name -> what it is and how it was trained.
ANALYSIS_MODELS = {name: f"{model.description} (retrain: {model.trained_by})" for name, model in _SHIPPED.items()}


def _shipped(name):
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {sorted(_SHIPPED)}; got a {type(name).__name__}.")
    if name not in _SHIPPED:
        raise ValueError(f"No shipped analysis model named {name!r}; the shipped ones are {sorted(_SHIPPED)}.")
    return _SHIPPED[name]


def analysis_model_path(name):
    """The model file of a shipped learned analysis model, for :func:`~sklearn_measattn.load_model`.

    Parameters
    ----------
    name : str
        A key of :data:`ANALYSIS_MODELS`.

    Returns
    -------
    pathlib.Path
        The safetensors model file inside the installed package.

    Examples
    --------
    >>> from sklearn_measattn import load_model
    >>> from sklearn_measattn.assimilation import analysis_model_path
    >>> model = load_model(analysis_model_path("quantile_softmax"))
    >>> model.n_features_in_, model.kernel
    (5, 'softmax')
    """
    _shipped(name)
    return Path(resources.files(__package__).joinpath("models", f"{name}.safetensors"))


def pretrained_analysis(name="quantile_residual_fit", **params):
    """A :class:`LearnedAnalysis` around a shipped model, ready for :func:`twin_experiment` or DAPPER.

    Loads the model file of :func:`analysis_model_path` with
    :func:`~sklearn_measattn.load_model` (its content digest checked) and
    reads it by the recipe its file holds (``noise_ratio_range``,
    ``level_offset``; for the models made before recipes were recorded, the
    range they were trained on and the levels their page reads them at,
    unless given). No
    training: every learned row of the assimilation pages can be rerun from
    these files. ``"quantile_residual"`` is the one that matches the rank
    histogram filter held out under heavy-tailed noise;
    ``"quantile_residual_fit"`` is the same recipe trained by
    :meth:`~sklearn_measattn.MeasureTransformerRegressor.fit` alone.
    ``"sampled_contaminated"`` and ``"sampled_skewed"`` were trained on one
    record of errors of one law each (see :data:`ANALYSIS_MODELS`): bind them
    to a :class:`SampledObservationModel` of that law.

    Parameters
    ----------
    name : str, default="quantile_residual_fit"
        A key of :data:`ANALYSIS_MODELS`; the default is the shipped scalar
        update that is best held out (at or below the rank histogram filter
        under heavy-tailed noise, at its level under Gaussian noise).
    **params
        Parameters of :class:`LearnedAnalysis` (``inflation``,
        ``relaxation``, ``localization_radius``, ``update``,
        ``noise_ratio_range``, ``batch_disjoint``, ``level_offset``). The pages tune
        ``inflation`` and ``relaxation`` per noise law; ``relaxation=0.3``
        holds for every law they show.

    Returns
    -------
    LearnedAnalysis or LocalLearnedAnalysis
        The step of the model: ``"local"`` is a :class:`LocalLearnedAnalysis`
        (its file says how to read it, so only ``inflation``,
        ``localization_radius`` and ``reflect`` may be passed).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem, pretrained_analysis, twin_experiment
    >>> step = pretrained_analysis("quantile_softmax", relaxation=0.3)
    >>> step.noise_ratio_range
    (0.2, 30.0)
    >>> pretrained_analysis("quantile_residual").level_offset
    0.45
    >>> problem = make_twin_problem(n_variables=10, noise="cauchy", n_cycles=30, random_state=0)
    >>> result = twin_experiment(step, problem, spin_up=10, ensemble_size=10, random_state=0)
    >>> result.diverged
    False
    """
    from .._model_files import load_model

    shipped = _shipped(name)
    step = LocalLearnedAnalysis if shipped.local else LearnedAnalysis
    allowed = frozenset(step._get_param_names()) - {"estimator"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise TypeError(
            f"pretrained_analysis got parameters that {step.__name__} (the step of {name!r}) does not take: "
            f"{unknown}; it takes {sorted(allowed)}."
        )
    if shipped.local:
        return LocalLearnedAnalysis(load_model(analysis_model_path(name)), **params)
    estimator = load_model(analysis_model_path(name))
    if getattr(estimator, "analysis_recipe_", None) is None:  # a model made before recipes were recorded
        params.setdefault("noise_ratio_range", shipped.noise_ratio_range)
        params.setdefault("level_offset", shipped.level_offset)
    return LearnedAnalysis(estimator, **params)

