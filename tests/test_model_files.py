"""Model files: save_model/load_model round trips through one safetensors file, and bad files refused unrun."""

from __future__ import annotations

import json
import os
import pickle

import joblib
import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from sklearn_measattn import (
    MeasureTransformerRegressor,
    SymlogTransformer,
    UnstorableParameterError,
    load_model,
    save_model,
)
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import energy_loss

# Every kernel family: exponential, polynomial (fixed and learnt degree), logarithmic, bounded, sparse.
KERNELS = [
    ("softmax", None),
    ("poly", {"degree": 2}),
    ("poly", {"degree": "learn"}),
    ("log", None),
    ("sigmoid", None),
    ("softplus", None),
    ("compact", None),
    ("sparsemax", None),
]


@pytest.fixture(scope="module")
def heavy():
    return make_matrix_inverse(n_samples=10, n_points=12, tail="pareto", tail_index=0.7, random_state=0)


def _fit(X, y, **params):
    base = {"d_model": 8, "n_heads": 2, "n_layers": 2, "dim_feedforward": 16, "max_epochs": 2, "batch_size": 4,
            "random_state": 0, "device": "cpu"}
    return MeasureTransformerRegressor(**{**base, **params}).fit(X, y)


def _assert_same_model(loaded, model, X):
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    Z = np.random.default_rng(1).standard_normal((len(X), 5, X.shape[-1]))
    np.testing.assert_array_equal(loaded.transport(X, Z), model.transport(X, Z))
    np.testing.assert_array_equal(loaded.attention_ess(X), model.attention_ess(X))
    np.testing.assert_array_equal(loaded.hidden_similarity(X), model.hidden_similarity(X))
    for key, value in model.learned_kernel_params_.items():
        np.testing.assert_array_equal(loaded.learned_kernel_params_[key], value)
    assert loaded.learned_kernel_params_.keys() == model.learned_kernel_params_.keys()
    assert loaded.get_params() == {**model.get_params(), "callbacks": None}
    assert [row["train_loss"] for row in loaded.history_] == [row["train_loss"] for row in model.history_]
    assert (loaded.n_features_in_, loaded.n_features_out_) == (model.n_features_in_, model.n_features_out_)


@pytest.mark.slow
@pytest.mark.parametrize("transform", [None, "symlog"])
@pytest.mark.parametrize("kernel, kernel_params", KERNELS, ids=[f"{k}-{p}" for k, p in KERNELS])
def test_every_kernel_round_trips_through_one_safetensors_file(kernel, kernel_params, transform, heavy, tmp_path):
    X, y = heavy
    model = _fit(X, y, kernel=kernel, kernel_params=kernel_params, transform=transform, n_layers=1, max_epochs=1)
    path = tmp_path / "model.safetensors"
    save_model(model, path)
    assert os.listdir(tmp_path) == ["model.safetensors"]  # nothing else written, no temporary left
    _assert_same_model(load_model(path), model, X)


@pytest.mark.slow
def test_ragged_weighted_training_and_transformer_objects_round_trip(tmp_path):
    X, y = make_matrix_inverse(n_samples=9, n_points=14, tail="student_t", tail_index=1.0, random_state=2)
    ragged_X, ragged_y = [x[: 6 + i % 5] for i, x in enumerate(X)], [t[: 8 + i % 3] for i, t in enumerate(y)]
    for transform in (SymlogTransformer(scale=2.0), StandardScaler()):
        model = _fit(ragged_X, ragged_y, transform=transform, kernel="log")
        save_model(model, tmp_path / "ragged.safetensors")
        loaded = load_model(tmp_path / "ragged.safetensors")
        for got, want in zip(loaded.predict(ragged_X), model.predict(ragged_X), strict=True):
            np.testing.assert_array_equal(got, want)
        assert type(loaded.transform_X_) is type(transform)
        assert loaded.transform.get_params() == transform.get_params()


@pytest.mark.slow
def test_a_loaded_model_keeps_training_and_pickles(heavy, tmp_path):
    X, y = heavy
    model = _fit(X, y, transform="symlog")
    save_model(model, tmp_path / "m.safetensors")
    loaded = load_model(tmp_path / "m.safetensors", device="cpu")
    loaded.set_params(warm_start=True, max_epochs=1).fit(X, y)
    assert len(loaded.history_) == 3 and not np.array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(loaded)).predict(X), loaded.predict(X))


