"""Cycled twin experiments: the observation noise, the forecast, the filters, divergence, the learned analysis."""


import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.assimilation import (
    ANALYSIS_FEATURES,
    EnKF,
    LearnedAnalysis,
    NoiseLaw,
    ObservationModel,
    ParticleFilter,
    RobustEnKF,
    SerialEnKF,
    TwinProblem,
    analysis_features,
    gaspari_cohn,
    localization_matrix,
    make_analysis_training_data,
    make_twin_problem,
    twin_experiment,
)
from sklearn_measattn.datasets import integrate_lorenz96
from sklearn_measattn.metrics import crps_ensemble, energy_score

SMALL = {"n_variables": 8, "n_cycles": 120}
RUN = {"spin_up": 20, "ensemble_size": 12}


def seeded(seed, **simulation):
    """A problem and the generator that simulated it, to run on: one generator for both, as recorded runs used."""
    rng = np.random.RandomState(seed)
    return make_twin_problem(**simulation, random_state=rng), rng


# --------------------------------------------------------------------------- #
# The truth, the observations and their noise
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("noise", "df", "law"),
    [("gaussian", 1.5, stats.norm), ("student_t", 1.5, stats.t(1.5)), ("cauchy", 1.5, stats.cauchy)],
)
def test_observation_noise_follows_its_law(noise, df, law):
    model = ObservationModel(n_variables=4, noise=noise, df=df, noise_scale=2.0)
    draws = model.sample(np.zeros((4000, 4)), random_state=0) / 2.0
    assert stats.kstest(draws.ravel(), law.cdf).pvalue > 1e-3
    other = "cauchy" if noise == "gaussian" else "gaussian"
    other_law = stats.cauchy if other == "cauchy" else stats.norm
    assert stats.kstest(draws.ravel(), other_law.cdf).pvalue < 1e-6


@pytest.mark.parametrize("noise", ["gaussian", "student_t", "cauchy"])
def test_log_likelihood_is_the_normalised_density(noise):
    model = ObservationModel(n_variables=5, observed=[1, 3], noise=noise, df=2.5, noise_scale=0.7)
    law = {"gaussian": stats.norm, "student_t": stats.t(2.5), "cauchy": stats.cauchy}[noise]
    states = np.random.default_rng(0).normal(size=(6, 5))
    observation = np.array([0.3, -1.2])
    expected = law.logpdf((observation - states[:, [1, 3]]) / 0.7).sum(axis=1) - 2 * np.log(0.7)
    np.testing.assert_allclose(model.log_likelihood(observation, states), expected, rtol=1e-10)


@pytest.mark.parametrize("noise", ["gaussian", "student_t", "cauchy"])
def test_log_density_is_the_noise_log_density_of_one_error(noise):
    model = ObservationModel(n_variables=4, noise=noise, df=2.5, noise_scale=0.7)
    law = {"gaussian": stats.norm, "student_t": stats.t(2.5), "cauchy": stats.cauchy}[noise]
    residual = np.linspace(-30.0, 30.0, 42).reshape(2, 3, 7)
    np.testing.assert_allclose(model.log_density(residual), law.logpdf(residual / 0.7) - np.log(0.7), rtol=1e-12)
    # the log-likelihood of one observed variable is the log-density of its residual
    states = np.zeros((42, 4))
    states[:, 0] = -residual.ravel()
    one = ObservationModel(n_variables=4, observed=[0], noise=noise, df=2.5, noise_scale=0.7)
    np.testing.assert_allclose(one.log_likelihood([0.0], states), model.log_density(residual.ravel()), rtol=1e-12)


class _LaplaceNoise(NoiseLaw):
    """Laplace noise of scale ``scale``: a law of one's own, through its draws, tail and density."""

    tail = 0.0

    def standard_noise(self, size, random_state=None):
        return check_random_state(random_state).laplace(size=size)

    def log_density(self, residual):
        return stats.laplace.logpdf(np.asarray(residual) / self.scale) - np.log(self.scale)


