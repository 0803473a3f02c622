"""The learned analysis models shipped with the package load, and run in a filter without training."""

import pytest

from sklearn_measattn import MeasureTransformerRegressor, load_model
from sklearn_measattn.assimilation import (
    ANALYSIS_FEATURE_SETS,
    ANALYSIS_MODELS,
    LearnedAnalysis,
    ObservationModel,
    analysis_model_path,
    make_twin_problem,
    pretrained_analysis,
    twin_experiment,
)

LOCAL_MODELS = {"local", "local_student_t"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ANALYSIS_MODELS) - LOCAL_MODELS))
def test_every_shipped_model_is_a_small_model_file_of_a_learned_scalar_update(name):
    path = analysis_model_path(name)
    assert path.is_file() and path.suffix == ".safetensors"
    assert path.stat().st_size < 1_000_000
    model = load_model(path)
    assert isinstance(model, MeasureTransformerRegressor)
    sets = {len(names): names for names in ANALYSIS_FEATURE_SETS.values()}
    assert model.n_features_in_ in sets
    step = pretrained_analysis(name, inflation=1.02)
    assert isinstance(step, LearnedAnalysis) and step.inflation == 1.02
    bound = step.bind(ObservationModel(n_variables=4, noise="cauchy"))
    assert bound.features_ == sets[model.n_features_in_]


@pytest.mark.parametrize("name, student_t", [("local", False), ("local_student_t", True)])
def test_the_local_models_are_small_files_of_a_local_learned_analysis(name, student_t):
    from sklearn_measattn.assimilation import LocalLearnedAnalysis

    path = analysis_model_path(name)
    assert path.stat().st_size < 2_500_000  # the weights and the per-batch training history of both rounds
    step = pretrained_analysis(name, inflation=1.02)
    assert isinstance(step, LocalLearnedAnalysis) and step.inflation == 1.02
    recipe = step.bind(ObservationModel(n_variables=40)).recipe_
    assert recipe["window_radius"] == 4 and recipe.get("letkf_student_t", False) is student_t
    assert [r["function"] for r in recipe["trained_by"].get("earlier", [])] == ["fit_local_analysis"]


def test_unknown_names_and_parameters_are_refused_before_loading():
    with pytest.raises(ValueError, match=r"No shipped analysis model named 'bayes'.*quantile_residual_fit"):
        pretrained_analysis("bayes")
    with pytest.raises(ValueError, match="No shipped analysis model"):
        analysis_model_path("quantile_residual_fit.safetensors")
    with pytest.raises(TypeError, match="name must be a str"):
        analysis_model_path(3)
    with pytest.raises(TypeError, match=r"does not take: \['inflaton'\]"):
        pretrained_analysis("quantile_residual_fit", inflaton=1.02)


@pytest.mark.parametrize("name", sorted(set(ANALYSIS_MODELS) - LOCAL_MODELS))
def test_every_scalar_model_is_read_by_the_recipe_its_file_holds(name):
    step = pretrained_analysis(name).bind(ObservationModel(n_variables=4))
    recipe = step.estimator.analysis_recipe_
    assert recipe["trained_by"]["function"] == "fit_learned_analysis"
    assert step.noise_ratio_range_ == tuple(recipe["noise_ratio_range"]) == (0.1, 100.0)
    assert step.level_offset_ == recipe["level_offset"] == 0.45
    assert "fit_learned_analysis(" in ANALYSIS_MODELS[name]
    with pytest.raises(ValueError, match="noise_ratio_range"):
        pretrained_analysis(name, noise_ratio_range=(0.2, 30.0)).bind(ObservationModel(n_variables=4))


@pytest.mark.slow
def test_the_default_model_tracks_the_truth_under_cauchy_noise_better_than_no_update():
    problem = make_twin_problem(n_variables=12, noise="cauchy", n_cycles=80, random_state=3)
    learned = twin_experiment(pretrained_analysis(relaxation=0.3), problem, ensemble_size=12, spin_up=20,
                              random_state=0)
    free = twin_experiment("none", problem, ensemble_size=12, spin_up=20, random_state=0)
    assert not learned.diverged
    assert learned.rmse < 0.5 * free.rmse


@pytest.mark.slow
@pytest.mark.parametrize("law", ["contaminated", "skewed"])
def test_the_models_trained_on_an_error_record_track_the_truth_under_that_law(law):
    from sklearn_measattn.assimilation import SampledObservationModel, contaminated_errors, skewed_errors

    errors = (contaminated_errors(10_000, gross_fraction=0.05, gross_scale=10.0, random_state=0) if law == "contaminated"
              else skewed_errors(10_000, skewness=0.5, df=3.0, random_state=10))
    problem = make_twin_problem(observation_model=SampledObservationModel(errors, n_variables=12), n_cycles=80,
                                random_state=3)
    step = pretrained_analysis(f"sampled_{law}", relaxation=0.3)
    assert step.bind(problem.observation_model).reflect_ is False  # a record does not say its law is symmetric
    learned = twin_experiment(step, problem, ensemble_size=12, spin_up=20, random_state=0)
    free = twin_experiment("none", problem, ensemble_size=12, spin_up=20, random_state=0)
    assert not learned.diverged
    assert learned.rmse < 0.5 * free.rmse
