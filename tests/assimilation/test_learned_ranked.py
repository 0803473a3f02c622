"""A learned scalar update with the members' ranks among its features, and the model the study ships."""

from pathlib import Path

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor, load_model
from sklearn_measattn.assimilation import (
    RANKED_ANALYSIS_FEATURES,
    LearnedAnalysis,
    ObservationModel,
    RankHistogramFilter,
    analysis_features,
)

SHIPPED = Path(__file__).resolve().parents[2] / "studies" / "results" / "learned_bayes" / "quantile_softmax.safetensors"


def test_the_rank_feature_is_the_centred_quantile_level_with_ties_in_member_order():
    prior = np.array([3.0, 1.0, 2.0, 1.0])
    features, centre, scale = analysis_features(prior, 2.5, noise_scale=0.5, noise_tail=1.0, features="ranked")
    assert features.shape == (4, len(RANKED_ANALYSIS_FEATURES))
    np.testing.assert_allclose(features[:, 1], np.array([4, 1, 3, 2]) / 5 - 0.5)
    plain, _, _ = analysis_features(prior, 2.5, noise_scale=0.5, noise_tail=1.0)
    np.testing.assert_array_equal(np.delete(features, 1, axis=-1), plain)


def test_the_noise_ratio_is_clipped_to_the_range_given():
    prior = np.array([0.0, 1.0, 2.0])  # sd 1
    ratio = RANKED_ANALYSIS_FEATURES.index("log_noise_ratio")
    sharp, _, _ = analysis_features(prior, 1.0, noise_scale=0.01, noise_tail=0.0, features="ranked", noise_ratio_range=(0.2, 30))
    vague, _, _ = analysis_features(prior, 1.0, noise_scale=1e3, noise_tail=0.0, features="ranked", noise_ratio_range=(0.2, 30))
    np.testing.assert_allclose([sharp[0, ratio], vague[0, ratio]], np.log([0.2, 30.0]))


@pytest.fixture(scope="module")
def ranked_model():
    rng = np.random.default_rng(0)
    priors = rng.standard_normal((64, 12))
    X, _, _ = analysis_features(priors, rng.standard_cauchy(64), noise_scale=1.0, noise_tail=1.0, features="ranked")
    y = rng.standard_normal((64, 1, 1))
    return MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=8, n_heads=2, n_layers=1,
                                       dim_feedforward=16, max_epochs=1, random_state=0).fit(X, y)


@pytest.mark.slow
def test_a_model_fitted_on_ranked_features_gets_them_and_the_update_commutes_with_reflection(ranked_model):
    step = LearnedAnalysis(ranked_model, noise_ratio_range=(0.2, 30)).bind(
        ObservationModel(n_variables=4, noise="cauchy"), random_state=0)
    assert step.features_ == RANKED_ANALYSIS_FEATURES
    prior = np.random.default_rng(1).standard_normal(12) * 0.8 + 0.3
    posterior = step.scalar_update(prior, 1.7)
    assert posterior.shape == prior.shape and np.all(np.isfinite(posterior))
    # averaged with its reflection x -> -x, the update commutes with it exactly when every feature reflects right
    np.testing.assert_allclose(step.scalar_update(-prior, -1.7), -posterior, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("bad", [(30.0, 0.2), (0.0, 1.0), (1.0, float("inf")), (1.0,)])
def test_a_noise_ratio_range_that_is_not_an_interval_is_refused_when_bound(ranked_model, bad):
    with pytest.raises(ValueError, match="noise_ratio_range must be"):
        LearnedAnalysis(ranked_model, noise_ratio_range=bad).bind(ObservationModel(n_variables=4), random_state=0)


@pytest.mark.slow
def test_the_shipped_model_loads_into_a_filter_and_follows_bayes_rule_roughly():
    """The learned update the assimilation page measures: close to the rank histogram filter in one step."""
    model = load_model(SHIPPED)
    model_law = ObservationModel(n_variables=4, noise="cauchy")
    learned = LearnedAnalysis(model, noise_ratio_range=(0.2, 30.0)).bind(model_law, random_state=0)
    bayes = RankHistogramFilter().bind(model_law, random_state=0)
    prior = np.random.default_rng(2).standard_normal(40)
    prior = (prior - prior.mean()) / prior.std(ddof=1)
    for innovation in (0.5, 2.0, 1000.0):
        exact = np.sort(bayes.scalar_update(prior, innovation))
        got = np.sort(learned.scalar_update(prior, innovation))
        assert np.mean(np.abs(got - exact)) < 0.3, innovation  # in prior standard deviations
    # an outlier a thousand prior sd away hardly moves the ensemble, as Bayes' rule under Cauchy noise
    assert abs(learned.scalar_update(prior, 1000.0).mean()) < 0.2


@pytest.mark.parametrize("mode", [True, False], ids=["training-mode", "eval-mode"])
def test_an_analysis_runs_the_network_in_evaluation_mode_and_leaves_its_mode_as_found(ranked_model, mode):
    module = ranked_model.net_.module_
    step = LearnedAnalysis(ranked_model, noise_ratio_range=(0.2, 30)).bind(
        ObservationModel(n_variables=4, noise="cauchy"), random_state=0)
    forecast = np.random.default_rng(2).standard_normal((12, 4))
    module.eval()
    expected = step(forecast, np.array([0.5, -1.0, 3.0, 0.2]))
    module.train(mode)
    try:
        np.testing.assert_array_equal(step(forecast, np.array([0.5, -1.0, 3.0, 0.2])), expected)
        assert all(layer.training == mode for layer in module.modules())
    finally:
        module.eval()
