"""The rank histogram filter: its scalar update against Bayes' rule computed independently, and in the cycle."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.assimilation import (
    ObservationModel,
    RankHistogramFilter,
    SerialEnKF,
    make_twin_problem,
    twin_experiment,
)

LAWS = {"gaussian": stats.norm, "student_t": stats.t(2.5), "cauchy": stats.cauchy}


def bound_update(noise="gaussian", noise_scale=1.0, df=1.5, **params):
    """The scalar update of a bound filter, as ``(prior, observation) -> posterior``."""
    model = ObservationModel(n_variables=4, noise=noise, df=df, noise_scale=noise_scale)
    return RankHistogramFilter(**params).bind(model).scalar_update


def gaussian_quantile_members(mean, sd, n_members, seed=0):
    """The quantiles ``k / (N + 1)`` of a normal law, shuffled: a Gaussian sample without sampling noise.

    Their rank histogram has the normal's distribution function at every
    member, and linear between: it differs from the normal by O(1/N^2) in
    the bulk.
    """
    members = mean + sd * stats.norm.ppf(np.arange(1, n_members + 1) / (n_members + 1))
    return np.random.default_rng(seed).permutation(members)


def quantiles_of(density, levels, points, low, high):
    """The quantiles at ``levels`` of the normalised ``density`` on ``[low, high]``, by adaptive quadrature."""
    pieces = np.concatenate([[low], np.sort(points), [high]])
    masses = np.array([integrate.quad(density, a, b, limit=200, epsabs=0, epsrel=1e-11)[0]
                       for a, b in zip(pieces[:-1], pieces[1:])])
    cumulative = np.concatenate([[0.0], np.cumsum(masses)]) / masses.sum()

    def cdf(x):
        k = min(np.searchsorted(pieces, x, side="right") - 1, len(masses) - 1)
        return cumulative[k] + integrate.quad(density, pieces[k], x, epsabs=0, epsrel=1e-11)[0] / masses.sum()

    return np.array([optimize.brentq(lambda x, level=level: cdf(x) - level, low, high, xtol=1e-12) for level in levels])


def rank_histogram_density(members):
    """Anderson's rank histogram density of the members, built here from its definition.

    Mass 1/(N+1) uniform between consecutive sorted members; in each tail,
    mass 1/(N+1) as a normal density with the members' sd (ddof=1) whose mean
    is placed (by root finding) so that its mass beyond the end member is 1/(N+1).
    """
    x = np.sort(members)
    n, sd = x.size, x.std(ddof=1)
    share = 1.0 / (n + 1)
    left_mean = optimize.brentq(lambda mu: stats.norm.cdf(x[0], mu, sd) - share, x[0] - 10 * sd, x[0] + 10 * sd)
    right_mean = optimize.brentq(lambda mu: stats.norm.sf(x[-1], mu, sd) - share, x[-1] - 10 * sd, x[-1] + 10 * sd)

    def normal(t, mean):
        return math.exp(-0.5 * ((t - mean) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))

    def density(t):
        if t < x[0]:
            return normal(t, left_mean)
        if t > x[-1]:
            return normal(t, right_mean)
        k = min(np.searchsorted(x, t, side="right") - 1, n - 2)
        return share / (x[k + 1] - x[k])

    return density


# --------------------------------------------------------------------------- #
# Gaussian prior and noise: the Kalman update
# --------------------------------------------------------------------------- #
# The members: the 2000 quantiles of N(2, 1.5^2), or 2000 draws from it. The kernel density of N members
# is the sample law smoothed by the kernel: its variance is the sample's (ddof=0) plus bandwidth^2, and the
# quantile map is then linear, x -> mean_post + (x - mean) * sd_post / sd_kde, which shrinks the members'
# sd by sqrt(R / (var_kde + R)). The rank histogram has the sample's variance (ddof=1 for its tails).
# Tolerances: with the quantiles, the densities differ from the normal only by the discretisation (the rank
# histogram mostly in its tails, of mass 1/(N+1)); the largest errors measured over innovations of -2 to 2 sd
# and R from 0.1 to 2 times the prior variance were 0.003 sd on the mean and 0.3 % on the sd, and the
# tolerances are twice and three times those. With draws, the sample's skewness and kurtosis (standard errors
# sqrt(6/N) = 0.055 and sqrt(24/N) = 0.11) make the exact Bayes update differ from the Kalman one (measured
# over 40 seeds: standard deviations of 0.010 sd on the mean and 1.2 % on the sd): tolerances of 4 of those.
@pytest.mark.slow
@pytest.mark.parametrize("prior", ["rank_histogram", "kernel"])
@pytest.mark.parametrize(("members", "mean_tol", "sd_tol"), [("quantiles", 0.006, 0.01), ("draws", 0.04, 0.05)])
@pytest.mark.parametrize(("noise_variance", "observation"), [(1.0, 4.0), (0.25, 5.0), (4.0, -1.0)])
def test_gaussian_prior_and_noise_give_the_kalman_posterior(prior, members, mean_tol, sd_tol, noise_variance,
                                                            observation):
    if members == "quantiles":
        x = gaussian_quantile_members(2.0, 1.5, 2000)
    else:
        x = np.random.default_rng(1).normal(2.0, 1.5, 2000)
    update = bound_update(noise_scale=math.sqrt(noise_variance), prior=prior)
    posterior = update(x, observation)
    if prior == "kernel":
        sd = x.std(ddof=1)
        q25, q75 = np.quantile(x, [0.25, 0.75])
        bandwidth = 0.9 * min(sd, (q75 - q25) / 1.34) * x.size ** (-0.2)  # Silverman's rule
        variance = x.var() + bandwidth**2
    else:
        variance = x.var(ddof=1)
    gain = variance / (variance + noise_variance)
    assert abs(posterior.mean() - (x.mean() + gain * (observation - x.mean()))) < mean_tol * math.sqrt(variance)
    assert posterior.std() == pytest.approx(x.std() * math.sqrt(1 - gain), rel=sd_tol)


# --------------------------------------------------------------------------- #
# Heavy-tailed noise: Bayes' rule by quadrature
# --------------------------------------------------------------------------- #
@pytest.mark.slow
@pytest.mark.parametrize(("noise", "observation"), [("cauchy", 1.3), ("cauchy", 6.0), ("student_t", -2.5)])
def test_rank_histogram_update_is_bayes_rule_for_its_prior(noise, observation):
    # a small skewed ensemble: its rank histogram, times the true likelihood, integrated by quad; the member of
    # rank k must land on the posterior quantile k / (N + 1)
    members = np.random.default_rng(3).gamma(2.0, 1.0, size=9)
    n = members.size
    law = LAWS[noise]
    prior = rank_histogram_density(members)

    def posterior(t):
        return prior(t) * law.pdf((observation - t) / 0.8)

    expected = quantiles_of(posterior, np.arange(1, n + 1) / (n + 1), members, members.min() - 40, members.max() + 40)
    got = bound_update(noise=noise, noise_scale=0.8, df=2.5)(members, observation)
    sd = members.std(ddof=1)
    # the grid's trapezoids and the linear interpolation of the distribution function within a grid step (about
    # sd / 200 here): measured errors below 2e-5 sd
    np.testing.assert_allclose(np.sort(got), expected, atol=2e-4 * sd)
    assert got.mean() == pytest.approx(expected.mean(), abs=1e-4 * sd)


@pytest.mark.slow
@pytest.mark.parametrize(("bandwidth", "observation"), [(0.5, 1.3), (0.3, 6.0), (1.2, -2.0)])
def test_kernel_update_is_bayes_rule_for_its_prior(bandwidth, observation):
    # scipy's gaussian_kde with a scalar bw_method: kernel sd = bandwidth * the members' sd (ddof=1); each member
    # must land on the posterior quantile equal to the kernel density's distribution function at it
    members = np.random.default_rng(3).gamma(2.0, 1.0, size=9)
    kde = stats.gaussian_kde(members, bw_method=bandwidth)
    levels = np.array([kde.integrate_box_1d(-np.inf, x) for x in members])
    width = math.sqrt(kde.covariance[0, 0])  # the same density as kde.pdf, quicker under quad
    probe = np.linspace(-5.0, 15.0, 7)
    np.testing.assert_allclose(stats.norm.pdf(probe[:, None], members, width).mean(axis=1), kde.pdf(probe), rtol=1e-12)

    def posterior(t):
        return np.exp(-0.5 * ((t - members) / width) ** 2).sum() * stats.cauchy.pdf((observation - t) / 0.8)

    low, high = members.min() - 40, members.max() + 40
    expected = quantiles_of(posterior, levels, np.concatenate([members, [observation]]), low, high)
    got = bound_update(noise="cauchy", noise_scale=0.8, prior="kernel", bandwidth=bandwidth)(members, observation)
    np.testing.assert_allclose(got, expected, atol=2e-4 * members.std(ddof=1))  # measured: below 2e-5 sd


def test_kernel_default_bandwidth_is_silverman():
    members = np.random.default_rng(4).normal(size=30)
    sd = members.std(ddof=1)
    q25, q75 = np.quantile(members, [0.25, 0.75])
    silverman = 0.9 * min(sd, (q75 - q25) / 1.34) * 30 ** (-0.2)
    default = bound_update(noise="cauchy", prior="kernel")(members, 0.7)
    explicit = bound_update(noise="cauchy", prior="kernel", bandwidth=silverman / sd)(members, 0.7)
    np.testing.assert_allclose(default, explicit, rtol=1e-12)
    other = bound_update(noise="cauchy", prior="kernel", bandwidth=2 * silverman / sd)(members, 0.7)
    assert not np.allclose(default, other, atol=1e-3)


@pytest.mark.slow
def test_large_gaussian_prior_with_cauchy_noise_matches_its_exact_posterior():
    # with many members the rank histogram approaches the normal: the members approach the quantiles k / (N + 1)
    # of the exact normal-prior x Cauchy posterior (measured: within 1e-3, the rank histogram's own difference)
    n, observation = 2000, 3.0
    members = gaussian_quantile_members(0.0, 1.0, n)

    def posterior(t):
        return stats.norm.pdf(t) * stats.cauchy.pdf((observation - t) / 0.5)

    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    expected = quantiles_of(posterior, levels, [observation], -40.0, 40.0)
    got = np.sort(bound_update(noise="cauchy", noise_scale=0.5)(members, observation))
    np.testing.assert_allclose(got[np.round(levels * (n + 1)).astype(int) - 1], expected, atol=2e-3)
    mean = integrate.quad(lambda t: t * posterior(t), -40, 40, points=[0, observation], limit=200)[0]
    mean /= integrate.quad(posterior, -40, 40, points=[0, observation], limit=200)[0]
    assert got.mean() == pytest.approx(mean, abs=2e-3)


@pytest.mark.parametrize("prior", ["rank_histogram", "kernel"])
def test_cauchy_outlier_leaves_the_members_nearly_unchanged(prior):
    # 1000 sd away, the Cauchy likelihood varies by about 2 * 3 / 1000 across the ensemble: the posterior is the
    # prior tilted by about 0.6 %, its quantiles move by well under 0.02 sd. A Kalman update moves by 500 sd.
    members = np.random.default_rng(5).normal(0.0, 1.0, size=40)
    sd = members.std(ddof=1)
    observation = members.mean() + 1000 * sd
    posterior = bound_update(noise="cauchy", noise_scale=sd, prior=prior)(members, observation)
    assert np.max(np.abs(posterior - members)) < 0.02 * sd
    # the same outlier under Gaussian noise is believed: the members move most of the way to it
    believed = bound_update(noise="gaussian", noise_scale=sd, prior=prior)(members, observation)
    assert np.min(believed - members) > 100 * sd


# --------------------------------------------------------------------------- #
# The quantile-conserving map
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("prior", ["rank_histogram", "kernel"])
@pytest.mark.parametrize(("noise", "observation"), [("gaussian", 0.4), ("gaussian", 9.0), ("cauchy", -3.0), ("cauchy", 1e4)])
def test_members_keep_their_order(prior, noise, observation):
    members = np.random.default_rng(6).standard_t(3, size=25)
    posterior = bound_update(noise=noise, noise_scale=0.5, prior=prior)(members, observation)
    assert posterior.shape == members.shape and np.all(np.isfinite(posterior))
    rank = np.argsort(members)
    assert np.all(np.diff(posterior[rank]) > 0)


def test_tied_members_keep_their_ensemble_order():
    members = np.array([0.3, -1.0, 0.3, 2.0, 0.3, -0.4, 1.1])
    posterior = bound_update(noise="cauchy", noise_scale=0.5)(members, 0.5)
    tied = posterior[[0, 2, 4]]
    assert np.all(np.diff(tied) >= 0)
    assert np.all(np.diff(posterior[np.argsort(members, kind="stable")]) >= 0)
    assert np.all(np.isfinite(posterior))


@pytest.mark.parametrize("prior", ["rank_histogram", "kernel"])
def test_flat_likelihood_leaves_the_members_in_place(prior):
    # posterior = prior: every member is at its own prior quantile
    members = np.random.default_rng(7).normal(size=20)
    posterior = bound_update(noise_scale=1e6, prior=prior)(members, 0.0)
    np.testing.assert_allclose(posterior, members, atol=1e-3)


def test_equal_members_are_left_alone():
    members = np.full(10, 2.5)
    np.testing.assert_array_equal(bound_update()(members, 0.0), members)


# --------------------------------------------------------------------------- #
# In the cycle
# --------------------------------------------------------------------------- #
CYCLE = {"ensemble_size": 20, "spin_up": 50, "random_state": 1}


@pytest.mark.slow
def test_gaussian_noise_cycle_scores_as_the_serial_enkf():
    # with Gaussian noise the Kalman update is Bayes' rule for a Gaussian prior: the two should be close
    # (over five problems the ratio of the RMSEs ranged from 0.95 to 1.08)
    problem = make_twin_problem(n_variables=10, n_cycles=300, random_state=0)
    serial = twin_experiment(SerialEnKF(inflation=1.05, localization_radius=3.0), problem, **CYCLE)
    rhf = twin_experiment(RankHistogramFilter(inflation=1.05, localization_radius=3.0), problem, **CYCLE)
    assert not rhf.diverged and not serial.diverged
    assert rhf.rmse == pytest.approx(serial.rmse, rel=0.1)


@pytest.mark.slow
def test_cauchy_noise_cycle_beats_the_serial_enkf():
    problem = make_twin_problem(n_variables=10, noise="cauchy", n_cycles=300, random_state=0)
    serial = twin_experiment(SerialEnKF(inflation=1.05, localization_radius=3.0), problem, **CYCLE)
    rhf = twin_experiment(RankHistogramFilter(inflation=1.05, localization_radius=3.0), problem, **CYCLE)
    assert not rhf.diverged
    assert rhf.rmse < 0.5 * serial.rmse  # the Kalman update follows the outliers (here it diverges: rmse inf)
    assert rhf.rmse < 0.5


@pytest.mark.slow
def test_kernel_prior_runs_in_the_cycle():
    problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=120, random_state=0)
    rhf = twin_experiment(RankHistogramFilter(inflation=1.05, localization_radius=2.0, prior="kernel", n_grid=500),
                          problem, **CYCLE)
    free = twin_experiment("none", problem, **CYCLE)
    assert not rhf.diverged and rhf.rmse < 0.3 * free.rmse


@pytest.mark.slow
def test_relaxation_widens_the_analysis():
    problem = make_twin_problem(n_variables=8, n_cycles=60, random_state=0)
    tight = twin_experiment(RankHistogramFilter(), problem, ensemble_size=10, spin_up=10, random_state=0)
    relaxed = twin_experiment(RankHistogramFilter(relaxation=0.7), problem, ensemble_size=10, spin_up=10,
                              random_state=0)
    assert relaxed.spread > tight.spread


# --------------------------------------------------------------------------- #
# Parameters
# --------------------------------------------------------------------------- #
@pytest.mark.slow
@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"prior": "gaussian"}, "prior"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"bandwidth": "silverman"}, "bandwidth"),
        ({"n_grid": 10}, "n_grid"),
        ({"n_grid": 2000.0}, "n_grid"),
        ({"n_grid": True}, "n_grid"),
        ({"inflation": 0.9}, "inflation"),
        ({"localization_radius": 0.0}, "localization_radius"),
        ({"relaxation": 1.0}, "relaxation"),
        ({"likelihood": "cauchy"}, "likelihood"),
    ],
)
def test_bad_parameters_raise_before_any_cycle(params, name):
    problem = make_twin_problem(n_variables=8, n_cycles=5, random_state=0)
    cycles = []
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of RankHistogramFilter must be"):
        twin_experiment(RankHistogramFilter(**params), problem, ensemble_size=5, spin_up=0,
                        callback=lambda k, *_: cycles.append(k))
    assert cycles == []


def test_the_true_likelihood_passed_explicitly_is_the_default():
    model = ObservationModel(n_variables=4, noise="student_t", df=3.0, noise_scale=0.7)
    prior = gaussian_quantile_members(0.5, 1.2, 40)
    default = RankHistogramFilter().bind(model)
    explicit = RankHistogramFilter(likelihood=model).bind(model)
    assert default.likelihood_ is model.law and explicit.likelihood_ is model.law
    for observation in (0.3, 4.0, -25.0):
        np.testing.assert_array_equal(explicit.scalar_update(prior.copy(), observation),
                                      default.scalar_update(prior.copy(), observation))


def test_an_assumed_likelihood_replaces_the_true_one():
    # the truth draws Cauchy noise; an assumed Gaussian likelihood follows an outlier, the true one ignores it
    truth = ObservationModel(n_variables=4, noise="cauchy")
    gaussian = ObservationModel(n_variables=4, observed=[2], noise="gaussian", noise_scale=1.0)
    prior = gaussian_quantile_members(0.0, 1.0, 40)
    true_update = RankHistogramFilter().bind(truth).scalar_update(prior.copy(), 8.0)
    assumed = RankHistogramFilter(likelihood=gaussian).bind(truth)
    assumed_update = assumed.scalar_update(prior.copy(), 8.0)
    assert abs(true_update.mean() - prior.mean()) < 0.3
    assert assumed_update.mean() > 3.5  # near the Kalman posterior mean, 8 / (1 + 1)
    # and it is the update a filter bound to the Gaussian law makes
    np.testing.assert_allclose(assumed_update, RankHistogramFilter().bind(gaussian).scalar_update(prior.copy(), 8.0))


def test_clip_is_not_a_parameter():
    with pytest.raises(TypeError, match="clip"):
        RankHistogramFilter(clip=2.0)


def test_is_a_scikit_learn_estimator():
    step = RankHistogramFilter(prior="kernel", bandwidth=0.4, n_grid=500)
    assert clone(step).get_params() == step.get_params()
    assert sorted(step.get_params()) == [
        "bandwidth", "batch_disjoint", "inflation", "likelihood", "localization_radius", "n_grid", "prior",
        "relaxation",
    ]
    bound = step.bind(ObservationModel(n_variables=6), random_state=0)
    assert not hasattr(step, "observation_model_") and bound.observation_model_.n_variables == 6
    forecast = np.random.default_rng(0).normal(size=(7, 6))
    assert bound(forecast, np.zeros(6)).shape == (7, 6)