def test_a_law_of_ones_own_reaches_sampling_and_the_likelihood():
    model = ObservationModel(n_variables=6, observed=[1, 4], noise=_LaplaceNoise(scale=0.5))
    assert model.noise_scale == 0.5 and model.tail == 0.0 and model.variance is None
    errors = (model.sample(np.ones((4000, 6)), random_state=0) - 1.0) / 0.5
    assert stats.kstest(errors.ravel(), stats.laplace.cdf).pvalue > 1e-3
    assert stats.kstest(errors.ravel(), stats.norm.cdf).pvalue < 1e-6
    problem = make_twin_problem(observation_model=model, n_cycles=5, random_state=0)
    assert problem.n_variables == 6 and problem.observation_model is model
    states = np.random.default_rng(1).normal(size=(5, 6))
    observation = np.array([0.2, np.nan])
    np.testing.assert_allclose(model.log_likelihood(observation, states),
                               stats.laplace.logpdf((0.2 - states[:, 1]) / 0.5) - np.log(0.5), rtol=1e-12)


@pytest.mark.parametrize("given", [{"n_variables": 40}, {"noise": "cauchy"}, {"observed": "all", "df": 3.0}])
def test_an_observation_model_and_its_parameters_are_not_both_given(given):
    model = ObservationModel(n_variables=8)
    with pytest.raises(InvalidParameterError, match="got an observation_model and"):
        make_twin_problem(observation_model=model, n_cycles=5, **given)
    with pytest.raises(InvalidParameterError, match="'observation_model' parameter of make_twin_problem"):
        make_twin_problem(observation_model="gaussian", n_cycles=5)


@pytest.mark.parametrize(("noise", "df", "variance"),
                         [("gaussian", 1.5, 4.0), ("student_t", 4.0, 8.0), ("student_t", 2.0, None), ("cauchy", 5.0, None)])
def test_variance_is_that_of_the_noise_law(noise, df, variance):
    assert ObservationModel(n_variables=4, noise=noise, df=df, noise_scale=2.0).variance == variance


def test_every_other_observes_the_even_variables():
    assert ObservationModel(n_variables=7, observed="every_other").observed.tolist() == [0, 2, 4, 6]


@pytest.mark.slow
def test_problem_pairs_each_observation_with_the_next_truth():
    problem = make_twin_problem(n_variables=10, noise="gaussian", noise_scale=1e-6, n_cycles=30, random_state=0)
    np.testing.assert_allclose(problem.observations, problem.truth[1:], atol=1e-4)
    step = integrate_lorenz96(problem.truth[:-1], problem.dt_obs)
    np.testing.assert_allclose(step, problem.truth[1:], rtol=1e-12)
    assert 2.5 < problem.climatological_std < 5.0


@pytest.mark.slow
def test_same_seed_same_truth_and_observations():
    first = make_twin_problem(n_variables=8, n_cycles=20, noise="cauchy", random_state=3)
    again = make_twin_problem(n_variables=8, n_cycles=20, noise="cauchy", random_state=3)
    np.testing.assert_array_equal(first.observations, again.observations)
    other = make_twin_problem(n_variables=8, n_cycles=20, noise="cauchy", random_state=4)
    assert not np.allclose(first.truth, other.truth)


def test_lorenz96_conserves_energy_without_forcing_and_damping():
    # with F = 0 the advection term conserves sum x^2 and the damping -x drains it: (d/dt) E = -2 E
    x = np.random.default_rng(0).normal(size=(3, 12))
    later = integrate_lorenz96(x, 0.01, forcing=0.0, time_step=0.001)
    energy = (x**2).sum(axis=1)
    np.testing.assert_allclose((later**2).sum(axis=1), energy * np.exp(-0.02), rtol=1e-4)


# --------------------------------------------------------------------------- #
# The experiment
# --------------------------------------------------------------------------- #
@pytest.mark.slow
def test_a_perfect_analysis_scores_zero_rmse():
    problem = make_twin_problem(n_variables=8, n_cycles=40, random_state=0)
    truths = iter(problem.truth[1:])

    def perfect(forecast, observation):
        truth = next(truths)
        return truth + 1e-3 * np.random.default_rng(0).standard_normal(forecast.shape)

    result = twin_experiment(perfect, problem, ensemble_size=6, spin_up=5)
    assert result.rmse < 2e-3 and result.crps < 2e-3 and not result.diverged
    free = twin_experiment("none", problem, ensemble_size=6, spin_up=5, random_state=0)
    assert free.rmse > 100 * result.rmse


