"""Checkpoints: a fit killed at any epoch and rerun unchanged ends with the uninterrupted fit's model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor, UnstorableParameterError
from sklearn_measattn.datasets import make_matrix_inverse

CHECKPOINT = "checkpoint.safetensors"


@pytest.fixture(scope="module")
def heavy():
    return make_matrix_inverse(n_samples=12, n_points=10, tail="student_t", tail_index=1.5, random_state=0)


def _params(**changes):
    """Every random stream in use: shuffling, dropout, sliced-loss projections."""
    base = {"d_model": 8, "n_heads": 2, "n_layers": 1, "dim_feedforward": 16, "batch_size": 4, "max_epochs": 5,
            "dropout": 0.2, "loss": "sliced", "shuffle": True, "random_state": 3, "device": "cpu"}
    return {**base, **changes}


class _InterruptAt(Callback):
    """Ctrl-C at the end of ``epoch`` (before that epoch's checkpoint is written)."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epoch:
            raise KeyboardInterrupt


def _weights(model):
    return {name: p.detach().numpy().copy() for name, p in model.net_.module_.named_parameters()}


def _assert_same_fit(resumed, straight, X):
    assert [r["train_loss"] for r in resumed.history_] == [r["train_loss"] for r in straight.history_]
    for name, value in _weights(straight).items():
        np.testing.assert_array_equal(_weights(resumed)[name], value, err_msg=name)
    np.testing.assert_array_equal(resumed.predict(X), straight.predict(X))


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"early_stopping": True, "validation_fraction": 0.25, "patience": 2, "max_epochs": 8, "loss": "energy"},
        {"transform": "symlog", "kernel": "poly", "kernel_params": {"degree": "learn"}, "random_state": None},
        {"context_size": 6, "lr_schedule": "onecycle"},
    ],
    ids=["shuffle-dropout-sliced", "early-stopping", "symlog-learnt-degree-unseeded", "subsampled-context-onecycle"],
)
def test_an_interrupted_fit_resumes_to_the_uninterrupted_model(changes, heavy, tmp_path, capsys):
    X, y = heavy
    params = _params(**changes)
    if params["random_state"] is None:  # unseeded: the resumed fit continues the streams it drew
        straight = None
    else:
        straight = MeasureTransformerRegressor(**params).fit(X, y)
    with pytest.raises(KeyboardInterrupt):
        MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path, callbacks=[_InterruptAt(3)]).fit(X, y)
    assert os.listdir(tmp_path) == [CHECKPOINT]
    resumed = MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    assert "Resumed from" in capsys.readouterr().err
    if straight is not None:
        _assert_same_fit(resumed, straight, X)
    assert len(resumed.history_) <= params["max_epochs"]
    # Run once more: the checkpoint of the finished fit is loaded, without training.
    again = MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    assert "that fit had finished" in capsys.readouterr().err
    _assert_same_fit(again, resumed, X)


@pytest.mark.slow
def test_a_ragged_weighted_fit_resumes(tmp_path):
    X, y = make_matrix_inverse(n_samples=10, n_points=12, tail="pareto", tail_index=0.7, random_state=5)
    X, y = [x[: 5 + i % 6] for i, x in enumerate(X)], [t[: 7 + i % 3] for i, t in enumerate(y)]
    params = _params(transform="symlog", max_epochs=4)
    straight = MeasureTransformerRegressor(**params).fit(X, y)
    with pytest.raises(KeyboardInterrupt):
        MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path, callbacks=[_InterruptAt(2)]).fit(X, y)
    resumed = MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    for got, want in zip(resumed.predict(X), straight.predict(X), strict=True):
        np.testing.assert_array_equal(got, want)


