"""The training machinery behind the estimator: a skorch net, its guards and checks.

The net's batches are dicts, so that point weights reach the module and the
loss; the guards stop training at the first non-finite forward output, loss or
gradient and name the stage that produced it; the checks run before any
training, so that bad input never leaves a half-trained estimator.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading

import numpy as np
import torch
from sklearn.base import BaseEstimator, clone
from skorch import NeuralNetRegressor
from skorch.callbacks import Callback, EarlyStopping, ProgressBar
from skorch.dataset import ValidSplit
from skorch.utils import to_tensor

from ..losses import MeasureLoss, get_loss
from ..preprocessing import SymlogTransformer
from ..transformer import MeasureTransformer
from ._context import ContextSubsample
from ._distributed import DistributedTraining, agree, sharded_loader

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32_range(X, input_name, transform):
    """The net runs in float32: reject values it would turn into inf, before it does."""
    if not np.all(np.isfinite(X)):
        kind = "NaN" if np.any(np.isnan(X)) else "inf"
        raise ValueError(
            f"transform={transform!r} produced {kind} values from the finite {input_name}; the "
            "network needs finite inputs. Check the transformer on these data (e.g. a log of "
            "negative values), or use transform='symlog', which is finite everywhere."
        )
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if largest > _FLOAT32_MAX:
        where = f"after transform={transform!r}, " if transform is not None else ""
        raise ValueError(
            f"{input_name} has values of magnitude up to {largest:.3g} {where}beyond the float32 range "
            f"({_FLOAT32_MAX:.3g}) the network computes in. Use transform='symlog' (it maps 1e300 to "
            "about 690) or rescale the data."
        )



class _MeasureNet(NeuralNetRegressor):
    """skorch net whose batches are dicts ``{"X", "weights"?, "y_weights"?}``.

    Input point weights go to the module and, with the target weights, to the
    criterion; ``y_weights`` never reaches the module.
    """

    loader_seed = None
    # True while training data-parallel: batches come from this process's shard
    # and the checks that stop training are agreed between the processes.
    distributed = False

    def get_params_for(self, prefix):
        params = super().get_params_for(prefix)
        # Shuffling from a private generator, kept across epochs. The evaluation
        # loader gets one too: a DataLoader draws a base seed from its generator
        # (torch's global one by default) even without workers.
        if prefix in ("iterator_train", "iterator_valid") and self.loader_seed is not None:
            generators = self.__dict__.setdefault("_loader_generators", {})
            if prefix not in generators:
                generators[prefix] = torch.Generator().manual_seed(self.loader_seed)
            params.setdefault("generator", generators[prefix])
        return params

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_loader_generators", None)  # recreated from loader_seed when needed
        return state

    def get_iterator(self, dataset, training=False):
        if not (training and self.distributed):
            return super().get_iterator(dataset, training=training)
        kwargs = self.get_params_for("iterator_train")
        kwargs.setdefault("batch_size", self.batch_size)
        return sharded_loader(dataset, kwargs, shuffle=bool(kwargs.get("shuffle", False)), seed=self.loader_seed or 0,
                              epoch=lambda: len(self.history))

    def _agree_finite(self, finite, stage):
        """Distributed: stop every process when one of them found a non-finite value."""
        if self.distributed and not agree(finite) and finite:
            raise FloatingPointError(
                f"Another training process found non-finite values in its {stage} at epoch {len(self.history)}; "
                "every process stops (see that process's error for the cause)."
            )

    def infer(self, x, **fit_params):
        if isinstance(x, dict) and "y_weights" in x:
            x = {key: value for key, value in x.items() if key != "y_weights"}
        return super().infer(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = to_tensor(y_true, device=self.device)
        pred_weights = true_weights = None
        if isinstance(X, dict):
            pred_weights = to_tensor(X["weights"], device=self.device) if "weights" in X else None
            true_weights = to_tensor(X["y_weights"], device=self.device) if "y_weights" in X else None
        # Name the stage that failed: the forward pass here, the loss just below,
        # the backward pass in _StopOnNonFinite.on_grad_computed.
        finite_outputs = bool(torch.isfinite(y_pred.detach()).all())
        self._agree_finite(finite_outputs, "forward pass")
        if not finite_outputs:
            kind = "nan" if bool(torch.isnan(y_pred.detach()).any()) else "inf"
            raise FloatingPointError(
                f"The network's forward pass produced non-finite outputs ({kind}) at epoch {len(self.history)} "
                f"({'training' if training else 'validation'} batch), before the loss: "
                + _nonfinite_forward_hint(self.module_, X, self.device)
            )
        loss = self.criterion_(y_pred, y_true, pred_weights, true_weights)
        finite_loss = bool(torch.isfinite(loss.detach()).all())
        self._agree_finite(finite_loss, "loss")
        if not finite_loss:
            name = self.criterion_.name
            culprit = (
                f"the user loss {getattr(name, '__name__', name)!r} returned it"
                if callable(name) else "the distance between prediction and target overflowed (extreme "
                "target values); use transform='symlog' or rescale y"
            )
            raise FloatingPointError(
                f"The loss became {float(loss.detach())} at epoch {len(self.history)} although the network's "
                f"outputs were finite: {culprit}."
            )
        return loss

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        with _watch_sigint() as sigint:
            try:
                return super().fit_loop(X, y, epochs=epochs, **fit_params)
            except KeyboardInterrupt as exc:
                if not sigint.arrived and _is_deliberate_stop(exc):
                    return self  # skorch's way for early stopping to end training
                raise TrainingInterrupted(_interrupt_origin(exc, sigint.arrived)) from None


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


class _SigintState:
    arrived = False


@contextlib.contextmanager
def _watch_sigint():
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


def _hook_frame(exc):
    """The innermost callback hook in ``exc``'s traceback: ``(callback, hook name,
    whether the hook raised it itself)``, or ``(None, None, False)``."""
    found = (None, None, False)
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self")
        if isinstance(owner, Callback) and frame.f_code.co_name.startswith("on_"):
            found = (owner, frame.f_code.co_name, tb.tb_next is None)
        tb = tb.tb_next
    return found


def _is_deliberate_stop(exc):
    """Whether a KeyboardInterrupt is a request to end training early: the
    package's StopTraining, or skorch's EarlyStopping raising it in its hooks.
    Anything else (Ctrl-C, a KeyboardInterrupt raised in user code, callbacks
    included) is an interrupt."""
    if isinstance(exc, StopTraining):
        return True
    owner, _, direct = _hook_frame(exc)
    return direct and isinstance(owner, EarlyStopping)


def _interrupt_origin(exc, sigint):
    """Where an interrupt came from, for the message ``fit`` raises."""
    if sigint:
        return ""
    owner, hook, _ = _hook_frame(exc)
    if owner is None:
        return ""
    return (
        f" (raised by callback {type(owner).__name__}.{hook}; to end training early from a "
        "callback and keep the model, raise sklearn_measattn.StopTraining there)"
    )


def _nonfinite_forward_hint(module, batch, device):
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


# Callback names the estimator or skorch already use.
_RESERVED_CALLBACK_NAMES = (
    "stop_on_non_finite", "early_stopping", "progress_bar", "epoch_timer", "train_loss", "valid_loss",
    "print_log", "lr_schedule", "checkpoint", "distributed_training",
)


def check_callbacks(callbacks):
    if callbacks is None:
        return
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks must be a list of skorch callbacks or None, got {type(callbacks).__name__}.")
    names = set()
    for index, entry in enumerate(callbacks):
        name, callback = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, entry)
        is_callback = isinstance(callback, Callback) or (isinstance(callback, type) and issubclass(callback, Callback))
        if not is_callback:
            raise TypeError(
                f"callbacks[{index}] is {callback!r}, not a skorch Callback; pass instances of "
                "skorch.callbacks.Callback subclasses, optionally as (name, callback) pairs."
            )
        if name is None:
            continue
        if not isinstance(name, str):
            raise TypeError(f"callbacks[{index}] has name {name!r}; callback names must be strings.")
        if name in _RESERVED_CALLBACK_NAMES:
            raise ValueError(
                f"callbacks[{index}] is named {name!r}, which the estimator already uses "
                f"({', '.join(_RESERVED_CALLBACK_NAMES)}); give it another name. Early stopping "
                "and progress output are the parameters early_stopping, patience and verbose."
            )
        if name in names:
            raise ValueError(f"Two callbacks are named {name!r}; callback names must be unique.")
        names.add(name)


def check_paired_counts(X, x_weights, y, y_weights):
    """loss='mse' pairs the i-th output point with the i-th target point of each measure."""
    x_counts = np.full(X.shape[0], X.shape[1]) if x_weights is None else (x_weights > 0).sum(axis=1)
    y_counts = np.full(y.shape[0], y.shape[1]) if y_weights is None else (y_weights > 0).sum(axis=1)
    differ = np.flatnonzero(x_counts != y_counts)
    if differ.size:
        i = int(differ[0])
        raise ValueError(
            f"loss='mse' needs paired targets with as many points as their inputs, but measure {i} "
            f"has {x_counts[i]} input and {y_counts[i]} target points ({differ.size} measure(s) "
            "differ); use loss='energy', 'sliced' or 'sinkhorn', which compare unpaired ensembles."
        )


def check_validation_split(n_samples, fraction):
    """early_stopping needs at least one measure on each side of the split."""
    n_valid = math.ceil(n_samples * fraction)
    if n_samples * fraction < 1 or n_samples - n_valid < 1:
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} splits {n_samples} measure(s) into "
            f"{n_samples - n_valid} for training and {n_valid} held out; each side needs at least one. "
            "Pass more measures or change validation_fraction."
        )


def probe_loss(loss, loss_params, n_features_out):
    """Call the loss once on two tiny batches and say what is wrong, before training."""
    generator = torch.Generator().manual_seed(0)
    if loss == "sliced" and "generator" not in loss_params:
        loss_params = {**loss_params, "generator": generator}  # not torch's global generator
    loss_fn = get_loss(loss, **loss_params)
    y_pred = torch.randn(2, 3, n_features_out, generator=generator, requires_grad=True)
    y_true = torch.randn(2, 3, n_features_out, generator=generator)
    name = getattr(loss, "__name__", loss)
    try:
        value = loss_fn(y_pred, y_true, None, None)
    except Exception as exc:
        raise ValueError(
            f"loss={name!r} raised {type(exc).__name__}: {exc} on a test batch of shape "
            "(2, 3, n_features_out); a loss is called as loss(y_pred, y_true, pred_weights, "
            "true_weights) with torch tensors (weights may be None)."
        ) from exc
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"loss={name!r} returned {type(value).__name__}; it must return a scalar torch tensor "
            "computed from y_pred with torch operations, so that it can be backpropagated."
        )
    if value.numel() != 1:
        hint = " (loss_params has reduction='none')" if loss_params.get("reduction") == "none" else ""
        raise ValueError(
            f"loss={name!r} returned a tensor of shape {tuple(value.shape)}{hint}; training needs "
            "a scalar loss. Use reduction='mean' or 'sum'."
        )
    if not value.dtype.is_floating_point or not value.requires_grad:
        raise TypeError(
            f"loss={name!r} returned a {value.dtype} tensor that does not depend on y_pred through "
            "autograd; compute it from y_pred with differentiable torch operations."
        )
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"loss={name!r} returned {float(value.detach())} on a finite test batch.")


class _StopOnNonFinite(Callback):
    """Abort training at the first non-finite gradient or loss, naming the stage.

    Non-finite forward outputs and losses are caught in ``_MeasureNet.get_loss``;
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



