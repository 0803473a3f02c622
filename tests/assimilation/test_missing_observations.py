"""Missing observations (NaN) in twin problems, and the checks a twin problem gets when it is made.

A NaN observation is a missing one: every analysis step assimilates the
observations present in its cycle, a cycle with none is a pure forecast, and
every cycle is still scored. An infinite observation, or arrays of the wrong
shape, are refused before any cycle runs, and no error message prints an array.
"""

import dataclasses

import numpy as np
import pytest
from scipy import stats
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.assimilation import (
    EnKF,
    LearnedAnalysis,
    NoUpdate,
    ObservationModel,
    ParticleFilter,
    RobustEnKF,
    SerialEnKF,
    TwinProblem,
    make_analysis_training_data,
    make_twin_problem,
    run_dapper,
    twin_experiment,
)

STEPS = ["none", "enkf", "robust_enkf", "serial_enkf", "particle_filter", "learned"]
MARKER = 1234.5678  # a value that no error message may show


@pytest.fixture(scope="module")
def learned_model():
    rng = np.random.RandomState(0)
    problem = make_twin_problem(n_variables=6, n_cycles=12, random_state=rng)
    X, y = make_analysis_training_data(problem, spin_up=2, ensemble_size=8, random_state=rng)
    return MeasureTransformerRegressor(transform="symlog", d_model=8, n_heads=2, n_layers=1, max_epochs=1,
                                       random_state=0).fit(X, y)


def _step(name, learned_model):
    return {
        "none": NoUpdate,
        "enkf": lambda: EnKF(inflation=1.1),
        "robust_enkf": RobustEnKF,
        "serial_enkf": lambda: SerialEnKF(inflation=1.05, relaxation=0.3),
        "particle_filter": ParticleFilter,
        "learned": lambda: LearnedAnalysis(learned_model, inflation=1.05),
    }[name]()


@pytest.fixture(scope="module")
def gappy():
    """A small problem with 30% of its observations missing, and no observation at all at cycles 3, 10 and 11."""
    problem = make_twin_problem(n_variables=6, n_cycles=30, random_state=0)
    observations = problem.observations.copy()
    observations[np.random.default_rng(1).random(observations.shape) < 0.3] = np.nan
    observations[[3, 10, 11]] = np.nan
    return dataclasses.replace(problem, observations=observations)


def _forecast(n_members=10, n_variables=6, seed=0):
    rng = np.random.default_rng(seed)
    return 3.0 + rng.normal(size=n_variables) + rng.normal(size=(n_members, n_variables))


# --------------------------------------------------------------------------- #
# Each analysis step, one cycle
# --------------------------------------------------------------------------- #
@pytest.mark.slow
@pytest.mark.parametrize("name", STEPS)
def test_a_cycle_without_any_observation_is_a_pure_forecast(name, learned_model):
    model = ObservationModel(n_variables=6, observed=[0, 2, 3, 5])
    forecast = _forecast()
    step = _step(name, learned_model).bind(model, random_state=0)
    analysis = step(forecast, np.full(4, np.nan))
    np.testing.assert_array_equal(analysis, forecast)  # not inflated, not resampled, not relaxed
    observed = step(forecast, np.array([6.0, -1.0, 0.5, 4.0]))
    assert np.array_equal(observed, forecast) == (name == "none")


@pytest.mark.parametrize("name", STEPS)
def test_a_cycle_with_some_missing_assimilates_the_others(name, learned_model):
    model = ObservationModel(n_variables=6, observed=[0, 2, 3, 5])
    forecast = _forecast(seed=1)
    observation = np.array([6.0, np.nan, 0.5, np.nan])
    analysis = _step(name, learned_model).bind(model, random_state=0)(forecast, observation)
    # the analysis of a model observing the present variables (0 and 3) alone, from the same draws
    present_only = ObservationModel(n_variables=6, observed=[0, 3])
    expected = _step(name, learned_model).bind(present_only, random_state=0)(forecast, observation[[0, 2]])
    np.testing.assert_allclose(analysis, expected, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(analysis))
    if name == "none":
        np.testing.assert_array_equal(analysis, forecast)
        return
    # the present observations are used: the observed variables move
    assert not np.allclose(analysis.mean(axis=0)[[0, 3]], forecast.mean(axis=0)[[0, 3]])
    # and the missing ones are not read: had they been there, the analysis would differ
    filled = _step(name, learned_model).bind(model, random_state=0)(forecast, np.array([6.0, 9.0, 0.5, -4.0]))
    assert not np.allclose(filled, analysis)