_KILLED_FIT = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from skorch.callbacks import Callback
    from sklearn_measattn import MeasureTransformerRegressor

    class KillAt(Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 3:
                os.kill(os.getpid(), signal.SIGKILL)

    import torch

    torch.set_num_threads(int(sys.argv[4]))  # the test's own count: another count sums in another order
    data = np.load(sys.argv[1])
    params = eval(sys.argv[2])
    MeasureTransformerRegressor(**params, checkpoint_dir=sys.argv[3], callbacks=[KillAt()]).fit(data["X"], data["y"])
    """
)


@pytest.mark.slow
def test_a_fit_killed_with_sigkill_resumes_to_the_uninterrupted_model(heavy, tmp_path):
    X, y = heavy
    params = _params()
    np.savez(tmp_path / "data.npz", X=X, y=y)
    killed = subprocess.run([sys.executable, "-c", _KILLED_FIT, str(tmp_path / "data.npz"), repr(params),
                             str(tmp_path / "ck"), str(torch.get_num_threads())], capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -9, killed.stderr
    resumed = MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path / "ck").fit(X, y)
    _assert_same_fit(resumed, MeasureTransformerRegressor(**params).fit(X, y), X)


@pytest.mark.slow
def test_a_crash_while_writing_leaves_the_previous_checkpoint(heavy, tmp_path, monkeypatch):
    X, y = heavy
    params = _params(max_epochs=4)
    calls = []
    real_replace = os.replace

    def replace_failing_the_third_time(source, target):
        calls.append(target)
        if len(calls) == 3:
            raise OSError("the machine went down while writing")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace_failing_the_third_time)
    with pytest.raises(OSError, match="went down"):
        MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == [CHECKPOINT]
    resumed = MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    _assert_same_fit(resumed, MeasureTransformerRegressor(**params).fit(X, y), X)


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, named",
    [
        ({"lr": 0.01}, "lr=0.001 in the checkpoint, 0.01 now"),
        ({"kernel": "sigmoid"}, "kernel='log' in the checkpoint, 'sigmoid' now"),
        ({"max_epochs": 9}, "max_epochs=5 in the checkpoint, 9 now"),
        ({"data": "values"}, "the X data differ (same shape, different values or weights)"),
        ({"data": "shape"}, "the y data differ (shape (12, 10, 2) in the checkpoint, (12, 6, 2) now)"),
    ],
)
def test_a_checkpoint_of_another_fit_is_refused_naming_the_difference(change, named, heavy, tmp_path):
    X, y = heavy
    params = _params()
    with pytest.raises(KeyboardInterrupt):
        MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path, callbacks=[_InterruptAt(2)]).fit(X, y)
    before = (tmp_path / CHECKPOINT).read_bytes()
    data = change.pop("data", None)
    X2 = X + 1e-3 if data == "values" else X
    y2 = y[:, :6] if data == "shape" else y
    with pytest.raises(ValueError, match="holds the checkpoint of a different fit") as info:
        MeasureTransformerRegressor(**{**params, **change}, checkpoint_dir=tmp_path).fit(X2, y2)
    assert named in str(info.value)
    assert (tmp_path / CHECKPOINT).read_bytes() == before  # untouched
    # What may change: how it reports and where it runs.
    MeasureTransformerRegressor(**{**params, "verbose": 0}, checkpoint_dir=str(tmp_path)).fit(X, y)


def test_bad_checkpoint_settings_are_refused_before_any_work(heavy, tmp_path):
    X, y = heavy
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="is a file; give a directory"):
        MeasureTransformerRegressor(**_params(), checkpoint_dir=tmp_path / "a_file").fit(X, y)
    with pytest.raises(UnstorableParameterError, match="kernel is <function"):
        MeasureTransformerRegressor(**_params(kernel=lambda s: torch.log1p(torch.relu(s))),
                                    checkpoint_dir=tmp_path / "ck").fit(X, y)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        MeasureTransformerRegressor(**_params(), checkpoint_dir=3).fit(X, y)
    with pytest.raises(ValueError, match="partial_fit continues the fitted network in memory"):
        MeasureTransformerRegressor(**_params(), checkpoint_dir=tmp_path / "ck").partial_fit(X, y)
    assert not (tmp_path / "ck").exists()
    model = MeasureTransformerRegressor(**_params(max_epochs=1), warm_start=True).fit(X, y)
    with pytest.raises(ValueError, match="a warm start continues the fitted network in memory"):
        model.set_params(checkpoint_dir=tmp_path / "ck").fit(X, y)
    assert len(model.set_params(checkpoint_dir=None).fit(X, y).history_) == 2
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / CHECKPOINT).write_bytes(b"\x80\x04 not a checkpoint")
    with pytest.raises(ValueError, match="it is a pickle"):
        MeasureTransformerRegressor(**_params(), checkpoint_dir=corrupt).fit(X, y)


def test_the_fitted_model_keeps_no_checkpoint_writer(heavy, tmp_path):
    X, y = heavy
    model = MeasureTransformerRegressor(**_params(max_epochs=2), checkpoint_dir=tmp_path).fit(X, y)
    assert "checkpoint" not in dict(model.net_.callbacks_)
    before = (tmp_path / CHECKPOINT).read_bytes()
    model.predict(X)
    model.set_params(checkpoint_dir=None, warm_start=True).fit(X, y)
    assert (tmp_path / CHECKPOINT).read_bytes() == before


def test_a_damaged_checkpoint_is_refused_on_resume_and_written_with_the_umask(heavy, tmp_path, capsys):
    X, y = heavy
    params = _params(max_epochs=3)
    previous = os.umask(0o022)
    try:
        with pytest.raises(KeyboardInterrupt):
            MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path, callbacks=[_InterruptAt(2)]).fit(X, y)
    finally:
        os.umask(previous)
    path = tmp_path / CHECKPOINT
    assert os.stat(path).st_mode & 0o777 == 0o644
    content = bytearray(path.read_bytes())
    middle = (8 + int.from_bytes(content[:8], "little") + len(content)) // 2  # inside the tensors' bytes
    content[middle:middle + 100] = bytes(byte ^ 0xFF for byte in content[middle:middle + 100])
    path.write_bytes(bytes(content))
    with pytest.raises(ValueError, match="is damaged") as info:
        MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y)
    assert f"delete the checkpoint file {str(path)!r}" in str(info.value)
    assert path.read_bytes() == bytes(content) and "Resumed from" not in capsys.readouterr().err
    path.unlink()  # as the message says: the fit starts afresh
    assert len(MeasureTransformerRegressor(**params, checkpoint_dir=tmp_path).fit(X, y).history_) == 3
    assert "Resumed from" not in capsys.readouterr().err
