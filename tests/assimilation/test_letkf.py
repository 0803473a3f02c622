"""The LETKF against the Kalman update it must equal, its localisation, and the tuning and comparison functions."""

import importlib.util

import numpy as np
import pytest

from sklearn_measattn.assimilation import (
    LETKF,
    EnKF,
    ObservationModel,
    SampledNoise,
    compare_analyses,
    contaminated_errors,
    make_twin_problem,
    tune_analysis,
    twin_experiment,
)
from sklearn_measattn.assimilation._letkf import local_transform, observation_weights

needs_dapper = pytest.mark.skipif(importlib.util.find_spec("dapper") is None, reason="DAPPER is not installed")


def _ensemble(n_members, n_variables, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_members, n_variables)) @ rng.standard_normal((n_variables, n_variables))


def test_global_letkf_is_the_kalman_update_in_mean_and_covariance():
    forecast = _ensemble(50, 6)
    model = ObservationModel(n_variables=6, observed=[0, 2, 3], noise_scale=0.7)
    observation = np.array([0.5, -1.0, 2.0])
    analysis = LETKF(inflation=1.0, localization_radius=None).bind(model)(forecast, observation)
    P = np.cov(forecast.T)
    H = np.eye(6)[[0, 2, 3]]
    gain = P @ H.T @ np.linalg.inv(H @ P @ H.T + 0.49 * np.eye(3))
    mean = forecast.mean(axis=0)
    np.testing.assert_allclose(analysis.mean(axis=0), mean + gain @ (observation - H @ mean), atol=1e-10)
    np.testing.assert_allclose(np.cov(analysis.T), (np.eye(6) - gain @ H) @ P, atol=1e-10)


def test_inflation_multiplies_the_forecast_anomalies_before_the_update():
    forecast = _ensemble(30, 5, seed=1)
    model = ObservationModel(n_variables=5, observed=[1])
    inflated = forecast.mean(axis=0) + 1.2 * (forecast - forecast.mean(axis=0))
    plain = LETKF(inflation=1.0, localization_radius=None).bind(model)
    np.testing.assert_allclose(LETKF(inflation=1.2, localization_radius=None).bind(model)(forecast, [0.3]),
                               plain(inflated, [0.3]), atol=1e-12)


def test_localisation_leaves_variables_beyond_twice_the_radius_untouched():
    forecast = _ensemble(12, 20, seed=2)
    model = ObservationModel(n_variables=20, observed=[0])
    analysis = LETKF(inflation=1.0, localization_radius=2.0).bind(model)(forecast, [5.0])
    far = np.arange(5, 16)  # cyclic distance >= 5 > 2 * 2 from variable 0
    np.testing.assert_allclose(analysis[:, far], forecast[:, far], atol=1e-12)
    assert not np.allclose(analysis[:, 0], forecast[:, 0])
    weights = observation_weights(20, [0], 2.0)
    assert weights[0, 0] == 1.0 and weights[4, 0] == 0.0 and weights[19, 0] == weights[1, 0]


def test_student_t_weights_are_the_expected_precision_factor_and_change_nothing_under_gaussian_noise():
    forecast = _ensemble(30, 6, seed=4)
    observation = np.array([0.5, 40.0])
    cauchy = ObservationModel(n_variables=6, observed=[0, 3], noise="cauchy", noise_scale=0.5)
    gaussian = ObservationModel(n_variables=6, observed=[0, 3], noise_scale=0.5)
    np.testing.assert_array_equal(LETKF(student_t=True).bind(gaussian)(forecast, observation),
                                  LETKF().bind(gaussian)(forecast, observation))
    # Under Cauchy errors (df 1) the weight of an innovation d is 2 / (1 + d^2 / (var(Hx) + 0.25)): with the
    # global ETKF this is the Kalman update with the noise variances 0.25 / weight.
    H = np.eye(6)[[0, 3]]
    mean = forecast.mean(axis=0)
    innovation = observation - H @ mean
    weights = 2.0 / (1.0 + innovation**2 / (np.var(forecast @ H.T, axis=0, ddof=1) + 0.25))
    assert weights[0] > 1.0 > 0.1 > weights[1]
    P = np.cov(forecast.T)
    gain = P @ H.T @ np.linalg.inv(H @ P @ H.T + np.diag(0.25 / weights))
    robust = LETKF(inflation=1.0, localization_radius=None, student_t=True).bind(cauchy)(forecast, observation)
    np.testing.assert_allclose(robust.mean(axis=0), mean + gain @ innovation, atol=1e-10)
    np.testing.assert_allclose(np.cov(robust.T), (np.eye(6) - gain @ H) @ P, atol=1e-10)
    # The gross error pulls the analysis less than with clipping at 2 innovation standard deviations.
    clipped = LETKF(inflation=1.0, localization_radius=None, clip=2.0).bind(cauchy)(forecast, observation)
    only_first = LETKF(inflation=1.0, localization_radius=None, student_t=True).bind(
        ObservationModel(n_variables=6, observed=[0], noise="cauchy", noise_scale=0.5))(forecast, observation[:1])
    pull = np.abs(robust.mean(axis=0) - only_first.mean(axis=0))[3]
    assert pull < np.abs(clipped.mean(axis=0) - only_first.mean(axis=0))[3]


