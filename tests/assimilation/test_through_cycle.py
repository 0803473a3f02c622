"""Training a local learned analysis through the cycle: the differentiable analysis equals the step's, gradients reach
the forecast and the network, and the fine-tuned step is a new, complete step."""

import numpy as np
import pytest
import torch

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    GaussianNoise,
    LocalLearnedAnalysis,
    ObservationModel,
    StudentTNoise,
    fit_local_analysis,
    fit_local_analysis_through_cycle,
    local_analysis_features,
    make_twin_problem,
    record_forecasts,
    twin_experiment,
    unrolled_local_analysis,
)
from sklearn_measattn.assimilation._letkf import observation_weights
from sklearn_measattn.assimilation._through_cycle import _local_features, _Runs


@pytest.fixture(scope="module")
def step():
    forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                 n_cycles=30, spin_up=10, every=5, random_state=0)
    return fit_local_analysis(GaussianNoise(), forecasts=forecasts, window_radius=2, d_model=8, n_heads=2,
                              n_layers=1, max_epochs=1, lr=1e-2)


def _one_network(n_variables, observed, values):
    present = torch.zeros(1, n_variables, dtype=torch.bool)
    present[0, observed] = True
    observation = torch.full((1, n_variables), float("nan"), dtype=torch.float64)
    observation[0, observed] = torch.as_tensor(values, dtype=torch.float64)
    return observation, present


@pytest.mark.parametrize("clip, student_t, tail", [(None, False, 0.4), (3.0, False, 0.4), (None, True, 0.4),
                                                   (None, True, 0.0)])
def test_torch_features_equal_the_numpy_windows(clip, student_t, tail):
    rng = np.random.default_rng(0)
    forecast = rng.normal(2.0, 1.5, (7, 16))
    observed = np.array([0, 3, 4, 9, 13])
    values = rng.normal(2.0, 3.0, observed.size)
    expected, centre, spread = local_analysis_features(forecast, values, observed, noise_scale=0.8, noise_tail=tail,
                                                       window_radius=3, localization_radius=2.5,
                                                       observation_variance=1.3, clip=clip, student_t=student_t)
    observation, present = _one_network(16, observed, values)
    one = torch.ones(1, dtype=torch.float64)
    weights = torch.as_tensor(observation_weights(16, np.arange(16), 2.5))
    features, mean, scale = _local_features(torch.as_tensor(forecast)[None], observation, present,
                                            noise_scale=0.8 * one, noise_tail=tail * one,
                                            observation_variance=1.3 * one, window_radius=3,
                                            localization_weights=weights, noise_ratio_range=(0.05, 20.0), clip=clip,
                                            student_t=student_t)
    np.testing.assert_allclose(features[0].numpy(), expected, atol=1e-10)
    np.testing.assert_allclose(mean[0].numpy(), centre, atol=1e-12)
    np.testing.assert_allclose(scale[0].numpy(), spread, atol=1e-12)


@pytest.mark.parametrize("settings", [{}, {"reflect": False}, {"inflation": 1.1, "correction_weight": 0.5},
                                      {"localization_radius": 2.0}])