def test_log_likelihood_sums_over_the_present_observations():
    model = ObservationModel(n_variables=5, observed=[0, 1, 3], noise="student_t", df=2.5, noise_scale=0.7)
    states = np.random.default_rng(0).normal(size=(6, 5))
    observation = np.array([0.3, np.nan, -1.2])
    expected = stats.t(2.5).logpdf((observation[[0, 2]] - states[:, [0, 3]]) / 0.7).sum(axis=1) - 2 * np.log(0.7)
    np.testing.assert_allclose(model.log_likelihood(observation, states), expected, rtol=1e-10)
    np.testing.assert_array_equal(model.log_likelihood(np.full(3, np.nan), states), np.zeros(6))


def test_present_and_restricted_name_the_observed_variables():
    model = ObservationModel(n_variables=8, observed="every_other", noise="cauchy", noise_scale=2.0)
    present = model.present([1.0, np.nan, np.nan, -3.0])
    assert present.tolist() == [True, False, False, True]
    restricted = model.restricted(present)
    assert restricted.observed.tolist() == [0, 6]
    assert (restricted.noise, restricted.noise_scale, restricted.n_variables) == ("cauchy", 2.0, 8)
    assert model.observed.tolist() == [0, 2, 4, 6]  # the model itself is unchanged


@pytest.mark.parametrize(
    ("observation", "match"),
    [(np.array([1.0, np.inf, 0.0, 2.0]), "infinite"), (np.zeros(3), "n_observed=4")],
)
def test_a_step_refuses_an_infinite_or_misshapen_observation(observation, match):
    step = EnKF().bind(ObservationModel(n_variables=6, observed=[0, 2, 3, 5]), random_state=0)
    with pytest.raises(ValueError, match=match):
        step(_forecast(), observation)


# --------------------------------------------------------------------------- #
# Cycled experiments with missing observations
# --------------------------------------------------------------------------- #
@pytest.mark.slow
@pytest.mark.parametrize("name", STEPS)
def test_a_twin_experiment_with_missing_observations_scores_every_cycle(name, learned_model, gappy):
    cycles = {}
    ensemble_size = 300 if name == "particle_filter" else 10
    result = twin_experiment(_step(name, learned_model), gappy, ensemble_size=ensemble_size, spin_up=5,
                             random_state=0, callback=lambda k, forecast, analysis, truth: cycles.update(
                                 {k: (forecast.copy(), analysis.copy())}))
    scores = [result.rmse_per_cycle, result.spread_per_cycle, result.crps_per_cycle, result.energy_score_per_cycle]
    assert all(s.shape == (30,) and np.all(np.isfinite(s)) for s in scores)
    assert sorted(cycles) == list(range(30)) and not result.diverged
    for k in (3, 10, 11):  # no observation: the analysis is the forecast
        np.testing.assert_array_equal(cycles[k][1], cycles[k][0])
    if name in ("enkf", "robust_enkf", "serial_enkf", "particle_filter"):
        free = twin_experiment("none", gappy, ensemble_size=ensemble_size, spin_up=5, random_state=0)
        assert result.rmse < 0.5 * free.rmse  # the present observations are assimilated


def test_a_callable_receives_nan_where_an_observation_is_missing(gappy):
    seen = []

    def record(forecast, observation):
        seen.append(np.asarray(observation).copy())
        return forecast

    result = twin_experiment(record, gappy, ensemble_size=5, spin_up=2)
    assert len(seen) == gappy.n_cycles and np.all(np.isfinite(result.rmse_per_cycle))
    np.testing.assert_array_equal(np.isnan(np.array(seen)), np.isnan(gappy.observations))
    np.testing.assert_array_equal(np.array(seen), gappy.observations)  # NaN compare equal here


def test_missing_observations_give_no_training_pairs(gappy):
    X, y = make_analysis_training_data(problem=gappy, ensemble_size=8, spin_up=5, random_state=0)
    present = int(np.sum(~np.isnan(gappy.observations[5:])))
    assert X.shape == (present, 8, 4) and y.shape == (present, 1, 1)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))


# --------------------------------------------------------------------------- #
# A twin problem is checked when it is made, before any cycle
# --------------------------------------------------------------------------- #
def _recording_step():
    calls = []

    def step(forecast, observation):
        calls.append(observation)
        return forecast

    return step, calls


@pytest.fixture
def problem():
    return make_twin_problem(n_variables=6, n_cycles=12, random_state=0)