@pytest.mark.slow
def test_saving_again_replaces_the_file_atomically(heavy, tmp_path, monkeypatch):
    X, y = heavy
    first, second = _fit(X, y, kernel="log"), _fit(X, y, kernel="sigmoid")
    path = tmp_path / "m.safetensors"
    save_model(first, path)
    with monkeypatch.context() as patch:  # the disk fails at the last step of the write
        patch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
        with pytest.raises(OSError, match="disk full"):
            save_model(second, path)
    assert os.listdir(tmp_path) == ["m.safetensors"]  # the temporary file is gone
    np.testing.assert_array_equal(load_model(path).predict(X), first.predict(X))
    save_model(second, path)
    np.testing.assert_array_equal(load_model(path).predict(X), second.predict(X))


# --------------------------------------------------------------------------- #
# What a data-only file cannot hold
# --------------------------------------------------------------------------- #
def _my_log_kernel(scores):
    return torch.log1p(torch.relu(scores))


def _my_loss(x, y, x_weights=None, y_weights=None):
    return energy_loss(x, y, x_weights, y_weights)


@pytest.mark.slow
@pytest.mark.parametrize(
    "params, named",
    [
        ({"kernel": _my_log_kernel}, "kernel is <function _my_log_kernel"),
        ({"loss": _my_loss}, "loss is <function _my_loss"),
        ({"transform": FunctionTransformer(np.arcsinh, np.sinh)}, "transform is FunctionTransformer"),
    ],
)
def test_code_in_the_parameters_is_refused_and_nothing_is_written(params, named, heavy, tmp_path):
    X, y = heavy
    model = _fit(X, y, **params)
    with pytest.raises(UnstorableParameterError, match=named) as info:
        save_model(model, tmp_path / "m.safetensors")
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    assert "joblib.dump" in str(info.value)
    assert os.listdir(tmp_path) == []
    joblib.dump(model, tmp_path / "trusted.joblib")  # a pickle stays available for such models
    np.testing.assert_array_equal(joblib.load(tmp_path / "trusted.joblib").predict(X), model.predict(X))


def test_save_model_needs_a_fitted_regressor(tmp_path):
    with pytest.raises(NotFittedError):
        save_model(MeasureTransformerRegressor(), tmp_path / "m.safetensors")
    with pytest.raises(TypeError, match="saves a fitted MeasureTransformerRegressor, got StandardScaler"):
        save_model(StandardScaler(), tmp_path / "m.safetensors")
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------- #
# Files that are not model files
# --------------------------------------------------------------------------- #
def _write_marker(path):
    with open(path, "w") as handle:
        handle.write("the payload ran")


