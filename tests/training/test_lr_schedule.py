"""lr_schedule='onecycle': the learning rate each training batch uses."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse


class _Rates(Callback):
    def __init__(self):
        self.rates = []

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.rates.append(net.optimizer_.param_groups[0]["lr"])


@pytest.fixture(scope="module")
def data():
    return make_matrix_inverse(n_samples=20, n_points=12, random_state=0)


def _fit(data, recorder, **params):
    base = {"d_model": 8, "n_heads": 2, "n_layers": 1, "dim_feedforward": 16, "batch_size": 4, "max_epochs": 10,
            "lr": 1e-2, "random_state": 0, "device": "cpu", "callbacks": [recorder]}
    return MeasureTransformerRegressor(**{**base, **params}).fit(*data)


def test_onecycle_warms_up_to_lr_then_decays(data):
    recorder = _Rates()
    model = _fit(data, recorder, lr_schedule="onecycle")
    rates = np.array(recorder.rates)
    assert len(rates) == 50  # 10 epochs x 5 batches
    peak = int(np.argmax(rates))
    assert peak == 15  # 30% of the steps
    np.testing.assert_allclose(rates[0], 1e-2 / 25)
    np.testing.assert_allclose(rates[peak], 1e-2)
    assert np.all(np.diff(rates[: peak + 1]) > 0) and np.all(np.diff(rates[peak:]) < 0)
    assert rates[-1] < 1e-2 / 100
    # A warm start runs a new cycle over its own epochs.
    recorder.rates.clear()
    model.set_params(warm_start=True, max_epochs=2).fit(*data)
    assert len(recorder.rates) == 10 and np.argmax(recorder.rates) == 3
    np.testing.assert_allclose(recorder.rates[0], 1e-2 / 25)


def test_constant_is_the_default_and_keeps_lr(data):
    recorder = _Rates()
    _fit(data, recorder, max_epochs=2)
    assert set(recorder.rates) == {1e-2}


def test_an_unknown_schedule_is_refused(data):
    with pytest.raises(InvalidParameterError, match="lr_schedule"):
        _fit(data, _Rates(), lr_schedule="cosine")
