"""The local learned analysis: its windows, one network call per cycle, any ensemble size, missing observations,
its model file, and the shipped model against the LETKF."""

import importlib.util

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor, load_model, save_model
from sklearn_measattn.assimilation import (
    LETKF,
    LOCAL_ANALYSIS_FEATURES,
    CauchyNoise,
    GaussianNoise,
    LocalLearnedAnalysis,
    ObservationModel,
    SampledNoise,
    contaminated_errors,
    fit_local_analysis,
    local_analysis_features,
    make_local_analysis_data,
    make_twin_problem,
    pretrained_analysis,
    record_forecasts,
    twin_experiment,
)
from sklearn_measattn.assimilation._local import n_local_features

needs_dapper = pytest.mark.skipif(importlib.util.find_spec("dapper") is None, reason="DAPPER is not installed")


@pytest.fixture(scope="module")
def forecasts():
    return record_forecasts(ensemble_sizes=(6, 9), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                            n_cycles=30, spin_up=10, every=5, random_state=0)


@pytest.fixture(scope="module")
def untrained(forecasts):
    """A model whose correction is still (almost) zero: the residual head starts at zero and barely moves."""
    return fit_local_analysis(ObservationModel(n_variables=12), forecasts=forecasts, window_radius=2, d_model=8,
                              n_heads=2, n_layers=1, max_epochs=1, lr=1e-9)


def test_features_hold_the_local_etkf_analysis_and_the_window():
    rng = np.random.default_rng(0)
    forecast = rng.standard_normal((10, 16)) * rng.uniform(0.5, 2.0, 16) + 3.0
    observed = np.arange(0, 16, 2)
    observation = rng.standard_normal(observed.size)
    features, centre, scale = local_analysis_features(forecast, observation, observed, noise_scale=0.8,
                                                      noise_tail=0.0, window_radius=2, localization_radius=3.0)
    assert features.shape == (16, 10, n_local_features(2)) and len(LOCAL_ANALYSIS_FEATURES) == 8
    letkf = LETKF(inflation=1.0, localization_radius=3.0, clip=3.0).bind(
        ObservationModel(n_variables=16, observed=observed, noise_scale=0.8))(forecast, observation)
    np.testing.assert_allclose(centre + scale * features[:, :, 0].T, letkf, atol=1e-10)
    # the anomaly of member 3 at offset +1 of grid point 15 is variable 0 (the ring wraps), in point 15's spread
    np.testing.assert_allclose(features[15, 3, 1 + 3], (forecast[3, 0] - centre[0]) / scale[15])
    observed_column = 1 + 3 * 5 + 2  # "observed" at offset 0
    np.testing.assert_array_equal(features[:, 0, observed_column], (np.arange(16) % 2 == 0).astype(float))


def test_an_untrained_correction_is_the_letkf_with_one_network_call_per_cycle(untrained, monkeypatch):
    problem = make_twin_problem(n_variables=12, observed="every_other", n_cycles=15, random_state=3)
    network = untrained.estimator._network()
    calls = []
    run = type(network).run
    monkeypatch.setattr(type(network), "run", lambda self, X: calls.append(X.shape) or run(self, X))
    step = LocalLearnedAnalysis(untrained.estimator, reflect=False)
    learned = twin_experiment(step, problem, ensemble_size=7, spin_up=5, random_state=0)
    letkf = twin_experiment(LETKF(inflation=1.0, localization_radius=4.0, clip=3.0), problem, ensemble_size=7, spin_up=5,
                            random_state=0)
    assert calls == [(12, 7, n_local_features(2))] * 15  # every grid point in one call, once a cycle
    np.testing.assert_allclose(learned.rmse_per_cycle, letkf.rmse_per_cycle, rtol=1e-3)


