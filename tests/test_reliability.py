"""Reliability under threads, extreme magnitudes, user callables and interrupted training.

Each test covers a class of failure, not one example: thread-safe seeding,
kernels known by what they compute, metrics across the float64 range, results
that keep the documented contract, scorer directions, extreme parameters and
user callables checked before any work.
"""

import math
import signal
import threading

import numpy as np
import pytest
import torch
from joblib import Parallel, delayed, parallel_config
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.model_selection import GridSearchCV
from skorch.callbacks import Callback, EarlyStopping

from sklearn_measattn import MeasureTransformer, MeasureTransformerRegressor, StopTraining, SymlogTransformer
from sklearn_measattn.attention import kernel_attention
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.kernels import AttentionKernel, get_kernel
from sklearn_measattn.losses import energy_loss
from sklearn_measattn.metrics import (
    across_sample_correlation,
    attention_ess,
    energy_distance,
    make_measure_scorer,
    mmd,
    spread_ratio,
    wasserstein_distance,
)

TINY = dict(d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, batch_size=4, max_epochs=3, device="cpu")


@pytest.fixture(scope="module")
def data():
    return make_matrix_inverse(n_samples=12, n_points=16, random_state=0)


def _fit_predict(X, y, seed, **params):
    model = MeasureTransformerRegressor(**{**TINY, **params}, random_state=seed)
    return model.fit(X, y).predict(X)


# --------------------------------------------------------------------------- #
# determinism without the global generator
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("params", [{}, {"dropout": 0.3}, {"loss": "sliced"}, {"early_stopping": True,
                                                                               "validation_fraction": 0.25}])
def test_fit_never_touches_the_global_generator(data, params):
    X, y = data
    state = torch.get_rng_state()
    model = MeasureTransformerRegressor(**{**TINY, **params}, random_state=0).fit(X, y)
    model.predict(X)
    model.attention_ess(X)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize("params", [{"kernel": "log"}, {"kernel": "softmax", "dropout": 0.2}, {"loss": "sliced"}])
def test_threaded_fits_match_serial_fits_bit_for_bit(data, params):
    X, y = data
    serial = [_fit_predict(X, y, seed, **params) for seed in range(3)]
    stop = threading.Event()

    def draw_from_the_global_generator():
        while not stop.is_set():
            torch.rand(64)

    noise = threading.Thread(target=draw_from_the_global_generator)
    noise.start()
    try:
        threaded = Parallel(n_jobs=3, backend="threading")(
            delayed(_fit_predict)(X, y, seed, **params) for seed in range(3)
        )
    finally:
        stop.set()
        noise.join()
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(serial[0], serial[1])  # the seed matters


def test_process_fits_match_serial_fits(data):
    """Bit-identical across processes when they use as many torch threads as this one
    (loky's default of one thread per worker changes the order of float reductions)."""
    X, y = data
    serial = [_fit_predict(X, y, seed) for seed in range(2)]
    with parallel_config(backend="loky", inner_max_num_threads=torch.get_num_threads()):
        in_processes = Parallel(n_jobs=2)(delayed(_fit_predict)(X, y, seed) for seed in range(2))
    for a, b in zip(serial, in_processes):
        np.testing.assert_array_equal(a, b)


def test_seeded_module_is_reproducible_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=5)
    b = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=torch.Generator().manual_seed(5))
    assert torch.equal(state, torch.get_rng_state())
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name
        assert p.device.type == "cpu" and torch.isfinite(p).all()
    c = MeasureTransformer(2, 2, d_model=8, n_heads=2, random_state=6)
    assert not torch.equal(a.embedding.weight, c.embedding.weight)
    # default initialisation statistics: nn.Linear's bound 1/sqrt(fan_in) on the biases
    assert float(a.embedding.bias.detach().abs().max()) <= 1 / math.sqrt(2)
    with pytest.raises(TypeError, match="random_state"):
        MeasureTransformer(2, 2, random_state="seed")


# --------------------------------------------------------------------------- #
# kernels known by what they compute
# --------------------------------------------------------------------------- #
def _doubled(s):
    return 2.0 * s


def softmax(s):  # a user kernel that reuses the built-in name
    return torch.nn.functional.logsigmoid(s)


