"""A residual learned scalar update: Kalman features, quantile levels, the shipped model against Bayes' rule."""

import pickle

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.assimilation import (
    ANALYSIS_FEATURE_SETS,
    KALMAN_ANALYSIS_FEATURES,
    LearnedAnalysis,
    ObservationModel,
    analysis_features,
    make_synthetic_analysis_data,
    pretrained_analysis,
)
from sklearn_measattn.assimilation._learned import _level_map, _trained_level_offset
from sklearn_measattn.transformer import MeasureTransformer


def test_kalman_features_are_the_quantities_of_a_kalman_update():
    prior = np.array([1.0, 2.0, 3.0, 6.0])
    features, centre, scale = analysis_features(prior, 9.0, noise_scale=2.0 * np.std(prior, ddof=1), noise_tail=0.5,
                                                features="kalman")
    assert features.shape == (4, len(KALMAN_ANALYSIS_FEATURES))
    column = dict(zip(KALMAN_ANALYSIS_FEATURES, features.T))
    innovation = (9.0 - centre) / scale
    assert_allclose(column["asinh_innovation"], np.arcsinh(innovation))
    assert_allclose(column["asinh_normalised_innovation"], np.arcsinh(innovation / np.sqrt(5.0)))  # ratio 2
    assert_allclose(column["kalman_gain"], 0.2)
    assert_allclose(column["log_noise_ratio"], np.log(2.0))
    ranked, _, _ = analysis_features(prior, 9.0, noise_scale=1.0, noise_tail=0.5, features="ranked")
    assert_allclose(column["rank"], ranked[:, 1])
    with pytest.raises(ValueError, match=r"features must be one of \['kalman', 'plain', 'ranked'\]; got 'bayes'"):
        analysis_features(prior, 9.0, noise_scale=1.0, noise_tail=0.5, features="bayes")


def test_rank_is_a_feature_set_not_a_keyword():
    prior = np.array([3.0, 1.0, 2.0])
    ranked = analysis_features(prior, 4.0, noise_scale=1.0, noise_tail=1.0, features="ranked")[0]
    assert_allclose(ranked[:, 1], [0.25, -0.25, 0.0])  # k / (N + 1) - 1/2 of the ranks 3, 1, 2
    with pytest.raises(TypeError, match="rank"):
        analysis_features(prior, 4.0, noise_scale=1.0, noise_tail=1.0, rank=True)


def test_synthetic_pairs_in_kalman_features_and_their_reflection():
    laws = [ObservationModel(n_variables=4, noise="cauchy")]
    X, y = make_synthetic_analysis_data(laws, n_priors=50, draws=2, ensemble_size=8, features="kalman",
                                        random_state=0)
    assert X.shape == (200, 8, 7) and y.shape == (200, 1, 1)
    half = len(X) // 2
    sign = np.array([-1, -1, -1, -1, 1, 1, 1])  # member, rank, both innovations flip; ratio, gain, tail do not
    assert_allclose(X[half:], X[:half] * sign)
    assert_allclose(y[half:], -y[:half])
    ranked, _ = make_synthetic_analysis_data(laws, n_priors=50, draws=2, ensemble_size=8, random_state=0)
    assert_allclose(X[..., :2], ranked[..., :2])  # the same pairs, other features


def test_level_map_moves_members_between_quantile_levels():
    members = np.sort(np.random.default_rng(0).normal(size=(3, 9)), axis=-1)
    assert_allclose(_level_map(0.3, 0.3)(members), members)
    wider = _level_map(0.3, 0.45)(members)
    assert np.all(np.ptp(wider, axis=-1) > np.ptp(members, axis=-1))
    # a quantile function that is linear in the level is read exactly, also beyond the outer members
    n, a0, a1 = 9, 0.5, 0.0
    k = np.arange(1, n + 1)
    linear = 2.0 + 3.0 * (k - a0) / (n + 1 - 2 * a0)
    assert_allclose(_level_map(a0, a1)(linear), 2.0 + 3.0 * k / (n + 1))


def _tiny_model(loss, **params):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 6, 7)).astype(np.float32)
    return MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1, loss=loss, random_state=0,
                                       **params).fit(X, X[:, :1, :1])