def test_any_ensemble_size_and_missing_observations(untrained):
    model = ObservationModel(n_variables=12, observed="every_other")
    step = untrained.bind(model)
    rng = np.random.default_rng(1)
    for n_members in (5, 30):
        forecast = rng.standard_normal((n_members, 12))
        assert step(forecast, rng.standard_normal(6)).shape == (n_members, 12)
    forecast = rng.standard_normal((8, 12))
    observation = rng.standard_normal(6)
    partial = observation.copy()
    partial[[1, 4]] = np.nan
    restricted = untrained.bind(model.restricted(model.present(partial)))
    np.testing.assert_allclose(step(forecast, partial), restricted(forecast, observation[[0, 2, 3, 5]]))
    np.testing.assert_array_equal(step(forecast, np.full(6, np.nan)), forecast)


def test_reflection_makes_the_step_odd_under_a_symmetric_law(untrained):
    step = LocalLearnedAnalysis(untrained.estimator, reflect=True).bind(ObservationModel(n_variables=12))
    rng = np.random.default_rng(2)
    forecast, observation = rng.standard_normal((6, 12)), rng.standard_normal(12)
    np.testing.assert_allclose(step(-forecast, -observation), -step(forecast, observation), atol=1e-9)


def test_model_file_holds_the_recipe_and_a_model_without_one_is_refused(untrained, tmp_path):
    path = tmp_path / "local.safetensors"
    save_model(untrained.estimator, path)
    loaded = load_model(path)
    assert loaded.analysis_recipe_ == untrained.estimator.analysis_recipe_
    forecast = np.random.default_rng(3).standard_normal((6, 12))
    model = ObservationModel(n_variables=12)
    np.testing.assert_allclose(LocalLearnedAnalysis(loaded).bind(model)(forecast, np.zeros(12)),
                               untrained.bind(model)(forecast, np.zeros(12)))
    plain = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1, random_state=0).fit(
        np.zeros((4, 5, n_local_features(2))), np.zeros((4, 1, 1)))
    with pytest.raises(ValueError, match="fit_local_analysis"):
        LocalLearnedAnalysis(plain).bind(model)
    plain.analysis_recipe_ = {**untrained.estimator.analysis_recipe_, "window_radius": 3}
    with pytest.raises(ValueError, match="does not belong to this model"):
        LocalLearnedAnalysis(plain).bind(model)


def test_training_pairs_come_from_a_stand_in_member(forecasts):
    X, y = make_local_analysis_data(forecasts[:3], ObservationModel(n_variables=12, noise="cauchy"),
                                    window_radius=2, observation_spacings=(1,), missing_fraction=0.0, random_state=0)
    assert set(X) == {6} and X[6].shape == (36, 6, n_local_features(2)) and y[6].shape == (36, 1, 1)
    # the stand-in is one of the 7 members: standardised by the other 6, it lies within their reach
    assert np.all(np.abs(y[6]) < 10)
    with pytest.raises(TypeError, match="ObservationModel"):
        make_local_analysis_data(forecasts, "cauchy")
    with pytest.raises(TypeError, match="ObservationModel"):
        fit_local_analysis(["gaussian"], forecasts=forecasts)
    with pytest.raises(ValueError, match=r"forecasts\[1\] must be a finite array"):
        make_local_analysis_data([forecasts[0], np.zeros(5)], ObservationModel(n_variables=12))