def test_student_t_weights_of_a_record_take_the_scale_of_the_student_t_fitted_to_it():
    forecast = _ensemble(20, 6, seed=5)
    observation = np.array([0.5, 12.0, -0.3])
    record = SampledNoise(contaminated_errors(5000, random_state=1))
    fitted = record.fit_student_t()
    assert abs(fitted.scale / record.scale - 1.0) > 0.1  # the fitted scale is not the record's robust scale
    for scale in (record.scale, 2.0):  # the record at its own scale and rescaled
        model = ObservationModel(n_variables=6, observed=[0, 2, 4], noise=record)
        model.noise_scale = scale
        step = LETKF(inflation=1.0, localization_radius=3.0, variance_factor=1.5, student_t=True).bind(model)
        twin = ObservationModel(n_variables=6, observed=[0, 2, 4], noise="student_t", df=fitted.df,
                                noise_scale=fitted.scale * scale / record.scale)
        same = LETKF(inflation=1.0, localization_radius=3.0, variance_factor=1.5, student_t=True).bind(twin)
        assert step.observation_variance_ == pytest.approx(1.5 * (fitted.scale * scale / record.scale) ** 2)
        np.testing.assert_allclose(step(forecast, observation), same(forecast, observation), atol=1e-10)


def test_the_batched_transform_is_each_grid_points_ensemble_transform():
    # Every grid point against its own ETKF written out: P = [(N-1) I + Y^T R_i Y]^-1, w = P Y^T R_i d,
    # W = sqrt((N-1) P); the points reach 0 to 4 of the 5 observations (the padding of the batch must not matter).
    rng = np.random.default_rng(7)
    anomalies = rng.standard_normal((6, 12))
    anomalies -= anomalies.mean(axis=0)
    observed = np.array([0, 1, 2, 3, 9])
    innovation = rng.standard_normal(5)
    precision = observation_weights(12, observed, 1.5) * 2.0
    reached = (precision > 0).sum(axis=1)
    assert reached.min() == 0 and reached.max() >= 4
    Y = anomalies[:, observed]
    expected = np.empty_like(anomalies)
    for i in range(12):
        P = np.linalg.inv(5.0 * np.eye(6) + Y @ np.diag(precision[i]) @ Y.T)
        values, vectors = np.linalg.eigh(5.0 * P)
        weights = vectors @ np.diag(np.sqrt(values)) @ vectors.T + (P @ Y @ (precision[i] * innovation))[:, None]
        expected[:, i] = anomalies[:, i] @ weights
    np.testing.assert_allclose(local_transform(anomalies, Y, innovation, precision), expected, atol=1e-12)


def test_missing_observations_are_left_out_and_none_keeps_the_forecast():
    forecast = _ensemble(12, 8, seed=3)
    model = ObservationModel(n_variables=8, observed=[0, 4])
    step = LETKF(localization_radius=None).bind(model)
    only_first = LETKF(localization_radius=None).bind(ObservationModel(n_variables=8, observed=[0]))
    np.testing.assert_allclose(step(forecast, [1.0, np.nan]), only_first(forecast, [1.0]), atol=1e-12)
    np.testing.assert_array_equal(step(forecast, [np.nan, np.nan]), forecast)


def test_letkf_tracks_a_sparse_network_and_refuses_bad_parameters():
    problem = make_twin_problem(n_variables=20, observed="every_other", n_cycles=150, random_state=0)
    result = twin_experiment(LETKF(inflation=1.05, localization_radius=3.0), problem, spin_up=50, ensemble_size=10,
                             random_state=0)
    free = twin_experiment("none", problem, spin_up=50, ensemble_size=10, random_state=0)
    assert not result.diverged and result.rmse < 0.25 * free.rmse
    with pytest.raises(ValueError, match="inflation"):
        twin_experiment(LETKF(inflation=0.9), problem, ensemble_size=10)
    assert twin_experiment("letkf", problem, spin_up=50, ensemble_size=10, random_state=0).rmse == pytest.approx(
        twin_experiment(LETKF(), problem, spin_up=50, ensemble_size=10, random_state=0).rmse)