@pytest.mark.parametrize("kernel", [AttentionKernel("softmax", _doubled), softmax])
def test_a_kernel_named_softmax_runs_as_written(kernel):
    kernel = get_kernel(kernel)
    assert kernel.name == "softmax" and not kernel.is_softmax
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 12, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    expected = torch.softmax(kernel.log_weight(q @ k.transpose(-1, -2) / 2.0), dim=-1) @ v
    plain = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1) @ v
    for backend in ("auto", "naive", "chunked"):
        out = kernel_attention(q, k, v, kernel=kernel, backend=backend)
        torch.testing.assert_close(out, expected)
        assert not torch.allclose(out, plain)
    assert get_kernel("softmax").is_softmax


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


@pytest.fixture(scope="module")
def clouds():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 15, 2)) * rng.uniform(0.5, 3.0, size=(4, 1, 1))
    y = rng.standard_normal((4, 11, 2)) + 0.7
    return x, y


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


def test_ragged_weights_follow_ragged_measures():
    x = [np.array([[0.0], [1.0], [2.0]]), np.array([[5.0], [6.0]])]
    y = [np.array([[0.0]]), np.array([[5.0]])]
    weights = [np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0])]
    assert wasserstein_distance(x, y, weights_true=weights) == 0.0
    with pytest.raises(ValueError, match=r"weights_true\[1\].*2 points"):
        wasserstein_distance(x, y, weights_true=[np.ones(3), np.ones(1)])


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


def test_attention_ess_rejects_empty_projections(clouds):
    x, _ = clouds
    with pytest.raises(ValueError, match="d_head"):
        attention_ess(x, projections=(np.zeros((2, 0)), np.zeros((2, 0))))


@pytest.mark.parametrize("n_jobs", [0, 1.5, "two", True])
def test_invalid_n_jobs(clouds, n_jobs):
    x, y = clouds
    with pytest.raises(ValueError, match="n_jobs"):
        wasserstein_distance(x, y, n_jobs=n_jobs)


def test_score_of_a_symlog_model_on_1e200_data(data):
    X, y = data
    model = MeasureTransformerRegressor(**TINY, transform="symlog", random_state=0).fit(X * 1e200, y * 1e200)
    assert np.isfinite(model.score(X * 1e200, y * 1e200))
    assert np.isfinite(model.set_params(score_space="symlog").score(X * 1e200, y * 1e200))


# --------------------------------------------------------------------------- #
# the documented contract
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


def test_predict_never_returns_a_user_inverse_transforms_nan(data):
    X, y = data
    model = MeasureTransformerRegressor(**TINY, transform=_LogTransform(), random_state=0).fit(X, y)
    with pytest.raises(FloatingPointError, match="inverse_transform"):
        model.predict(X)


def test_a_transform_producing_nan_is_refused_before_training(data):
    X, y = data
    with pytest.raises(ValueError, match="produced NaN"):
        MeasureTransformerRegressor(**TINY, transform=_NanTransform()).fit(X, y)


def test_paired_loss_refuses_different_point_counts_per_measure():
    X = [np.ones((4, 2)), np.ones((3, 2))]
    y = [np.ones((4, 2)), np.ones((2, 2))]  # same padded length as X, different counts in measure 1
    with pytest.raises(ValueError, match="measure 1 has 3 input and 2 target points"):
        MeasureTransformerRegressor(**TINY, loss="mse").fit(X, y)


def _interrupt_in_loss():
    calls = []

    def interrupted_loss(y_pred, y_true, pred_weights, true_weights):
        calls.append(1)
        if len(calls) == 6:  # the user presses Ctrl-C during the second epoch
            raise KeyboardInterrupt
        return energy_loss(y_pred, y_true, pred_weights, true_weights)

    return {"loss": interrupted_loss}


class _InterruptIn(Callback):
    """Raises KeyboardInterrupt (or sends a real SIGINT) in one hook, in epoch 2."""

    def __init__(self, hook, how="raise"):
        self.hook, self.how = hook, how

    def _maybe(self, net, hook):
        if hook == self.hook and len(net.history) == 2:
            if self.how == "signal":
                signal.raise_signal(signal.SIGINT)
            elif self.how == "nested":
                _deep_helper()
            else:
                raise KeyboardInterrupt

    def on_batch_end(self, net, **kwargs):
        self._maybe(net, "on_batch_end")

    def on_epoch_end(self, net, **kwargs):
        self._maybe(net, "on_epoch_end")

    def on_grad_computed(self, net, named_parameters, **kwargs):
        self._maybe(net, "on_grad_computed")