def test_training_against_a_known_truth_changes_the_target_and_keeps_the_prior(forecasts):
    recorded, truths = record_forecasts(ensemble_sizes=(6, 9), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                        n_cycles=30, spin_up=10, every=5, return_truth=True, random_state=0)
    assert len(truths) == len(recorded) and all(np.array_equal(a, b) for a, b in zip(recorded, forecasts))
    # the truth is no member: it lies outside every recorded ensemble's members
    assert all(np.abs(forecast - truth).max(axis=1).min() > 1e-6 for forecast, truth in zip(recorded, truths))
    settings = dict(window_radius=2, observation_spacings=(1,), missing_fraction=0.0, n_draws=4, random_state=0)
    law = ObservationModel(n_variables=12, noise="cauchy")
    X_stand_in, y_stand_in = make_local_analysis_data(forecasts[:3], law, **settings)
    # with member 0 as the "truth", each target is member 0: left out (then the stand-in's target) or in the prior
    X_truth, y_truth = make_local_analysis_data(forecasts[:3], law, truths=[f[0] for f in forecasts[:3]], **settings)
    anomaly = slice(1, 1 + 5)  # the member anomalies of the 5 window positions depend on the prior only
    np.testing.assert_array_equal(X_truth[6][:, :, anomaly], X_stand_in[6][:, :, anomaly])
    centre_anomaly = X_truth[6][:, :, 1 + 2, None]  # offset 0: (member - prior mean) / spread
    in_prior = np.isclose(centre_anomaly, y_truth[6][:, :1, :]).any(axis=1)[:, 0]
    left_out = np.isclose(y_truth[6], y_stand_in[6])[:, 0, 0]
    assert np.all(in_prior | left_out) and in_prior.any() and not in_prior.all()
    step = fit_local_analysis(law, forecasts=recorded, truths=truths, window_radius=2, d_model=8, n_heads=2,
                              n_layers=1, max_epochs=1)
    assert step.estimator.analysis_recipe_["trained_by"]["target"] == "truth"
    with pytest.raises(ValueError, match="one truth per forecast; got 2 truths for 3"):
        make_local_analysis_data(forecasts[:3], law, truths=truths[:2])
    with pytest.raises(ValueError, match=r"truths\[1\] must be a finite array of shape \(12,\)"):
        make_local_analysis_data(forecasts[:2], law, truths=[truths[0], truths[1][:5]])
    with pytest.raises(ValueError, match="truths needs the forecasts"):
        fit_local_analysis(law, truths=truths)


def test_shipped_model_loads_alone_and_holds_the_truth_beside_the_letkf():
    step = pretrained_analysis("local")
    recipe = step.estimator.analysis_recipe_
    assert recipe["kind"] == "local" and recipe["trained_by"]["function"] == "fit_local_analysis_through_cycle"
    assert recipe["trained_by"]["target"] == "stand-ins from recorded forecasts through the cycle"
    assert [round["function"] for round in recipe["trained_by"]["earlier"]] == ["fit_local_analysis"]
    problem = make_twin_problem(n_variables=40, observed=np.arange(0, 40, 4), dt_obs=0.15, n_cycles=150,
                                random_state=77)
    learned = twin_experiment(step, problem, ensemble_size=20, spin_up=50, random_state=0)
    letkf = twin_experiment(LETKF(inflation=1.02, localization_radius=4.0), problem, ensemble_size=20, spin_up=50,
                            random_state=0)
    free = twin_experiment("none", problem, ensemble_size=20, spin_up=50, random_state=0)
    assert not learned.diverged and learned.rmse < 0.6 * free.rmse
    assert learned.rmse < 1.15 * letkf.rmse
    with pytest.raises(TypeError, match="relaxation"):
        pretrained_analysis("local", relaxation=0.3)


def test_shipped_student_t_model_holds_the_truth_under_cauchy_noise_beside_the_robust_letkfs():
    step = pretrained_analysis("local_student_t")
    assert step.estimator.analysis_recipe_["letkf_student_t"] is True
    problem = make_twin_problem(n_variables=40, observed="every_other", dt_obs=0.1, noise="cauchy", n_cycles=150,
                                random_state=78)

    def rmse(analysis):
        return twin_experiment(analysis, problem, ensemble_size=20, spin_up=50, random_state=0)

    learned = rmse(step)
    student_t = rmse(LETKF(inflation=1.1, localization_radius=6.0, student_t=True))
    clipped = rmse(LETKF(inflation=1.1, localization_radius=4.0, clip=2.0))
    free = rmse("none")
    assert not learned.diverged and learned.rmse < 0.4 * free.rmse
    assert learned.rmse < 0.95 * min(student_t.rmse, clipped.rmse)