@needs_dapper
def test_letkf_matches_dappers_on_the_same_truth_and_observations():
    from sklearn_measattn.assimilation import run_dapper

    problem = make_twin_problem(n_variables=40, n_cycles=600, random_state=5)
    ours = twin_experiment(LETKF(inflation=1.04, localization_radius=1.82 * 4), problem, ensemble_size=20,
                           spin_up=200, random_state=5)
    dappers = run_dapper("LETKF", problem, ensemble_size=20, spin_up=200, random_state=5, infl=1.04, loc_rad=4)
    assert ours.rmse == pytest.approx(dappers.rmse, rel=0.08)


@needs_dapper
def test_letkf_is_dappers_analysis_with_one_variable_per_local_analysis():
    # every 4th variable observed, few members: where the local domains' centres matter
    from sklearn_measattn.assimilation import run_dapper

    problem = make_twin_problem(n_variables=40, observed=np.arange(0, 40, 4), dt_obs=0.15, noise_scale=0.7,
                                n_cycles=12, random_state=3)
    ours = twin_experiment(LETKF(inflation=1.0, localization_radius=1.82 * 2), problem, ensemble_size=10, spin_up=1,
                           random_state=0)
    per_variable = run_dapper("LETKF", problem, ensemble_size=10, spin_up=1, random_state=0, infl=1.0, rot=False,
                              loc_rad=2, loc_batch=1)
    in_pairs = run_dapper("LETKF", problem, ensemble_size=10, spin_up=1, random_state=0, infl=1.0, rot=False,
                          loc_rad=2)
    np.testing.assert_allclose(per_variable.rmse_per_cycle, ours.rmse_per_cycle, rtol=1e-4)
    assert np.abs(in_pairs.rmse_per_cycle - ours.rmse_per_cycle).max() > 1e-3  # DAPPER's default pairs differ


@pytest.fixture(scope="module")
def small_problems():
    return [make_twin_problem(n_variables=12, observed="every_other", n_cycles=80, random_state=seed)
            for seed in (1000, 1001)]


def test_tuning_takes_the_fewest_divergences_then_the_lowest_mean_rmse(small_problems):
    grid = {"inflation": [1.0, 1.05, 3.0], "localization_radius": [3.0]}
    tuning = tune_analysis(LETKF(), grid, small_problems, ensemble_size=8, spin_up=20)
    keys = [(c["n_diverged"], c["mean_rmse"]) for c in tuning.candidates]
    assert keys.index(min(keys)) == [c["params"] for c in tuning.candidates].index(tuning.best_params)
    assert tuning.best_step.get_params()["inflation"] == tuning.best_params["inflation"]
    assert len(tuning.candidates) == 3 and all(len(c["rmse"]) == 2 for c in tuning.candidates)


def test_parallel_runs_give_the_serial_results(small_problems):
    steps = {"LETKF": LETKF(localization_radius=3.0), "EnKF": EnKF(localization_radius=3.0)}
    serial = compare_analyses(steps, small_problems, ensemble_size=8, spin_up=20, reference="EnKF")
    parallel = compare_analyses(steps, small_problems, ensemble_size=8, spin_up=20, reference="EnKF", n_jobs=2)
    # Worker processes run BLAS on fewer threads, which may change the last bits of a sum.
    for ours, theirs in zip(serial, parallel, strict=True):
        assert {k: ours[k] for k in ("step", "problem", "diverged")} == {k: theirs[k] for k in ("step", "problem", "diverged")}
        for key in ("rmse", "crps", "spread", "rmse_ratio", "crps_ratio"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-9, abs=0.0)
    assert [row["rmse_ratio"] for row in serial if row["step"] == "EnKF"] == [1.0, 1.0]


def test_tuning_and_comparison_refuse_bad_input_before_running(small_problems):
    with pytest.raises(TypeError, match="AnalysisStep"):
        tune_analysis("letkf", {"inflation": [1.0]}, small_problems)
    with pytest.raises(TypeError, match="TwinProblem"):
        tune_analysis(LETKF(), {"inflation": [1.0]}, [])
    with pytest.raises(ValueError, match="inflation"):
        tune_analysis(LETKF(), {"inflation": [0.5]}, small_problems)
    with pytest.raises(ValueError, match="reference"):
        compare_analyses({"a": LETKF()}, small_problems, reference="b")
