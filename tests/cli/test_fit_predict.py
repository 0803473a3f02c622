"""``measattn fit`` and ``measattn predict``: train, save, apply, as the Python API does."""

import os
import re
import signal
import subprocess
import sys
import time

import joblib
import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn import MeasureTransformerRegressor, load_model
from sklearn_measattn.__main__ import main
from sklearn_measattn._extension import _loader as fused_loader
from sklearn_measattn.cli._epoch_progress import EpochProgress
from sklearn_measattn.cli._estimator_options import ESTIMATOR_OPTIONS, estimator_params
from sklearn_measattn.cli._main import build_parser
from sklearn_measattn.datasets import load_measures, make_matrix_inverse
from sklearn_measattn.kernels import ALL_KERNEL_NAMES

# The command line's option for each estimator parameter the tests below set.
OPTIONS = {"max_epochs": "--epochs", "d_model": "--d-model", "n_heads": "--n-heads", "n_layers": "--n-layers",
           "dim_feedforward": "--dim-feedforward", "batch_size": "--batch-size", "device": "--device"}


@pytest.fixture(scope="module")
def small_params(tiny_params):
    """The tiny regressor trained two epochs, seeded with 0 as the command line seeds by default."""
    return {**tiny_params, "max_epochs": 2, "random_state": 0}


@pytest.fixture(scope="module")
def small_args(small_params):
    """The same settings as command-line options."""
    return [arg for name, option in OPTIONS.items() for arg in (option, str(small_params[name]))]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_model")
    X, y = make_matrix_inverse(n_samples=10, n_points=16, random_state=0)
    np.save(folder / "X.npy", X)
    np.save(folder / "y.npy", y)
    np.save(folder / "X3.npy", np.concatenate([X, X[..., :1]], axis=-1))
    Z = np.random.default_rng(0).standard_normal((10, 40, 2))
    np.save(folder / "Z.npy", Z)
    ragged = [X[i, : 3 + i] for i in range(10)]
    np.savez(folder / "X_ragged.npz", *ragged)
    return folder, X, y, Z, ragged


@pytest.fixture(scope="module")
def saved(files, small_args):
    folder = files[0]
    model_path = folder / "model.safetensors"
    assert main(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save", str(model_path),
                 "--transform", "symlog", "--quiet", *small_args]) == 0
    return model_path


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


@pytest.mark.slow
def test_fit_then_predict_round_trips_on_npy_and_equals_the_python_api(files, saved, capsys, small_params):
    folder, X, y, _, _ = files
    out = folder / "pred.npy"
    assert main(["predict", str(saved), "--data", str(folder / "X.npy"), "--out", str(out)]) == 0
    assert "wrote the predictions (shape (10, 16, 2))" in capsys.readouterr().out
    predicted = np.load(out)
    # The same fit in Python (the command line seeds with 0 by default) predicts the same.
    model = MeasureTransformerRegressor(transform="symlog", **small_params).fit(X, y)
    np.testing.assert_allclose(predicted, model.predict(X), rtol=1e-6, atol=1e-9)
    loaded = load_model(saved)
    np.testing.assert_array_equal(predicted, loaded.predict(X))
    assert loaded.callbacks is None  # no command-line progress printer inside the saved model
    assert saved.read_bytes()[:1] != b"\x80"  # not a pickle
    assert loaded.transform == "symlog" and loaded.max_epochs == 2 and len(loaded.history_) == 2


@pytest.mark.slow
def test_fit_prints_progress_per_epoch(files, tmp_path, capsys, small_args):
    folder = files[0]
    assert main(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
                 str(tmp_path / "m.safetensors"), *small_args]) == 0
    captured = capsys.readouterr()
    assert "fit: X.npy: 10 measures of 16 points, 2 features" in captured.err
    assert "epoch 1/2: training loss" in captured.err and "epoch 2/2: training loss" in captured.err
    assert "trained 2 epochs" in captured.out and str(tmp_path / "m.safetensors") in captured.out


