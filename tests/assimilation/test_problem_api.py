"""The problem-first API of the cycled runs, the recording of scalar priors, the name table,
forecast statistics beside the analysis ones, and the Lorenz-96 home shared with the benchmark loader."""

import warnings

import numpy as np
import pytest

import sklearn_measattn._lorenz96 as _lorenz96
import sklearn_measattn.assimilation as assimilation
import sklearn_measattn.datasets as datasets
from sklearn_measattn.assimilation import (
    ANALYSIS_NAMES,
    ANALYSIS_STEPS,
    EnKF,
    ObservationModel,
    RankHistogramFilter,
    SerialEnKF,
    make_analysis_training_data,
    make_twin_problem,
    twin_experiment,
)
from sklearn_measattn.datasets import make_lorenz96_analysis

SIMULATION = {"n_variables": 8, "noise": "cauchy", "n_cycles": 60}
RUN = {"spin_up": 10, "ensemble_size": 10}


def _problem_and_generator(seed, **simulation):
    rng = np.random.RandomState(seed)
    return make_twin_problem(**simulation, random_state=rng), rng


# --------------------------------------------------------------------------- #
# Seeded results do not move
# --------------------------------------------------------------------------- #
# Recorded before the problem-first API and the shared Lorenz-96 home: the problem and the run drawn from one
# generator, RandomState(3), the problem first.
RECORDED_RMSE_AND_SPREAD = {
    "robust_enkf": (0.41551454727242665, 0.32167034093020797),
    "rank_histogram": (0.4003676343371144, 0.2775239716801772),
    "serial_enkf": (4.809433159535462, 0.27876616774325685),
}


@pytest.mark.parametrize("name", sorted(RECORDED_RMSE_AND_SPREAD))
def test_a_seeded_twin_experiment_scores_as_before(name):
    problem, rng = _problem_and_generator(3, **SIMULATION)
    passed = twin_experiment(name, problem, **RUN, random_state=rng)
    assert (passed.rmse, passed.spread) == pytest.approx(RECORDED_RMSE_AND_SPREAD[name], rel=1e-9)


def test_the_benchmark_data_are_those_recorded_before():
    X, y, params = make_lorenz96_analysis(n_samples=6, n_points=12, n_features=6, prior_size=256,
                                          observation_noise="cauchy", return_params=True, random_state=11)
    recorded = (859.3093372945841, 880.4774105477265, 573.4575926535246, 79.48052879170737)
    actual = (X.sum(), y.sum(), params["ess"].sum(), params["observation"].sum())
    assert actual == pytest.approx(recorded, rel=1e-9)


# --------------------------------------------------------------------------- #
# One home for the model and the observations
# --------------------------------------------------------------------------- #
def test_the_benchmark_and_the_experiments_share_the_model_and_the_noise_laws():
    assert datasets.integrate_lorenz96 is _lorenz96.integrate_lorenz96 is assimilation._problem.integrate_lorenz96
    assert datasets.OBSERVATION_NOISES is _lorenz96.OBSERVATION_NOISES
    assert ObservationModel is _lorenz96.ObservationModel


def test_the_benchmark_observes_through_the_observation_model(monkeypatch):
    calls = []
    sample = ObservationModel.sample

    def counted(self, states, random_state=None):
        calls.append(self)
        return sample(self, states, random_state)

    monkeypatch.setattr(ObservationModel, "sample", counted)
    _, _, params = make_lorenz96_analysis(n_samples=2, n_points=4, n_features=6, prior_size=16, observed=[0, 3],
                                          return_params=True, random_state=0)
    assert len(calls) == 1 and calls[0].observed.tolist() == [0, 3] == params["observed"].tolist()


def test_the_benchmark_refuses_bad_observed_indices_as_the_observation_model_does():
    with pytest.raises(ValueError, match=r"distinct variable indices in \[0, 5\]") as benchmark:
        make_lorenz96_analysis(n_samples=2, n_points=4, n_features=6, observed=[0, 6])
    with pytest.raises(ValueError, match=r"distinct variable indices in \[0, 5\]") as model:
        ObservationModel(n_variables=6, observed=[0, 6])
    assert str(benchmark.value) == str(model.value)


# --------------------------------------------------------------------------- #
# A problem, never its parameters
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("given", [{"noise": "cauchy"}, {"n_variables": 40}, {"n_cycles": 1000, "df": 1.5}])
def test_the_runs_take_a_problem_not_its_simulation_parameters(given):
    problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    for run, arguments in ((twin_experiment, ("enkf", problem)), (make_analysis_training_data, (problem,))):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            run(*arguments, spin_up=5, **given)
    with pytest.raises(TypeError, match="missing a required argument: 'problem'"):
        twin_experiment("enkf", spin_up=5)
    teacher = SerialEnKF()
    with pytest.raises(ValueError, match="problem"):  # the teacher first is refused, not swapped
        make_analysis_training_data(teacher, problem, spin_up=5)


def test_the_problem_form_gives_no_warning():
    problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twin_experiment("serial_enkf", problem, spin_up=5, ensemble_size=6, random_state=0)
        make_analysis_training_data(problem, spin_up=5, ensemble_size=6, random_state=0)


# --------------------------------------------------------------------------- #
# Recording the scalar priors of a serial filter
# --------------------------------------------------------------------------- #
def test_recording_collects_every_scalar_prior_of_an_experiment():
    problem = make_twin_problem(n_variables=8, observed="every_other", n_cycles=6, random_state=0)
    step = SerialEnKF(inflation=1.02)
    with step.recording() as records:
        twin_experiment(step, problem, spin_up=0, ensemble_size=5, random_state=0)
    assert len(records) == 6 * 4
    assert [variable for _, _, variable in records[:4]] == [0, 2, 4, 6]
    np.testing.assert_array_equal([value for _, value, _ in records[:4]], problem.observations[0])
    twin_experiment(step, problem, spin_up=0, ensemble_size=5, random_state=0)
    assert len(records) == 6 * 4  # nothing recorded outside the block


