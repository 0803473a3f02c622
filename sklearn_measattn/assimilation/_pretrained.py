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
    trained_by: str
    local: bool = False  # a LocalLearnedAnalysis model (its file holds a local recipe)


_CONTAMINATED_RECORD = "contaminated_errors(10_000, gross_fraction=0.05, gross_scale=10.0, random_state=0)"
_SKEWED_RECORD = "skewed_errors(10_000, skewness=0.5, df=3.0, random_state=10)"

# Every file holds the recipe it was trained by (``analysis_recipe_``), so it is read with nothing passed beside it.
_SHIPPED = {
    "quantile_residual_fit": _ShippedModel(
        description=(
            "the learned scalar update of the assimilation page: a residual network (the members' increments) with "
            "the 7 Kalman features, fitted with the quantile loss on synthetic priors (Gaussian, skewed, bimodal, "
            "Student-t) under noise laws from Gaussian to Cauchy at noise-to-prior ratios 0.1-100, likelihood-free; "
            "members read at the levels (k - 0.45) / (N + 0.1); observations beyond 2-3 widths of the noise law "
            "turn to Bayes' rule (the rank histogram update)"
        ),
        trained_by="fit_learned_analysis(random_state=0)",
    ),
    "quantile_residual_fit_1layer": _ShippedModel(
        description=(
            "quantile_residual_fit with one attention block instead of two: about two thirds of its time per cycle, "
            "a few percent further from Bayes' rule; the assimilation page's cost table"
        ),
        trained_by="fit_learned_analysis(n_layers=1, random_state=0)",
    ),
    "sampled_contaminated": _ShippedModel(
        description=(
            "the recipe of quantile_residual_fit trained on one noise law known only by a record of 10^4 errors, "
            f"resampled (no density fitted or evaluated): {_CONTAMINATED_RECORD}, Gaussian errors of sd 1 with 5% "
            "gross Cauchy errors of scale 10; bind it to an observation model of that record; the assimilation "
            "page's contaminated rows"
        ),
        trained_by=f"fit_learned_analysis(SampledNoise({_CONTAMINATED_RECORD}), random_state=0)",
    ),
    "sampled_skewed": _ShippedModel(
        description=(
            f"as sampled_contaminated, trained on the record {_SKEWED_RECORD}, a two-piece Student-t with 3 degrees "
            "of freedom whose right half is 3 times wider than its left, median 0; the page's skewed rows"
        ),
        trained_by=f"fit_learned_analysis(SampledNoise({_SKEWED_RECORD}), random_state=0)",
    ),
    "local": _ShippedModel(
        description=(
            "the local learned analysis: each grid point's window (radius 4) of the forecast ensemble, its "
            "observations and each member's local ETKF analysis in, a correction of that analysis out, for all "
            "grid points in one batched call per cycle; trained likelihood-free and truth-free on LETKF forecasts "
            "of 10, 20 and 40 members (one member the stand-in truth) with Gaussian, Student-t (df 1.5, 4) and "
            "Cauchy noise of scales 0.5-2 on every first, second or fourth variable, then through the cycle: runs "
            "started from those forecasts, one member the stand-in truth carried forward by the Lorenz-96 model, "
            "scored over five cycles of forecasts and analyses; the local analysis page"
        ),
        trained_by=(
            "benchmarks/local_analysis_training.py: forecasts = record_forecasts(random_state=0); step = "
            "fit_local_analysis(forecasts=forecasts, max_epochs=10), then fit_local_analysis_through_cycle(step, "
            "forecasts=forecasts, n_iterations=3600, n_runs=4, unroll=5, lifetime=1, spin_up=0, random_state=0)"
        ),
        local=True,
    ),
    "local_student_t": _ShippedModel(
        description=(
            "the local recipe with Student-t weights in the local ETKF analysis the network corrects (each "
            "observation's precision times its Student-t expectation given the innovation, df = 1 / tail of the "
            "noise law; the same analysis as local's under Gaussian noise): below local with heavy-tailed errors "
            "on dense observation networks, above it with Gaussian errors on sparse ones; the local analysis page"
        ),
        trained_by=(
            "benchmarks/local_analysis_training.py --student-t: as local's, with fit_local_analysis(forecasts="
            "forecasts, student_t=True, max_epochs=10)"
        ),
        local=True,
    ),
}

#: The shipped learned analysis models: name -> what it is and the public call that trains it again.
ANALYSIS_MODELS = {name: f"{model.description} (trained by {model.trained_by})" for name, model in _SHIPPED.items()}


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
    >>> model = load_model(analysis_model_path("quantile_residual_fit"))
    >>> model.n_features_in_, model.analysis_recipe_["features"]
    (7, 'kalman')
    """
    _shipped(name)
    return Path(resources.files(__package__).joinpath("models", f"{name}.safetensors"))


def pretrained_analysis(name="quantile_residual_fit", **params):
    """A :class:`LearnedAnalysis` around a shipped model, ready for :func:`twin_experiment` or DAPPER.

    Loads the model file of :func:`analysis_model_path` with
    :func:`~sklearn_measattn.load_model` (its content digest checked) and
    reads it by the recipe its file holds (``noise_ratio_range``,
    ``level_offset``, the feature set; for the local model its window). No
    training: every learned row of the assimilation pages can be rerun from
    these files, and each was trained by the public call that
    :data:`ANALYSIS_MODELS` names. ``"sampled_contaminated"`` and
    ``"sampled_skewed"`` were trained on one record of errors of one law each:
    bind them to a :class:`SampledObservationModel` of that law.

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
        The step of the model: ``"local"`` and ``"local_student_t"`` are :class:`LocalLearnedAnalysis` steps
        (its file says how to read it, so only ``inflation``,
        ``localization_radius`` and ``reflect`` may be passed).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_twin_problem, pretrained_analysis, twin_experiment
    >>> step = pretrained_analysis(relaxation=0.3)
    >>> bound = step.bind(make_twin_problem(n_variables=10, n_cycles=1, random_state=0).observation_model)
    >>> bound.noise_ratio_range_, bound.level_offset_
    ((0.1, 100.0), 0.45)
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
    return LearnedAnalysis(load_model(analysis_model_path(name)), **params)