def _deep_helper():
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(_interrupt_in_loss, id="loss"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_batch_end")]}, id="callback-batch"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_epoch_end")]}, id="callback-epoch"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_grad_computed")]}, id="callback-grad"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_epoch_end", "nested")]}, id="callback-helper"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_batch_end", "signal")]}, id="real-sigint"),
        pytest.param(lambda: {"callbacks": [_InterruptIn("on_epoch_end", "signal")], "early_stopping": True,
                              "validation_fraction": 0.25}, id="real-sigint-with-early-stopping"),
    ],
)
def test_an_interrupt_from_anywhere_in_training_leaves_the_estimator_unfitted(data, params):
    """Ctrl-C (a real SIGINT or a KeyboardInterrupt raised in the loss, in any
    callback hook, or deeper) ends fit with KeyboardInterrupt and no fitted
    attributes, never a model that looks fitted after a fraction of its epochs."""
    X, y = data
    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 5, **params()})
    with pytest.raises(KeyboardInterrupt, match="interrupted at epoch 2 of 5"):
        model.fit(X, y)
    assert not hasattr(model, "net_")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_a_keyboard_interrupt_from_a_callback_says_how_to_stop_early(data):
    X, y = data
    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 5}, callbacks=[_InterruptIn("on_epoch_end")])
    with pytest.raises(KeyboardInterrupt, match=r"_InterruptIn\.on_epoch_end.*raise sklearn_measattn\.StopTraining"):
        model.fit(X, y)


class _StopAfterTwo(Callback):
    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == 2:
            raise StopTraining


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"callbacks": [_StopAfterTwo()]}, id="StopTraining"),
        pytest.param({"callbacks": [EarlyStopping(monitor="train_loss", patience=1, threshold=1e9)]},
                     id="skorch-EarlyStopping"),
    ],
)
def test_a_callback_ends_training_early_and_keeps_the_model(data, params):
    X, y = data
    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 5}, **params).fit(X, y)
    assert len(model.history_) == 2
    assert model.predict(X).shape == y.shape


# --------------------------------------------------------------------------- #
# scorer directions
# --------------------------------------------------------------------------- #
class _Scaled(RegressorMixin, BaseEstimator):
    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        return X * self.scale


@pytest.mark.parametrize("metric", ["spread_ratio", "energy", "wasserstein", "mmd", "sliced_wasserstein"])
def test_every_named_scorer_picks_the_right_model(metric):
    X = np.random.default_rng(1).normal(size=(9, 10, 2))
    y = 2.0 * X
    grid = GridSearchCV(_Scaled(), {"scale": [0.0, 0.01, 0.5, 2.0, 6.0, 50.0]},
                        scoring=make_measure_scorer(metric), cv=3).fit(X, y)
    assert grid.best_params_ == {"scale": 2.0}


@pytest.mark.parametrize("metric", ["spread_ratio", "energy"])
def test_a_direction_that_would_reward_the_wrong_model_is_refused(metric):
    with pytest.raises(ValueError, match="greater_is_better"):
        make_measure_scorer(metric, greater_is_better=True)


# --------------------------------------------------------------------------- #
# extreme parameters
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("degree", [1e39, 1e-40, 1e4, 1e-4])
def test_poly_degrees_outside_the_float32_range_are_refused(degree):
    with pytest.raises(ValueError, match=r"degree must be a number in \[0.001, 1000\]"):
        get_kernel("poly", degree=degree)


@pytest.mark.parametrize("degree", [1e-3, 0.37, 7.0, 1e3])
def test_poly_degrees_in_range_are_finite_in_float32(degree):
    kernel = get_kernel("poly", degree=degree)
    s = torch.linspace(-1e4, 1e4, 4001).requires_grad_()
    g = kernel(s)
    g.sum().backward()
    assert torch.isfinite(g).all() and torch.isfinite(s.grad).all()
    assert torch.isfinite(kernel.derivative(s.detach())).all()


