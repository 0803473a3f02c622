"""Arrays with negative or other strides work wherever an array does, with the results of their contiguous copies."""

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.metrics import energy_distance, mmd, wasserstein_distance


@pytest.fixture(scope="module")
def strided():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 20, 6))[:, ::2, ::-2]  # negative strides on the features, every other point
    y = rng.standard_normal((8, 6, 4))[:, :, ::-1]
    assert X.strides[2] < 0 and not X.flags.c_contiguous
    return X, y


def _model():
    return MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=2, random_state=0)


def test_fit_predict_transport_and_ess_equal_the_contiguous_copys(strided):
    X, y = strided
    on_view, on_copy = _model().fit(X, y), _model().fit(X.copy(), y.copy())
    np.testing.assert_allclose(on_view.predict(X), on_copy.predict(X.copy()), rtol=1e-6, atol=1e-7)
    Z = X[:, ::-1, :]
    np.testing.assert_allclose(on_view.transport(X, Z), on_copy.transport(X.copy(), Z.copy()), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(on_view.attention_ess(X), on_copy.attention_ess(X.copy()), rtol=1e-6)
    assert np.isfinite(on_view.score(X, y))


def test_metrics_take_strided_arrays(strided):
    X, _ = strided
    Y = X[::-1]
    assert energy_distance(X, Y) == pytest.approx(energy_distance(X.copy(), Y.copy()))
    assert wasserstein_distance(X, Y) == pytest.approx(wasserstein_distance(X.copy(), Y.copy()))
    assert mmd(X, Y) == pytest.approx(mmd(X.copy(), Y.copy()))
