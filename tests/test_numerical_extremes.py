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
  ``FloatingPointError``, and so does a user transform whose inverse gives NaN;
  a transform that gives NaN is refused before training.

The metrics keep their values across the float64 range: homogeneous metrics
scale exactly from 1e-200 to 1e300, weights whose sum overflows are normalised,
and the attention ESS is computed (or refused with a clear error) at extreme
scales.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import energy_loss
from sklearn_measattn.metrics import (
    across_sample_correlation,
    attention_ess,
    energy_distance,
    mmd,
    spread_ratio,
    wasserstein_distance,
)


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
def test_symlog_trains_finite_at_1e30(heavy, kernel, seeded_tiny_params):
    X, y = heavy
    Xe, ye = _extreme(X), _extreme(y)
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel=kernel, transform="symlog").fit(Xe, ye)
    pred = _assert_trained_finite(model, Xe)
    assert pred.shape == ye.shape


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["log", "sigmoid"])
def test_symlog_trains_finite_at_1e300(heavy, kernel, seeded_tiny_params):
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel=kernel, transform="symlog")
    _assert_trained_finite(model.fit(_extreme(X, 1e300), _extreme(y, 1e300)), _extreme(X, 1e300))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["log", "sigmoid"])
def test_raw_heavy_tailed_data_train_finite_up_to_1e15(heavy, kernel, seeded_tiny_params):
    """Slow kernels, no transform: inputs and targets up to 1e15 (float32 squares stay finite)."""
    X, y = heavy
    Xe, ye = _extreme(X, 1e15), _extreme(y, 1e15)
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel=kernel).fit(Xe, ye)
    _assert_trained_finite(model, Xe)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["softmax", "log", "sigmoid"])
def test_raw_1e30_inputs_stop_with_clear_error(heavy, kernel, seeded_tiny_params):
    """Inputs of 1e30 without symlog: attention scores overflow float32; training stops."""
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel=kernel)
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


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["softmax", "log", "sigmoid"])
def test_raw_extreme_targets_stop_with_clear_error(heavy, kernel, seeded_tiny_params):
    """Targets of 1e30 overflow the float32 loss: a clear error, and no half-fitted model."""
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel=kernel)
    with pytest.raises(FloatingPointError) as info:
        model.fit(_extreme(X), _extreme(y))
    message = str(info.value)
    assert "transform='symlog'" in message
    assert "overflow" in message and "nan" in message.lower()
    assert not hasattr(model, "net_")
    with pytest.raises(NotFittedError):
        check_is_fitted(model)


@pytest.mark.slow
def test_failed_refit_leaves_unfitted(heavy, seeded_tiny_params):
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params).fit(X, y)
    assert hasattr(model, "net_")
    with pytest.raises(FloatingPointError, match="symlog"):
        model.fit(_extreme(X), _extreme(y))
    for attribute in ("net_", "n_features_in_", "transform_X_", "device_"):
        assert not hasattr(model, attribute), attribute
    with pytest.raises(NotFittedError):
        model.predict(X)


def test_forced_non_finite_loss_stops_at_first_batch(heavy, seeded_tiny_params):
    """A loss that is inf (forced) is refused before training, naming the loss."""
    X, y = heavy
    calls = []

    def exploding_loss(y_pred, y_true, pred_weights=None, true_weights=None):
        calls.append(1)
        return (y_pred - y_pred.detach()).sum() + float("inf")

    model = MeasureTransformerRegressor(**{**seeded_tiny_params, "max_epochs": 5, "batch_size": 4}, loss=exploding_loss)
    with pytest.raises(ValueError, match=r"loss='exploding_loss' returned inf on a finite test batch"):
        model.fit(X, y)
    assert len(calls) == 1  # the probe call before training, not 5 epochs of batches
    assert not hasattr(model, "net_")


def test_beyond_float32_range_rejected_before_training(heavy, seeded_tiny_params):
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params)
    with pytest.raises(ValueError, match=r"float32 range.*symlog"):
        model.fit(_extreme(X, 1e300), y)
    with pytest.raises(ValueError, match=r"^y .*float32 range.*symlog"):
        model.fit(X, _extreme(y, 1e300))
    assert not hasattr(model, "net_")


