"""Training guards: the global generator untouched, thread and process determinism,
bad training setups refused before any work, interrupts, callbacks that stop
training, warm start and partial_fit.
"""

import signal
import threading

import numpy as np
import pytest
import torch
from joblib import Parallel, delayed, parallel_config
from skorch.callbacks import Callback, EarlyStopping

from sklearn_measattn import MeasureTransformerRegressor, StopTraining, SymlogTransformer
from sklearn_measattn.kernels import get_kernel
from sklearn_measattn.losses import energy_loss
from sklearn_measattn.metrics import energy_distance


def _fit_predict(X, y, seed, tiny, **params):
    model = MeasureTransformerRegressor(**{**tiny, **params}, random_state=seed)
    return model.fit(X, y).predict(X)


# --------------------------------------------------------------------------- #
# determinism without the global generator
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("params", [{}, {"dropout": 0.3}, {"loss": "sliced"}, {"early_stopping": True,
                                                                               "validation_fraction": 0.25}])
def test_fit_never_touches_the_global_generator(data, params, tiny_params):
    X, y = data
    state = torch.get_rng_state()
    model = MeasureTransformerRegressor(**{**tiny_params, **params}, random_state=0).fit(X, y)
    model.predict(X)
    model.attention_ess(X)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.slow
@pytest.mark.parametrize("params", [{"kernel": "log"}, {"kernel": "softmax", "dropout": 0.2}, {"loss": "sliced"}])
def test_threaded_fits_match_serial_fits_bit_for_bit(data, params, tiny_params):
    X, y = data
    serial = [_fit_predict(X, y, seed, tiny_params, **params) for seed in range(3)]
    stop = threading.Event()

    def draw_from_the_global_generator():
        while not stop.is_set():
            torch.rand(64)

    noise = threading.Thread(target=draw_from_the_global_generator)
    noise.start()
    try:
        threaded = Parallel(n_jobs=3, backend="threading")(
            delayed(_fit_predict)(X, y, seed, tiny_params, **params) for seed in range(3)
        )
    finally:
        stop.set()
        noise.join()
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(serial[0], serial[1])  # the seed matters


@pytest.mark.slow
def test_process_fits_match_serial_fits(data, tiny_params):
    """Bit-identical across processes when they use as many torch threads as this one
    (loky's default of one thread per worker changes the order of float reductions)."""
    X, y = data
    serial = [_fit_predict(X, y, seed, tiny_params) for seed in range(2)]
    with parallel_config(backend="loky", inner_max_num_threads=torch.get_num_threads()):
        in_processes = Parallel(n_jobs=2)(delayed(_fit_predict)(X, y, seed, tiny_params) for seed in range(2))
    for a, b in zip(serial, in_processes):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- #
# bad training setups, refused before any work
# --------------------------------------------------------------------------- #
def test_paired_loss_refuses_different_point_counts_per_measure(tiny_params):
    X = [np.ones((4, 2)), np.ones((3, 2))]
    y = [np.ones((4, 2)), np.ones((2, 2))]  # same padded length as X, different counts in measure 1
    with pytest.raises(ValueError, match="measure 1 has 3 input and 2 target points"):
        MeasureTransformerRegressor(**tiny_params, loss="mse").fit(X, y)


def _two_argument_kernel(s, t):
    return s


def _two_argument_loss(y_pred, y_true):
    return (y_pred - y_true).mean()


@pytest.mark.parametrize("params", [{"kernel": _two_argument_kernel}, {"loss": _two_argument_loss}])
def test_a_user_callables_own_error_stays_in_the_traceback(data, params, tiny_params):
    """The message explains the expected signature, and the user's own error is
    chained under it (not dropped), so the traceback still shows the call."""
    X, y = data
    with pytest.raises(ValueError, match="raised TypeError") as info:
        MeasureTransformerRegressor(**tiny_params, **params).fit(X, y)
    chain, exc = [], info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    assert isinstance(chain[-1], TypeError), chain
    assert "positional argument" in str(chain[-1])


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
def test_bad_training_setups_fail_before_training(data, params, error, match, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, **params)
    with pytest.raises(error, match=match):
        model.fit(X, y)
    assert not hasattr(model, "net_")


def test_tensors_that_require_grad_are_accepted(data, tiny_params):
    X, y = data
    X_t = torch.tensor(X, requires_grad=True)
    model = MeasureTransformerRegressor(**tiny_params, random_state=0).fit(X_t, torch.tensor(y))
    np.testing.assert_array_equal(model.predict(X_t), model.predict(X))
    assert energy_distance(torch.tensor(y, requires_grad=True), y) == 0.0


