"""Observation noise known only by a sample of errors: the two laws' generators, the resampled model, its fits."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import trapezoid
from scipy.special import logsumexp, stdtrit
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.assimilation import (
    KernelDensityObservationModel,
    ObservationModel,
    RankHistogramFilter,
    RobustEnKF,
    SampledNoise,
    SampledObservationModel,
    SerialEnKF,
    contaminated_errors,
    make_twin_problem,
    resolve_analysis,
    skewed_errors,
    twin_experiment,
)


def two_piece_quantile(p, scale, skewness, df):
    """The quantile function of the two-piece Student-t of mode 0, from its definition (before centring)."""
    p = np.asarray(p, dtype=np.float64)
    left, right = scale * (1 - skewness), scale * (1 + skewness)
    mass_left = (1 - skewness) / 2
    low = left * stdtrit(df, np.minimum(p / (1 - skewness), 0.5))
    high = right * stdtrit(df, 0.5 + np.maximum(p - mass_left, 0.0) / (1 + skewness))
    return np.where(p < mass_left, low, high)


def integral_of_density(model):
    """The integral of ``exp(model.log_density)`` over the line, in the coordinate ``e = s sinh(y)``."""
    y = np.linspace(-60.0, 60.0, 400_001)
    errors = model.noise_scale * np.sinh(y)
    return trapezoid(np.exp(model.log_density(errors)) * model.noise_scale * np.cosh(y), y)


# --- the generators ---------------------------------------------------------------------------------------------


def test_contaminated_errors_fraction_of_gross_errors():
    # with gross errors far larger than the Gaussian ones, nearly every error beyond 5 scales is gross
    errors = contaminated_errors(40_000, gross_fraction=0.04, scale=0.5, gross_scale=1000.0, random_state=0)
    expected = 0.04 * 2 * stats.cauchy.sf(2.5 / 1000.0)
    assert np.mean(np.abs(errors) > 2.5) == pytest.approx(expected, abs=4 * math.sqrt(expected / 40_000))


def test_contaminated_errors_law():
    # the whole law: Kolmogorov-Smirnov against the mixture's distribution function
    errors = contaminated_errors(20_000, gross_fraction=0.1, scale=2.0, gross_scale=5.0, gross_df=3.0, random_state=1)
    law = lambda x: 0.9 * stats.norm.cdf(x, scale=2.0) + 0.1 * stats.t.cdf(x, 3.0, scale=5.0)  # noqa: E731
    assert stats.kstest(errors, law).pvalue > 1e-3
    assert stats.kstest(errors, stats.norm(scale=2.0).cdf).pvalue < 1e-6  # a test that can fail
    no_gross = contaminated_errors(20_000, gross_fraction=0.0, scale=2.0, random_state=1)
    assert stats.kstest(no_gross, stats.norm(scale=2.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize("skewness", [0.5, -0.3, 0.0])
def test_skewed_errors_law(skewness):
    errors = skewed_errors(40_000, scale=2.0, skewness=skewness, df=3.0, random_state=2)
    centre = two_piece_quantile(0.5, 2.0, skewness, 3.0)
    levels = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    exact = two_piece_quantile(levels, 2.0, skewness, 3.0) - centre
    assert np.median(errors) == pytest.approx(0.0, abs=0.04)
    np.testing.assert_allclose(np.quantile(errors, levels), exact, atol=0.08)
    q25, q50, q75 = np.quantile(errors, [0.25, 0.5, 0.75])
    e25, e75 = exact[[1, 3]]
    assert (q75 + q25 - 2 * q50) / (q75 - q25) == pytest.approx((e75 + e25) / (e75 - e25), abs=0.02)  # Bowley's
    if skewness:
        assert np.sign((e75 + e25) / (e75 - e25)) == np.sign(skewness)
    else:  # symmetric: zero up to the quantile function's rounding
        assert (e75 + e25) / (e75 - e25) == pytest.approx(0.0, abs=1e-12)
    if skewness:
        assert np.sign(stats.skew(errors)) == np.sign(skewness)


def test_generators_are_seeded_and_validated():
    np.testing.assert_array_equal(contaminated_errors(50, random_state=3), contaminated_errors(50, random_state=3))
    np.testing.assert_array_equal(skewed_errors(50, random_state=3), skewed_errors(50, random_state=3))
    with pytest.raises(InvalidParameterError, match="gross_fraction"):
        contaminated_errors(10, gross_fraction=1.5)
    with pytest.raises(InvalidParameterError, match="skewness"):
        skewed_errors(10, skewness=1.0)
    with pytest.raises(InvalidParameterError, match="n_errors"):
        skewed_errors(0)


# --- the sampled model --------------------------------------------------------------------------------------------


def test_sampled_model_resamples_the_sample():
    errors = skewed_errors(500, random_state=4)
    model = SampledObservationModel(errors, n_variables=6, observed=[1, 4])
    observations = model.sample(np.full((300, 6), 2.5), random_state=0)
    assert observations.shape == (300, 2)
    assert np.abs((observations - 2.5)[..., None] - errors).min(axis=-1).max() < 1e-12
    noise = model.sample(np.zeros((300, 6)), random_state=0)
    assert np.isin(noise, errors).all()
    assert np.unique(noise).size > 200  # many distinct errors, drawn with replacement
    np.testing.assert_array_equal(noise, model.sample(np.zeros((300, 6)), random_state=0))
    np.testing.assert_allclose(model.standard_noise((300, 2), random_state=0) * model.noise_scale, noise)


def test_sampled_model_scale_is_the_robust_scale():
    errors = np.random.default_rng(5).standard_cauchy(2001)
    model = SampledObservationModel(errors, n_variables=4)
    assert model.noise_scale == pytest.approx(1.4826 * np.median(np.abs(errors - np.median(errors))))
    assert model.noise_scale == pytest.approx(1.4826, rel=0.1)  # a Cauchy's median absolute deviation is 1
    gaussian = SampledObservationModel(np.random.default_rng(5).normal(0.0, 3.0, 4000), n_variables=4)
    assert gaussian.noise_scale == pytest.approx(3.0, rel=0.05)
    assert gaussian.nominal_variance == pytest.approx(gaussian.noise_scale**2)


def test_a_record_has_no_density_and_neither_has_its_model():
    errors = contaminated_errors(300, random_state=6)
    law, model = SampledNoise(errors), SampledObservationModel(errors, n_variables=4)
    assert not hasattr(law, "log_density") and not hasattr(model, "log_density")
    with pytest.raises(AttributeError, match=r"has no density.*fit_student_t\(\).*kernel_density\(\)"):
        model.log_likelihood(np.zeros(4), np.zeros((3, 4)))
    assert "SampledNoise(n_errors=300" in repr(model) and "n_errors=300" in repr(law)
    assert hasattr(law.kernel_density(), "log_density") and hasattr(model.kernel_density(), "log_density")
    with pytest.raises(ValueError, match="has none.*likelihood=law.kernel_density"):
        RankHistogramFilter().bind(model)


@pytest.mark.slow
def test_sampled_model_in_a_twin_problem_and_missing_observations():
    errors = contaminated_errors(1000, random_state=7)
    model = SampledObservationModel(errors, n_variables=8, observed="every_other")
    problem = make_twin_problem(observation_model=model, n_cycles=30, random_state=0)
    assert problem.observation_model is model
    noise = problem.observations - problem.truth[1:, ::2]  # errors of the sample, up to the rounding of x + e - x
    assert np.abs(noise[..., None] - errors).min(axis=-1).max() < 1e-12
    restricted = model.restricted(np.array([True, False, True, False]))
    assert isinstance(restricted, SampledObservationModel) and restricted.observed.tolist() == [0, 4]
    assert restricted.errors is model.errors


@pytest.mark.parametrize(
    "errors, error, match",
    [
        ("abc", InvalidParameterError, "errors"),
        (None, InvalidParameterError, "errors"),
        (3.0, InvalidParameterError, "errors"),
        (np.array(["a"] * 200), TypeError, "real numbers.*got an array of shape \\(200,\\) and dtype <U1"),
        (np.ones(200, dtype=complex), TypeError, "real numbers"),
        (np.zeros((20, 10)), ValueError, "1-D.*shape \\(20, 10\\)"),
        (np.arange(99.0), ValueError, "holds 99 value"),
        (np.r_[np.arange(200.0), np.nan, np.inf], ValueError, "2 non-finite value.*position 200"),
        (np.r_[np.zeros(150), np.arange(100.0)], ValueError, "median absolute deviation of 0"),
        ([[1.0, 2.0], [3.0]], TypeError, "not a rectangular array"),
    ],
)
def test_sampled_model_refuses_bad_errors(errors, error, match):
    with pytest.raises(error, match=match) as raised:
        SampledObservationModel(errors, n_variables=4)
    assert "0.0, 0.0" not in str(raised.value) and "1.0, 2.0" not in str(raised.value)  # never printed


def test_sampled_model_refuses_bad_parameters():
    errors = np.arange(200.0)
    with pytest.raises(InvalidParameterError, match="n_variables"):
        SampledObservationModel(errors, n_variables=2)
    with pytest.raises(InvalidParameterError, match="n_variables.*array of shape \\(200,\\)"):
        SampledObservationModel(errors, n_variables=errors)
    with pytest.raises(ValueError, match="observed"):
        SampledObservationModel(errors, n_variables=4, observed=[0, 7])
    with pytest.raises(InvalidParameterError, match="bandwidth"):
        KernelDensityObservationModel(errors, n_variables=4, bandwidth=0.0)
    assert SampledObservationModel(list(range(200)), n_variables=4).errors.dtype == np.float64
    stored = SampledObservationModel(errors, n_variables=4).errors
    with pytest.raises(ValueError, match="read-only"):
        stored[0] = 1.0


# --- the fitted densities -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fit_student_t_recovers_df_and_scale():
    errors = stats.t.rvs(2.5, scale=1.7, size=20_000, random_state=8)
    model = SampledObservationModel(errors, n_variables=6, observed="every_other")
    fitted = model.fit_student_t()
    assert type(fitted) is ObservationModel and fitted.noise == "student_t"
    assert fitted.df == pytest.approx(2.5, rel=0.1)
    assert fitted.noise_scale == pytest.approx(1.7, rel=0.05)
    assert fitted.observed.tolist() == [0, 2, 4]
    assert model.tail == pytest.approx(1 / fitted.df)
    assert model.variance == pytest.approx(np.var(errors, ddof=1))  # df > 2: the sample variance


@pytest.mark.slow
def test_fit_student_t_of_heavy_and_gaussian_samples():
    cauchy = SampledObservationModel(np.random.default_rng(9).standard_cauchy(3000), n_variables=4)
    assert cauchy.fit_student_t().df == pytest.approx(1.0, rel=0.15)
    assert cauchy.variance is None  # no variance: the Kalman steps take noise_scale ** 2
    gaussian = SampledObservationModel(np.random.default_rng(9).standard_normal(3000), n_variables=4)
    assert gaussian.fit_student_t().df == 1000.0 and gaussian.tail == 0.001
    assert gaussian.fit_student_t().noise_scale == pytest.approx(1.0, rel=0.05)


def test_kernel_density_integrates_to_one_and_matches_a_gaussian():
    errors = np.random.default_rng(10).normal(0.0, 2.0, 10_000)
    model = SampledObservationModel(errors, n_variables=4).kernel_density()
    assert isinstance(model, KernelDensityObservationModel) and model.noise == "kernel_density"
    assert integral_of_density(model) == pytest.approx(1.0, abs=1e-3)
    x = np.linspace(-6.0, 6.0, 49)
    np.testing.assert_allclose(np.exp(model.log_density(x)), stats.norm.pdf(x, scale=2.0), atol=0.01)
    np.testing.assert_allclose(model.log_density(x[8:41]), stats.norm.logpdf(x[8:41], scale=2.0), atol=0.1)
    assert model.log_density(x.reshape(7, 7)).shape == (7, 7)


def test_kernel_density_of_a_heavy_tailed_sample():
    errors = contaminated_errors(100_000, gross_fraction=0.05, gross_scale=10.0, random_state=11)
    model = KernelDensityObservationModel(errors, n_variables=4)
    assert integral_of_density(model) == pytest.approx(1.0, abs=1e-3)
    x = np.array([0.0, 1.0, 2.0, 10.0, 40.0])
    true = np.log(0.95 * stats.norm.pdf(x) + 0.05 * stats.cauchy.pdf(x, scale=10.0))
    np.testing.assert_allclose(model.log_density(x), true, atol=0.3)
    # beyond every recorded error: finite, and nearly flat (an observation that far is barely believed)
    far = np.abs(errors).max() * np.array([2.0, 2.0 + 1e-3, 1e3, 1e100])
    log_density = model.log_density(np.r_[far, -far])
    assert np.isfinite(log_density).all()
    assert abs(log_density[1] - log_density[0]) < 0.01
    assert model.log_density([np.inf, -np.inf]).tolist() == [-np.inf, -np.inf]


def test_kernel_density_is_smooth_in_the_tails():
    # the kernels widen with |e|: no spikes at the isolated gross errors, unlike a fixed-bandwidth density
    errors = contaminated_errors(10_000, gross_fraction=0.05, gross_scale=10.0, random_state=12)
    model = KernelDensityObservationModel(errors, n_variables=4)
    x = np.linspace(30.0, 60.0, 301)
    curvature = np.diff(model.log_density(x), 2) / 0.1**2
    assert np.abs(curvature).max() < 0.5
    # what the transformation avoids: the kernel density with the same bandwidth at every error, Silverman's
    bandwidth = 0.9 * np.subtract(*np.quantile(errors, [0.75, 0.25])) / 1.34 * errors.size ** -0.2
    near = errors[np.abs(errors - 45.0) < 25.0]  # the others' kernels vanish on [30, 60] (exp(-2500) and less)
    fixed = logsumexp(stats.norm.logpdf(x[:, None], near, bandwidth), axis=1) - math.log(errors.size)
    assert np.abs(np.diff(fixed, 2) / 0.1**2).max() > 50.0


def test_kernel_density_draws_follow_its_density():
    errors = skewed_errors(5000, skewness=0.6, df=2.5, random_state=13)
    model = KernelDensityObservationModel(errors, n_variables=4)
    draws = model.sample(np.zeros((2500, 4)), random_state=0).ravel()
    assert not np.isin(draws, errors).any()  # a smoothed bootstrap
    grid = model.noise_scale * np.sinh(np.linspace(-25.0, 25.0, 200_001))
    cdf = np.concatenate([[0.0], np.cumsum(np.diff(grid) * 0.5 * (np.exp(model.log_density(grid[1:]))
                                                                   + np.exp(model.log_density(grid[:-1]))))])
    assert stats.kstest(draws, lambda v: np.interp(v, grid, cdf / cdf[-1])).pvalue > 1e-3
    assert stats.kstest(draws, stats.t(2.5).cdf).pvalue < 1e-6
    assert model.kernel_density() is model
    assert model.kernel_density(bandwidth=0.3).bandwidth_ == 0.3


def test_kernel_density_is_fast_on_a_large_sample():
    errors = contaminated_errors(400_000, random_state=14)
    model = KernelDensityObservationModel(errors, n_variables=4)  # binned: linear in the sample size
    assert model.bandwidth_ == pytest.approx(0.9 * 0.94 * 4e5 ** -0.2, rel=0.1)
    residual = np.linspace(-30.0, 30.0, 3000)
    assert np.isfinite(model.log_density(residual)).all()


def test_kalman_steps_take_the_sample_variance_or_the_robust_scale():
    skewed = SampledObservationModel(skewed_errors(2000, df=4.0, random_state=16), n_variables=4)
    assert skewed.variance == pytest.approx(np.var(skewed.errors, ddof=1))
    assert resolve_analysis("enkf", skewed).observation_variance_ == pytest.approx(skewed.variance)
    assert resolve_analysis(SerialEnKF(), skewed).observation_variance_ == pytest.approx(skewed.variance)
    contaminated = SampledObservationModel(contaminated_errors(2000, random_state=16), n_variables=4)
    assert contaminated.variance is None and contaminated.tail > 0.5  # gross Cauchy errors: no variance
    robust = resolve_analysis(RobustEnKF(variance_factor=2.0), contaminated)
    assert robust.observation_variance_ == pytest.approx(2.0 * contaminated.noise_scale**2)
    assert contaminated.kernel_density().variance is None


# --- in the cycle ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_twin_problem_with_sampled_noise_and_the_rank_histogram_filter():
    errors = contaminated_errors(10_000, gross_fraction=0.05, random_state=15)
    model = SampledObservationModel(errors, n_variables=10)
    problem = make_twin_problem(observation_model=model, n_cycles=120, random_state=0)
    with pytest.raises(ValueError, match="kernel_density"):
        twin_experiment(RankHistogramFilter(), problem, ensemble_size=10, spin_up=20, random_state=0)
    settings = {"ensemble_size": 10, "spin_up": 20, "random_state": 0}
    kde = twin_experiment(RankHistogramFilter(inflation=1.05, localization_radius=2.0,
                                              likelihood=model.kernel_density()), problem, **settings)
    student_t = twin_experiment(RankHistogramFilter(inflation=1.05, localization_radius=2.0,
                                                    likelihood=model.fit_student_t()), problem, **settings)
    free = twin_experiment("none", problem, **settings)
    assert not kde.diverged and not student_t.diverged
    assert kde.rmse < 0.5 * free.rmse and student_t.rmse < 0.5 * free.rmse