def test_unrolled_analysis_is_the_steps_and_gradients_reach_forecast_and_network(step, settings):
    step = LocalLearnedAnalysis(step.estimator, **settings)
    rng = np.random.default_rng(1)
    forecasts = rng.normal(1.0, 1.0, (3, 6, 12))
    observed = np.array([1, 3, 5, 8, 11])
    values = rng.normal(1.0, 2.0, (3, observed.size))
    law = StudentTNoise(df=3.0, scale=0.7)
    bound = step.bind(ObservationModel(n_variables=12, observed=observed, noise=law))
    forecast = torch.tensor(forecasts, requires_grad=True)
    rows = [_one_network(12, observed, v) for v in values]
    analysis = unrolled_local_analysis(step, forecast, torch.cat([o for o, _ in rows]), torch.cat([p for _, p in rows]),
                                       noise_scale=0.7, noise_tail=law.tail, symmetric=law.symmetric,
                                       observation_variance=bound.observation_variance_)
    for k in range(3):
        np.testing.assert_allclose(analysis[k].detach().numpy(), bound.analyse(forecasts[k], values[k]), atol=1e-4)
    analysis.pow(2).sum().backward()
    assert torch.isfinite(forecast.grad).all() and forecast.grad.abs().max() > 0
    grads = [p.grad for p in step.estimator.net_.module_.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert max(float(g.abs().max()) for g in grads) > 0
    step.estimator.net_.module_.zero_grad(set_to_none=True)


def test_unrolled_analysis_refuses_what_it_cannot_read(step):
    observation, present = _one_network(12, [0, 6], [1.0, 2.0])
    with pytest.raises(TypeError, match="step must be a LocalLearnedAnalysis"):
        unrolled_local_analysis(step.estimator, torch.zeros(1, 6, 12), observation, present, noise_scale=1.0,
                                noise_tail=0.0)
    with pytest.raises(ValueError, match=r"forecast must be \(n_batch, n_members, n_variables\)"):
        unrolled_local_analysis(step, torch.zeros(6, 12), observation, present, noise_scale=1.0, noise_tail=0.0)


def test_fine_tuning_makes_a_new_step_that_runs_alone(step, tmp_path):
    before = [p.detach().clone() for p in step.estimator.net_.module_.parameters()]
    tuned = fit_local_analysis_through_cycle(step, GaussianNoise(), ensemble_sizes=(5, 7), n_variables=12,
                                             dt_obs=(0.05,), observation_spacings=(2,), n_runs=2, unroll=2,
                                             n_iterations=4, spin_up=2, lr=1e-2, random_state=0)
    assert tuned is not step and tuned.estimator is not step.estimator
    assert all(torch.equal(p, b) for p, b in zip(step.estimator.net_.module_.parameters(), before))
    after = [p.detach() for p in tuned.estimator.net_.module_.parameters()]
    assert max(float((a - b).abs().max()) for a, b in zip(after, before)) > 1e-4
    trained_by = tuned.estimator.analysis_recipe_["trained_by"]
    assert trained_by["function"] == "fit_local_analysis_through_cycle"
    assert trained_by["ensemble_sizes"] == [5, 7] and trained_by["unroll"] == 2
    assert trained_by["earlier"][-1]["function"] == "fit_local_analysis"
    assert np.isfinite(trained_by["final_crps"])
    save_model(tuned.estimator, tmp_path / "tuned.safetensors")
    loaded = LocalLearnedAnalysis(load_model(tmp_path / "tuned.safetensors"))
    assert loaded.estimator.analysis_recipe_ == tuned.estimator.analysis_recipe_
    problem = make_twin_problem(n_variables=12, observed="every_other", n_cycles=30, random_state=0)
    result = twin_experiment(loaded, problem, ensemble_size=8, spin_up=10, random_state=0)
    expected = twin_experiment(tuned, problem, ensemble_size=8, spin_up=10, random_state=0)
    assert np.isfinite(result.rmse) and result.rmse == pytest.approx(expected.rmse, rel=1e-6)


def test_fine_tuning_keeps_the_steps_settings_and_is_seeded(step):
    settings = LocalLearnedAnalysis(step.estimator, inflation=1.05, correction_weight=0.5, reflect=False)
    kwargs = dict(ensemble_sizes=(5,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,), n_runs=2,
                  unroll=2, n_iterations=3, spin_up=1, lr=1e-2, random_state=3)
    first = fit_local_analysis_through_cycle(settings, GaussianNoise(), **kwargs)
    again = fit_local_analysis_through_cycle(settings, GaussianNoise(), **kwargs)
    assert {key: first.get_params()[key] for key in ("inflation", "correction_weight", "reflect")} == \
        {"inflation": 1.05, "correction_weight": 0.5, "reflect": False}
    assert all(torch.equal(a, b) for a, b in zip(first.estimator.net_.module_.parameters(),
                                                 again.estimator.net_.module_.parameters()))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ensemble_sizes=(1,)), ValueError, "ensemble_sizes must be a non-empty sequence of integers >= 2"),
    (dict(observation_spacings=(13,)), ValueError, "observation_spacings must be at most n_variables=12"),
    (dict(dt_obs=(0.0,)), ValueError, "dt_obs must be positive"),
    (dict(scale_range=(2.0, 1.0)), ValueError, "scale_range must be"),
    (dict(unroll=0), ValueError, "unroll"),
])
def test_bad_settings_are_refused_before_training(step, kwargs, error, match):
    before = [p.detach().clone() for p in step.estimator.net_.module_.parameters()]
    with pytest.raises(error, match=match):
        fit_local_analysis_through_cycle(step, GaussianNoise(), n_variables=12, n_iterations=2, **kwargs)
    assert all(torch.equal(p, b) for p, b in zip(step.estimator.net_.module_.parameters(), before))