@pytest.mark.parametrize("scale", [1e-50, 1e-300, 1e40])
def test_symlog_scale_outside_float32_stays_finite(scale):
    X = np.array([[0.0, 1.0], [3e38, -2.0]], dtype=np.float32)
    transformer = SymlogTransformer(scale=scale).fit(X)
    Z = transformer.transform(X)
    assert Z.dtype == np.float32 and np.all(np.isfinite(Z)) and np.all((Z == 0) == (X == 0))
    back = transformer.inverse_transform(Z)
    assert np.all(np.isfinite(back))
    np.testing.assert_allclose(back, X, rtol=1e-4)


def test_symlog_scale_that_loses_the_data_raises():
    X = np.array([[1.0, -2.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="maps nonzero values of X"):
        SymlogTransformer(scale=1e50).fit_transform(X)


# --------------------------------------------------------------------------- #
# user callables, checked once before any work
# --------------------------------------------------------------------------- #
class _KernelClass(torch.nn.Module):
    def forward(self, s):
        return s


@pytest.mark.parametrize(
    "kernel, error, match",
    [
        (lambda s: s.sum(), ValueError, r"returned shape \(\)"),
        (lambda s: 1.0, TypeError, "returned float"),
        (lambda s: s.long(), TypeError, "dtype torch.int64"),
        (lambda s: s / 0.0, ValueError, "non-finite log-weights"),
        (lambda s: torch.log(s), ValueError, "non-finite log-weights"),
        (lambda s: s.numpy(), TypeError, "returned ndarray"),
        (lambda s, t: s, ValueError, "raised TypeError"),
        (_KernelClass, TypeError, r"is the class _KernelClass.*_KernelClass\(\)"),
    ],
)
def test_bad_user_kernels_fail_when_built(data, kernel, error, match):
    with pytest.raises(error, match=match):
        get_kernel(kernel)
    X, y = data
    with pytest.raises(error, match=match):
        MeasureTransformerRegressor(**TINY, kernel=kernel).fit(X, y)


def _two_argument_kernel(s, t):
    return s


def _two_argument_loss(y_pred, y_true):
    return (y_pred - y_true).mean()


@pytest.mark.parametrize("params", [{"kernel": _two_argument_kernel}, {"loss": _two_argument_loss}])
def test_a_user_callables_own_error_stays_in_the_traceback(data, params):
    """The message explains the expected signature, and the user's own error is
    chained under it (not dropped), so the traceback still shows the call."""
    X, y = data
    with pytest.raises(ValueError, match="raised TypeError") as info:
        MeasureTransformerRegressor(**TINY, **params).fit(X, y)
    chain, exc = [], info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    assert isinstance(chain[-1], TypeError), chain
    assert "positional argument" in str(chain[-1])


def test_a_module_instance_is_a_valid_kernel(data):
    X, y = data
    MeasureTransformerRegressor(**TINY, kernel=_KernelClass()).fit(X, y)


def _float_loss(y_pred, y_true, pred_weights, true_weights):
    return 1.0


def _detached_loss(y_pred, y_true, pred_weights, true_weights):
    return (y_pred.detach() - y_true.mean()).abs().mean()


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"loss": _float_loss}, TypeError, "returned float"),
        ({"loss": _detached_loss}, TypeError, "does not depend on y_pred"),
        ({"loss_params": {"reduction": "none"}}, ValueError, "reduction='none'"),
        ({"early_stopping": True, "validation_fraction": 0.95}, ValueError, "0 for training"),
        ({"callbacks": [print]}, TypeError, "not a skorch Callback"),
        ({"callbacks": [("early_stopping", Callback())]}, ValueError, "already uses"),
        ({"callbacks": [("a", Callback()), ("a", Callback())]}, ValueError, "unique"),
    ],
)
def test_bad_training_setups_fail_before_training(data, params, error, match):
    X, y = data
    model = MeasureTransformerRegressor(**TINY, **params)
    with pytest.raises(error, match=match):
        model.fit(X, y)
    assert not hasattr(model, "net_")


