"""Writing your own analysis step: the public methods to override, plain callables, errors that name the step.

A subclass of :class:`AnalysisStep` implements ``analyse``; a subclass of
:class:`SerialEnKF` overrides ``scalar_update`` and inherits the serial loop;
a plain callable that asks for ``observation_model`` or ``random_state`` is
given them. The Kalman steps take the noise law's variance as ``R``.
"""

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn.assimilation import (
    AnalysisStep,
    EnKF,
    LearnedAnalysis,
    NoUpdate,
    ObservationModel,
    RankHistogramFilter,
    RobustEnKF,
    SerialEnKF,
    make_analysis_training_data,
    make_twin_problem,
    resolve_analysis,
    twin_experiment,
)


@pytest.fixture(scope="module")
def problem():
    return make_twin_problem(n_variables=6, n_cycles=12, random_state=0)


def _forecast(n_members=8, n_variables=6, seed=0):
    rng = np.random.default_rng(seed)
    return 3.0 + rng.normal(size=n_variables) + rng.normal(size=(n_members, n_variables))


# --------------------------------------------------------------------------- #
# A scalar update of your own in the serial filter
# --------------------------------------------------------------------------- #
class _Recorded(SerialEnKF):
    """The Kalman update of SerialEnKF, recording what each call saw."""

    def scalar_update(self, prior, observation):
        self.calls.append((prior.copy(), observation, self.observation_model_.observed.copy()))
        return super().scalar_update(prior, observation)


def test_a_scalar_update_override_runs_inside_the_inherited_loop():
    model = ObservationModel(n_variables=6, observed="every_other")
    forecast = _forecast()
    step = _Recorded(inflation=1.2, localization_radius=2.0).bind(model, random_state=0)
    step.calls = []
    analysis = step(forecast, np.array([1.0, np.nan, 2.0]))  # the second observation is missing
    assert [observation for _, observation, _ in step.calls] == [1.0, 2.0]
    assert all(observed.tolist() == [0, 4] for _, _, observed in step.calls)  # restricted to the present ones
    inflated = forecast.mean(axis=0) + 1.2 * (forecast - forecast.mean(axis=0))
    np.testing.assert_allclose(step.calls[0][0], inflated[:, 0])  # the first prior is inflated
    plain = SerialEnKF(inflation=1.2, localization_radius=2.0).bind(model)(forecast, np.array([1.0, np.nan, 2.0]))
    np.testing.assert_allclose(analysis, plain, rtol=1e-12)


class _Frozen(SerialEnKF):
    """A scalar update that leaves the observed variable as it is: nothing moves."""

    def scalar_update(self, prior, observation):
        return prior


def test_a_scalar_update_that_moves_nothing_leaves_the_inflated_forecast():
    forecast = _forecast()
    analysis = _Frozen(inflation=1.1).bind(ObservationModel(n_variables=6))(forecast, np.zeros(6))
    mean = forecast.mean(axis=0)
    np.testing.assert_allclose(analysis, mean + 1.1 * (forecast - mean), rtol=1e-12)


class _ShrunkGain(SerialEnKF):
    def __init__(self, *, shrink=0.9, inflation=1.05):
        super().__init__(inflation=inflation)
        self.shrink = shrink

    def scalar_update(self, prior, observation):
        variance = prior.var(ddof=1)
        gain = self.shrink * variance / (variance + self.observation_variance_)
        return prior + gain * (observation - prior)


def test_a_subclass_with_a_parameter_of_its_own_is_an_estimator(problem):
    step = _ShrunkGain(shrink=0.5)
    assert step.get_params() == {"inflation": 1.05, "shrink": 0.5}
    result = twin_experiment(step, problem, ensemble_size=6, spin_up=2, random_state=0)
    assert result.analysis == "_ShrunkGain(shrink=0.5)" and np.isfinite(result.rmse)


def test_an_override_without_a_docstring_is_documented_by_the_method_it_overrides():
    # inspect.getdoc, which the API pages use, finds the documented method an override replaces
    assert inspect.getdoc(_Frozen.scalar_update) == inspect.getdoc(SerialEnKF.scalar_update)
    assert inspect.getdoc(LearnedAnalysis.analyse) == inspect.getdoc(AnalysisStep.analyse)
    assert "Parameters" in inspect.getdoc(EnKF.analyse)