@needs_dapper
def test_local_step_runs_as_a_dapper_method():
    from sklearn_measattn.assimilation import dapper_method

    method = dapper_method(pretrained_analysis("local"), ensemble_size=10)
    assert hasattr(method, "assimilate")


def test_tuning_keeps_the_fitted_model_of_a_learned_step(untrained):
    from sklearn_measattn.assimilation import tune_analysis

    problem = make_twin_problem(n_variables=12, observed="every_other", n_cycles=30, random_state=4)
    tuning = tune_analysis(untrained, {"inflation": [1.0, 1.05]}, [problem], ensemble_size=6, spin_up=10)
    assert tuning.best_step.estimator is untrained.estimator and len(tuning.candidates) == 2


def test_correction_weight_moves_the_analysis_from_the_letkf_to_the_network():
    model = ObservationModel(n_variables=40, observed=np.arange(0, 40, 4))
    rng = np.random.default_rng(5)
    forecast = rng.standard_normal((10, 40)) + np.sin(np.arange(40))
    observation = rng.standard_normal(10) * 2.0

    def analysis(weight):
        return pretrained_analysis("local", correction_weight=weight, localization_radius=5.0).bind(model)(
            forecast, observation)

    letkf = LETKF(inflation=1.0, localization_radius=5.0, clip=3.0).bind(model)(forecast, observation)
    network, half = analysis(1.0), analysis(0.5)
    np.testing.assert_allclose(analysis(0.0), letkf, atol=1e-10)
    assert np.abs(network - letkf).max() > 1e-2  # the shipped network does correct the LETKF
    np.testing.assert_allclose(half, 0.5 * (letkf + network), atol=1e-9)
    with pytest.raises(ValueError, match="correction_weight"):
        pretrained_analysis("local", correction_weight=1.5).bind(model)


def test_a_student_t_base_is_the_student_t_letkf_recorded_and_kept_by_a_warm_start(forecasts):
    step = fit_local_analysis(CauchyNoise(), forecasts=forecasts, window_radius=2, student_t=True, d_model=8, n_heads=2,
                              n_layers=1, max_epochs=1, lr=1e-9)
    assert step.estimator.analysis_recipe_["letkf_student_t"] is True
    rng = np.random.default_rng(2)
    forecast = rng.standard_normal((9, 12)) + 2.0
    observation = np.array([0.3, 25.0, -1.0, 2.0, 0.5, -40.0])  # two gross Cauchy errors
    bases = {}
    record = SampledNoise(contaminated_errors(2000, random_state=0))  # its weights take its fitted Student-t's scale
    for law in ("cauchy", "gaussian", record):
        model = ObservationModel(n_variables=12, observed="every_other", noise=law)
        bases[str(law)] = step.set_params(correction_weight=0.0).bind(model)(forecast, observation)
        expected = LETKF(inflation=1.0, localization_radius=4.0, clip=3.0, student_t=True).bind(model)(
            forecast, observation)
        np.testing.assert_allclose(bases[str(law)], expected, atol=1e-10)
    clipped = LETKF(inflation=1.0, localization_radius=4.0, clip=3.0).bind(
        ObservationModel(n_variables=12, observed="every_other", noise="cauchy"))(forecast, observation)
    assert np.abs(bases["cauchy"] - clipped).max() > 0.1  # the weights, not only the clipping, act under Cauchy noise
    with pytest.raises(ValueError, match=r"student_t=False \(its recipe: True\)"):
        fit_local_analysis(CauchyNoise(), forecasts=forecasts, window_radius=2, warm_start=step)
    with pytest.raises(ValueError, match="student_t"):
        fit_local_analysis(CauchyNoise(), student_t="yes")  # refused before any forecast is recorded
    with pytest.raises(ValueError, match="student_t"):
        make_local_analysis_data(forecasts, CauchyNoise(), student_t=1.0)