@pytest.mark.parametrize("value, message, dtype", [
    (1e300, "magnitude up to 1e[+]300", np.float64), (-1e300, "magnitude up to 1e[+]300", np.float64),
    *[(value, message, dtype) for dtype in (np.float64, np.float32)
      for value, message in ((np.inf, "produced inf"), (-np.inf, "produced inf"), (np.nan, "produced NaN"))],
])
def test_float32_range_check_finds_one_bad_value_of_either_sign(value, message, dtype):
    from sklearn_measattn._validation import check_float32_range

    X = np.zeros((3, 4, 2))
    X[1, 2, 1] = value
    with pytest.raises(ValueError, match=message):
        check_float32_range(X.astype(dtype), "X", None)
    X[1, 2, 1] = -3.4e38  # the float32 range's edge passes, as does an empty batch
    check_float32_range(X.astype(dtype), "X", None)
    check_float32_range(np.zeros((0, 4, 2), dtype=dtype), "X", None)


def test_float32_training_data_are_not_copied():
    from sklearn_measattn._training._net import as_batch

    X = np.ones((5, 3, 2), dtype=np.float32)
    assert as_batch(X, None, None)["X"] is X
    assert as_batch(X.astype(np.float64), None, None)["X"].dtype == np.float32


@pytest.mark.slow
def test_predict_never_returns_nan(heavy, seeded_tiny_params):
    """Extreme inputs at predict time: finite output or a clear error."""
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params, kernel="softmax").fit(X, y)
    for top in (1e10, 1e30, 1e38):
        try:
            pred = model.predict(_extreme(X, top))
        except FloatingPointError as exc:
            assert "transform='symlog'" in str(exc)
        else:
            assert np.all(np.isfinite(pred)), top
    with pytest.raises(ValueError, match=r"float32 range.*symlog"):
        model.predict(_extreme(X, 1e300))


@pytest.mark.slow
def test_predict_non_finite_output_raises(heavy, monkeypatch, seeded_tiny_params):
    """If the net ever outputs NaN, predict raises instead of returning it."""
    X, y = heavy
    model = MeasureTransformerRegressor(**seeded_tiny_params).fit(X, y)
    monkeypatch.setattr(model.net_.module_, "forward",
                        lambda X, weights=None: torch.full((*X.shape[:2], 2), float("nan")))
    with pytest.raises(FloatingPointError, match=r"non-finite predictions.*symlog"):
        model.predict(X)