@pytest.mark.slow
def test_a_resumed_fit_says_what_this_run_trained_and_a_finished_one_that_it_trained_none(
        files, tmp_path, capsys, small_args, monkeypatch):
    folder = files[0]
    argv = ["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
            str(tmp_path / "m.safetensors"), "--checkpoint", str(tmp_path / "checkpoint"), *small_args]
    progress = EpochProgress.on_epoch_end

    def interrupt_in_epoch_two(self, net, **kwargs):
        progress(self, net, **kwargs)
        if len(net.history) == 2:  # before the checkpoint records it: the checkpoint holds epoch 1
            raise KeyboardInterrupt

    monkeypatch.setattr(EpochProgress, "on_epoch_end", interrupt_in_epoch_two)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    monkeypatch.undo()
    capsys.readouterr()

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "resumed at epoch 2 of 2, trained 1 epoch in " in out and " s, 2 in all (final training loss" in out
    assert "trained 2 epochs" not in out

    assert main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trained no epochs: the checkpoint holds the finished fit (2 epochs), loaded in ")
    assert out.count("trained") == 1 and "resumed at" not in out


@pytest.mark.slow
def test_fit_says_on_stderr_that_it_waits_for_the_fused_kernels_build(files, tmp_path, capsys, small_args,
                                                                        monkeypatch):
    """The first use of the fused CPU kernels (the log kernel's attention) prints its one line to the user of
    ``measattn fit``; the stand-in build fails, so nothing is compiled and training runs chunked."""
    folder = files[0]
    monkeypatch.setattr(fused_loader, "_state", {"loaded": False, "reason": None, "build_seconds": None,
                                                 "library": None})
    monkeypatch.setattr(fused_loader, "build_precondition", lambda: None)

    def failing_build(cpp_extension, directory):
        time.sleep(0.2)
        raise RuntimeError("fatal error: simulated")

    monkeypatch.setattr(fused_loader, "_build_and_load", failing_build)
    monkeypatch.setenv("CXX", sys.executable)
    monkeypatch.setenv("MEASATTN_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
                 str(tmp_path / "m.safetensors"), "--kernel", "log", "--quiet", *small_args]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sklearn_measattn: ")]
    assert len(lines) == 1 and lines[0].startswith("sklearn_measattn: compiling the fused CPU kernels"), lines
    seconds = float(re.search(r"\.\.\. failed after ([0-9.]+) s$", lines[0])[1])
    assert seconds >= 0.2
    assert "simulated" in fused_loader.fused_unavailable_reason()