# --------------------------------------------------------------------------- #
# A whole analysis of your own
# --------------------------------------------------------------------------- #
class _Jitter(AnalysisStep):
    """Noise from the step's own generator: the same seed gives the same run."""

    def analyse(self, forecast, observation):
        return forecast + 0.01 * self.random_state_.standard_normal(forecast.shape)


def test_an_analysis_drawing_from_random_state_is_reproducible(problem):
    first = twin_experiment(_Jitter(), problem, ensemble_size=5, spin_up=2, random_state=3)
    again = twin_experiment(_Jitter(), problem, ensemble_size=5, spin_up=2, random_state=3)
    other = twin_experiment(_Jitter(), problem, ensemble_size=5, spin_up=2, random_state=4)
    np.testing.assert_array_equal(first.rmse_per_cycle, again.rmse_per_cycle)
    assert not np.array_equal(first.rmse_per_cycle, other.rmse_per_cycle)


class _Unfinished(AnalysisStep):
    pass


def test_a_step_without_analyse_says_what_to_implement():
    step = _Unfinished().bind(ObservationModel(n_variables=6))
    with pytest.raises(NotImplementedError, match=r"analyse\(self, forecast, observation\).*scalar_update"):
        step(_forecast(), np.zeros(6))


# --------------------------------------------------------------------------- #
# Plain callables
# --------------------------------------------------------------------------- #
def test_a_callable_asking_for_the_observation_model_and_a_generator_gets_them(problem):
    seen = {}

    def step(forecast, observation, *, observation_model, random_state):
        seen.setdefault("model", observation_model)
        seen.setdefault("rng", random_state)
        return forecast + 0.01 * random_state.standard_normal(forecast.shape)

    first = twin_experiment(step, problem, ensemble_size=5, spin_up=2, random_state=7)
    assert seen["model"] is problem.observation_model
    assert isinstance(seen["rng"], np.random.RandomState)
    seen.clear()
    again = twin_experiment(step, problem, ensemble_size=5, spin_up=2, random_state=7)
    np.testing.assert_array_equal(first.rmse_per_cycle, again.rmse_per_cycle)
    assert first.analysis == "step"


def test_a_callable_gets_only_what_it_asks_for():
    model = ObservationModel(n_variables=6)

    def by_name(forecast, observation, observation_model=None):
        return observation_model

    def by_kwargs(forecast, observation, **kwargs):
        return sorted(kwargs)

    def plain(forecast, observation):
        return "plain"

    assert resolve_analysis(by_name, model, random_state=0)(None, None) is model
    assert resolve_analysis(by_kwargs, model, random_state=0)(None, None) == ["observation_model", "random_state"]
    assert resolve_analysis(plain, model, random_state=0) is plain
    assert resolve_analysis(np.add, model) is np.add  # no signature to read: called as it is


# --------------------------------------------------------------------------- #
# Errors name the step
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("step", "message"),
    [
        (SerialEnKF(inflation=0.9), "The 'inflation' parameter of SerialEnKF must be"),
        (EnKF(localization_radius=-1.0), "The 'localization_radius' parameter of EnKF must be"),
        (RobustEnKF(clip=0.0), "The 'clip' parameter of RobustEnKF must be"),
        (RankHistogramFilter(n_grid=5), "The 'n_grid' parameter of RankHistogramFilter must be"),
        (EnKF(inflation=np.ones(3)), r"The 'inflation' parameter of EnKF must be .* Got an array of shape \(3,\)"),
    ],
)
def test_a_bad_step_parameter_names_the_step(problem, step, message):
    with pytest.raises(InvalidParameterError, match=message):
        twin_experiment(step, problem, ensemble_size=5, spin_up=2)
    with pytest.raises(InvalidParameterError, match=message):
        resolve_analysis(step, problem.observation_model)


def test_a_bad_teacher_parameter_names_the_teacher():
    with pytest.raises(InvalidParameterError, match="The 'relaxation' parameter of SerialEnKF must be"):
        make_analysis_training_data(make_twin_problem(n_variables=6, n_cycles=5), teacher=SerialEnKF(relaxation=1.0),
                                    spin_up=1)


def test_the_experiments_own_parameters_still_name_the_experiment():
    with pytest.raises(InvalidParameterError, match="The 'ensemble_size' parameter of twin_experiment must be"):
        twin_experiment(SerialEnKF(), make_twin_problem(n_variables=6, n_cycles=12, random_state=0), ensemble_size=1,
                        spin_up=2)