def test_a_user_kernel_going_non_finite_in_training_is_blamed(data, tiny_params):
    X, y = data

    def blows_up(s):
        # NaN for 0.3 < |s| < 0.7: finite on the probe's integer grid, not in training
        return torch.where(((s.abs() - 0.5).abs() < 0.2), s * float("nan"), s)

    kernel = get_kernel(blows_up)
    with pytest.raises(FloatingPointError, match="user kernel 'blows_up'"):
        MeasureTransformerRegressor(**tiny_params, kernel=kernel, random_state=0).fit(X, y)


# --------------------------------------------------------------------------- #
# interrupts and callbacks that end training
# --------------------------------------------------------------------------- #
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
def test_an_interrupt_from_anywhere_in_training_leaves_the_estimator_unfitted(data, params, tiny_params):
    """Ctrl-C (a real SIGINT or a KeyboardInterrupt raised in the loss, in any
    callback hook, or deeper) ends fit with KeyboardInterrupt and no fitted
    attributes, never a model that looks fitted after a fraction of its epochs."""
    X, y = data
    model = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 5, **params()})
    # Python's own handler, as in a terminal, also where the suite runs as a background job (which ignores SIGINT)
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt, match="interrupted at epoch 2 of 5"):
            model.fit(X, y)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
    finally:
        signal.signal(signal.SIGINT, outside)
    assert not hasattr(model, "net_")


def test_a_keyboard_interrupt_from_a_callback_says_how_to_stop_early(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 5}, callbacks=[_InterruptIn("on_epoch_end")])
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
def test_a_callback_ends_training_early_and_keeps_the_model(data, params, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 5}, **params).fit(X, y)
    assert len(model.history_) == 2
    assert model.predict(X).shape == y.shape


# --------------------------------------------------------------------------- #
# warm start and partial fit
# --------------------------------------------------------------------------- #
def test_warm_start_continues_training(data, tiny_params):
    X, y = data
    cold = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 4}, random_state=0).fit(X, y)
    model = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 2}, random_state=0, warm_start=True).fit(X, y)
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
def test_a_warm_refit_trains_with_the_parameters_the_estimator_shows(data, param, value, check, method, tiny_params):
    """After set_params, a warm-started fit (and partial_fit) trains with the new
    value of every training parameter, from the fitted weights and optimizer state."""
    X, y = data
    recorder = _Recorder()
    start = {**tiny_params, "max_epochs": 2, "callbacks": [recorder], "random_state": 0, "warm_start": True}
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
def test_a_warm_refit_uses_new_callbacks(data, method, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 2}, random_state=0, warm_start=True).fit(X, y)
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
def test_a_warm_refit_refuses_what_the_fitted_net_cannot_take(data, param, value, method, tiny_params):
    """Architecture, kernel, transform, backend and seed are fixed by the first
    fit: changing one is refused by name, before any training, and the fitted
    model is kept."""
    X, y = data
    start = {**tiny_params, "max_epochs": 2, "random_state": 0, "warm_start": True}
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


def test_a_transform_changed_in_place_is_refused(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, transform=SymlogTransformer(), warm_start=True).fit(X, y)
    model.set_params(transform__scale=5.0)
    with pytest.raises(ValueError, match="transform=SymlogTransformer.*changed"):
        model.fit(X, y)


def test_partial_fit_runs_one_epoch_at_a_time(data, tiny_params):
    X, y = data
    model = MeasureTransformerRegressor(**tiny_params, random_state=0)
    model.partial_fit(X, y)
    assert len(model.history_) == 1
    transform_net = model.net_
    model.partial_fit(X[:6], y[:6])
    assert len(model.history_) == 2 and model.net_ is transform_net
    with pytest.raises(ValueError, match="features"):
        model.partial_fit(X[..., :1], y)
    assert len(model.history_) == 2  # refused before any training
    reference = MeasureTransformerRegressor(**{**tiny_params, "max_epochs": 2}, random_state=0)
    reference.fit(X, y)
    model_again = MeasureTransformerRegressor(**tiny_params, random_state=0)
    for _ in range(2):
        model_again.partial_fit(X, y)
    np.testing.assert_allclose(model_again.predict(X), reference.predict(X), rtol=1e-5, atol=1e-6)


def test_warm_start_must_be_a_bool(data, tiny_params):
    with pytest.raises(TypeError, match="warm_start"):
        MeasureTransformerRegressor(**tiny_params, warm_start="yes").fit(*data)
