"""The public training of a learned scalar analysis: its recipe travels in the model file and is read back."""

import numpy as np
import pytest

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    GaussianNoise,
    LearnedAnalysis,
    ObservationModel,
    RankHistogramFilter,
    SampledNoise,
    compare_analyses,
    contaminated_errors,
    fit_learned_analysis,
    make_twin_problem,
    pretrained_analysis,
    tune_analysis,
)

TINY = dict(n_priors=1500, ensemble_size=10, d_model=16, n_heads=2, n_layers=1, max_epochs=3)


@pytest.fixture(scope="module")
def gaussian_step():
    return fit_learned_analysis(GaussianNoise(), **TINY)


def test_the_recipe_is_read_back_from_the_model_file(gaussian_step, tmp_path):
    recipe = gaussian_step.estimator.analysis_recipe_
    assert recipe["kind"] == "scalar" and recipe["features"] == "kalman"
    assert recipe["trained_by"]["n_pairs"] == 2 * TINY["n_priors"] * 4  # four stand-ins per prior, reflected
    path = tmp_path / "scalar.safetensors"
    save_model(gaussian_step.estimator, path)
    step = LearnedAnalysis(load_model(path)).bind(ObservationModel(n_variables=8))
    assert step.noise_ratio_range_ == (0.1, 100.0) and step.level_offset_ == 0.45
    assert step.estimator.analysis_recipe_ == recipe


def test_the_trained_update_beats_keeping_the_prior(gaussian_step):
    # Gaussian prior and noise of the prior's scale: Bayes' posterior is the Kalman update
    rng = np.random.default_rng(5)
    priors = rng.standard_normal((400, 10))
    truth = rng.standard_normal(400)
    observations = truth + rng.standard_normal(400)
    step = gaussian_step.bind(ObservationModel(n_variables=8, noise_scale=1.0))
    updated = step.scalar_updates(priors, observations)

    def crps(members):
        spread = np.abs(members[:, :, None] - members[:, None, :]).mean(axis=(1, 2))
        return np.mean(np.abs(members - truth[:, None]).mean(axis=1) - 0.5 * spread)

    assert crps(updated) < 0.92 * crps(priors)
    assert np.abs(updated.mean(axis=1) - 0.5 * observations).mean() < 0.25  # the Kalman mean is o / 2


def test_a_range_other_than_the_recipes_is_refused(gaussian_step):
    step = LearnedAnalysis(gaussian_step.estimator, noise_ratio_range=(0.2, 30.0))
    with pytest.raises(ValueError, match="trained on the noise-to-prior ratios"):
        step.bind(ObservationModel(n_variables=8))
    # reading the members at another level is a choice, not a misreading
    assert LearnedAnalysis(gaussian_step.estimator, level_offset=0.3).bind(
        ObservationModel(n_variables=8)).level_offset_ == 0.3


def test_a_recipe_of_another_kind_is_refused(gaussian_step):
    local = pretrained_analysis("local").estimator
    with pytest.raises(ValueError, match="LocalLearnedAnalysis"):
        LearnedAnalysis(local).bind(ObservationModel(n_variables=8))


def test_a_users_record_trains_saves_loads_runs_tunes_and_compares_through_public_calls(tmp_path):
    # the workflow of a user with only the installed package: a record of errors in, a tuned step compared out
    law = SampledNoise(contaminated_errors(1000, random_state=0))
    step = fit_learned_analysis(law, **TINY)
    save_model(step.estimator, tmp_path / "mine.safetensors")
    step = LearnedAnalysis(load_model(tmp_path / "mine.safetensors"))
    assert "1000 recorded errors" in step.estimator.analysis_recipe_["trained_by"]["noise"][0]

    def problems(seeds):
        return [make_twin_problem(n_variables=8, noise=law, n_cycles=20, random_state=seed) for seed in seeds]

    tuned = tune_analysis(step, {"inflation": [1.0, 1.05]}, problems([1000]), ensemble_size=10, spin_up=5)
    assert {tuple(c["params"].items()) for c in tuned.candidates} == {(("inflation", 1.0),), (("inflation", 1.05),)}
    rhf = RankHistogramFilter(likelihood=law.kernel_density())
    rows = compare_analyses({"mine": tuned.best_step, "RHF": rhf}, problems([7]), ensemble_size=10, spin_up=5,
                            reference="RHF")
    assert [row["step"] for row in rows] == ["mine", "RHF"]
    assert all(np.isfinite(row["rmse"]) for row in rows)
    assert rows[1]["rmse_ratio"] == pytest.approx(1.0)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(noise="cauchy"), TypeError, "noise"),
    (dict(n_priors=0), ValueError, "n_priors"),
    (dict(noise_ratio_range=(5.0, 1.0)), ValueError, "noise_ratio_range"),
    (dict(prior_weights={"uniform": 1.0}), ValueError, "prior_weights"),
])
def test_bad_input_is_refused_before_training(kwargs, error, match):
    with pytest.raises(error, match=match):
        fit_learned_analysis(**{**TINY, **kwargs})