def _marked(array):
    return np.full(np.shape(array), MARKER)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda p: {"observations": np.where(np.arange(6) == 2, np.inf, _marked(p.observations))}, ValueError,
         r"observations holds 12 infinite value\(s\) \(the first at observations\[0, 2\]\).*NaN"),
        (lambda p: {"observations": _marked(p.observations)[:, :4]}, ValueError, "4 columns.*n_observed=6"),
        (lambda p: {"observations": _marked(p.observations)[:10]}, ValueError,
         "truth has 13 rows and observations 10: truth must have exactly one more row"),
        (lambda p: {"observations": _marked(p.observations).ravel()}, ValueError, r"2-D array.*shape \(72,\)"),
        (lambda p: {"observations": _marked(p.observations)[:0]}, ValueError, "at least one cycle"),
        (lambda p: {"truth": _marked(p.truth)[:, :5]}, ValueError, "5 columns.*n_variables=6"),
        (lambda p: {"truth": np.where(np.arange(6) == 1, np.nan, _marked(p.truth))}, ValueError,
         r"truth holds 13 non-finite value\(s\)"),
        (lambda p: {"truth": _marked(p.truth).astype(str)}, TypeError, "real numbers"),
        (lambda p: {"observation_model": _marked(p.observations)}, TypeError,
         r"must be an ObservationModel.*array of shape \(12, 6\)"),
        (lambda p: {"dt_obs": 0.0}, ValueError, "dt_obs must be a finite positive number"),
        (lambda p: {"time_step": np.inf}, ValueError, "time_step must be a finite positive number"),
        (lambda p: {"forcing": "8"}, TypeError, "forcing must be a real number"),
    ],
)
def test_a_bad_problem_is_refused_when_made_and_never_printed(problem, change, error, match):
    step, calls = _recording_step()
    with pytest.raises(error, match=match) as caught:
        twin_experiment(step, dataclasses.replace(problem, **change(problem)), ensemble_size=4, spin_up=2)
    assert calls == []
    assert str(MARKER) not in str(caught.value) and "[[" not in str(caught.value)


@pytest.mark.slow
def test_nan_observations_are_missing_not_refused(problem):
    observations = problem.observations.copy()
    observations[2] = np.nan
    observations[5, 1:4] = np.nan
    gappy = dataclasses.replace(problem, observations=observations)
    assert gappy.n_missing == 9 and "missing=9 of 72" in repr(gappy)
    assert problem.n_missing == 0


@pytest.mark.slow
def test_a_problem_changed_in_place_is_refused_before_any_cycle(problem):
    problem.observations[4, 1] = np.inf  # after the problem was checked
    step, calls = _recording_step()
    with pytest.raises(ValueError, match=r"observations\[4, 1\]"):
        twin_experiment(step, problem, ensemble_size=4, spin_up=2)
    with pytest.raises(ValueError, match=r"observations\[4, 1\]"):
        make_analysis_training_data(problem=problem, ensemble_size=4, spin_up=2)
    with pytest.raises(ValueError, match=r"observations\[4, 1\]"):
        run_dapper("EnKF", problem, ensemble_size=4, spin_up=2)  # before DAPPER is imported
    assert calls == []


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda a: twin_experiment("enkf", a), r"'problem' parameter of twin_experiment must be .*TwinProblem"),
        (lambda a: make_analysis_training_data(problem=a), "'problem' parameter of make_analysis_training_data"),
        (lambda a: run_dapper("EnKF", a), "'problem' parameter of run_dapper"),
        (lambda a: twin_experiment(a, make_twin_problem(n_variables=6, n_cycles=5)), "'analysis' parameter"),
        (lambda a: twin_experiment(EnKF(inflation=a), make_twin_problem(n_variables=6, n_cycles=5)),
         "'inflation' parameter"),
        (lambda a: make_twin_problem(n_variables=6, noise_scale=a), "'noise_scale' parameter"),
        (lambda a: run_dapper("EnKF", make_twin_problem(n_variables=6, n_cycles=5), spin_up=1, infl=a), "'infl'"),
    ],
)
def test_an_array_where_none_belongs_is_described_not_printed(call, match):
    array = np.full((60, 8), MARKER)
    with pytest.raises(InvalidParameterError, match=match) as caught:
        call(array)
    message = str(caught.value)
    assert "array of shape (60, 8) and dtype float64" in message
    assert str(MARKER) not in message and "[[" not in message


@pytest.mark.parametrize(
    ("observed", "error", "match"),
    [
        (np.full(30, 2), ValueError, "index 2 more than once"),
        (np.arange(30) + 2, ValueError, "holds 24 outside it"),
        (np.full((5, 2), 1), TypeError, r"array of shape \(5, 2\)"),
        (np.full(30, 1.5), TypeError, "dtype float64"),
    ],
)
def test_bad_observed_indices_are_described_not_printed(observed, error, match):
    with pytest.raises(error, match=match) as caught:
        ObservationModel(n_variables=8, observed=observed)
    assert "[" not in str(caught.value).split("[0, 7]")[-1]  # no list of the indices