def test_forecasts_recorded_from_any_filter_under_each_noise_law(untrained):
    settings = dict(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,), n_cycles=30,
                    spin_up=10, every=5, random_state=0)
    gaussian = record_forecasts(**settings)
    both = record_forecasts(**settings, noise=[GaussianNoise(), CauchyNoise(scale=3.0)])
    own = record_forecasts(**settings, analysis=untrained)
    assert len(both) == 2 * len(gaussian) and len(own) == len(gaussian)
    # the Gaussian run of the two is the default run; the Cauchy run is another one
    assert min(np.abs(forecast - both[len(gaussian)]).max() for forecast in gaussian) > 1e-3
    assert all(forecast.shape == (7, 12) and np.isfinite(forecast).all() for forecast in both + own)
    with pytest.raises(TypeError, match="ObservationModel"):
        record_forecasts(**settings, noise="cauchy")
    with pytest.raises(ValueError, match="analysis"):
        record_forecasts(**settings, analysis="letkf")


def test_recording_and_windows_do_not_depend_on_the_number_of_workers(forecasts):
    settings = dict(ensemble_sizes=(6, 9), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,), n_cycles=30,
                    spin_up=10, every=5, noise=[GaussianNoise(), CauchyNoise()], return_truth=True, random_state=0)
    alone, in_two = record_forecasts(**settings), record_forecasts(**settings, n_jobs=2)
    for one, other in zip(alone, in_two):
        assert len(one) == len(other) == 16 and all(np.array_equal(a, b) for a, b in zip(one, other))
    # the runs keep their order: the sizes come one after the other
    assert [f.shape[0] for f in in_two[0]] == [7] * 8 + [10] * 8
    laws = [GaussianNoise(), CauchyNoise()]
    X, y = make_local_analysis_data(forecasts, laws, window_radius=2, n_draws=2, random_state=0)
    X2, y2 = make_local_analysis_data(forecasts, laws, window_radius=2, n_draws=2, random_state=0, n_jobs=2)
    assert sorted(X) == sorted(X2) == [6, 9]
    assert all(np.array_equal(X[size], X2[size]) and np.array_equal(y[size], y2[size]) for size in X)
    for bad in (0, 1.5, "two"):
        with pytest.raises(ValueError, match="n_jobs"):
            record_forecasts(**settings, n_jobs=bad)
        with pytest.raises(ValueError, match="n_jobs"):
            make_local_analysis_data(forecasts, laws, n_jobs=bad)


def test_warm_start_trains_a_copy_of_the_network_further(untrained, forecasts):
    before = [p.detach().clone() for p in untrained.estimator.net_.module_.parameters()]
    epochs = len(untrained.estimator.history_)
    further = fit_local_analysis(ObservationModel(n_variables=12), forecasts=forecasts, window_radius=2,
                                 warm_start=untrained, max_epochs=1, lr=1e-2)
    assert further.estimator is not untrained.estimator
    assert len(further.estimator.history_) == epochs + 2  # one epoch for each of the two ensemble sizes
    after = [p.detach() for p in further.estimator.net_.module_.parameters()]
    assert max(float((a - b).abs().max()) for a, b in zip(after, before)) > 1e-4
    assert all(np.array_equal(p.detach(), b) for p, b in zip(untrained.estimator.net_.module_.parameters(), before))
    trained_by = further.estimator.analysis_recipe_["trained_by"]
    assert trained_by["target"] == "stand-in member"
    assert trained_by["estimator"]["lr"] == 1e-2 and trained_by["earlier"][0]["estimator"]["lr"] == 1e-9
    assert further.estimator.analysis_recipe_["window_radius"] == 2
    with pytest.raises(ValueError, match=r"window_radius=4 \(its recipe: 2\)"):
        fit_local_analysis(forecasts=forecasts, warm_start=untrained)
    with pytest.raises(ValueError, match="keeps its network"):
        fit_local_analysis(forecasts=forecasts, window_radius=2, warm_start=untrained, d_model=16)
    with pytest.raises(TypeError, match="warm_start must be a LocalLearnedAnalysis"):
        fit_local_analysis(forecasts=forecasts, window_radius=2, warm_start=untrained.estimator)
