"""``measattn train-analysis``: a record of errors in, a model file that a filter reads with nothing beside it out."""

import numpy as np
import pytest

from sklearn_measattn import load_model
from sklearn_measattn.__main__ import main
from sklearn_measattn.assimilation import LearnedAnalysis, SampledObservationModel, make_twin_problem, twin_experiment

FAST = ["--n-priors", "300", "--max-epochs", "1", "--ensemble-size", "12", "--quiet"]


@pytest.fixture
def errors():
    return np.random.default_rng(0).standard_t(3.0, 1000)


def test_a_record_in_a_table_becomes_a_model_a_filter_reads(tmp_path, errors, capsys):
    table = tmp_path / "errors.csv"
    table.write_text("station,error\n" + "".join(f"a,{value}\n" for value in errors))
    model_path = tmp_path / "model.safetensors"
    assert main(["train-analysis", "--errors", str(table), "--column", "error", "--save", str(model_path), *FAST]) == 0
    assert "saved the learned analysis" in capsys.readouterr().out
    estimator = load_model(model_path)
    assert "1000 recorded errors" in estimator.analysis_recipe_["trained_by"]["noise"][0]
    problem = make_twin_problem(observation_model=SampledObservationModel(errors, n_variables=8), n_cycles=10,
                                random_state=0)
    step = LearnedAnalysis(estimator, inflation=1.05)
    result = twin_experiment(step, problem, ensemble_size=12, spin_up=2, random_state=0)
    assert result.rmse_per_cycle.shape == (10,)
    assert step.bind(problem.observation_model).noise_ratio_range_ == (0.1, 100.0)


def test_an_npy_record_trains_with_progress_on_stderr(tmp_path, errors, capsys):
    np.save(tmp_path / "errors.npy", errors)
    argv = ["train-analysis", "--errors", str(tmp_path / "errors.npy"), "--save", str(tmp_path / "m.safetensors"),
            *[a for a in FAST if a != "--quiet"]]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "1000 errors" in err and "epoch 1/1" in err


@pytest.mark.parametrize(("content", "extra", "match"), [
    ("a,b\n1,2\n", [], "name the one of the errors with --column"),
    ("error\n" + "0.5\n" * 10, [], "at least 100"),
    ("error\n" + "x\n" * 200, [], "not a number"),
    ("error\n" + "1\n" * 200, ["--column", "other"], "is not in the header"),
])
def test_a_bad_record_is_a_usage_error_before_training(tmp_path, content, extra, match, capsys):
    table = tmp_path / "errors.csv"
    table.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["train-analysis", "--errors", str(table), "--save", str(tmp_path / "m.safetensors"), *extra, *FAST])
    assert exit_info.value.code == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "m.safetensors").exists()


def test_the_model_must_be_saved_as_safetensors(tmp_path, errors, capsys):
    np.save(tmp_path / "errors.npy", errors)
    with pytest.raises(SystemExit) as exit_info:
        main(["train-analysis", "--errors", str(tmp_path / "errors.npy"), "--save", str(tmp_path / "m.pkl"), *FAST])
    assert exit_info.value.code == 2 and "safetensors" in capsys.readouterr().err