def test_scores_per_cycle_are_the_package_scores():
    problem = make_twin_problem(n_variables=8, n_cycles=10, random_state=0)
    seen = []
    result = twin_experiment("enkf", problem, ensemble_size=10, spin_up=2, random_state=0,
                             callback=lambda k, forecast, analysis, truth: seen.append((analysis.copy(), truth)))
    analysis, truth = seen[-1]
    assert result.energy_score_per_cycle[-1] == pytest.approx(energy_score(analysis, truth))
    assert result.crps_per_cycle[-1] == pytest.approx(crps_ensemble(analysis.T, truth).mean())
    assert result.rmse_per_cycle[-1] == pytest.approx(np.sqrt(np.mean((analysis.mean(0) - truth) ** 2)))
    assert result.rmse == pytest.approx(result.rmse_per_cycle[2:].mean())


@pytest.mark.slow
def test_enkf_tracks_the_truth_and_beats_no_update():
    problem, rng = seeded(0, **SMALL)
    enkf = twin_experiment(EnKF(inflation=1.1), problem, **RUN, random_state=rng)
    problem, rng = seeded(0, **SMALL)
    free = twin_experiment("none", problem, **RUN, random_state=rng)
    assert enkf.rmse < 0.25 * free.rmse and not enkf.diverged
    assert 0.3 < enkf.spread / enkf.rmse < 3.0


@pytest.mark.slow
def test_cauchy_noise_breaks_the_plain_enkf_but_not_the_robust_ones():
    problem = make_twin_problem(n_variables=10, noise="cauchy", n_cycles=300, random_state=1)
    plain = twin_experiment(EnKF(inflation=1.1), problem, ensemble_size=20, spin_up=50, random_state=0)
    robust = twin_experiment(RobustEnKF(), problem, ensemble_size=20, spin_up=50, random_state=0)
    serial = twin_experiment(SerialEnKF(inflation=1.05, clip=2.0), problem, ensemble_size=20, spin_up=50,
                             random_state=0)
    assert plain.diverged
    assert not robust.diverged and robust.rmse < 1.0
    assert not serial.diverged and serial.rmse < 1.0


def test_divergence_stops_the_run_and_is_not_averaged_away():
    def explode(forecast, observation):
        return forecast * 1e5

    problem, rng = seeded(0, **SMALL)
    result = twin_experiment(explode, problem, **RUN, random_state=rng)
    assert result.diverged and result.diverged_at == 0
    assert np.isinf(result.rmse) and np.all(np.isinf(result.rmse_per_cycle))


@pytest.mark.slow
def test_losing_the_truth_is_divergence():
    problem = make_twin_problem(n_variables=8, n_cycles=150, random_state=0)
    wrong = problem.truth[::-1].copy()  # a finite analysis that is nowhere near the truth
    cycle = iter(range(problem.n_cycles))

    def lost(forecast, observation):
        return wrong[next(cycle)] + 0.1 * np.random.default_rng(0).standard_normal(forecast.shape)

    result = twin_experiment(lost, problem, ensemble_size=6, spin_up=10)
    assert result.diverged and 10 + 49 <= result.diverged_at < 150
    assert np.isfinite(result.rmse)


@pytest.mark.slow
def test_particle_filter_with_many_members_beats_the_robust_enkf_under_cauchy_noise():
    problem = make_twin_problem(n_variables=6, observed="every_other", noise="cauchy", n_cycles=200, random_state=2)
    bayes = twin_experiment(ParticleFilter(jitter=0.2), problem, ensemble_size=1500, spin_up=40, random_state=0)
    robust = twin_experiment(RobustEnKF(), problem, ensemble_size=20, spin_up=40, random_state=0)
    assert not bayes.diverged and bayes.rmse < robust.rmse


@pytest.mark.slow
def test_localization_lets_a_small_ensemble_filter_many_variables():
    problem = make_twin_problem(n_variables=40, n_cycles=200, random_state=0)
    local = twin_experiment(EnKF(inflation=1.1, localization_radius=4.0), problem, ensemble_size=15, spin_up=50,
                            random_state=0)
    global_ = twin_experiment(EnKF(inflation=1.1), problem, ensemble_size=15, spin_up=50, random_state=0)
    assert local.rmse < 0.5 and local.rmse < 0.7 * global_.rmse


