"""Persistence: pickle/joblib round trips, CUDA-trained models on CPU, version stamps."""

from __future__ import annotations

import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
import torch.serialization
from skorch.exceptions import DeviceWarning

import sklearn_measattn
from sklearn_measattn import MeasureTransformerRegressor


@pytest.fixture(scope="module")
def one_epoch_params(seeded_tiny_params):
    """The seeded tiny regressor, trained one epoch."""
    return {**seeded_tiny_params, "max_epochs": 1}


@pytest.fixture(scope="module", params=[None, "symlog"], ids=["raw", "symlog"])
def fitted(request, data, one_epoch_params):
    return MeasureTransformerRegressor(**one_epoch_params, transform=request.param, kernel="sigmoid").fit(*data)


def _joblib_round_trip(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


@pytest.mark.slow
@pytest.mark.parametrize("round_trip", [lambda m: pickle.loads(pickle.dumps(m)), _joblib_round_trip], ids=["pickle", "joblib"])
def test_round_trip_identical_predictions(fitted, data, round_trip):
    X, y = data
    expected = fitted.predict(X)
    loaded = round_trip(fitted)
    assert loaded is not fitted
    np.testing.assert_array_equal(loaded.predict(X), expected)
    assert loaded.score(X, y) == fitted.score(X, y)
    assert loaded.get_params() == fitted.get_params()
    assert loaded.device_ == fitted.device_ == "cpu"


@pytest.mark.slow
def test_unfitted_round_trip(data, one_epoch_params):
    model = MeasureTransformerRegressor(**one_epoch_params)
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.fit(*data).predict(data[0]), model.fit(*data).predict(data[0]))


# --------------------------------------------------------------------------- #
# A model trained on CUDA, loaded on a CPU-only machine
# --------------------------------------------------------------------------- #
def _cuda_pickle(model, monkeypatch):
    """Pickle ``model`` as if it had been trained on device "cuda".

    The estimator and its skorch net claim device "cuda", and every tensor storage
    is serialised with location tag "cuda:0" (``torch.serialization.location_tag``
    is what torch writes into the payload), exactly what a CUDA-trained model holds.
    """
    model.device = "cuda"
    model.net_.device = "cuda"
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        payload = pickle.dumps(model)
        tensor_payload = pickle.dumps(torch.ones(2))
    return payload, tensor_payload


@pytest.mark.slow
def test_cuda_trained_model_loads_and_predicts_on_cpu(data, monkeypatch, one_epoch_params):
    X, y = data
    model = MeasureTransformerRegressor(**one_epoch_params).fit(X, y)
    expected = model.predict(X)
    payload, tensor_payload = _cuda_pickle(model, monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    # The payload really is CUDA-tagged: plain unpickling of such a tensor fails on CPU.
    with pytest.raises(RuntimeError, match="CUDA"):
        pickle.loads(tensor_payload)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = pickle.loads(payload)
    messages = [str(w.message) for w in caught]
    assert any(issubclass(w.category, DeviceWarning) for w in caught), messages
    assert any("requested device (cuda) is not available" in m for m in messages), messages

    assert torch.device(loaded.net_.device) == torch.device("cpu")
    assert loaded.device_ == "cpu"
    assert all(p.device.type == "cpu" for p in loaded.net_.module_.parameters())
    np.testing.assert_array_equal(loaded.predict(X), expected)
    # Refitting needs a usable device: the user's "cuda" param is kept and explained.
    with pytest.raises(ValueError, match="CUDA is not available"):
        loaded.fit(X, y)
    loaded.set_params(device="cpu").fit(X, y)


# --------------------------------------------------------------------------- #
# Version stamps
# --------------------------------------------------------------------------- #
@pytest.mark.slow
def test_state_is_version_stamped(fitted):
    state = fitted.__getstate__()
    assert state["_sklearn_measattn_version"] == sklearn_measattn.__version__
    assert "_sklearn_measattn_version" not in pickle.loads(pickle.dumps(fitted)).__dict__


def _bump(version, minor=0, patch=0):
    major_, minor_, patch_ = (int(p) for p in version.split(".")[:3])
    return f"{major_}.{minor_ + minor}.{patch_ + patch}"


@pytest.mark.parametrize("how", ["pickle", "joblib"])
def test_incompatible_version_gives_clear_error(fitted, monkeypatch, how):
    current = sklearn_measattn.__version__
    other = _bump(current, minor=1)
    with monkeypatch.context() as patch:
        patch.setattr(sklearn_measattn._version, "__version__", other)
        if how == "pickle":
            payload = pickle.dumps(fitted)
        else:
            buffer = io.BytesIO()
            joblib.dump(fitted, buffer)
            payload = buffer.getvalue()
    with pytest.raises(RuntimeError) as info:
        pickle.loads(payload) if how == "pickle" else joblib.load(io.BytesIO(payload))
    message = str(info.value)
    assert other in message and current in message
    assert "refit" in message


@pytest.mark.slow
def test_patch_version_difference_loads(fitted, data, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(sklearn_measattn._version, "__version__", _bump(sklearn_measattn.__version__, patch=7))
        payload = pickle.dumps(fitted)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = pickle.loads(payload)
    np.testing.assert_array_equal(loaded.predict(data[0]), fitted.predict(data[0]))


@pytest.mark.slow
def test_missing_version_stamp_warns(fitted, data, monkeypatch):
    original = MeasureTransformerRegressor.__getstate__

    def unstamped(self):
        state = original(self)
        del state["_sklearn_measattn_version"]
        return state

    with monkeypatch.context() as patch:
        patch.setattr(MeasureTransformerRegressor, "__getstate__", unstamped)
        payload = pickle.dumps(fitted)
    with pytest.warns(UserWarning, match="without a sklearn_measattn version stamp"):
        loaded = pickle.loads(payload)
    np.testing.assert_array_equal(loaded.predict(data[0]), fitted.predict(data[0]))