class _Payload:
    """Unpickling this writes a marker file: what a malicious model file does."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (_write_marker, (self.marker,))


@pytest.fixture()
def good_file(heavy, tmp_path):
    path = tmp_path / "good.safetensors"
    save_model(_fit(*heavy, max_epochs=1), path)
    return path


def _bad_files(folder, good_file, marker):
    good = good_file.read_bytes()
    header_size = int.from_bytes(good[:8], "little")
    header = json.loads(good[8:8 + header_size])
    metadata = json.loads(header["__metadata__"]["sklearn_measattn"])

    def with_metadata(**changes):
        new_header = dict(header)
        new_header["__metadata__"] = {**header["__metadata__"],
                                      "sklearn_measattn": json.dumps({**metadata, **changes})}
        encoded = json.dumps(new_header).encode()
        return len(encoded).to_bytes(8, "little") + encoded + good[8 + header_size:]

    files = {
        "pickle_renamed": pickle.dumps(_Payload(marker)),
        "joblib_renamed": None,
        "compressed_joblib": None,
        "truncated": good[: len(good) - 100],
        "header_cut": good[:40],
        "empty": b"",
        "random_bytes": np.random.default_rng(0).bytes(4096),
        "future_format": with_metadata(format_version=99, package_version="9.0.0"),
        "another_format": with_metadata(format="sklearn-measattn-checkpoint"),
    }
    joblib.dump(_Payload(marker), folder / "joblib_renamed.safetensors")
    joblib.dump(_Payload(marker), folder / "compressed_joblib.safetensors", compress=3)
    save_file({"weight": torch.ones(3)}, str(folder / "plain_tensors.safetensors"))
    for name, content in files.items():
        if content is not None:
            (folder / f"{name}.safetensors").write_bytes(content)
    return [*files, "plain_tensors"]


EXPECTED_REASONS = {
    "pickle_renamed": "it is a pickle",
    "joblib_renamed": "it is a pickle",
    "compressed_joblib": "compressed file",
    "truncated": "it is truncated",
    "header_cut": "header",
    "empty": "it has 0 bytes",
    "random_bytes": "not a sklearn-measattn model file",
    "future_format": "in model-file format 99",
    "another_format": "a training checkpoint",
    "plain_tensors": "without sklearn-measattn metadata",
}


@pytest.mark.slow
def test_files_that_are_not_model_files_are_refused_and_never_run(good_file, tmp_path):
    marker = tmp_path / "payload_ran"
    names = _bad_files(tmp_path, good_file, marker)
    assert set(names) == set(EXPECTED_REASONS)
    for name in names:
        with pytest.raises(ValueError, match=EXPECTED_REASONS[name]) as info:
            load_model(tmp_path / f"{name}.safetensors")
        assert "Nothing in the file was run" in str(info.value), name
    assert not marker.exists()
    with pytest.raises(FileNotFoundError, match="No model file"):
        load_model(tmp_path / "missing.safetensors")
    assert "Upgrade" in _message(tmp_path / "future_format.safetensors")


def test_a_trusted_pickle_loads_only_with_allow_pickle(heavy, tmp_path):
    model = _fit(*heavy, max_epochs=1)
    path = tmp_path / "trusted.joblib"
    joblib.dump(model, path)
    with pytest.raises(ValueError, match=r"it is a pickle.*allow_pickle=True"):
        load_model(path)
    loaded = load_model(path, allow_pickle=True)
    np.testing.assert_array_equal(loaded.predict(heavy[0]), model.predict(heavy[0]))
    joblib.dump({"not": "a model"}, tmp_path / "dict.joblib")
    with pytest.raises(ValueError, match="holds a dict, not a MeasureTransformerRegressor"):
        load_model(tmp_path / "dict.joblib", allow_pickle=True)
    joblib.dump(MeasureTransformerRegressor(), tmp_path / "unfitted.joblib")
    with pytest.raises(ValueError, match="unfitted MeasureTransformerRegressor; fit it first"):
        load_model(tmp_path / "unfitted.joblib", allow_pickle=True)
    # a model file loads as before with the keyword set
    save_model(model, tmp_path / "model.safetensors")
    np.testing.assert_array_equal(load_model(tmp_path / "model.safetensors", allow_pickle=True).predict(heavy[0]),
                                  model.predict(heavy[0]))


def _message(path):
    with pytest.raises(ValueError) as info:
        load_model(path)
    return str(info.value)


@pytest.mark.slow
def test_a_file_from_another_minor_version_loads_with_a_warning(good_file, heavy, tmp_path, monkeypatch):
    import sklearn_measattn

    expected = load_model(good_file).predict(heavy[0])
    monkeypatch.setattr(sklearn_measattn._version, "__version__", "0.9.0")
    with pytest.warns(UserWarning, match="written by sklearn-measattn 0.1.0; this is 0.9.0"):
        loaded = load_model(good_file)
    np.testing.assert_array_equal(loaded.predict(heavy[0]), expected)


@pytest.mark.slow
def test_a_model_saved_for_cuda_loads_on_the_cpu_with_a_warning(heavy, tmp_path, monkeypatch):
    import sklearn_measattn._model_files as model_files

    model = _fit(*heavy)
    original = model_files.estimator_params_as_data
    monkeypatch.setattr(model_files, "estimator_params_as_data",
                        lambda estimator: {**original(estimator), "device": "cuda:3"})
    save_model(model, tmp_path / "m.safetensors")
    monkeypatch.undo()
    if torch.cuda.device_count() > 3:
        pytest.skip("this machine has a cuda:3")
    with pytest.warns(UserWarning, match="device='cuda:3', which this machine lacks; it is loaded on the CPU"):
        loaded = load_model(tmp_path / "m.safetensors")
    assert loaded.device == "cuda:3" and loaded.device_ == "cpu"
    np.testing.assert_array_equal(loaded.predict(heavy[0]), model.predict(heavy[0]))


def _header_size(path):
    with open(path, "rb") as file:
        return int.from_bytes(file.read(8), "little")


@pytest.mark.slow
@pytest.mark.parametrize("leading_bytes", [b"\x80\x12", b"\x80\x14", b"x\x9c"], ids=["pickle", "pickle-2", "zlib"])
def test_a_header_length_that_starts_like_another_format_still_loads(leading_bytes, heavy, tmp_path):
    """A safetensors file starts with its header's length, whose bytes can read as another format's
    signature (a length of 0x1280 starts b"\x80", as every pickle does). Such a model file loads;
    a real pickle is still refused."""
    import sklearn_measattn._persistence as persistence
    from sklearn_measattn._model_files import fitted_state

    model = _fit(*heavy)
    tensors, metadata = fitted_state(model)
    path = tmp_path / "m.safetensors"
    target = int.from_bytes(leading_bytes, "little")
    padding = 0
    for _ in range(8):  # pad the metadata until the JSON header has exactly that length
        persistence.write_state(path, tensors, {**metadata, "padding": "x" * padding})
        if _header_size(path) == target:
            break
        padding += target - _header_size(path)
    assert _header_size(path) == target and path.read_bytes().startswith(leading_bytes)
    np.testing.assert_array_equal(load_model(path).predict(heavy[0]), model.predict(heavy[0]))
    assert not persistence.is_pickle_like(path)
    pickled = tmp_path / "m.pkl"
    pickled.write_bytes(pickle.dumps(model, protocol=4))
    assert persistence.is_pickle_like(pickled)
    with pytest.raises(ValueError, match="it is a pickle"):
        load_model(pickled)


# --------------------------------------------------------------------------- #
# Damaged files, files without a digest, permissions
# --------------------------------------------------------------------------- #
def _header(content):
    size = int.from_bytes(content[:8], "little")
    return size, json.loads(content[8:8 + size])


@pytest.mark.slow
def test_a_model_file_with_bytes_changed_in_a_tensor_is_refused_as_damaged(good_file):
    content = bytearray(good_file.read_bytes())
    size, header = _header(content)
    name = max((key for key in header if key.startswith("module.")),
               key=lambda key: header[key]["data_offsets"][1] - header[key]["data_offsets"][0])
    begin, end = header[name]["data_offsets"]
    assert end - begin >= 200, name
    start = 8 + size + begin + 50
    content[start:start + 100] = bytes(byte ^ 0xFF for byte in content[start:start + 100])
    damaged = good_file.with_name("damaged.safetensors")
    damaged.write_bytes(bytes(content))
    message = _message(damaged)
    assert f"{str(damaged)!r} is damaged" in message and "Copy or download it again" in message
    load_model(good_file)  # the intact file it was copied from loads


@pytest.mark.slow
def test_a_model_file_with_changed_metadata_is_refused_as_damaged(good_file):
    content = good_file.read_bytes()
    size, header = _header(content)
    assert len(header["__metadata__"]["sklearn_measattn_sha256"]) == 64
    metadata = json.loads(header["__metadata__"]["sklearn_measattn"])
    assert metadata["params"]["lr"] != 0.5
    metadata["params"]["lr"] = 0.5  # still a valid model file, but not the one that was saved
    header["__metadata__"]["sklearn_measattn"] = json.dumps(metadata)
    encoded = json.dumps(header).encode()
    changed = good_file.with_name("changed.safetensors")
    changed.write_bytes(len(encoded).to_bytes(8, "little") + encoded + content[8 + size:])
    assert f"{str(changed)!r} is damaged" in _message(changed)


@pytest.mark.slow
def test_a_model_file_saved_without_a_digest_loads_without_a_warning(heavy, tmp_path, recwarn):
    from safetensors.torch import save

    from sklearn_measattn._model_files import fitted_state

    model = _fit(*heavy, n_layers=1, max_epochs=1)
    tensors, metadata = fitted_state(model)
    path = tmp_path / "old.safetensors"  # written as save_model wrote files before it recorded a digest
    path.write_bytes(save(tensors, metadata={"format": "pt", "sklearn_measattn": json.dumps(metadata)}))
    assert "sklearn_measattn_sha256" not in _header(path.read_bytes())[1]["__metadata__"]
    np.testing.assert_array_equal(load_model(path).predict(heavy[0]), model.predict(heavy[0]))
    assert not recwarn.list


@pytest.mark.parametrize("umask", [0o027, 0o002])
def test_a_model_file_gets_the_permissions_of_the_umask(umask, heavy, tmp_path):
    model = _fit(*heavy, n_layers=1, max_epochs=1)
    path = tmp_path / "m.safetensors"
    previous = os.umask(umask)
    try:
        save_model(model, path)
        save_model(model, path)  # replacing a file: the new one gets the same permissions
    finally:
        os.umask(previous)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["m.safetensors"]
