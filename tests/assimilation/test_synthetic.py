"""Likelihood-free training pairs from synthetic priors, and a learned step that trusts reflection only when it may."""

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn._training import FittedNetwork
from sklearn_measattn.assimilation import (
    RANKED_ANALYSIS_FEATURES,
    LearnedAnalysis,
    ObservationModel,
    SampledObservationModel,
    make_synthetic_analysis_data,
    skewed_errors,
)

FEATURE = {name: i for i, name in enumerate(RANKED_ANALYSIS_FEATURES)}
GAUSSIAN = ObservationModel(n_variables=8)
CAUCHY = ObservationModel(n_variables=8, noise="cauchy")


def test_the_stand_in_is_exchangeable_with_the_members():
    X, y = make_synthetic_analysis_data(GAUSSIAN, n_priors=3000, draws=2, ensemble_size=9, reflect=False,
                                        random_state=0)
    # the stand-in's rank among the members is uniform on 0..9: mean 4.5, and every rank about a tenth of the time
    ranks = (X[..., FEATURE["member"]] < y[:, :, 0]).sum(axis=1)
    counts = np.bincount(ranks, minlength=10) / len(ranks)
    assert abs(ranks.mean() - 4.5) < 0.15
    np.testing.assert_allclose(counts, 0.1, atol=0.02)


def test_observations_are_the_stand_in_plus_the_laws_noise_at_the_drawn_ratio():
    X, y = make_synthetic_analysis_data(GAUSSIAN, n_priors=4000, draws=1, ensemble_size=12,
                                        noise_ratio_range=(0.5, 4.0), reflect=False, random_state=1)
    ratio = np.exp(X[:, 0, FEATURE["log_noise_ratio"]])
    assert 0.5 <= ratio.min() and ratio.max() <= 4.0 and ratio.max() / ratio.min() > 6
    noise = (X[:, 0, FEATURE["innovation"]] - y[:, 0, 0]) / ratio
    assert abs(noise.mean()) < 0.05 and abs(noise.std() - 1.0) < 0.05
    assert np.all(X[..., FEATURE["noise_tail"]] == 0.0)


def test_a_mixture_of_laws_gives_each_prior_one_law_and_reflection_doubles_the_pairs():
    X, y = make_synthetic_analysis_data([GAUSSIAN, CAUCHY, CAUCHY], n_priors=600, draws=2, ensemble_size=6,
                                        random_state=2)
    assert X.shape == (2 * 600 * 2, 6, 5) and y.shape == (2400, 1, 1)
    tails = X[:1200, :, FEATURE["noise_tail"]]
    assert np.all(tails == tails[:, :1]) and set(np.unique(tails)) == {0.0, 1.0}
    assert 0.55 < tails[:, 0].mean() < 0.78  # Cauchy listed twice: two thirds of the priors
    reflected = X[1200:]
    np.testing.assert_array_equal(reflected[..., FEATURE["member"]], -X[:1200, :, FEATURE["member"]])
    np.testing.assert_array_equal(reflected[..., FEATURE["rank"]], -X[:1200, :, FEATURE["rank"]])
    np.testing.assert_array_equal(y[1200:], -y[:1200])


def test_a_sampled_law_is_not_reflected_unless_asked():
    sampled = SampledObservationModel(skewed_errors(2000, random_state=0), n_variables=8)
    assert not sampled.symmetric and GAUSSIAN.symmetric
    X, _ = make_synthetic_analysis_data(sampled, n_priors=100, draws=2, ensemble_size=5, random_state=0)
    assert len(X) == 200
    X, _ = make_synthetic_analysis_data(sampled, n_priors=100, draws=2, ensemble_size=5, reflect=True,
                                        random_state=0)
    assert len(X) == 400
    # a skewed law: the noise of the observations is skewed as the sample is (right tail longer)
    X, y = make_synthetic_analysis_data(sampled, n_priors=3000, draws=1, ensemble_size=5, random_state=0)
    noise = (X[:, 0, FEATURE["innovation"]] - y[:, 0, 0]) / np.exp(X[:, 0, FEATURE["log_noise_ratio"]])
    q10, q50, q90 = np.quantile(noise, [0.1, 0.5, 0.9])
    assert q90 - q50 > 1.5 * (q50 - q10)