def test_tensors_that_require_grad_are_accepted(data):
    X, y = data
    X_t = torch.tensor(X, requires_grad=True)
    model = MeasureTransformerRegressor(**TINY, random_state=0).fit(X_t, torch.tensor(y))
    np.testing.assert_array_equal(model.predict(X_t), model.predict(X))
    assert energy_distance(torch.tensor(y, requires_grad=True), y) == 0.0


def test_a_user_kernel_going_non_finite_in_training_is_blamed(data):
    X, y = data

    def blows_up(s):
        # NaN for 0.3 < |s| < 0.7: finite on the probe's integer grid, not in training
        return torch.where(((s.abs() - 0.5).abs() < 0.2), s * float("nan"), s)

    kernel = get_kernel(blows_up)
    with pytest.raises(FloatingPointError, match="user kernel 'blows_up'"):
        MeasureTransformerRegressor(**TINY, kernel=kernel, random_state=0).fit(X, y)


# --------------------------------------------------------------------------- #
# warm start and partial fit
# --------------------------------------------------------------------------- #
def test_warm_start_continues_training(data):
    X, y = data
    cold = MeasureTransformerRegressor(**{**TINY, "max_epochs": 4}, random_state=0).fit(X, y)
    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 2}, random_state=0, warm_start=True).fit(X, y)
    first = model.net_.module_.embedding.weight.detach().clone()
    model.fit(X, y)
    assert len(model.history_) == 4
    assert not torch.equal(first, model.net_.module_.embedding.weight)
    # two warm fits of two epochs train exactly like one fit of four
    np.testing.assert_allclose(model.predict(X), cold.predict(X), rtol=1e-5, atol=1e-6)
    # without warm_start the next fit starts afresh
    model.set_params(warm_start=False).fit(X, y)
    assert len(model.history_) == 2


class _Recorder(Callback):
    """Records, at every training batch, the settings the net trains with."""

    def __init__(self):
        self.seen = []

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training:
            group = net.optimizer_.param_groups[0]
            self.seen.append({
                "epoch": len(net.history), "lr": group["lr"], "weight_decay": group["weight_decay"],
                "batch_size": len(batch[0]["X"]), "loss": net.criterion_.name,
                "loss_params": dict(net.criterion_.params),
            })


def _phase_two(recorder, first_epochs):
    return [row for row in recorder.seen if row["epoch"] > first_epochs]


def _new_callback():
    recorder = _Recorder()
    return {"callbacks": [recorder]}, recorder


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize(
    "param, value, check",
    [
        ("lr", 0.05, lambda rows, model: {r["lr"] for r in rows} == {0.05}),
        ("weight_decay", 0.3, lambda rows, model: {r["weight_decay"] for r in rows} == {0.3}),
        ("batch_size", 5, lambda rows, model: max(r["batch_size"] for r in rows) == 5),
        ("loss", "sliced", lambda rows, model: {r["loss"] for r in rows} == {"sliced"}),
        ("loss_params", {"beta": 1.5}, lambda rows, model: all(r["loss_params"] == {"beta": 1.5} for r in rows)),
        ("max_epochs", 3, lambda rows, model: len(model.history_) in (2 + 3, 2 + 1)),
        ("verbose", 1, lambda rows, model: "progress_bar" in dict(model.net_.callbacks_)),
        ("early_stopping", True, lambda rows, model: "valid_loss" in model.history_[-1]),
        ("patience", 1, lambda rows, model: dict(model.net_.callbacks_)["early_stopping"].patience == 1),
        ("validation_fraction", 0.5,
         lambda rows, model: sum(r["batch_size"] for r in rows if r["epoch"] == rows[-1]["epoch"]) == 6),
    ],
)
def test_a_warm_refit_trains_with_the_parameters_the_estimator_shows(data, param, value, check, method):
    """After set_params, a warm-started fit (and partial_fit) trains with the new
    value of every training parameter, from the fitted weights and optimizer state."""
    X, y = data
    recorder = _Recorder()
    start = {**TINY, "max_epochs": 2, "callbacks": [recorder], "random_state": 0, "warm_start": True}
    if param in ("patience", "validation_fraction"):
        start.update(early_stopping=True, validation_fraction=0.25, patience=5)
    model = MeasureTransformerRegressor(**start).fit(X, y)
    steps = float(model.net_.optimizer_.state_dict()["state"][0]["step"])
    model.set_params(**{param: value})
    getattr(model, method)(X, y)
    rows = _phase_two(recorder, 2)
    assert rows and check(rows, model), rows
    # the optimizer continued (its step count did not restart)
    assert float(model.net_.optimizer_.state_dict()["state"][0]["step"]) > steps


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_a_warm_refit_uses_new_callbacks(data, method):
    X, y = data
    model = MeasureTransformerRegressor(**{**TINY, "max_epochs": 2}, random_state=0, warm_start=True).fit(X, y)
    params, recorder = _new_callback()
    getattr(model.set_params(**params), method)(X, y)
    assert {row["epoch"] for row in recorder.seen} >= {3}


