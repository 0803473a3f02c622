"""Far observations: the learned scalar update turns to Bayes' rule where its training pairs have no mass."""

import numpy as np
import pytest
from scipy import stats

from sklearn_measattn.assimilation import (
    KernelDensityNoise,
    ObservationModel,
    RankHistogramFilter,
    SampledObservationModel,
    contaminated_errors,
    pretrained_analysis,
)

LAWS = {"gaussian": (stats.norm, {}), "cauchy": (stats.cauchy, {}), "student_t": (stats.t, {"df": 2.0})}


def exact_posterior(noise, scale, innovation):
    """Mean and sd of N(0, 1) x the law's likelihood of the observation, on a fine grid."""
    law, shape = LAWS[noise]
    grid = np.linspace(-12.0, 14.0, 40001)
    log_post = stats.norm.logpdf(grid) + law.logpdf(innovation - grid, *shape.values(), scale=scale)
    weight = np.exp(log_post - log_post.max())
    weight /= weight.sum()
    mean = weight @ grid
    return mean, np.sqrt(weight @ (grid - mean) ** 2)


@pytest.mark.parametrize(("noise", "scale", "innovation"), [
    ("student_t", 0.3, 10.0), ("student_t", 1.0, 10.0), ("gaussian", 0.3, 10.0), ("gaussian", 1.0, 10.0),
    ("cauchy", 0.3, 1000.0), ("gaussian", 1.0, 1.0), ("cauchy", 1.0, 3.0),
])
def test_the_shipped_update_follows_bayes_rule_near_and_far(noise, scale, innovation):
    priors = np.random.default_rng(0).standard_normal((200, 40))
    model = ObservationModel(n_variables=4, noise=noise, noise_scale=scale, **LAWS[noise][1])
    step = pretrained_analysis().bind(model)
    posterior = step.scalar_updates(priors, np.full(200, innovation))
    mean, sd = exact_posterior(noise, scale, innovation)
    assert abs(posterior.mean(axis=1).mean() - mean) < 0.3
    assert abs(posterior.std(axis=1, ddof=1).mean() / sd - 1.0) < 0.2


def test_the_switch_is_the_learned_update_below_bayes_rule_above_and_a_blend_between():
    model = ObservationModel(n_variables=4, noise="gaussian", noise_scale=1.0)
    rng = np.random.default_rng(1)
    priors = rng.standard_normal((3, 40))
    turning = pretrained_analysis(far_innovation=(2.0, 3.0)).bind(model)
    assert turning.far_width_ == pytest.approx(1.0, rel=0.01)  # a Gaussian's width is its sd
    unit = np.sqrt(priors.var(axis=1, ddof=1) + turning.far_width_**2)
    observations = priors.mean(axis=1) + np.array([1.5, 2.5, 4.0]) * unit  # z = 1.5, 2.5 and 4
    learned = pretrained_analysis(far_innovation=None).bind(model).scalar_updates(priors.copy(), observations)
    bayes = RankHistogramFilter(inflation=1.0).bind(model)
    turned = turning.scalar_updates(priors.copy(), observations)
    np.testing.assert_allclose(turned[0], learned[0])
    np.testing.assert_allclose(turned[2], bayes.scalar_update(priors[2], observations[2]))
    np.testing.assert_allclose(turned[1], 0.5 * learned[1] + 0.5 * bayes.scalar_update(priors[1], observations[1]))


def test_the_width_of_a_heavy_tailed_law_keeps_its_common_observations_with_the_network():
    cauchy = pretrained_analysis().bind(ObservationModel(n_variables=4, noise="cauchy", noise_scale=2.0))
    assert cauchy.far_width_ == pytest.approx(2.0 * stats.cauchy.ppf(0.975) / stats.norm.ppf(0.975), rel=0.03)


def test_a_law_known_by_a_record_turns_to_its_kernel_density():
    model = SampledObservationModel(contaminated_errors(2000, random_state=0), n_variables=4)
    step = pretrained_analysis().bind(model)
    assert isinstance(step._bayes.likelihood_, KernelDensityNoise)
    prior = np.random.default_rng(2).standard_normal((1, 40))
    far = step.scalar_updates(prior.copy(), np.array([50.0]))  # a gross error: the prior is kept
    assert abs(far.mean() - prior.mean()) < 0.1


@pytest.mark.parametrize("far", [(3.0, 2.0), (1.0,), (np.nan, 2.0), (-1.0, 2.0)])
def test_a_bad_far_innovation_range_is_refused_when_bound(far):
    with pytest.raises(ValueError, match="far_innovation"):
        pretrained_analysis(far_innovation=far).bind(ObservationModel(n_variables=4))