class OneCycleSchedule(Callback):
    """The one-cycle learning rate: a cosine warm-up to ``lr`` over the first 30% of the steps, then a cosine
    decay to ``lr / 1e4``, set before every training batch.

    The rate follows from the position in the training call (epochs done
    since ``first_epoch`` out of ``span`` epochs, batches done in this epoch),
    which the net's history holds: a fit resumed from a checkpoint continues
    the same curve. The peak is the net's ``lr``. Each ``fit`` is one cycle;
    a warm start or a ``partial_fit`` call starts a new cycle over its epochs.
    """

    WARMUP, START_DIVISOR, END_DIVISOR = 0.3, 25.0, 1e4

    def __init__(self):
        self.first_epoch, self.span = 0, None

    def start(self, first_epoch, span):
        """Set the epochs the cycle covers, before training starts."""
        self.first_epoch, self.span = first_epoch, span

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        shards = torch.distributed.get_world_size() if net.distributed else 1
        per_process = math.ceil(len(dataset_train) / shards)
        self.batches_per_epoch_ = max(1, math.ceil(per_process / net.batch_size))

    def on_batch_begin(self, net, training=False, **kwargs):
        if not training:
            return
        span = self.span or net.max_epochs
        epoch = len(net.history) - 1 - self.first_epoch
        batch = len(net.history[-1]["batches"]) - 1
        progress = min((epoch + batch / self.batches_per_epoch_) / span, 1.0)
        for group in net.optimizer_.param_groups:
            group["lr"] = self.rate(net.lr, progress)

    @classmethod
    def rate(cls, peak, progress):
        """The learning rate at ``progress`` (0 to 1) of a cycle that peaks at ``peak``."""
        if progress < cls.WARMUP:
            start, end, t = peak / cls.START_DIVISOR, peak, progress / cls.WARMUP
        else:
            start, end, t = peak, peak / cls.END_DIVISOR, (progress - cls.WARMUP) / (1 - cls.WARMUP)
        return start + (end - start) * (1 - math.cos(math.pi * t)) / 2