@pytest.mark.parametrize(
    "param, value",
    [("kernel", "softmax"), ("kernel_params", {"degree": 2}), ("transform", "symlog"), ("d_model", 16),
     ("n_heads", 4), ("n_layers", 2), ("dim_feedforward", 8), ("norm", "pre"), ("dropout", 0.2),
     ("attention_backend", "naive"), ("random_state", 1)],
)
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_a_warm_refit_refuses_what_the_fitted_net_cannot_take(data, param, value, method):
    """Architecture, kernel, transform, backend and seed are fixed by the first
    fit: changing one is refused by name, before any training, and the fitted
    model is kept."""
    X, y = data
    start = {**TINY, "max_epochs": 2, "random_state": 0, "warm_start": True}
    if param == "kernel_params":
        start["kernel"] = "poly"
    model = MeasureTransformerRegressor(**start).fit(X, y)
    before = model.predict(X)
    model.set_params(**{param: value})
    with pytest.raises(ValueError, match=rf"{param}=.*changed since it was fitted.*warm_start=False"):
        getattr(model, method)(X, y)
    assert len(model.history_) == 2
    model.set_params(**{param: start.get(param, MeasureTransformerRegressor().get_params()[param])})
    np.testing.assert_array_equal(model.predict(X), before)
    model.fit(X, y)  # set back, training continues
    assert len(model.history_) == 4


def test_a_transform_changed_in_place_is_refused(data):
    X, y = data
    model = MeasureTransformerRegressor(**TINY, transform=SymlogTransformer(), warm_start=True).fit(X, y)
    model.set_params(transform__scale=5.0)
    with pytest.raises(ValueError, match="transform=SymlogTransformer.*changed"):
        model.fit(X, y)


def test_partial_fit_runs_one_epoch_at_a_time(data):
    X, y = data
    model = MeasureTransformerRegressor(**TINY, random_state=0)
    model.partial_fit(X, y)
    assert len(model.history_) == 1
    transform_net = model.net_
    model.partial_fit(X[:6], y[:6])
    assert len(model.history_) == 2 and model.net_ is transform_net
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X[..., :1], y)
    assert len(model.history_) == 2  # refused before any training
    reference = MeasureTransformerRegressor(**{**TINY, "max_epochs": 2}, random_state=0)
    reference.fit(X, y)
    model_again = MeasureTransformerRegressor(**TINY, random_state=0)
    for _ in range(2):
        model_again.partial_fit(X, y)
    np.testing.assert_allclose(model_again.predict(X), reference.predict(X), rtol=1e-5, atol=1e-6)


def test_warm_start_must_be_a_bool(data):
    with pytest.raises(TypeError, match="warm_start"):
        MeasureTransformerRegressor(**TINY, warm_start="yes").fit(*data)


def test_study_in_parallel_gives_the_serial_table():
    from sklearn_measattn.experiments import compare_kernels

    params = dict(kernels=["softmax", "log"], transforms=[None], n_samples=8, n_points=12, n_test=3,
                  epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, device="cpu")
    serial = compare_kernels(**params, n_jobs=1)
    parallel = compare_kernels(**params, n_jobs=2)
    varying = {"fit_time"}
    assert len(serial) == len(parallel)

    def comparable(row):  # NaN (the no-model rows' empty attention columns) as a string: NaN != NaN
        return {k: ("nan" if isinstance(v, float) and v != v else v) for k, v in row.items() if k not in varying}

    for a, b in zip(serial, parallel):
        assert comparable(a) == comparable(b)
