"""The learned analysis models shipped with the package load, and run in a filter without training."""

import numpy as np
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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ANALYSIS_MODELS) - {"local"}))
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


def test_the_local_model_is_a_small_file_of_a_local_learned_analysis():
    from sklearn_measattn.assimilation import LocalLearnedAnalysis

    path = analysis_model_path("local")
    assert path.stat().st_size < 2_000_000  # the weights and the per-batch training history
    step = pretrained_analysis("local", inflation=1.02)
    assert isinstance(step, LocalLearnedAnalysis) and step.inflation == 1.02
    assert step.bind(ObservationModel(n_variables=40)).recipe_["window_radius"] == 4


def test_unknown_names_and_parameters_are_refused_before_loading():
    with pytest.raises(ValueError, match=r"No shipped analysis model named 'bayes'.*quantile_softmax"):
        pretrained_analysis("bayes")
    with pytest.raises(ValueError, match="No shipped analysis model"):
        analysis_model_path("quantile_softmax.safetensors")
    with pytest.raises(TypeError, match="name must be a str"):
        analysis_model_path(3)
    with pytest.raises(TypeError, match=r"does not take: \['inflaton'\]"):
        pretrained_analysis("quantile_softmax", inflaton=1.02)


def test_the_trained_noise_ratio_range_is_set_unless_given():
    assert pretrained_analysis("quantile_softmax").noise_ratio_range == (0.2, 30.0)
    assert pretrained_analysis("quantile_softmax", noise_ratio_range=None).noise_ratio_range is None
    assert pretrained_analysis("quantile_softmax").level_offset is None
    residual = pretrained_analysis("quantile_residual")
    assert (residual.noise_ratio_range, residual.level_offset) == ((0.1, 100.0), 0.45)
    assert pretrained_analysis("quantile_residual", level_offset=None).level_offset is None


@pytest.mark.slow
def test_the_reference_model_ignores_an_outlier_and_follows_an_informative_observation():
    # Bayes' rule under Cauchy noise at the prior's scale: an observation 1000 prior sd away barely moves the
    # posterior, one at 1 sd moves its mean by about 0.45 sd; a Kalman update would follow both in proportion
    step = pretrained_analysis("quantile_softmax").bind(ObservationModel(n_variables=4, noise="cauchy"))
    rng = np.random.default_rng(0)
    shifts = {1.0: [], 1000.0: []}
    for _ in range(20):
        prior = rng.standard_normal(40)
        prior = (prior - prior.mean()) / prior.std(ddof=1)
        for innovation in shifts:
            shifts[innovation].append(step.scalar_update(prior.copy(), innovation).mean())
    assert 0.1 < np.mean(shifts[1.0]) < 0.8
    assert abs(np.mean(shifts[1000.0])) < 0.3


@pytest.mark.slow
def test_the_reference_model_tracks_the_truth_under_cauchy_noise_better_than_no_update():
    problem = make_twin_problem(n_variables=12, noise="cauchy", n_cycles=80, random_state=3)
    learned = twin_experiment(pretrained_analysis("quantile_softmax", relaxation=0.3), problem, ensemble_size=12,
                              spin_up=20, random_state=0)
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
