"""What ends training other than its last epoch: interrupts, requests to stop early, non-finite values.

An interrupt (Ctrl-C, or a ``KeyboardInterrupt`` raised in training) must
leave the estimator unfitted, whereas skorch ends training on any
``KeyboardInterrupt`` and keeps the half-trained net; a request to stop early
(:class:`StopTraining`, or skorch's ``EarlyStopping``, which raises
``KeyboardInterrupt`` too) ends training normally. The net tells them apart by
where the exception came from: it records which callback hook raised it
(:func:`from_callback`), and whether a real SIGINT arrived meanwhile
(:func:`watch_sigint`). A non-finite forward output, loss or gradient stops
training at once, with the stage and the layer that produced it.
"""

from __future__ import annotations

import contextlib
import signal
import threading

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping
from skorch.utils import to_tensor

__all__ = [
    "StopTraining", "TrainingInterrupted", "from_callback", "interrupt_origin", "is_deliberate_stop",
    "nonfinite_forward_hint", "watch_sigint",
]


class TrainingInterrupted(BaseException):
    """Carries a KeyboardInterrupt past skorch, which would swallow it; its
    argument says where it came from."""


class StopTraining(KeyboardInterrupt):
    """Raise from a callback's hook to end training early and keep the model.

    skorch ends training when a callback raises ``KeyboardInterrupt`` (that is
    how :class:`skorch.callbacks.EarlyStopping` works), but so does Ctrl-C, and
    a fit interrupted by the user must not look fitted. So
    :class:`~sklearn_measattn.MeasureTransformerRegressor` treats a
    ``KeyboardInterrupt`` from anywhere in training as an interrupt (``fit``
    raises it and the estimator is left unfitted), except this exception and
    skorch's ``EarlyStopping``, which end training normally: the estimator is
    fitted with the epochs run so far.

    Examples
    --------
    >>> from skorch.callbacks import Callback
    >>> from sklearn_measattn import MeasureTransformerRegressor, StopTraining
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> class StopAfterTwo(Callback):
    ...     def on_epoch_end(self, net, **kwargs):
    ...         if len(net.history) == 2:
    ...             raise StopTraining
    >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
    >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=5,
    ...                                     callbacks=[StopAfterTwo()], random_state=0).fit(X, y)
    >>> len(model.history_)
    2
    """


# ----------------------------------------------------------------- interrupts
class _SigintState:
    arrived = False


@contextlib.contextmanager
def watch_sigint():
    """Record whether a real Ctrl-C (SIGINT) arrives, then handle it as before.

    A ``KeyboardInterrupt`` raised by code cannot be told from one raised by the
    signal handler, so this one notes the signal before passing it on to the
    handler that was installed (Python's, which raises ``KeyboardInterrupt``).
    Signal handlers can only be set from the main thread; elsewhere (threaded
    searches) nothing is recorded, and Ctrl-C reaches the main thread anyway.
    """
    state = _SigintState()
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        yield state
        return

    def note_and_forward(signum, frame):
        state.arrived = True
        previous(signum, frame)

    try:
        signal.signal(signal.SIGINT, note_and_forward)
    except ValueError:  # not the main thread of the main interpreter
        yield state
        return
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def from_callback(callback, hook):
    """Note on a ``KeyboardInterrupt`` raised in ``callback``'s ``hook`` that it came from there.

    The innermost hook wins: an interrupt passing through several keeps the first one noted.
    """
    try:
        yield
    except KeyboardInterrupt as exc:
        if getattr(exc, "raised_in", None) is None:
            exc.raised_in = (callback, hook)
        raise


def is_deliberate_stop(exc, sigint_arrived):
    """Whether a KeyboardInterrupt is a request to end training early: the package's
    :class:`StopTraining`, or skorch's ``EarlyStopping`` raising it in its hooks.

    Anything else (Ctrl-C, a KeyboardInterrupt raised in user code, callbacks
    included) is an interrupt.
    """
    if sigint_arrived:
        return False
    owner, _ = getattr(exc, "raised_in", None) or (None, None)
    return isinstance(exc, StopTraining) or isinstance(owner, EarlyStopping)