def test_a_step_that_is_not_local_is_refused(step):
    with pytest.raises(TypeError, match="step must be a LocalLearnedAnalysis"):
        fit_local_analysis_through_cycle(step.estimator, n_iterations=1)


@pytest.mark.parametrize("start", ["nature runs", "stand-ins of recorded forecasts"])
def test_training_through_the_cycle_improves_the_letkf_it_starts_from(start):
    """A step whose correction is still zero is the LETKF without inflation, which loses the truth in this setting;
    through the cycle it learns to keep it, on problems it never saw (measured against the LETKF it started as),
    whether the runs score it against nature runs or against stand-in members of recorded forecasts, every batch a
    fresh draw."""
    forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                 n_cycles=30, spin_up=10, every=5, random_state=0)
    letkf = fit_local_analysis(ObservationModel(n_variables=12), forecasts=forecasts, window_radius=2, d_model=8,
                               n_heads=2, n_layers=1, max_epochs=1, lr=1e-9)
    if start == "nature runs":
        runs = dict(ensemble_sizes=(6,), spin_up=5)
    else:
        recorded = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.1,), observation_spacings=(2,),
                                    n_cycles=100, spin_up=20, every=2, random_state=1)
        runs = dict(forecasts=recorded, spin_up=0, lifetime=1)
    tuned = fit_local_analysis_through_cycle(letkf, GaussianNoise(), n_variables=12, dt_obs=(0.1,),
                                             observation_spacings=(2,), n_runs=4, unroll=3, n_iterations=60,
                                             lr=1e-2, random_state=0, **runs)
    assert tuned.estimator.analysis_recipe_["trained_by"]["target"] == (
        "truth through the cycle" if start == "nature runs" else "stand-ins from recorded forecasts through the cycle")
    for k in range(2):
        problem = make_twin_problem(n_variables=12, observed="every_other", dt_obs=0.1, n_cycles=200,
                                    random_state=100 + k)
        before, after = (twin_experiment(step, problem, ensemble_size=6, spin_up=50, random_state=k)
                         for step in (letkf, tuned))
        assert not after.diverged
        assert after.crps < 0.9 * before.crps


def test_runs_from_recorded_forecasts_start_from_one_member_as_the_stand_in():
    records = np.random.default_rng(0).normal(size=(5, 4, 12))  # five forecasts of 3 + 1 members
    runs = _Runs(n_runs=3, n_members=3, n_variables=12, dt_obs=0.05, spacing=2, law=GaussianNoise(), scale=1.0,
                 missing_fraction=0.0, rng=np.random.RandomState(0), records=records)
    assert runs.truth.shape == (3, 12) and runs.ensemble.shape == (3, 3, 12)
    for truth, ensemble in zip(runs.truth.numpy(), runs.ensemble.numpy()):
        together = np.concatenate([truth[None], ensemble])
        matches = [k for k in range(5) if sorted(map(tuple, records[k])) == sorted(map(tuple, together))]
        assert len(matches) == 1