def test_gaspari_cohn_is_a_compact_taper():
    d = np.linspace(0, 10, 101)
    rho = gaspari_cohn(d, 3.0)
    assert rho[0] == 1.0 and np.all(rho[d >= 6.0] == 0.0) and np.all(np.diff(rho) <= 1e-12)
    matrix = localization_matrix(12, 2.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[0, 11] == matrix[0, 1]  # the ring wraps around
    assert np.all(np.linalg.eigvalsh(matrix) > -1e-10)  # a correlation matrix


@pytest.mark.slow
def test_relaxation_restores_forecast_spread():
    problem = make_twin_problem(n_variables=8, n_cycles=60, random_state=0)
    tight = twin_experiment(SerialEnKF(), problem, ensemble_size=10, spin_up=10, random_state=0)
    relaxed = twin_experiment(SerialEnKF(relaxation=0.7), problem, ensemble_size=10, spin_up=10, random_state=0)
    assert relaxed.spread > 1.2 * tight.spread


# --------------------------------------------------------------------------- #
# Bad input, before any work
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"analysis": "kalman"}, "analysis"),
        ({"analysis": "enkf", "ensemble_size": 1}, "ensemble_size"),
        ({"analysis": "enkf", "spin_up": 20}, "spin_up"),
        ({"analysis": EnKF(inflation=0.5)}, "inflation"),
        ({"analysis": RobustEnKF(clip=-1.0)}, "clip"),
        ({"analysis": SerialEnKF(relaxation=1.0)}, "relaxation"),
        ({"analysis": "enkf", "problem": np.zeros((21, 8))}, "problem"),
        ({"analysis": "enkf", "callback": 3}, "callback"),
    ],
)
def test_bad_parameters_are_refused_before_any_work(kwargs, match, monkeypatch):
    problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    monkeypatch.setattr(TwinProblem, "forecast", _no_work)
    with pytest.raises((InvalidParameterError, ValueError, TypeError), match=match):
        twin_experiment(**{"problem": problem, "spin_up": 5, **kwargs})


def _no_work(*args, **kwargs):
    raise AssertionError("a cycle ran before the arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"noise": "laplace"}, "noise"), ({"n_variables": 3}, "n_variables"), ({"observed": [0, 0]}, "distinct")],
)
def test_bad_simulation_parameters_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make_twin_problem(**{"n_variables": 8, "n_cycles": 20, **kwargs})


def test_a_spin_up_that_leaves_no_cycle_is_refused_before_any_cycle():
    problem = make_twin_problem(n_variables=8, n_cycles=10, random_state=0)
    with pytest.raises(ValueError, match=r"spin_up=10 leaves no cycle to score: it must be below n_cycles \(10\)"):
        twin_experiment(lambda forecast, observation: _no_work(), problem, spin_up=10)


@pytest.mark.slow
def test_an_analysis_of_the_wrong_shape_is_reported():
    with pytest.raises(ValueError, match="one analysis member per forecast member"):
        twin_experiment(lambda forecast, observation: forecast[:-1], seeded(0, **SMALL)[0], **RUN)


def test_an_unbound_step_says_how_to_bind_it():
    with pytest.raises(RuntimeError, match="bind"):
        EnKF()(np.zeros((4, 8)), np.zeros(8))


# --------------------------------------------------------------------------- #
# The learned analysis
# --------------------------------------------------------------------------- #
def test_analysis_features_standardise_members_and_innovation():
    prior = np.random.default_rng(0).normal(3.0, 2.0, size=(5, 30))
    observation = np.full(5, 10.0)
    features, centre, scale = analysis_features(prior, observation, noise_scale=2.0, noise_tail=1.0)
    assert features.shape == (5, 30, len(ANALYSIS_FEATURES))
    np.testing.assert_allclose(features[..., 0].mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(features[..., 0].std(axis=-1, ddof=1), 1.0)
    np.testing.assert_allclose(centre + scale * features[:, 0, 1], observation)
    np.testing.assert_allclose(features[:, 0, 2], np.log(2.0 / scale))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["member", "truth"])
def test_training_pairs_have_the_shape_and_law_of_their_target(target):
    problem, rng = seeded(0, n_variables=8, noise="gaussian", n_cycles=80)
    X, y = make_analysis_training_data(problem, spin_up=10, ensemble_size=10, target=target, random_state=rng)
    assert X.shape == (70 * 8, 10, 4) and y.shape == (70 * 8, 1, 1)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    if target == "member":
        # the stand-in is exchangeable with the members: its standardised value has about unit spread
        assert 0.8 < y.std() < 1.3
        # and the simulated observation is the stand-in plus Gaussian noise of scale 1
        residual = (X[:, 0, 1] - y[:, 0, 0]) / np.exp(X[:, 0, 2])
        assert 0.85 < residual.std() < 1.15


