"""Serial filters that take the observations with non-overlapping localisation supports together."""

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn._training import FittedNetwork
from sklearn_measattn.assimilation import (
    LearnedAnalysis,
    ObservationModel,
    RankHistogramFilter,
    SerialEnKF,
    analysis_features,
)

N_VARIABLES, N_MEMBERS = 20, 10


def _forecast_and_observation(noise="gaussian", seed=0):
    rng = np.random.default_rng(seed)
    # correlated members, so that the regression moves neighbours
    base = rng.standard_normal((N_MEMBERS, N_VARIABLES))
    forecast = base + 0.7 * np.roll(base, 1, axis=1) + np.linspace(0, 3, N_VARIABLES)
    observation = forecast.mean(axis=0) + rng.standard_normal(N_VARIABLES)
    return forecast, observation


def test_groups_have_disjoint_supports_and_cover_every_observation_once():
    step = SerialEnKF(localization_radius=2.0, batch_disjoint=True).bind(ObservationModel(n_variables=N_VARIABLES))
    observed = step.observation_model_.observed
    groups = step._disjoint_groups(observed)
    assert sorted(j for group in groups for j in group) == list(range(N_VARIABLES))
    supports = step.localization_[observed] > 0
    for group in groups:
        assert supports[group].sum(axis=0).max() == 1  # no variable reached by two observations of a group
    # radius 2 reaches 7 variables: at most two observations fit on a ring of 20, and ten groups of two do
    assert len(groups) == N_VARIABLES // 2


@pytest.mark.parametrize("make_step", [
    lambda **kw: SerialEnKF(inflation=1.05, clip=2.0, **kw),
    lambda **kw: RankHistogramFilter(n_grid=400, **kw),
], ids=["serial_enkf", "rank_histogram"])
def test_grouped_updates_equal_the_serial_filter_taking_the_observations_group_by_group(make_step):
    forecast, observation = _forecast_and_observation()
    model = ObservationModel(n_variables=N_VARIABLES)
    grouped = make_step(localization_radius=2.0, batch_disjoint=True).bind(model, random_state=0)
    order = np.concatenate(grouped._disjoint_groups(model.observed))
    assert not np.array_equal(order, np.arange(N_VARIABLES))  # the order does change
    reordered = make_step(localization_radius=2.0).bind(ObservationModel(n_variables=N_VARIABLES, observed=order))
    np.testing.assert_allclose(grouped(forecast, observation), reordered(forecast, observation[order]),
                               rtol=1e-10, atol=1e-10)
    in_index_order = make_step(localization_radius=2.0).bind(model)(forecast, observation)
    assert not np.allclose(grouped(forecast, observation), in_index_order, atol=1e-6)


def test_without_localisation_grouping_changes_nothing():
    forecast, observation = _forecast_and_observation()
    model = ObservationModel(n_variables=N_VARIABLES)
    np.testing.assert_array_equal(SerialEnKF(batch_disjoint=True).bind(model)(forecast, observation),
                                  SerialEnKF().bind(model)(forecast, observation))


def test_missing_observations_are_skipped_in_groups():
    forecast, observation = _forecast_and_observation()
    observation[[3, 4, 11]] = np.nan
    model = ObservationModel(n_variables=N_VARIABLES)
    grouped = SerialEnKF(localization_radius=2.0, batch_disjoint=True).bind(model)(forecast, observation)
    present = model.present(observation)
    restricted = SerialEnKF(localization_radius=2.0, batch_disjoint=True).bind(model.restricted(present))
    np.testing.assert_allclose(grouped, restricted(forecast, observation[present]))


@pytest.fixture(scope="module")
def learned_model():
    rng = np.random.default_rng(0)
    X, _, _ = analysis_features(rng.standard_normal((48, N_MEMBERS)), rng.standard_cauchy(48), noise_scale=1.0,
                                noise_tail=1.0, features="ranked")
    return MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=8, n_heads=2, n_layers=1,
                                       dim_feedforward=16, max_epochs=1, random_state=0).fit(X, rng.normal(size=(48, 1, 1)))


@pytest.mark.slow
@pytest.mark.parametrize("update", ["ensemble", "moments"])
def test_a_learned_batch_of_updates_equals_the_updates_one_by_one(learned_model, update):
    step = LearnedAnalysis(learned_model, update=update).bind(ObservationModel(n_variables=4, noise="cauchy"))
    rng = np.random.default_rng(2)
    priors = rng.standard_normal((5, N_MEMBERS)) * rng.uniform(0.5, 2, size=(5, 1)) + rng.normal(size=(5, 1))
    observations = rng.standard_cauchy(5)
    batched = step.scalar_updates(priors.copy(), observations)
    one_by_one = np.stack([step.scalar_update(prior.copy(), value) for prior, value in zip(priors, observations)])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_learned_step_in_groups_makes_one_network_call_per_group(learned_model, monkeypatch):
    forecast, observation = _forecast_and_observation(seed=3)
    model = ObservationModel(n_variables=N_VARIABLES, noise="cauchy")
    step = LearnedAnalysis(learned_model, localization_radius=2.0, batch_disjoint=True).bind(model)
    calls = []
    original = FittedNetwork.run
    monkeypatch.setattr(FittedNetwork, "run", lambda self, X: calls.append(X.shape[0]) or original(self, X))
    grouped = step(forecast, observation)
    groups = step._disjoint_groups(model.observed)
    assert calls == [2 * len(group) for group in groups]  # each problem and its reflection
    order = np.concatenate(groups)
    serial = LearnedAnalysis(learned_model, localization_radius=2.0).bind(
        ObservationModel(n_variables=N_VARIABLES, noise="cauchy", observed=order))
    np.testing.assert_allclose(grouped, serial(forecast, observation[order]), rtol=1e-5, atol=1e-5)


def test_forty_evenly_spaced_observations_take_the_fewest_groups():
    # radius 2 on a ring of 40: seven supports meet at every variable, and five observations eight apart fit
    step = SerialEnKF(localization_radius=2.0, batch_disjoint=True).bind(ObservationModel(n_variables=40))
    assert [len(group) for group in step._disjoint_groups(step.observation_model_.observed)] == [5] * 8
    # irregular observations: the greedy grouping, still disjoint
    irregular = SerialEnKF(localization_radius=2.0, batch_disjoint=True).bind(
        ObservationModel(n_variables=40, observed=[0, 1, 2, 9, 10, 25, 26, 33]))
    observed = irregular.observation_model_.observed
    supports = irregular.localization_[observed] > 0
    groups = irregular._disjoint_groups(observed)
    assert sorted(j for group in groups for j in group) == list(range(len(observed)))
    assert all(supports[group].sum(axis=0).max() == 1 for group in groups)