# --------------------------------------------------------------------------- #
# The observation-error variance of the Kalman steps
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("noise", "df", "expected"),
    [("gaussian", 1.5, 0.25), ("student_t", 4.0, 0.5), ("student_t", 2.0, 0.25), ("cauchy", 1.0, 0.25)],
)
@pytest.mark.parametrize("step", [EnKF, RobustEnKF, SerialEnKF])
def test_kalman_steps_take_the_variance_of_the_noise_law(step, noise, df, expected):
    model = ObservationModel(n_variables=6, noise=noise, df=df, noise_scale=0.5)
    assert step(variance_factor=3.0).bind(model).observation_variance_ == pytest.approx(3.0 * expected)


def test_serial_variance_factor_is_the_kalman_update_of_that_variance():
    model = ObservationModel(n_variables=6, noise="student_t", df=4.0)  # variance 2
    prior = np.random.default_rng(0).normal(size=20)
    update = SerialEnKF(variance_factor=1.5).bind(model).scalar_update(prior.copy(), 2.0)
    variance, noise_variance = prior.var(ddof=1), 3.0
    expected_mean = prior.mean() + variance / (variance + noise_variance) * (2.0 - prior.mean())
    assert update.mean() == pytest.approx(expected_mean)
    assert update.var(ddof=1) == pytest.approx(variance * noise_variance / (variance + noise_variance))


def test_robust_clip_is_in_standard_deviations_of_the_innovation_with_that_variance():
    # one observed variable, a far observation: the mean moves by clip innovation sds times the gain
    model = ObservationModel(n_variables=6, observed=[0], noise="student_t", df=3.0)  # variance 3
    forecast = _forecast(n_members=30)
    analysis = RobustEnKF(inflation=1.0, clip=1.0).bind(model, random_state=0)(forecast, np.array([1e6]))
    variance = forecast[:, 0].var(ddof=1)
    shift = np.sqrt(variance + 3.0) * variance / (variance + 3.0)
    assert analysis[:, 0].mean() - forecast[:, 0].mean() == pytest.approx(shift, rel=1e-10)


def test_steps_by_name_are_the_built_in_ones():
    model = ObservationModel(n_variables=6)
    assert isinstance(resolve_analysis("rank_histogram", model), RankHistogramFilter)
    assert isinstance(resolve_analysis("none", model), NoUpdate)


def test_an_assumed_likelihood_of_the_rank_histogram_filter_changes_the_cycle(problem):
    heavy = dataclasses.replace(problem, observation_model=ObservationModel(n_variables=6, noise="cauchy"))
    cauchy = ObservationModel(n_variables=6, noise="cauchy")
    gaussian = ObservationModel(n_variables=6)
    true = twin_experiment(RankHistogramFilter(n_grid=200), heavy, ensemble_size=5, spin_up=2, random_state=0)
    same = twin_experiment(RankHistogramFilter(n_grid=200, likelihood=cauchy), heavy, ensemble_size=5, spin_up=2,
                           random_state=0)
    other = twin_experiment(RankHistogramFilter(n_grid=200, likelihood=gaussian), heavy, ensemble_size=5,
                            spin_up=2, random_state=0)
    np.testing.assert_array_equal(true.rmse_per_cycle, same.rmse_per_cycle)
    assert not np.allclose(true.rmse_per_cycle, other.rmse_per_cycle)


# --------------------------------------------------------------------------- #
# Defaults that hold in the standard setting
# --------------------------------------------------------------------------- #
@pytest.mark.slow
def test_the_built_in_steps_by_name_hold_the_truth_in_the_standard_setting():
    # 40 variables, all observed every 0.05 with unit Gaussian noise, 40 members (Sakov and Oke 2008): tuned
    # filters score an RMSE of about 0.18-0.25. The particle filter is left out: 40 members cannot weight a
    # 40-dimensional state (it loses the truth there by design), and "none" observes nothing.
    scores = {name: [] for name in ("enkf", "robust_enkf", "serial_enkf", "rank_histogram")}
    for seed in range(5):
        problem = make_twin_problem(n_variables=40, n_cycles=300, random_state=seed)
        for name, rmse in scores.items():
            result = twin_experiment(name, problem, ensemble_size=40, spin_up=50, random_state=seed)
            assert not result.diverged, (name, seed)
            rmse.append(result.rmse)
    for name, rmse in scores.items():
        assert max(rmse) < 0.3, (name, rmse)
        assert 0.15 < np.mean(rmse) < 0.25, (name, rmse)