def test_a_problem_can_be_made_from_plain_lists(problem):
    remade = TwinProblem(truth=problem.truth.tolist(), observations=problem.observations.tolist(),
                         observation_model=problem.observation_model, dt_obs=1 / 20, forcing=8, time_step=0.01)
    assert remade.truth.dtype == np.float64 and isinstance(remade.forcing, float)
    np.testing.assert_array_equal(remade.observations, problem.observations)


# --------------------------------------------------------------------------- #
# DAPPER's filters on missing observations
# --------------------------------------------------------------------------- #
DAPPER_SETTINGS = {"EnKF": {"infl": 1.02}, "EnKF_sqrt": {"infl": 1.02}, "LETKF": {"infl": 1.02, "loc_rad": 3},
                   "PartFilt": {"reg": 0.7, "NER": 0.5}}


@pytest.mark.parametrize("method", list(DAPPER_SETTINGS))
def test_dapper_assimilates_the_present_observations_and_scores_every_cycle(method, gappy):
    pytest.importorskip("dapper")
    ensemble_size = 300 if method == "PartFilt" else 10
    result = run_dapper(method, gappy, ensemble_size=ensemble_size, spin_up=5, random_state=0,
                        **DAPPER_SETTINGS[method])
    assert np.all(np.isfinite(result.rmse_per_cycle)) and np.all(np.isfinite(result.energy_score_per_cycle))
    free = twin_experiment("none", gappy, ensemble_size=ensemble_size, spin_up=5, random_state=0)
    assert not result.diverged and result.rmse < 0.5 * free.rmse


@pytest.mark.slow
@pytest.mark.parametrize("method", list(DAPPER_SETTINGS))
def test_dapper_leaves_a_cycle_without_observation_to_the_forecast(method, problem):
    pytest.importorskip("dapper")
    observations = problem.observations.copy()
    observations[0] = np.nan
    silent = dataclasses.replace(problem, observations=observations)
    ensemble_size = 50 if method == "PartFilt" else 10
    theirs = run_dapper(method, silent, ensemble_size=ensemble_size, spin_up=0, random_state=7,
                        **DAPPER_SETTINGS[method])
    free = twin_experiment("none", silent, ensemble_size=ensemble_size, spin_up=0, random_state=7)
    # the same initial ensemble and model, and no analysis (no inflation): the same ensemble at cycle 0
    assert theirs.rmse_per_cycle[0] == pytest.approx(free.rmse_per_cycle[0], rel=1e-12)
    assert theirs.spread_per_cycle[0] == pytest.approx(free.spread_per_cycle[0], rel=1e-12)
    assert theirs.rmse_per_cycle[1] != pytest.approx(free.rmse_per_cycle[1], rel=1e-3)  # cycle 1 is observed


@pytest.mark.slow
def test_dapper_assimilates_what_the_package_assimilates_when_some_are_missing(problem):
    """DAPPER's ETKF and the package's serial EAKF, two square roots of one Kalman update, on the same gaps.

    Cycle 0 has no observation, cycle 1 three of six: from the same initial
    ensemble both reach the same analysis mean and variances at both cycles
    only if both leave cycle 0 to the forecast and assimilate exactly the
    present observations of cycle 1.
    """
    pytest.importorskip("dapper")
    observations = problem.observations.copy()
    observations[0] = np.nan
    observations[1, [1, 4, 5]] = np.nan
    gaps = dataclasses.replace(problem, observations=observations)
    ours = twin_experiment(SerialEnKF(inflation=1.0), gaps, ensemble_size=12, spin_up=0, random_state=7)
    theirs = run_dapper("EnKF_sqrt", gaps, ensemble_size=12, spin_up=0, random_state=7, rot=False)
    np.testing.assert_allclose(theirs.rmse_per_cycle[:2], ours.rmse_per_cycle[:2], rtol=1e-8)
    np.testing.assert_allclose(theirs.spread_per_cycle[:2], ours.spread_per_cycle[:2], rtol=1e-8)
    full = run_dapper("EnKF_sqrt", problem, ensemble_size=12, spin_up=0, random_state=7, rot=False)
    assert not np.allclose(full.rmse_per_cycle[:2], theirs.rmse_per_cycle[:2], rtol=1e-3)


def test_dapper_runs_a_problem_of_one_cycle():
    pytest.importorskip("dapper")
    problem = make_twin_problem(n_variables=6, n_cycles=1, random_state=0)
    result = run_dapper("EnKF", problem, ensemble_size=5, spin_up=0, random_state=0)
    assert result.rmse_per_cycle.shape == (1,) and np.isfinite(result.rmse)
