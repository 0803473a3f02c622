"""Tests for the Lorenz-96 data-assimilation benchmark."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn._lorenz96._model import _integrate_lorenz96, _lorenz96_tendency
from sklearn_measattn.datasets import OBSERVATION_NOISES, integrate_lorenz96, make_lorenz96_analysis

SMALL = {"n_samples": 6, "n_points": 12, "n_features": 6, "prior_size": 256}


@pytest.mark.parametrize("noise", OBSERVATION_NOISES)
def test_shapes_dtypes_and_params(noise):
    X, y, params = make_lorenz96_analysis(**SMALL, observation_noise=noise, return_params=True, random_state=0)
    assert X.shape == y.shape == (6, 12, 6)
    assert X.dtype == y.dtype == np.float64
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    np.testing.assert_array_equal(params["observed"], [0, 2, 4])
    assert params["truth"].shape == (6, 6)
    assert params["observation"].shape == (6, 3)
    assert params["ess"].shape == (6,) and np.all((params["ess"] >= 1) & (params["ess"] <= 256 + 1e-9))


@pytest.mark.parametrize("observed, expected", [("all", [0, 1, 2, 3, 4, 5]), ("every_other", [0, 2, 4]), ([5, 1], [5, 1])])
def test_observed_coordinates(observed, expected):
    _, _, params = make_lorenz96_analysis(**SMALL, observed=observed, return_params=True, random_state=0)
    np.testing.assert_array_equal(params["observed"], expected)
    assert params["observation"].shape == (6, len(expected))


@pytest.mark.slow
def test_append_innovation():
    X, y, params = make_lorenz96_analysis(**SMALL, return_params=True, random_state=0)
    X_aug, y_aug = make_lorenz96_analysis(**SMALL, append_innovation=True, random_state=0)
    assert X_aug.shape == (6, 12, 6 + 3)
    np.testing.assert_array_equal(X_aug[..., :6], X)
    np.testing.assert_array_equal(y_aug, y)
    expected = params["observation"][:, np.newaxis, :] - X[..., params["observed"]]
    np.testing.assert_allclose(X_aug[..., 6:], expected)


def test_analysis_members_come_from_the_forecast_distribution_not_the_input():
    # y is resampled from a pool drawn apart from X: no analysis member is a forecast member.
    X, y = make_lorenz96_analysis(**SMALL, random_state=0)
    for forecast, analysis in zip(X, y):
        assert not np.any(np.all(np.isclose(analysis[:, np.newaxis, :], forecast[np.newaxis]), axis=-1))


@pytest.mark.slow
def test_determinism():
    X1, y1 = make_lorenz96_analysis(**SMALL, random_state=3)
    X2, y2 = make_lorenz96_analysis(**SMALL, random_state=3)
    X3, y3 = make_lorenz96_analysis(**SMALL, random_state=4)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3) and not np.array_equal(y1, y3)
    X4, _ = make_lorenz96_analysis(**SMALL, random_state=np.random.RandomState(3))
    np.testing.assert_array_equal(X1, X4)


@pytest.mark.slow
def test_gaussian_analysis_moves_toward_the_observation_and_the_truth():
    X, y, params = make_lorenz96_analysis(
        n_samples=32, n_points=64, n_features=8, observation_noise="gaussian", observed="all",
        noise_scale=1.5, prior_size=2048, return_params=True, random_state=1,
    )
    observation, truth = params["observation"], params["truth"]
    prior_mean, posterior_mean = X.mean(axis=1), y.mean(axis=1)
    # measured ratios about 0.4, 0.4 and 0.6
    assert np.mean((posterior_mean - observation) ** 2) < 0.7 * np.mean((prior_mean - observation) ** 2)
    assert np.mean((posterior_mean - truth) ** 2) < 0.7 * np.mean((prior_mean - truth) ** 2)
    assert np.mean(y.std(axis=1)) < 0.8 * np.mean(X.std(axis=1))  # the data sharpen the ensemble


def test_reference_posterior_matches_the_kalman_posterior_when_both_are_exact():
    # A forecast of length ~0 keeps the prior Gaussian N(m, s^2 I); with Gaussian noise of scale sigma
    # on every coordinate the posterior is N(m + k (o - m), k sigma^2 I), k = s^2 / (s^2 + sigma^2).
    s, sigma = 1.0, 1.0
    X, y, params = make_lorenz96_analysis(
        n_samples=3, n_points=4000, n_features=4, lead_time=1e-6, initial_spread=s, observation_noise="gaussian",
        noise_scale=sigma, observed="all", prior_size=40000, return_params=True, random_state=0,
    )
    gain = s**2 / (s**2 + sigma**2)
    prior_mean = X.mean(axis=1)
    expected_mean = prior_mean + gain * (params["observation"] - prior_mean)
    np.testing.assert_allclose(y.mean(axis=1), expected_mean, atol=0.08)
    np.testing.assert_allclose(y.var(axis=1), gain * sigma**2, rtol=0.15)
    np.testing.assert_allclose(X.var(axis=1), s**2, rtol=0.15)


@pytest.mark.slow
def test_heavy_tailed_noise_has_heavier_tails_and_the_analysis_ignores_outliers():
    common = {"n_samples": 48, "n_points": 16, "n_features": 8, "prior_size": 512, "return_params": True}
    runs = {}
    for noise in ("gaussian", "cauchy"):
        _, y, params = make_lorenz96_analysis(**common, observation_noise=noise, random_state=0)
        error = params["observation"] - params["truth"][:, params["observed"]]
        misfit = np.abs(params["observation"] - y.mean(axis=1)[:, params["observed"]])
        runs[noise] = (np.mean(np.abs(error) > 5.0), misfit.max())
    # P(|N(0,1)| > 5) ~ 6e-7; P(|Cauchy| > 5) ~ 0.13 over 192 errors
    assert runs["gaussian"][0] == 0.0
    assert runs["cauchy"][0] > 0.05
    # Bayes' rule with a Cauchy likelihood leaves far-off observations unexplained
    assert runs["cauchy"][1] > 3.0 * runs["gaussian"][1]


@pytest.mark.slow
def test_student_t_tail_follows_df():
    common = {"n_samples": 64, "n_points": 4, "n_features": 8, "prior_size": 64, "observed": "all", "return_params": True}
    fractions = []
    for df in (1.0, 30.0):
        _, _, params = make_lorenz96_analysis(**common, observation_noise="student_t", df=df, random_state=0)
        error = params["observation"] - params["truth"]
        fractions.append(np.mean(np.abs(error) > 4.0))
    assert fractions[0] > 3 * max(fractions[1], 1 / 512)


def test_few_effective_members_warn():
    with pytest.warns(UserWarning, match="effective sample size"):
        make_lorenz96_analysis(n_samples=2, n_points=16, n_features=4, prior_size=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_lorenz96_analysis(**SMALL, random_state=0)


# --------------------------------------------------------------------------- #
# The integrator
# --------------------------------------------------------------------------- #


def test_fixed_point_is_preserved():
    x = np.full((2, 3, 7), 8.0)
    np.testing.assert_array_equal(_lorenz96_tendency(x, 8.0), 0.0)
    np.testing.assert_allclose(_integrate_lorenz96(x, 8.0, 1.0, 0.01), 8.0, rtol=0, atol=1e-12)


def test_tendency_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # dx_0 = (x_1 - x_3) x_4 - x_0 + F with cyclic indices -2 -> 3, -1 -> 4
    expected = [(x[(i + 1) % 5] - x[(i - 2) % 5]) * x[(i - 1) % 5] - x[i] + 8.0 for i in range(5)]
    np.testing.assert_allclose(_lorenz96_tendency(x, 8.0), expected)


def test_tendency_is_the_same_on_numpy_and_torch_along_the_last_axis():
    x = np.random.default_rng(2).normal(3.0, 4.0, (3, 4, 9))
    by_hand = np.stack([(x[..., (i + 1) % 9] - x[..., (i - 2) % 9]) * x[..., (i - 1) % 9] - x[..., i] + 8.0
                        for i in range(9)], axis=-1)
    np.testing.assert_allclose(_lorenz96_tendency(x, 8.0), by_hand, rtol=1e-14, atol=1e-12)
    np.testing.assert_allclose(_lorenz96_tendency(torch.as_tensor(x), 8.0).numpy(), by_hand, rtol=1e-14, atol=1e-12)


@pytest.mark.slow
def test_rk4_is_fourth_order():
    x0 = 8.0 + np.random.default_rng(0).standard_normal((3, 10))
    duration = 0.4
    reference = _integrate_lorenz96(x0, 8.0, duration, 0.01 / 64)
    errors = [np.max(np.abs(_integrate_lorenz96(x0, 8.0, duration, h) - reference)) for h in (0.01, 0.005)]
    assert errors[1] < 1e-4
    assert 12 < errors[0] / errors[1] < 20  # 2^4 = 16 for a fourth-order scheme


def test_integration_is_vectorised_over_members():
    x0 = 8.0 + np.random.default_rng(1).standard_normal((4, 5, 6))
    together = _integrate_lorenz96(x0, 8.0, 0.3, 0.01)
    one_by_one = np.array([[_integrate_lorenz96(x, 8.0, 0.3, 0.01) for x in batch] for batch in x0])
    np.testing.assert_allclose(together, one_by_one, rtol=1e-12)


# --------------------------------------------------------------------------- #
# Bad parameters
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"n_samples": 0}, ValueError, "n_samples"),
        ({"n_points": 2.5}, TypeError, "n_points"),
        ({"n_features": 3}, ValueError, r"'n_features' parameter .* \[4, inf\): each tendency couples four"),
        ({"forcing": "8"}, TypeError, "forcing"),
        ({"forcing": np.nan}, ValueError, "forcing"),
        ({"lead_time": 0}, ValueError, "lead_time"),
        ({"time_step": -0.01}, ValueError, "time_step"),
        ({"initial_spread": np.inf}, ValueError, "initial_spread"),
        ({"observation_noise": "laplace"}, ValueError, "'observation_noise' parameter .* 'cauchy' is Student-t"),
        ({"noise_scale": 0.0}, ValueError, "noise_scale"),
        ({"df": -1}, ValueError, "df"),
        ({"observed": "odd"}, ValueError, "'observed' parameter .* among {'all', 'every_other'}"),
        ({"observed": []}, TypeError, "non-empty"),
        ({"observed": [0.5, 1.0]}, TypeError, "integer"),
        ({"observed": [0, 8]}, ValueError, r"in \[0, 7\]"),
        ({"observed": [1, 1]}, ValueError, "distinct"),
        ({"prior_size": 0}, ValueError, "prior_size"),
        ({"return_params": 1}, TypeError, "return_params"),
        ({"append_innovation": "yes"}, TypeError, "append_innovation"),
    ],
)
def test_invalid_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_lorenz96_analysis(**{"n_samples": 2, "n_points": 4, **kwargs})


def test_validation_happens_before_any_work(monkeypatch):
    import sklearn_measattn.datasets._lorenz96 as lorenz96

    def fail(*args, **kwargs):
        raise AssertionError("random numbers drawn before validation finished")

    monkeypatch.setattr(lorenz96, "check_random_state", fail)
    with pytest.raises(ValueError, match="observed"):
        make_lorenz96_analysis(observed=[0, 99])


def test_overflow_is_reported():
    with pytest.raises(ValueError, match="smaller time_step"):
        make_lorenz96_analysis(n_samples=2, n_points=4, forcing=1e4, time_step=0.5, lead_time=5.0, prior_size=8)


@pytest.mark.parametrize(
    "call, name, reason",
    [
        (lambda: make_lorenz96_analysis(n_features=3), "n_features", "each tendency couples four neighbours"),
        (lambda: make_lorenz96_analysis(lead_time=0.0), "lead_time", r"\(0.0, inf\)"),
        (lambda: make_lorenz96_analysis(forcing=np.inf), "forcing", r"\(-inf, inf\)"),
        (lambda: make_lorenz96_analysis(df=True), "df", r"\(0.0, inf\)"),
        (lambda: make_lorenz96_analysis(observation_noise="laplace"), "observation_noise", "'cauchy' is Student-t"),
        (lambda: make_lorenz96_analysis(observed=3), "observed", "array-like"),
        (lambda: make_lorenz96_analysis(prior_size=1.5), "prior_size", r"\[1, inf\)"),
        (lambda: make_lorenz96_analysis(append_innovation=1), "append_innovation", "bool"),
        (lambda: integrate_lorenz96(np.zeros(8), 0.0), "duration", r"\(0.0, inf\)"),
        (lambda: integrate_lorenz96(np.zeros(8), 1.0, forcing="8"), "forcing", r"\(-inf, inf\)"),
        (lambda: integrate_lorenz96(np.zeros(8), 1.0, time_step=-0.01), "time_step", r"\(0.0, inf\)"),
    ],
)
def test_bad_arguments_raise_invalid_parameter_error(call, name, reason):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of \w+ must be .*{reason}"):
        call()