def test_selection_on_the_innovation_shows_far_observations_more_often():
    plain, _ = make_synthetic_analysis_data(CAUCHY, n_priors=2000, draws=1, ensemble_size=8, random_state=3)
    far, _ = make_synthetic_analysis_data(CAUCHY, n_priors=2000, draws=1, ensemble_size=8, candidates=6,
                                          innovation_power=1.0, random_state=3)
    innovation = FEATURE["innovation"]
    assert np.median(np.abs(far[:, 0, innovation])) > 1.5 * np.median(np.abs(plain[:, 0, innovation]))


def test_student_t_priors_show_gaussian_noise_far_from_the_ensemble_and_leave_the_default_draws_alone():
    def far_share(kinds):
        X, _ = make_synthetic_analysis_data(GAUSSIAN, n_priors=4000, draws=1, ensemble_size=20, prior_weights=kinds,
                                            reflect=False, random_state=4)
        # the innovation in its own standard deviation (sqrt(1 + ratio^2) prior sd)
        ratio = np.exp(X[:, 0, FEATURE["log_noise_ratio"]])
        return np.mean(np.abs(X[:, 0, FEATURE["innovation"]]) / np.sqrt(1 + ratio**2) > 4)

    assert far_share({"student_t": 1.0}) > 5 * max(far_share({"gaussian": 1.0}), 1e-3)
    default, _ = make_synthetic_analysis_data(GAUSSIAN, n_priors=50, draws=1, ensemble_size=5, random_state=0)
    explicit, _ = make_synthetic_analysis_data(GAUSSIAN, n_priors=50, draws=1, ensemble_size=5, random_state=0,
                                               prior_weights={"gaussian": 0.5, "skewed": 0.3, "bimodal": 0.2})
    np.testing.assert_array_equal(default, explicit)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"noise": "cauchy"}, TypeError, "'noise' parameter of make_synthetic_analysis_data must be an instance"),
    ({"noise": []}, TypeError, "non-empty list"),
    ({"prior_weights": {"uniform": 1.0}}, ValueError, "prior_weights must map kinds among"),
    ({"prior_weights": {"gaussian": 0.0}}, ValueError, "not all zero"),
    ({"noise_ratio_range": (3.0, 1.0)}, ValueError, "0 < low < high"),
    ({"draws": 4, "candidates": 2}, ValueError, "candidates must be between draws"),
    ({"candidates": 50}, ValueError, r"ensemble_size \+ 1"),
])
def test_bad_arguments_are_refused_before_any_draw(kwargs, error, match):
    arguments = {"noise": GAUSSIAN, "n_priors": 10, "ensemble_size": 5, **kwargs}
    with pytest.raises(error, match=match):
        make_synthetic_analysis_data(arguments.pop("noise"), **arguments)


@pytest.fixture(scope="module")
def ranked_model():
    X, y = make_synthetic_analysis_data(CAUCHY, n_priors=40, draws=1, ensemble_size=8, random_state=0)
    return MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=8, n_heads=2, n_layers=1,
                                       dim_feedforward=16, max_epochs=1, random_state=0).fit(X, y)


@pytest.mark.slow
def test_a_learned_step_averages_with_the_reflection_only_for_a_symmetric_law(ranked_model, monkeypatch):
    sampled = SampledObservationModel(skewed_errors(500, random_state=0), n_variables=4)
    symmetric = LearnedAnalysis(ranked_model).bind(ObservationModel(n_variables=4, noise="cauchy"))
    skewed = LearnedAnalysis(ranked_model).bind(sampled)
    forced = LearnedAnalysis(ranked_model, reflect=True).bind(sampled)
    assert symmetric.reflect_ and not skewed.reflect_ and forced.reflect_
    batches = []
    original = FittedNetwork.run
    monkeypatch.setattr(FittedNetwork, "run", lambda self, X: batches.append(X.shape[0]) or original(self, X))
    prior = np.random.default_rng(0).standard_normal(8)
    skewed.scalar_update(prior, 0.7)
    forced.scalar_update(prior, 0.7)
    assert batches == [1, 2]
    # the reflected average commutes with x -> -x; the plain update need not
    np.testing.assert_allclose(forced.scalar_update(-prior, -0.7), -forced.scalar_update(prior, 0.7), atol=1e-6)