def schedule_epochs(net, first_epoch, span):
    """Tell the net's learning-rate schedule (if any) which epochs this training call covers."""
    for entry in net.callbacks or []:
        if isinstance(entry, tuple) and entry[0] == "lr_schedule":
            entry[1].start(first_epoch, span)


# The training options this package adds to skorch's keyword arguments in an estimator's net
# parameters: turned into callbacks, a validation split and collate functions here.
_TRAINING_OPTIONS = ("callbacks", "lr_schedule", "early_stopping", "context_size")
# The callbacks that belong to training and not to the fitted model.
_TRAINING_ONLY_CALLBACKS = ("distributed_training", "checkpoint")


def _criterion_generator(params, seed):
    """A private generator for the sliced loss's projections, unless the parameters bring one."""
    if params.get("criterion__name") == "sliced" and "criterion__generator" not in params:
        # on the CPU whatever the device: a CUDA generator would not unpickle without CUDA
        return {"criterion__generator": torch.Generator().manual_seed(seed + 1)}
    return {}


def _callbacks(options, verbose, distributed=False):
    """The net's callbacks for the user's callbacks, the schedule, early stopping and verbosity.

    Data-parallel training puts the gradient averaging first, so that every
    check after it sees the same gradients on every process, and shows progress
    on the first process only.
    """
    callbacks = [("distributed_training", DistributedTraining())] if distributed else []
    callbacks.append(("stop_on_non_finite", _StopOnNonFinite()))
    if options["lr_schedule"] == "onecycle":
        callbacks.append(("lr_schedule", OneCycleSchedule()))
    # User callbacks run before early stopping so they also see the last epoch.
    for index, callback in enumerate(options["callbacks"] or []):
        callbacks.append(callback if isinstance(callback, tuple) else (f"user_callback_{index}", callback))
    if options["early_stopping"]:
        patience = options["early_stopping"]["patience"]
        callbacks.append(("early_stopping", EarlyStopping(monitor="valid_loss", patience=patience, load_best=True)))
    if verbose and not (distributed and torch.distributed.get_rank() != 0):
        callbacks.append(("progress_bar", ProgressBar()))
    return callbacks