def test_recording_follows_the_grouped_order_and_the_bound_step():
    problem = make_twin_problem(n_variables=12, n_cycles=2, random_state=0)
    bound = SerialEnKF(localization_radius=1.0, batch_disjoint=True).bind(problem.observation_model)
    forecast = problem.truth[0] + np.random.default_rng(0).standard_normal((6, 12))
    with bound.recording() as records:
        bound(forecast, problem.observations[0])
    assert sorted(variable for _, _, variable in records) == list(range(12))


# --------------------------------------------------------------------------- #
# The serial loop declares what it reads
# --------------------------------------------------------------------------- #
class _NoBatchDisjoint(SerialEnKF):
    """A subclass that does not call SerialEnKF.__init__ and leaves out batch_disjoint."""

    def __init__(self, *, inflation=1.02, localization_radius=None, relaxation=0.0, variance_factor=1.0, clip=None):
        self.inflation = inflation
        self.localization_radius = localization_radius
        self.relaxation = relaxation
        self.variance_factor = variance_factor
        self.clip = clip


class _NoRelaxation(SerialEnKF):
    def __init__(self, *, inflation=1.02):
        self.inflation = inflation
        self.localization_radius = None
        self.batch_disjoint = False


def test_the_loop_parameters_are_declared_not_defaulted_on_the_class():
    assert "batch_disjoint" not in vars(SerialEnKF)
    model = ObservationModel(n_variables=6)
    forecast = np.random.default_rng(0).normal(8.0, 1.0, (6, 6))
    with pytest.raises(TypeError, match=r"does not set \['batch_disjoint'\]"):
        _NoBatchDisjoint().bind(model)
    assert SerialEnKF().bind(model)(forecast, np.zeros(6)).shape == forecast.shape
    with pytest.raises(TypeError, match=r"does not set \['relaxation'\]"):
        _NoRelaxation().bind(model)


def test_the_kalman_variance_needs_variance_factor():
    class NoVarianceFactor(SerialEnKF):
        def __init__(self):
            self.inflation, self.localization_radius, self.relaxation, self.batch_disjoint = 1.0, None, 0.0, False

    bound = NoVarianceFactor().bind(ObservationModel(n_variables=4))
    with pytest.raises(AttributeError, match="variance_factor"):
        _ = bound.observation_variance_
    assert SerialEnKF(variance_factor=2.0).bind(ObservationModel(n_variables=4)).observation_variance_ == 2.0
    assert RankHistogramFilter().bind(ObservationModel(n_variables=4))(np.eye(4) + 8.0, np.zeros(4)).shape == (4, 4)


# --------------------------------------------------------------------------- #
# The name table holds names
# --------------------------------------------------------------------------- #
def test_analysis_names_are_names_and_the_steps_are_classes():
    assert all(isinstance(name, str) for name in ANALYSIS_NAMES)
    assert tuple(ANALYSIS_NAMES) == tuple(ANALYSIS_STEPS)
    assert ANALYSIS_STEPS["enkf"] is EnKF and "rank_histogram" in ANALYSIS_NAMES
    assert ANALYSIS_NAMES[1] == "enkf" and type(ANALYSIS_NAMES) is tuple


# --------------------------------------------------------------------------- #
# Forecast and analysis statistics side by side
# --------------------------------------------------------------------------- #
def test_results_hold_the_forecast_statistics_before_each_analysis():
    problem = make_twin_problem(n_variables=8, n_cycles=40, random_state=0)
    forecasts = []
    result = twin_experiment(EnKF(inflation=1.5), problem, spin_up=5, ensemble_size=8, random_state=0,
                             callback=lambda k, forecast, analysis, truth: forecasts.append((forecast, truth)))
    rmse = [np.sqrt(np.mean((f.mean(axis=0) - t) ** 2)) for f, t in forecasts]
    spread = [np.sqrt(np.mean(f.var(axis=0, ddof=1))) for f, _ in forecasts]
    np.testing.assert_allclose(result.forecast_rmse_per_cycle, rmse, rtol=1e-12)
    np.testing.assert_allclose(result.forecast_spread_per_cycle, spread, rtol=1e-12)
    assert result.forecast_rmse == pytest.approx(np.mean(rmse[5:]))
    assert result.rmse < result.forecast_rmse  # the update moves toward the truth
    assert set(result.summary(forecast=True)) - set(result.summary()) == {"forecast_rmse", "forecast_spread"}


def test_without_update_the_forecast_scores_are_the_analysis_scores():
    problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    result = twin_experiment("none", problem, spin_up=2, ensemble_size=6, random_state=0)
    np.testing.assert_allclose(result.forecast_rmse_per_cycle, result.rmse_per_cycle, rtol=1e-12)
    np.testing.assert_allclose(result.forecast_spread_per_cycle, result.spread_per_cycle, rtol=1e-12)


def test_a_run_that_blows_up_scores_the_rest_inf():
    problem = make_twin_problem(n_variables=8, n_cycles=20, random_state=0)
    result = twin_experiment(lambda forecast, observation: forecast * 1e5, problem, spin_up=2, ensemble_size=6)
    assert result.diverged_at == 0 and np.isfinite(result.forecast_rmse_per_cycle[0])
    assert np.all(np.isinf(result.forecast_rmse_per_cycle[1:])) and np.isinf(result.forecast_rmse)