# --------------------------------------------------------------------------- #
# a user transform's NaN is never returned nor trained on
# --------------------------------------------------------------------------- #
class _LogTransform(TransformerMixin, BaseEstimator):
    """log(1 + x) whose inverse overflows to inf (and to NaN below -1)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return np.log1p(np.abs(X))

    def inverse_transform(self, X):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.sqrt(np.expm1(X) - 1e6)


class _NanTransform(_LogTransform):
    def transform(self, X):
        out = np.array(X, dtype=np.float64)
        out[0, 0] = np.nan
        return out


@pytest.mark.slow
def test_predict_never_returns_a_user_inverse_transforms_nan(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, transform=_LogTransform(), random_state=0).fit(X, y)
    with pytest.raises(FloatingPointError, match="inverse_transform"):
        model.predict(X)


def test_a_transform_producing_nan_is_refused_before_training(data, tiny_params):
    X, y = data
    with pytest.raises(ValueError, match="produced NaN"):
        MeasureTransformerRegressor(**tiny_params, transform=_NanTransform()).fit(X, y)


@pytest.mark.slow
def test_score_of_a_symlog_model_on_1e200_data(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, transform="symlog", random_state=0).fit(X * 1e200, y * 1e200)
    assert np.isfinite(model.score(X * 1e200, y * 1e200))
    assert np.isfinite(model.set_params(score_space="symlog").score(X * 1e200, y * 1e200))


# --------------------------------------------------------------------------- #
# metrics across the float64 range
# --------------------------------------------------------------------------- #
SCALES = [1e-200, 1e-120, 1e120, 1e150, 1e200, 1e300]
HOMOGENEOUS = {
    "w1": (lambda a, b: wasserstein_distance(a, b), 1.0),
    "w2": (lambda a, b: wasserstein_distance(a, b, p=2), 1.0),
    "w3": (lambda a, b: wasserstein_distance(a, b, p=3), 1.0),
    "sliced": (lambda a, b: wasserstein_distance(a, b, method="sliced", random_state=0), 1.0),
    "energy": (lambda a, b: energy_distance(a, b), 1.0),
    "energy_beta_0.5": (lambda a, b: energy_distance(a, b, beta=0.5), 0.5),
    "mmd": (lambda a, b: mmd(a, b), 0.0),
    "spread_ratio": (lambda a, b: spread_ratio(a, b), 0.0),
    "correlation_of_identical": (lambda a, b: across_sample_correlation(a, a), 0.0),
}


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", HOMOGENEOUS)
def test_metrics_are_homogeneous_across_the_float64_range(clouds, name, scale):
    metric, degree = HOMOGENEOUS[name]
    x, y = clouds
    reference = metric(x, y)
    assert np.isfinite(reference) and reference != 0
    try:
        value = metric(x * scale, y * scale)
    except ValueError as exc:  # allowed only when the true value does not fit float64
        assert "float64" in str(exc)
        assert abs(degree * math.log10(scale) + math.log10(reference)) > 300
        return
    assert np.isfinite(value) and value != 0
    np.testing.assert_allclose(value, reference * scale**degree if degree else reference, rtol=1e-9)


def test_one_huge_measure_is_not_dropped_from_the_mean(clouds):
    x, y = clouds
    x, y = x.copy(), y.copy()
    x[0] *= 1e200
    y[0] *= 1e200
    per_sample = energy_distance(x, y, multioutput="raw_values")
    assert np.all(np.isfinite(per_sample))
    assert energy_distance(x, y) == pytest.approx(per_sample.mean(), rel=1e-12)
    assert energy_distance(x, y) > 1e199


@pytest.mark.parametrize("p", [20, 60, 200])
def test_large_p_neither_overflows_nor_vanishes(clouds, p):
    x, y = clouds
    exact = wasserstein_distance(x, y, p=p)
    sliced = wasserstein_distance(x, y, p=p, method="sliced", random_state=0)
    assert np.isfinite(exact) and exact > wasserstein_distance(x, y, p=2)
    assert np.isfinite(sliced) and sliced > 0
    # W_p grows with p towards the largest displacement of an optimal plan
    assert exact <= max(np.abs(x).max(), np.abs(y).max()) * 2 * math.sqrt(2)


def test_weights_whose_sum_overflows_are_normalised(clouds):
    x, y = clouds
    huge = np.full(x.shape[:2], 1e308)
    assert wasserstein_distance(x, y, weights_true=huge) == pytest.approx(wasserstein_distance(x, y))
    assert energy_distance(x, y, weights_true=huge) == pytest.approx(energy_distance(x, y))
    np.testing.assert_allclose(attention_ess(x, weights=huge, random_state=0), attention_ess(x, random_state=0))
    huge_samples = np.full(x.shape[0], 1e308)
    assert energy_distance(x, y, sample_weight=huge_samples) == pytest.approx(energy_distance(x, y))


def test_tiny_and_huge_bandwidths_are_computed_not_divided_by_zero(clouds):
    x, y = clouds
    # a bandwidth far below every distance: the kernel is the identity on coincident points
    assert mmd(x, y, bandwidth=1e-200) == pytest.approx(1 / 15 + 1 / 11, rel=1e-9)
    assert mmd(x * 1e200, y * 1e200, bandwidth=1e-200) == pytest.approx(1 / 15 + 1 / 11, rel=1e-9)
    assert mmd(x, y, bandwidth=1e200) == 0.0  # every point at distance ~0: the measures coincide


@pytest.mark.parametrize("kernel", ["softmax", "poly", "log", "sigmoid", "softplus"])
def test_attention_ess_at_extreme_scales(clouds, kernel):
    x, _ = clouds
    tiny = attention_ess(x * 1e-200, kernel, random_state=0)
    np.testing.assert_allclose(tiny, 1.0)  # scores ~ 0: uniform attention
    large = attention_ess(x * 1e150, kernel, random_state=0)
    assert np.all(np.isfinite(large)) and np.all(large > 0)
    if kernel == "softmax":
        np.testing.assert_allclose(large, 1 / x.shape[1])  # one point takes all the weight
    with pytest.raises(ValueError, match="float64 range.*symlog"):
        attention_ess(x * 1e200, kernel, random_state=0)