def _context_loaders(options, params, seed):
    """Loader settings that subsample each measure to ``context_size`` points (none without it)."""
    if options["context_size"] is None:
        return {}
    paired = params.get("criterion__name") == "mse"
    size = options["context_size"]
    return {
        "iterator_train__collate_fn": ContextSubsample(size, seed + 4, paired=paired),
        "iterator_valid__collate_fn": ContextSubsample(size, seed + 5, paired=paired, fresh=False),
    }


def _train_split(options, seed):
    if not options["early_stopping"]:
        return None
    return ValidSplit(options["early_stopping"]["validation_fraction"], stratified=False, random_state=seed)


def _split_options(params):
    """``params`` as (skorch's keyword arguments, this package's training options)."""
    options = {name: params.get(name) for name in _TRAINING_OPTIONS}
    return {name: value for name, value in params.items() if name not in _TRAINING_OPTIONS}, options


def build_net(params, n_features_in, n_features_out, device, seed, *, distributed=False, checkpoint=None):
    """The skorch net that trains a :class:`MeasureTransformer` (not yet initialised).

    ``params`` are the keyword arguments an estimator derives from its
    hyper-parameters: skorch's own (``module__*``, ``criterion__*``, ``lr``,
    ``optimizer__*``, ``batch_size``, ``max_epochs``, ``iterator_train__*``,
    ``verbose``) and the training options ``callbacks``, ``lr_schedule``,
    ``early_stopping`` (None or ``{"patience", "validation_fraction"}``) and
    ``context_size``. ``seed`` seeds the network's private random streams.
    With ``distributed``, on a process group already set up: each process
    trains on its shard of the measures and the gradients are averaged.
    ``checkpoint`` is a callback that goes last, after every other.
    """
    skorch_params, options = _split_options(params)
    on_first_process = not (distributed and torch.distributed.get_rank() != 0)
    verbose = skorch_params.pop("verbose", 0)
    net = _MeasureNet(
        MeasureTransformer,
        criterion=MeasureLoss,
        optimizer=torch.optim.AdamW,
        **skorch_params,
        verbose=verbose if on_first_process else 0,
        module__n_features_in=n_features_in,
        module__n_features_out=n_features_out,
        # Private generators for weights, dropout, shuffling and loss
        # projections: torch's global generator is shared by every thread.
        module__random_state=seed,
        **_criterion_generator(skorch_params, seed),
        train_split=_train_split(options, seed),
        **_context_loaders(options, skorch_params, seed),
        callbacks=_callbacks(options, verbose, distributed) + ([("checkpoint", checkpoint)] if checkpoint else []),
        device=device,
    )
    net.loader_seed = seed
    net.distributed = distributed
    net.training_params = freeze_params(params)
    return net