@pytest.mark.slow
def test_predict_points_equals_transport(files, saved):
    folder, X, _, Z, _ = files
    out = folder / "images.npy"
    assert main(["predict", str(saved), "--data", str(folder / "X.npy"), "--points", str(folder / "Z.npy"),
                 "--out", str(out), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(out), load_model(saved).transport(X, Z))


@pytest.mark.slow
def test_ragged_predictions_go_to_npz_one_array_per_measure(files, saved):
    folder, _, _, _, ragged = files
    out = folder / "ragged.npz"
    assert main(["predict", str(saved), "--data", str(folder / "X_ragged.npz"), "--out", str(out), "--quiet"]) == 0
    with np.load(out) as archive:
        assert sorted(archive.files, key=lambda name: int(name.split("_")[1])) == [f"arr_{i}" for i in range(10)]
    expected = load_model(saved).predict(ragged)
    for got, want in zip(load_measures(out), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_same_errors_as_the_python_api(files, saved, capsys):
    folder, X, _, _, _ = files
    with pytest.raises(ValueError) as api:
        load_model(saved).predict(np.concatenate([X, X[..., :1]], axis=-1))
    code, err = _exit(["predict", str(saved), "--data", str(folder / "X3.npy"), "--out", str(folder / "o.npy")],
                      capsys)
    assert code == 2 and str(api.value) in err and "--data" in err
    with pytest.raises(ValueError) as api:
        MeasureTransformerRegressor(d_model=8, n_heads=3).fit(X, X)
    code, err = _exit(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
                       str(folder / "bad.safetensors"), "--d-model", "8", "--n-heads", "3"], capsys)
    assert code == 2 and str(api.value) in err
    assert not (folder / "bad.safetensors").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "--data", "{X}", "--y", "{y}", "--save", "/no/such/folder/m.safetensors"], "does not exist"),
        (["fit", "--data", "{X}", "--save", "{tmp}/m.safetensors"], "--y FILE is required"),
        (["fit", "--data", "/no/such/X.npy", "--y", "{y}", "--save", "{tmp}/m.safetensors"], "No such file"),
        (["fit", "--data", "{X}", "--y", "{y}"], "the following arguments are required: --save"),
        (["fit", "--data", "{X}", "--y", "{y}", "--save", "{tmp}/m.safetensors", "--kernel", "rbf"], "invalid choice: 'rbf'"),
        (["fit", "--data", "{X}", "--y", "{y}", "--save", "{tmp}/m.safetensors", "--epochs", "0"], "expected a positive integer"),
        (["predict", "{model}", "--data", "{X}", "--out", "{tmp}/p.csv"], "must end in .npy"),
        (["predict", "{model}", "--data", "{X}", "--out", "/no/such/folder/p.npy"], "does not exist"),
        (["predict", "/no/such/model.joblib", "--data", "{X}", "--out", "{tmp}/p.npy"], "no such file"),
        (["predict", "{X}", "--data", "{X}", "--out", "{tmp}/p.npy"], "is not a sklearn-measattn model file: it is a NumPy"),
        (["fit", "--data", "{X}", "--y", "{y}", "--save", "{tmp}/m.joblib"], "saves a safetensors model file"),
        (["fit", "--data", "{X}", "--y", "{y}", "--save", "{tmp}/m.safetensors", "--checkpoint", "{X}"], "is a file"),
        (["predict", "{model}", "--data", "{ragged}", "--out", "{tmp}/p.npy"], "write it as .npz"),
        (["predict", "{model}", "--data", "{X}", "--points", "{ragged}", "--out", "{tmp}/p.npy"], "write it as .npz"),
        (["predict", "{model}", "--data", "{X}", "--points-key", "Z", "--out", "{tmp}/p.npy"], "apply only with --points"),
        (["predict", "{model}", "--data", "{X}", "--batch-size", "0", "--out", "{tmp}/p.npy"], "expected a positive integer"),
    ],
)
def test_bad_arguments_exit_2_before_any_work(argv, message, files, saved, tmp_path, capsys, monkeypatch):
    folder = files[0]
    names = {"X": folder / "X.npy", "y": folder / "y.npy", "tmp": tmp_path, "model": saved,
             "ragged": folder / "X_ragged.npz"}
    argv = [arg.format(**names) for arg in argv]
    monkeypatch.setattr(MeasureTransformerRegressor, "fit", lambda *a, **k: pytest.fail("trained on bad arguments"))
    code, err = _exit(argv, capsys)
    assert code == 2, err
    assert "usage:" in err and message in err, err
    assert not list(tmp_path.glob("p.*")) and not list(tmp_path.glob("m.*"))


def test_query_points_for_other_measures_are_refused_with_the_api_message(files, saved, tmp_path, capsys):
    folder = files[0]
    np.savez(tmp_path / "few.npz", *[np.zeros((2 + i, 2)) for i in range(3)])
    code, err = _exit(["predict", str(saved), "--data", str(folder / "X.npy"), "--points", str(tmp_path / "few.npz"),
                       "--out", str(tmp_path / "p.npz")], capsys)
    assert code == 2 and "--data and --points: X has 10 measures but points has 3 sets of query points" in err
    assert not (tmp_path / "p.npz").exists()