def test_recorded_forecasts_set_the_sizes_and_are_checked_before_training(step):
    forecasts = record_forecasts(ensemble_sizes=(4, 6), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                 n_cycles=20, spin_up=10, every=5, random_state=0)
    tuned = fit_local_analysis_through_cycle(step, GaussianNoise(), forecasts=forecasts, n_variables=12, n_runs=2,
                                             unroll=2, n_iterations=2, spin_up=0, random_state=0)
    trained_by = tuned.estimator.analysis_recipe_["trained_by"]
    assert trained_by["ensemble_sizes"] == [4, 6] and trained_by["n_forecasts"] == {"4": 2, "6": 2}
    before = [p.detach().clone() for p in step.estimator.net_.module_.parameters()]
    for kwargs, match in [(dict(n_variables=16), "forecasts must have n_variables=16"),
                          (dict(ensemble_sizes=(5,)), r"ensemble_sizes \[5\] must be among the sizes"),
                          (dict(forecasts=[np.zeros((2, 12))]), "with N \\+ 1 >= 3 members")]:
        with pytest.raises(ValueError, match=match):
            fit_local_analysis_through_cycle(step, GaussianNoise(), **{"forecasts": forecasts, "n_variables": 12,
                                                                       "n_iterations": 2, **kwargs})
    assert all(torch.equal(p, b) for p, b in zip(step.estimator.net_.module_.parameters(), before))


def test_a_forecast_model_of_ones_own_carries_the_runs(step):
    """The default model passed as a function trains the same network bit for bit; another model is the one that
    forecasts every run (the stand-ins and the members, each cycle), and its name is in the recipe."""
    from sklearn_measattn.assimilation._through_cycle import _lorenz96

    forecasts = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                 n_cycles=20, spin_up=10, every=5, random_state=0)
    kwargs = dict(forecasts=forecasts, n_variables=12, dt_obs=(0.05,), n_runs=2, unroll=2, n_iterations=3,
                  lifetime=1, spin_up=0, random_state=0)
    default = fit_local_analysis_through_cycle(step, GaussianNoise(), **kwargs)
    passed = fit_local_analysis_through_cycle(step, GaussianNoise(), forecast_model=_lorenz96, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(default.estimator.net_.module_.parameters(),
                                                 passed.estimator.net_.module_.parameters()))
    assert default.estimator.analysis_recipe_["trained_by"]["forecast_model"] == "Lorenz-96, forcing 8"
    calls = []

    def slowed(states, duration):
        calls.append(tuple(states.shape))
        return _lorenz96(states, duration) * 0.5 + 4.0

    other = fit_local_analysis_through_cycle(step, GaussianNoise(), forecast_model=slowed, **kwargs)
    assert calls == [(2, 7, 12)] + [(2, 12), (2, 6, 12)] * 3 * 2  # the check, then the truth and members per cycle
    assert not all(torch.equal(a, b) for a, b in zip(default.estimator.net_.module_.parameters(),
                                                     other.estimator.net_.module_.parameters()))
    assert other.estimator.analysis_recipe_["trained_by"]["forecast_model"].endswith("slowed")


@pytest.mark.parametrize("forecast_model, forecasts, error, match", [
    (lambda states, duration: states, None, ValueError, "forecast_model needs forecasts="),
    (lambda states, duration: states.numpy(), "recorded", TypeError, "must return a torch.Tensor"),
    (lambda states, duration: states[..., :-1], "recorded", ValueError, "of the shape it is given"),
    (lambda states, duration: states.float(), "recorded", ValueError, "finite float64 states"),
    (lambda states, duration: states / 0.0, "recorded", ValueError, "not finite"),
    (lambda states: states, "recorded", ValueError, "forecast_model\\(states, duration\\) failed"),
])
def test_a_forecast_model_that_cannot_serve_is_refused_before_training(step, forecast_model, forecasts, error, match):
    recorded = record_forecasts(ensemble_sizes=(6,), n_variables=12, dt_obs=(0.05,), observation_spacings=(2,),
                                n_cycles=20, spin_up=10, every=5, random_state=0)
    before = [p.detach().clone() for p in step.estimator.net_.module_.parameters()]
    with pytest.raises(error, match=match):
        fit_local_analysis_through_cycle(step, GaussianNoise(), forecasts=recorded if forecasts else None,
                                         forecast_model=forecast_model, n_variables=12, n_iterations=2)
    assert all(torch.equal(p, b) for p, b in zip(step.estimator.net_.module_.parameters(), before))
