"""Numerical extremes in training: heavy tails up to 1e30 and beyond.

What the package guarantees (float32 training):

- with ``transform="symlog"`` every kernel trains with finite losses and
  predicts finite values on data with magnitudes up to 1e30 (and 1e300);
- without a transform, data up to about 1e15 trains finitely with the slow
  kernels; beyond about 1e19 float32 overflows (attention scores <q, k> ~ |x|^2
  and the energy loss's |x - y|^2 exceed 3.4e38), and training stops at the
  first non-finite batch with a ``FloatingPointError`` that names the cause and
  suggests ``transform="symlog"``; the estimator is left unfitted;
- values beyond the float32 range (|x| > 3.4e38) are rejected before training
  with a ``ValueError`` suggesting ``transform="symlog"``;
- ``predict`` never returns NaN: a non-finite network output raises
  ``FloatingPointError``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import energy_loss

TINY = dict(d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, max_epochs=2, batch_size=8, random_state=0)


@pytest.fixture(scope="module")
def heavy():
    """Pareto(alpha=1) measures with one point per measure pushed to +-1e30."""
    X, y = make_matrix_inverse(n_samples=8, n_points=12, tail="pareto", tail_index=1.0, random_state=0)
    return X, y


def _extreme(A, top=1e30):
    A = A.copy()
    A[:, 0, 0] = np.where(np.arange(len(A)) % 2, top, -top)
    return A


def _assert_trained_finite(model, X):
    losses = np.asarray(model.history_[:, "train_loss"], dtype=float)
    assert np.all(np.isfinite(losses)), losses
    pred = model.predict(X)
    assert np.all(np.isfinite(pred))
    return pred


@pytest.mark.parametrize("kernel", ["log", "sigmoid", "softmax"])
def test_symlog_trains_finite_at_1e30(heavy, kernel):
    X, y = heavy
    Xe, ye = _extreme(X), _extreme(y)
    model = MeasureTransformerRegressor(**TINY, kernel=kernel, transform="symlog").fit(Xe, ye)
    pred = _assert_trained_finite(model, Xe)
    assert pred.shape == ye.shape


@pytest.mark.parametrize("kernel", ["log", "sigmoid"])
def test_symlog_trains_finite_at_1e300(heavy, kernel):
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY, kernel=kernel, transform="symlog")
    _assert_trained_finite(model.fit(_extreme(X, 1e300), _extreme(y, 1e300)), _extreme(X, 1e300))


@pytest.mark.parametrize("kernel", ["log", "sigmoid"])
def test_raw_heavy_tailed_data_train_finite_up_to_1e15(heavy, kernel):
    """Slow kernels, no transform: inputs and targets up to 1e15 (float32 squares stay finite)."""
    X, y = heavy
    Xe, ye = _extreme(X, 1e15), _extreme(y, 1e15)
    model = MeasureTransformerRegressor(**TINY, kernel=kernel).fit(Xe, ye)
    _assert_trained_finite(model, Xe)


@pytest.mark.parametrize("kernel", ["softmax", "log", "sigmoid"])
def test_raw_1e30_inputs_stop_with_clear_error(heavy, kernel):
    """Inputs of 1e30 without symlog: attention scores overflow float32; training stops."""
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY, kernel=kernel)
    # The error names the stage that failed: the forward pass, not the loss.
    with pytest.raises(FloatingPointError, match=r"forward pass produced non-finite outputs \(nan\) at epoch 1.*transform='symlog'"):
        model.fit(_extreme(X), y)
    assert not hasattr(model, "net_")


def test_energy_loss_propagates_non_finite_predictions():
    """Regression: NaN/inf predicted points used to be masked to distance 0, giving a
    finite (even negative) loss, so overflow went undetected and the weights became NaN."""
    x = torch.zeros(1, 3, 2)
    y = torch.ones(1, 3, 2)
    for bad in (float("nan"), float("inf")):
        x_bad = x.clone()
        x_bad[0, 0, 0] = bad
        for beta in (0.5, 1.0, 1.5):
            assert not torch.isfinite(energy_loss(x_bad, y, beta=beta))
    assert torch.isfinite(energy_loss(x, y)) and energy_loss(x, x) == 0


@pytest.mark.parametrize("kernel", ["softmax", "log", "sigmoid"])
def test_raw_extreme_targets_stop_with_clear_error(heavy, kernel):
    """Targets of 1e30 overflow the float32 loss: a clear error, and no half-fitted model."""
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY, kernel=kernel)
    with pytest.raises(FloatingPointError) as info:
        model.fit(_extreme(X), _extreme(y))
    message = str(info.value)
    assert "transform='symlog'" in message
    assert "overflow" in message and "nan" in message.lower()
    assert not hasattr(model, "net_")
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


def test_failed_refit_leaves_unfitted(heavy):
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY).fit(X, y)
    assert hasattr(model, "net_")
    with pytest.raises(FloatingPointError, match="symlog"):
        model.fit(_extreme(X), _extreme(y))
    for attribute in ("net_", "n_features_in_", "transform_X_", "device_"):
        assert not hasattr(model, attribute), attribute
    with pytest.raises(NotFittedError):
        model.predict(X)


def test_forced_non_finite_loss_stops_at_first_batch(heavy):
    """A loss that is inf (forced) is refused before training, naming the loss."""
    X, y = heavy
    calls = []

    def exploding_loss(y_pred, y_true, pred_weights=None, true_weights=None):
        calls.append(1)
        return (y_pred - y_pred.detach()).sum() + float("inf")

    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 5, "batch_size": 4}, loss=exploding_loss)
    with pytest.raises(ValueError, match=r"loss='exploding_loss' returned inf on a finite test batch"):
        model.fit(X, y)
    assert len(calls) == 1  # the probe call before training, not 5 epochs of batches
    assert not hasattr(model, "net_")


def test_beyond_float32_range_rejected_before_training(heavy):
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY)
    with pytest.raises(ValueError, match=r"float32 range.*symlog"):
        model.fit(_extreme(X, 1e300), y)
    with pytest.raises(ValueError, match=r"^y .*float32 range.*symlog"):
        model.fit(X, _extreme(y, 1e300))
    assert not hasattr(model, "net_")


def test_predict_never_returns_nan(heavy):
    """Extreme inputs at predict time: finite output or a clear error."""
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY, kernel="softmax").fit(X, y)
    for top in (1e10, 1e30, 1e38):
        try:
            pred = model.predict(_extreme(X, top))
        except FloatingPointError as exc:
            assert "transform='symlog'" in str(exc)
        else:
            assert np.all(np.isfinite(pred)), top
    with pytest.raises(ValueError, match=r"float32 range.*symlog"):
        model.predict(_extreme(X, 1e300))


def test_predict_non_finite_output_raises(heavy, monkeypatch):
    """If the net ever outputs NaN, predict raises instead of returning it."""
    X, y = heavy
    model = MeasureTransformerRegressor(**TINY).fit(X, y)
    monkeypatch.setattr(type(model.net_), "predict", lambda self, X: np.full((8, 12, 2), np.nan, np.float32))
    with pytest.raises(FloatingPointError, match=r"non-finite predictions.*symlog"):
        model.predict(X)