def test_level_offset_reads_the_levels_of_the_training_loss():
    assert _trained_level_offset(_tiny_model("quantile", loss_params={"level_offset": 0.3})) == 0.3
    assert _trained_level_offset(_tiny_model("energy")) == 0.5
    step = LearnedAnalysis(_tiny_model("sliced"), level_offset=0.4)
    with pytest.raises(ValueError, match="loss='quantile'.*loss='sliced'.*level_offset=None"):
        step.bind(ObservationModel(n_variables=4, noise="cauchy"))
    with pytest.raises(ValueError, match="level_offset"):
        LearnedAnalysis(_tiny_model("energy"), level_offset=1.5).bind(ObservationModel(n_variables=4))


def test_a_residual_network_starts_as_the_identity_and_learns_a_displacement():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(64, 10, 3)).astype(np.float32)
    untrained = MeasureTransformerRegressor(residual=True, d_model=8, n_heads=2, n_layers=1, max_epochs=1, lr=1e-12,
                                            random_state=0).fit(X, X[:, :, :2])
    assert_allclose(untrained.predict(X), X[:, :, :2], atol=1e-5)
    trained = MeasureTransformerRegressor(residual=True, loss="mse", d_model=8, n_heads=2, n_layers=1, max_epochs=30,
                                          lr=1e-2, random_state=0).fit(X, X[:, :, :1] + 1.0)
    error = np.abs(trained.predict(X) - (X[:, :, :1] + 1.0)).mean()
    assert error < 0.3, error  # the identity's error is 1
    with pytest.raises(ValueError, match="n_features_out=4 .* n_features_in=3; use residual=False"):
        MeasureTransformer(3, 4, residual=True)


def test_a_pickled_module_keeps_its_residual_option():
    module = MeasureTransformer(2, 1, d_model=8, n_heads=2, n_layers=1, residual=True, random_state=0)
    loaded = pickle.loads(pickle.dumps(module))
    X = torch.randn(2, 5, 2)
    assert loaded.residual
    assert_allclose(loaded(X).detach().numpy(), module(X).detach().numpy())
    assert pickle.loads(pickle.dumps(MeasureTransformer(2, 1, d_model=8, n_heads=2, n_layers=1))).residual is False


def _exact_posterior_mean_and_sd(innovation, noise_scale=1.0):
    # standard normal prior, Cauchy likelihood of the given scale: Bayes' rule on a fine grid
    x = np.linspace(-12.0, 12.0, 48001)
    density = np.exp(-0.5 * x**2) / (1.0 + ((innovation - x) / noise_scale) ** 2)
    density /= density.sum()
    mean = (x * density).sum()
    return mean, np.sqrt(((x - mean) ** 2 * density).sum())


@pytest.mark.slow
# the largest error of the posterior mean each model makes (the one-block model is 0.125 off at an innovation of 3)
@pytest.mark.parametrize(("name", "tolerance"), [("quantile_residual_fit", 0.12), ("quantile_residual_fit_1layer", 0.15)])
def test_the_shipped_residual_model_follows_bayes_rule_where_no_model_and_kalman_do_not(name, tolerance):
    step = pretrained_analysis(name).bind(ObservationModel(n_variables=4, noise="cauchy"))
    assert step.feature_set_ == "kalman" and step.estimator.residual
    rng = np.random.default_rng(0)
    priors = rng.standard_normal((40, 40))
    priors = (priors - priors.mean(1, keepdims=True)) / priors.std(1, ddof=1, keepdims=True)
    errors = {"learned": [], "no update": [], "Kalman": []}
    for innovation in (0.5, 1.0, 3.0, 10.0, 1000.0):
        exact_mean, exact_sd = _exact_posterior_mean_and_sd(innovation)
        posterior = step.scalar_updates(priors, np.full(len(priors), innovation))
        errors["learned"].append(abs(posterior.mean() - exact_mean))
        errors["no update"].append(abs(0.0 - exact_mean))
        errors["Kalman"].append(abs(innovation / 2.0 - exact_mean))  # gain 1/2 at noise scale = prior sd
        # the members sit at the levels (k - 0.45) / (N + 0.1): a little wider than the posterior itself
        assert 0.9 * exact_sd < posterior.std(axis=1, ddof=1).mean() < 1.15 * exact_sd, innovation
    assert max(errors["learned"]) < tolerance, errors
    assert max(errors["no update"]) > 0.7 and max(errors["Kalman"]) > 100
    assert set(ANALYSIS_FEATURE_SETS) == {"plain", "ranked", "kalman"}