def test_help_lists_fit_and_predict(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "fit" in out and "predict" in out
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    assert "query point" in capsys.readouterr().out


class _WritesAMarker:
    """A pickle payload that, when unpickled, writes a file (what a malicious model file would do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (_touch, (self.marker,))


def _touch(path):
    with open(path, "w") as handle:
        handle.write("ran")


@pytest.mark.parametrize("name", ["evil.joblib", "evil.safetensors"])
def test_predict_refuses_a_pickle_without_allow_pickle_and_never_runs_it(name, files, tmp_path, capsys):
    folder = files[0]
    marker = tmp_path / "payload_ran"
    joblib.dump(_WritesAMarker(marker), tmp_path / name)
    code, err = _exit(["predict", str(tmp_path / name), "--data", str(folder / "X.npy"),
                       "--out", str(tmp_path / "p.npy")], capsys)
    assert code == 2 and "is a pickle" in err and "--allow-pickle" in err
    assert not marker.exists() and not (tmp_path / "p.npy").exists()


def test_predict_refuses_a_damaged_model_file(files, saved, tmp_path, capsys):
    folder = files[0]
    content = bytearray(saved.read_bytes())
    middle = (8 + int.from_bytes(content[:8], "little") + len(content)) // 2  # inside the tensors' bytes
    content[middle:middle + 100] = bytes(100)
    assert content != saved.read_bytes()
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(bytes(content))
    code, err = _exit(["predict", str(damaged), "--data", str(folder / "X.npy"), "--out", str(tmp_path / "p.npy")],
                      capsys)
    assert code == 2 and f"{str(damaged)!r} is damaged" in err and "Copy or download it again" in err
    assert not (tmp_path / "p.npy").exists()


@pytest.mark.slow
def test_allow_pickle_loads_a_trusted_joblib_model(files, saved, tmp_path, capsys):
    folder, X, _, _, _ = files
    joblib.dump(load_model(saved), tmp_path / "trusted.joblib")
    out = tmp_path / "p.npy"
    assert main(["predict", str(tmp_path / "trusted.joblib"), "--allow-pickle", "--data", str(folder / "X.npy"),
                 "--out", str(out), "--quiet"]) == 0
    np.testing.assert_array_equal(np.load(out), load_model(saved).predict(X))


def _fit_command(folder, save, *extra):
    return [sys.executable, "-m", "sklearn_measattn", "fit", "--data", str(folder / "X.npy"), "--y",
            str(folder / "y.npy"), "--save", str(save), "--d-model", "8", "--n-heads", "2", "--n-layers", "1",
            "--batch-size", "2", "--epochs", "40", "--threads", "1", *extra]


@pytest.mark.slow
def test_fit_killed_with_sigkill_resumes_from_its_checkpoint_to_the_uninterrupted_model(files, tmp_path):
    folder, X, _, _, _ = files
    checkpoint = tmp_path / "checkpoint"
    written = checkpoint / "checkpoint.safetensors"
    process = subprocess.Popen(_fit_command(folder, tmp_path / "resumed.safetensors", "--checkpoint", str(checkpoint)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:  # one progress line per epoch: killed without warning after the fifth
        if line.startswith("epoch 5/"):
            os.kill(process.pid, signal.SIGKILL)
            break
    process.wait(timeout=120)
    process.stderr.close()
    assert process.returncode == -signal.SIGKILL and not (tmp_path / "resumed.safetensors").exists()
    assert written.exists()

    rerun = subprocess.run(_fit_command(folder, tmp_path / "resumed.safetensors", "--checkpoint", str(checkpoint)),
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "Resumed from" in rerun.stderr and "epochs were done" in rerun.stderr, rerun.stderr
    uninterrupted = subprocess.run(_fit_command(folder, tmp_path / "straight.safetensors", "--quiet"),
                                   capture_output=True, text=True, timeout=300)
    assert uninterrupted.returncode == 0, uninterrupted.stderr
    resumed, straight = load_model(tmp_path / "resumed.safetensors"), load_model(tmp_path / "straight.safetensors")
    assert len(resumed.history_) == len(straight.history_) == 40
    np.testing.assert_allclose(resumed.predict(X), straight.predict(X), rtol=1e-4, atol=1e-4)
    assert resumed.checkpoint_dir is None  # the saved model does not point at the directory


@pytest.mark.slow
def test_fit_with_a_subsampled_context_equals_the_python_api(files, tmp_path, small_args, small_params):
    folder, X, y, _, _ = files
    assert main(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
                 str(tmp_path / "m.safetensors"), "--context-size", "8", "--quiet", *small_args]) == 0
    loaded = load_model(tmp_path / "m.safetensors")
    assert loaded.context_size == 8
    expected = MeasureTransformerRegressor(**small_params, context_size=8).fit(X, y).predict(X)
    np.testing.assert_allclose(loaded.predict(X), expected, rtol=1e-6, atol=1e-9)


def test_every_fit_option_of_the_table_sets_a_real_estimator_parameter(capsys):
    defaults = MeasureTransformerRegressor().get_params()
    constraints = MeasureTransformerRegressor._parameter_constraints
    assert len({option.flag for option in ESTIMATOR_OPTIONS}) == len(ESTIMATOR_OPTIONS)
    assert len({option.parameter for option in ESTIMATOR_OPTIONS}) == len(ESTIMATOR_OPTIONS)
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    help_text = capsys.readouterr().out
    for option in ESTIMATOR_OPTIONS:
        assert option.parameter in defaults and option.parameter in constraints, option
        assert option.flag in help_text, option


def test_fit_takes_every_kernel_name_the_library_takes():
    parser = build_parser()
    for kernel in ALL_KERNEL_NAMES:
        args = parser.parse_args(["fit", "--data", "X.npy", "--y", "y.npy", "--save", "m.safetensors",
                                  "--kernel", kernel])
        assert estimator_params(args)["kernel"] == kernel


@pytest.mark.parametrize("option, value, params, message", [
    ("--seed", "-1", {"random_state": -1}, "expected a seed, an integer from 0 to 4294967295, got '-1'"),
    ("--seed", str(2**32), {"random_state": 2**32}, "expected a seed"),
    ("--device", "nonsense", {"device": "nonsense"}, None),  # None: the estimator's own message
])
def test_a_value_the_estimator_refuses_is_reported_naming_the_option_before_any_work(
        option, value, params, message, files, tmp_path, capsys, monkeypatch):
    folder, X, y, _, _ = files
    with pytest.raises(ValueError) as api:
        MeasureTransformerRegressor(**params).fit(X, y)
    monkeypatch.setattr(MeasureTransformerRegressor, "fit", lambda *a, **k: pytest.fail("trained on bad arguments"))
    code, err = _exit(["fit", "--data", str(folder / "X.npy"), "--y", str(folder / "y.npy"), "--save",
                       str(tmp_path / "m.safetensors"), option, value], capsys)
    assert code == 2 and "usage:" in err
    assert f"argument {option}: {message or api.value}" in err, err
    assert not (tmp_path / "m.safetensors").exists()


def test_every_option_of_the_table_refuses_what_the_estimator_refuses():
    """Each option's type or choices hold its parameter's domain: a value the option takes, the estimator
    takes (checked by fitting nothing: the parameters are checked before the data)."""
    import argparse

    for option in ESTIMATOR_OPTIONS:
        if option.choices:
            continue  # the choices are checked against the estimator's in test_commands
        for text in ("0", "-1", "1", "2.5", "nan", "inf", "abc", "cpu"):
            try:
                value = option.type(text)
            except argparse.ArgumentTypeError:
                continue
            model = MeasureTransformerRegressor(**{option.parameter: value})
            with pytest.raises((ValueError, TypeError)) as info:
                model.fit(None, None)  # fit checks its parameters first: a valid one gets as far as the data
            assert not isinstance(info.value, InvalidParameterError), (option.flag, text, info.value)


@pytest.mark.slow
def test_predict_batch_size_runs_the_estimators_predict(files, saved, tmp_path):
    folder, X, _, _, _ = files
    out = tmp_path / "p.npy"
    assert main(["predict", str(saved), "--data", str(folder / "X.npy"), "--batch-size", "3", "--out", str(out),
                 "--quiet"]) == 0
    np.testing.assert_allclose(np.load(out), load_model(saved).predict(X), rtol=1e-6, atol=1e-9)