def train_net(net, inputs, targets, *, epochs, max_epochs, continued, resume=None):
    """Train ``net`` on a batch dict and targets; the trained net, as :func:`finish_training` leaves it.

    ``epochs`` more epochs (``None``: ``max_epochs``): from where a fitted net
    stands when ``continued``, from the checkpoint ``resume`` (``(tensors,
    metadata)``) of an interrupted fit, else from a fresh initialisation. An
    interrupt anywhere in it raises ``KeyboardInterrupt`` saying at which epoch.
    """
    total = (len(net.history) if continued else 0) + (epochs or max_epochs)
    try:
        if continued:
            schedule_epochs(net, len(net.history), epochs or max_epochs)
            net.partial_fit(inputs, targets, epochs=epochs)
        elif resume is not None:
            net.initialize()
            restore_checkpoint(net)
            if not resume[1]["finished"]:
                # Zero epochs left still ends training as an uninterrupted fit does (early stopping's best weights).
                net.partial_fit(inputs, targets, epochs=max(max_epochs - len(net.history), 0))
        elif epochs is not None:
            schedule_epochs(net, 0, epochs)
            net.initialize()
            net.partial_fit(inputs, targets, epochs=epochs)
        else:
            net.fit(inputs, targets)
    except (TrainingInterrupted, KeyboardInterrupt) as exc:
        # skorch would swallow Ctrl-C and leave a half-trained net that looks
        # fitted; a scikit-learn estimator (and a GridSearchCV around it) stops.
        # (A KeyboardInterrupt outside skorch's loop, e.g. in on_train_begin or
        # on_train_end, arrives here unwrapped.)
        origin = exc.args[0] if isinstance(exc, TrainingInterrupted) and exc.args else ""
        raise KeyboardInterrupt(
            f"Training interrupted at epoch {len(net.history)} of {total}{origin}; the estimator is left unfitted."
        ) from None
    return finish_training(net)


def restore_checkpoint(net):
    """Put the checkpoint a fresh fit resumes from into its initialised ``net``."""
    dict(net.callbacks_)["checkpoint"].restore(net)


def finish_training(net):
    """The trained ``net`` as the fitted model keeps it: in one process, without the
    callbacks that only training needs (gradient averaging, checkpoint writing)."""
    net.distributed = False
    net.callbacks_ = [(name, cb) for name, cb in net.callbacks_ if name not in _TRAINING_ONLY_CALLBACKS]
    net.callbacks = [cb for cb in net.callbacks if not (isinstance(cb, tuple) and cb[0] in _TRAINING_ONLY_CALLBACKS)]
    return net


def freeze_params(params):
    """A snapshot of parameter values that later in-place changes do not alter:
    containers copied, estimators (e.g. a transformer) as their class and params."""
    if isinstance(params, BaseEstimator):
        return (_EstimatorSnapshot, type(params), freeze_params(params.get_params(deep=False)))
    if isinstance(params, dict):
        return {key: freeze_params(value) for key, value in params.items()}
    if isinstance(params, (list, tuple)):
        return (type(params), *[freeze_params(value) for value in params])
    return params