def interrupt_origin(exc, sigint_arrived):
    """Where an interrupt came from, for the message ``fit`` raises."""
    owner, hook = getattr(exc, "raised_in", None) or (None, None)
    if sigint_arrived or owner is None:
        return ""
    return (
        f" (raised by callback {type(owner).__name__}.{hook}; to end training early from a "
        "callback and keep the model, raise sklearn_measattn.StopTraining there)"
    )


# ----------------------------------------------------------------- non-finite values
def nonfinite_forward_hint(module, batch, device):
    """Which parameters are already non-finite, or else which layer first went non-finite."""
    bad = [name for name, p in module.named_parameters() if not bool(torch.isfinite(p.detach()).all())]
    if bad:
        return (
            f"parameters {', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''} are already non-finite "
            "(an optimizer step diverged); use a smaller lr or transform='symlog'."
        )
    stage = _first_nonfinite_layer(module, batch, device)
    if stage is not None and stage.endswith(".attention"):
        kernel = module.get_submodule(stage).kernel
        if kernel.growth == "user":
            return (
                f"the attention in {stage} went non-finite on finite inputs: the user kernel "
                f"{kernel.name!r} returned inf or nan for some attention scores. Make g finite for "
                "all scores (e.g. clamp its argument), or use a built-in kernel."
            )
        return (
            f"the attention in {stage} overflowed float32 on extreme input points (softmax attention "
            "on raw heavy-tailed data is the typical cause). Use transform='symlog', a slower-growing "
            "kernel ('log', 'sigmoid', 'poly'), or rescale X."
        )
    where = f"in {stage} " if stage is not None else ""
    return (
        f"the activations {where}overflowed float32 on extreme input points. Use transform='symlog' "
        "or rescale X, or a smaller lr."
    )


def _first_nonfinite_layer(module, batch, device):
    """Name of the first layer whose inputs are finite and whose output is not, or None."""
    if not isinstance(batch, dict) or "X" not in batch:
        return None
    X = to_tensor(batch["X"], device=device)
    weights = to_tensor(batch["weights"], device=device) if "weights" in batch else None
    found = []

    def finite(values):
        return all(bool(torch.isfinite(v).all()) for v in values if isinstance(v, torch.Tensor))

    def record(name):
        def hook(layer, inputs, output):
            if not found and finite(inputs) and not finite([output]):
                found.append(name)
        return hook

    handles = [layer.register_forward_hook(record(name)) for name, layer in module.named_modules() if name]
    try:
        with torch.no_grad():
            module(X, weights)
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None


class _StopOnNonFinite(Callback):
    """Abort training at the first non-finite gradient or loss, naming the stage.

    Non-finite forward outputs and losses are caught in the net's ``get_loss``;
    gradients here, before the optimizer step writes them into the weights.
    """

    def on_grad_computed(self, net, named_parameters, X=None, y=None, training=False, **kwargs):
        bad = [name for name, p in named_parameters if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
        if bad:
            raise FloatingPointError(
                f"The backward pass produced non-finite gradients at epoch {len(net.history)} for "
                f"{', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''}, while the forward pass and the "
                "loss were finite. The gradient overflowed on extreme points; use transform='symlog', "
                "a slower-growing kernel ('log', 'sigmoid', 'poly'), a smaller lr, or "
                "attention_backend='chunked'."
            )

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        key = "train_loss" if training else "valid_loss"
        loss = net.history[-1, "batches", -1, key]
        if not np.isfinite(loss):
            raise FloatingPointError(
                f"The training loss became {loss} at epoch {len(net.history)}; the network's outputs "
                "or the loss overflowed. Use transform='symlog' or a smaller lr."
            )
