"""Data-parallel training (distributed=True) on two gloo processes of this CPU."""

import os
import pickle

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse


@pytest.fixture(scope="module")
def distributed_params(tiny_network):
    """The tiny network on the CPU, seeded; a plain dict, passed to the worker processes."""
    return {**tiny_network, "lr": 3e-3, "random_state": 0, "device": "cpu"}


def _data():
    return make_matrix_inverse(n_samples=16, n_points=8, tail="student_t", tail_index=2.0, random_state=0)


def _ragged():
    X, y = make_matrix_inverse(n_samples=12, n_points=10, tail="pareto", tail_index=0.7, random_state=1)
    return [x[: 6 + i % 4] for i, x in enumerate(X)], list(y)


_CALLS = []


def _nan_on_rank_one(x, y, *weights):
    """A loss that turns NaN in training on the second process only (its first call is fit's probe)."""
    from sklearn_measattn.losses import energy_loss

    _CALLS.append(1)
    value = energy_loss(x, y, *weights)
    return value * float("nan") if dist.get_rank() == 1 and len(_CALLS) > 1 else value


def _cases(rank, out, tiny):
    """What each process does; results go to ``out/<case>_<rank>.pkl``."""
    X, y = _data()
    model = MeasureTransformerRegressor(batch_size=2, max_epochs=2, shuffle=False, distributed=True, **tiny)
    model.fit(X, y)
    params = {name: p.detach().numpy().copy() for name, p in model.net_.module_.named_parameters()}
    _save(out, "equivalence", rank, {"params": params, "history": [e["train_loss"] for e in model.history_]})

    Xr, yr = _ragged()
    model = MeasureTransformerRegressor(batch_size=3, max_epochs=2, transform="symlog", distributed=True, **tiny)
    model.fit(Xr, yr)
    _save(out, "ragged", rank, {"prediction": [p.copy() for p in model.predict(Xr[:3])],
                                "model": pickle.dumps(model) if rank == 0 else None})

    errors = {}
    for name, make in (("different_data", lambda: (X + rank, y)),
                       ("non_finite", lambda: (X, y))):
        loss = _nan_on_rank_one if name == "non_finite" else "energy"
        try:
            MeasureTransformerRegressor(batch_size=2, max_epochs=1, loss=loss, distributed=True, **tiny).fit(*make())
        except (ValueError, FloatingPointError) as exc:
            errors[name] = (type(exc).__name__, str(exc))
    try:
        MeasureTransformerRegressor(distributed=True, **tiny).partial_fit(X, y)
    except ValueError as exc:
        errors["partial_fit"] = ("ValueError", str(exc))
    _save(out, "errors", rank, errors)

    # Both processes stopped at the end of epoch 2 (Ctrl-C), then the same fit again: it resumes.
    checkpoint_dir = os.path.join(out, "checkpoint")
    params = {"batch_size": 2, "max_epochs": 4, "dropout": 0.1, "distributed": True, **tiny}
    try:
        MeasureTransformerRegressor(**params, checkpoint_dir=checkpoint_dir, callbacks=[_InterruptAtTwo()]).fit(X, y)
    except KeyboardInterrupt:
        pass
    dist.barrier()
    files = sorted(os.listdir(checkpoint_dir))
    resumed = MeasureTransformerRegressor(**params, checkpoint_dir=checkpoint_dir).fit(X, y)
    straight = MeasureTransformerRegressor(**params).fit(X, y)
    _save(out, "checkpoint", rank, {"files": files, "resumed": resumed.predict(X), "straight": straight.predict(X),
                                    "epochs": len(resumed.history_)})


class _InterruptAtTwo(Callback):
    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == 2:
            raise KeyboardInterrupt


def _save(out, case, rank, value):
    with open(os.path.join(out, f"{case}_{rank}.pkl"), "wb") as handle:
        pickle.dump(value, handle)


def _worker(rank, world_size, init_file, out, tiny):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        _cases(rank, out, tiny)
    finally:
        dist.destroy_process_group()
    # Every result is on disk. Leave without the interpreter's teardown: gloo's
    # threads occasionally abort in static destructors at exit ("terminate called
    # without an active exception"), which would fail a run whose work is done.
    os._exit(0)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, distributed_params):
    out = tmp_path_factory.mktemp("distributed")
    mp.spawn(_worker, args=(2, str(out / "rendezvous"), str(out), distributed_params), nprocs=2, join=True)

    def load(case):
        results = []
        for rank in (0, 1):
            with open(out / f"{case}_{rank}.pkl", "rb") as handle:
                results.append(pickle.load(handle))
        return results

    return load


@pytest.mark.slow
def test_two_processes_train_as_one_with_the_global_batch(two_processes, distributed_params):
    """Unshuffled, 2 processes x batch 2 take the steps of 1 process x batch 4; the replicas are identical."""
    first, second = two_processes("equivalence")
    for name in first["params"]:
        np.testing.assert_array_equal(first["params"][name], second["params"][name])
    assert first["history"] == second["history"]  # the logged loss is the mean over processes

    X, y = _data()
    single = MeasureTransformerRegressor(batch_size=4, max_epochs=2, shuffle=False, **distributed_params).fit(X, y)
    for name, p in single.net_.module_.named_parameters():
        np.testing.assert_allclose(first["params"][name], p.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(first["history"], [e["train_loss"] for e in single.history_], rtol=1e-5)


@pytest.mark.slow
def test_ragged_symlog_fit_predicts_alike_and_pickles_to_one_process(two_processes):
    first, second = two_processes("ragged")
    for a, b in zip(first["prediction"], second["prediction"]):
        np.testing.assert_array_equal(a, b)
    model = pickle.loads(first["model"])
    Xr, _ = _ragged()
    for a, b in zip(model.predict(Xr[:3]), first["prediction"]):  # here: no process group at all
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert model.transform_X_ is not None and model.history_ is not None


@pytest.mark.slow
def test_failures_stop_every_process_with_a_clear_error(two_processes):
    first, second = two_processes("errors")
    for errors in (first, second):
        kind, message = errors["different_data"]
        assert kind == "ValueError" and "same X and y on every process" in message
        kind, message = errors["non_finite"]
        assert kind == "FloatingPointError"
        assert errors["partial_fit"][0] == "ValueError" and "partial_fit" in errors["partial_fit"][1]
    assert "Another training process" in first["non_finite"][1]  # rank 0 was fine: it says who failed
    assert "user loss" in second["non_finite"][1]


def test_distributed_without_a_launcher_says_how_to_launch(monkeypatch, distributed_params):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    X, y = _data()
    model = MeasureTransformerRegressor(distributed=True, **distributed_params)
    with pytest.raises(ValueError, match="torchrun --standalone --nproc_per_node"):
        model.fit(X, y)
    assert not hasattr(model, "net_")
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT"):
        model.fit(X, y)


@pytest.mark.slow
def test_a_checkpointed_distributed_fit_resumes_on_every_process(two_processes):
    first, second = two_processes("checkpoint")
    assert first["files"] == second["files"] == ["checkpoint.safetensors"]  # one file, from the first process
    assert first["epochs"] == second["epochs"] == 4
    np.testing.assert_array_equal(first["resumed"], second["resumed"])
    np.testing.assert_allclose(first["resumed"], first["straight"], rtol=1e-6, atol=1e-7)