class _EstimatorSnapshot:
    """Marks an estimator in a frozen snapshot."""


def same_params(a, b):
    """Whether two frozen values are the same (identity for objects without a safe ==)."""
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_params(a[key], b[key]) for key in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_params(x, y) for x, y in zip(a, b))
    if callable(a) or callable(b):
        return False  # functions, modules, callbacks: the same object or not at all
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - e.g. arrays, whose == is elementwise
        return False


def update_net(net, params):
    """Apply the net parameters of a continued fit (see :func:`build_net`) to its fitted ``net``.

    The optimiser keeps its state (the learning rate and the optimiser's
    settings are set on its parameter groups); the criterion and the callbacks
    are rebuilt only when their parameters changed since the net was built or
    last updated, so an unchanged warm start continues exactly.
    """
    before = getattr(net, "training_params", None)  # None: a net pickled before nets recorded them
    now = freeze_params(params)
    changed = set(now) if before is None else {
        name for name in set(now) | set(before) if not same_params(before.get(name), now.get(name))
    }
    skorch_params, options = _split_options(params)
    net.set_params(**{name: value for name, value in skorch_params.items()
                      if name == "lr" or name.startswith("optimizer__")})
    net.batch_size = skorch_params["batch_size"]
    net.max_epochs = skorch_params["max_epochs"]
    net.verbose = skorch_params["verbose"]
    if any(name.startswith("criterion__") for name in changed):
        for attribute in [name for name in vars(net) if name.startswith("criterion__")]:
            delattr(net, attribute)
        criterion = {name: value for name, value in skorch_params.items() if name.startswith("criterion__")}
        for name, value in {**criterion, **_criterion_generator(criterion, net.loader_seed)}.items():
            setattr(net, name, value)
        net.initialize_criterion()
    if changed & {*_TRAINING_OPTIONS, "verbose"}:
        net.callbacks = _callbacks(options, net.verbose)
        net.train_split = _train_split(options, net.loader_seed)
        net.initialize_callbacks()
    net.training_params = now
    return net


def as_batch(X, x_weights, y_weights):
    """The dict of float32 arrays that skorch slices into batches."""
    batch = {"X": X.astype(np.float32)}
    if x_weights is not None:
        batch["weights"] = x_weights.astype(np.float32)
    if y_weights is not None:
        batch["y_weights"] = y_weights.astype(np.float32)
    return batch


def fit_transform_points(transformer, X, weights):
    """Fit ``transformer`` on the real (positive-weight) points of ``X``; transform all."""
    if transformer is None:
        return X
    points = X.reshape(-1, X.shape[-1]) if weights is None else X[weights > 0]
    transformer.fit(points)
    return transform_points(transformer, X, "transform")


def transform_points(transformer, X, method):
    if transformer is None:
        return X
    flat = getattr(transformer, method)(X.reshape(-1, X.shape[-1]))
    return np.asarray(flat, dtype=np.float64).reshape(*X.shape[:2], -1)


def resolve_device(device):
    """The torch device a ``device`` parameter names (a string), checked against this machine.

    Takes the strings ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` and the
    equivalent :class:`torch.device` objects, as skorch does.
    """
    given = device
    if isinstance(device, torch.device):
        device = str(device)
    valid = "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device of type cpu or cuda"
    if not isinstance(device, str):
        raise ValueError(f"device must be {valid}, got {given!r}.")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda") or (parsed.type == "cpu" and parsed.index):
        raise ValueError(f"device must be {valid}, got {given!r}.")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine "
                f"(torch {torch.__version__}); use device='cpu' or device='auto'."
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} names GPU {parsed.index}, but this machine has "
                f"{torch.cuda.device_count()} (cuda:0 to cuda:{torch.cuda.device_count() - 1})."
            )
    return "cpu" if parsed.type == "cpu" else str(parsed)


def make_transform(transform):
    """A fresh transformer for a ``transform`` parameter (None, "symlog" or a transformer)."""
    if transform is None:
        return None
    if isinstance(transform, str):
        if transform != "symlog":
            raise ValueError(f"transform must be None, 'symlog' or a transformer object, got {transform!r}.")
        return SymlogTransformer()
    return clone(transform)