class _KalmanModel(BaseEstimator):
    """A stand-in for a fitted model: the scalar Kalman (EAKF) posterior of the features, as points."""

    def fit(self, X=None, y=None):
        self.n_features_in_, self.n_features_out_ = 4, 1
        return self

    def predict(self, X):
        member, innovation, log_ratio = X[..., 0], X[..., 1], X[..., 2]
        ratio2 = np.exp(2 * log_ratio)
        gain = 1.0 / (1.0 + ratio2)
        return (gain * innovation + np.sqrt(ratio2 * gain) * member)[..., None]


@pytest.mark.slow
def test_learned_analysis_with_the_kalman_rule_is_the_serial_enkf():
    problem = make_twin_problem(n_variables=8, n_cycles=60, random_state=0)
    learned = twin_experiment(LearnedAnalysis(_KalmanModel().fit(), inflation=1.05, far_innovation=None), problem,
                              ensemble_size=10, spin_up=10, random_state=0)
    serial = twin_experiment(SerialEnKF(inflation=1.05), problem, ensemble_size=10, spin_up=10, random_state=0)
    np.testing.assert_allclose(learned.rmse_per_cycle, serial.rmse_per_cycle, rtol=1e-8)


@pytest.mark.slow
def test_learned_analysis_refuses_a_model_of_other_features():
    from sklearn_measattn.datasets import make_matrix_inverse

    X, y = make_matrix_inverse(n_samples=8, n_points=8, random_state=0)
    model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="make_analysis_training_data"):
        twin_experiment(LearnedAnalysis(model), make_twin_problem(n_variables=8, n_cycles=5), spin_up=1)


@pytest.mark.slow
def test_learned_analysis_runs_a_fitted_transformer_in_the_cycle_fast():
    problem, rng = seeded(0, n_variables=8, noise="cauchy", n_cycles=60)
    X, y = make_analysis_training_data(problem, spin_up=10, ensemble_size=10, random_state=rng)
    model = MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=16, n_heads=2, n_layers=1,
                                        batch_size=64, max_epochs=2, random_state=0).fit(X, y)
    problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=40, random_state=1)
    result = twin_experiment(LearnedAnalysis(model, inflation=1.02), problem, ensemble_size=10, spin_up=5,
                             random_state=0)
    assert result.rmse_per_cycle.shape == (40,)
    assert result.seconds_per_cycle < 0.5  # milliseconds per observation, not a re-validated predict each time
    # the direct network path gives what predict gives
    step = LearnedAnalysis(model).bind(problem.observation_model)
    features = X[0]
    direct = step._predict_standardised(features[None])[0]
    via_predict = np.sort(model.predict(features[None])[0, :, 0])
    mirrored = np.sort(-model.predict((features * [-1, -1, 1, 1])[None])[0, :, 0])
    np.testing.assert_allclose(direct, 0.5 * (via_predict + mirrored), atol=1e-5)


@pytest.mark.slow
def test_learned_moments_update_with_the_kalman_rule_is_the_serial_enkf():
    problem = make_twin_problem(n_variables=8, n_cycles=40, random_state=0)
    moments = twin_experiment(LearnedAnalysis(_KalmanModel().fit(), update="moments", inflation=1.05,
                                              far_innovation=None), problem,
                              ensemble_size=10, spin_up=10, random_state=0)
    serial = twin_experiment(SerialEnKF(inflation=1.05), problem, ensemble_size=10, spin_up=10, random_state=0)
    np.testing.assert_allclose(moments.rmse_per_cycle, serial.rmse_per_cycle, rtol=1e-8)


@pytest.mark.slow
def test_learned_analysis_leaves_torch_threads_as_they_were():
    import torch

    problem, rng = seeded(0, n_variables=8, n_cycles=20)
    X, y = make_analysis_training_data(problem, spin_up=5, ensemble_size=6, random_state=rng)
    model = MeasureTransformerRegressor(transform="symlog", d_model=8, n_heads=2, n_layers=1, max_epochs=1,
                                        random_state=0).fit(X, y)
    threads = torch.get_num_threads()
    problem, rng = seeded(0, n_variables=8, n_cycles=10)
    result = twin_experiment(LearnedAnalysis(model, relaxation=0.3), problem, spin_up=2, ensemble_size=6,
                             random_state=rng)
    assert torch.get_num_threads() == threads and np.isfinite(result.rmse_per_cycle).any()

