"""The skorch net that trains a :class:`~sklearn_measattn.transformer.MeasureTransformer`, and its loop.

The net's batches are dicts, so that point weights reach the module and the
loss; its loop stops at the first non-finite forward output or loss (naming
the stage), and tells an interrupt from a request to stop early (see
:mod:`._guards`). :func:`build_net` builds it from the keyword arguments an
estimator derives from its hyper-parameters, :func:`train_net` trains it,
:func:`update_net` applies a continued fit's parameters to it.
"""

from __future__ import annotations

import numpy as np
import torch
from skorch import NeuralNetRegressor
from skorch.dataset import ValidSplit
from skorch.utils import to_tensor

from ..losses import MeasureLoss
from ..transformer import MeasureTransformer
from ._callbacks import schedule_epochs, training_callbacks
from ._context import ContextSubsample
from ._distributed import agree, is_first_process, sharded_loader
from ._guards import (
    TrainingInterrupted,
    from_callback,
    interrupt_origin,
    is_deliberate_stop,
    nonfinite_forward_hint,
    watch_sigint,
)
from ._loss import criterion_generator
from ._params import TRAINING_OPTIONS, freeze_params, same_params, split_options
from ._streams import RandomStreams

__all__ = ["as_batch", "build_net", "finish_training", "restore_checkpoint", "train_net", "update_net"]

# The callbacks that belong to training and not to the fitted model.
_TRAINING_ONLY_CALLBACKS = ("distributed_training", "checkpoint")


class _MeasureNet(NeuralNetRegressor):
    """skorch net whose batches are dicts ``{"X", "weights"?, "y_weights"?}``.

    Input point weights go to the module and, with the target weights, to the
    criterion; ``y_weights`` never reaches the module.
    """

    # The seed of the fit (its random streams derive from it; see RandomStreams).
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
                generators[prefix] = RandomStreams(self.loader_seed).generator("shuffling")
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
        return sharded_loader(dataset, kwargs, shuffle=bool(kwargs.get("shuffle", False)),
                              seed=RandomStreams(self.loader_seed or 0).seed_of("shuffling"),
                              epoch=lambda: len(self.history))

    def notify(self, method_name, **cb_kwargs):
        # skorch's, noting which callback hook a KeyboardInterrupt came from (early stopping's, or another's)
        getattr(self, method_name)(self, **cb_kwargs)
        for _, callback in self.callbacks_:
            with from_callback(callback, method_name):
                getattr(callback, method_name)(self, **cb_kwargs)

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
                + nonfinite_forward_hint(self.module_, X, self.device)
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
        with watch_sigint() as sigint:
            try:
                return super().fit_loop(X, y, epochs=epochs, **fit_params)
            except KeyboardInterrupt as exc:
                if is_deliberate_stop(exc, sigint.arrived):
                    return self  # skorch's way for early stopping to end training
                raise TrainingInterrupted(interrupt_origin(exc, sigint.arrived)) from None


def _context_loaders(options, params, streams):
    """Loader settings that subsample each measure to ``context_size`` points (none without it)."""
    if options["context_size"] is None:
        return {}
    paired = params.get("criterion__name") == "mse"
    size = options["context_size"]
    return {
        "iterator_train__collate_fn": ContextSubsample(size, streams.seed_of("training_context"), paired=paired),
        "iterator_valid__collate_fn": ContextSubsample(size, streams.seed_of("validation_context"), paired=paired,
                                                       fresh=False),
    }


def _train_split(options, streams):
    if not options["early_stopping"]:
        return None
    return ValidSplit(options["early_stopping"]["validation_fraction"], stratified=False,
                      random_state=streams.seed_of("validation_split"))


def build_net(params, n_features_in, n_features_out, device, seed, *, distributed=False, checkpoint=None):
    """The skorch net that trains a :class:`MeasureTransformer` (not yet initialised).

    ``params`` are the keyword arguments an estimator derives from its
    hyper-parameters: skorch's own (``module__*``, ``criterion__*``, ``lr``,
    ``optimizer__*``, ``batch_size``, ``max_epochs``, ``iterator_train__*``,
    ``verbose``) and the training options ``callbacks``, ``lr_schedule``,
    ``early_stopping`` (None or ``{"patience", "validation_fraction"}``) and
    ``context_size``. ``seed`` is the fit's seed, from which each of the
    network's private random streams derives. With ``distributed``, on a
    process group already set up: each process trains on its shard of the
    measures and the gradients are averaged. ``checkpoint`` is a callback that
    goes last, after every other.
    """
    skorch_params, options = split_options(params)
    streams = RandomStreams(seed)
    verbose = skorch_params.pop("verbose", 0)
    net = _MeasureNet(
        MeasureTransformer,
        criterion=MeasureLoss,
        optimizer=torch.optim.AdamW,
        **skorch_params,
        verbose=verbose if is_first_process(distributed) else 0,
        module__n_features_in=n_features_in,
        module__n_features_out=n_features_out,
        # Private generators for weights, dropout, shuffling and loss
        # projections: torch's global generator is shared by every thread.
        module__random_state=streams.seed_of("weights"),
        **criterion_generator(skorch_params, streams),
        train_split=_train_split(options, streams),
        **_context_loaders(options, skorch_params, streams),
        callbacks=training_callbacks(options, verbose, distributed) + ([("checkpoint", checkpoint)] if checkpoint else []),
        device=device,
    )
    net.loader_seed = streams.seed
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
    skorch_params, options = split_options(params)
    net.set_params(**{name: value for name, value in skorch_params.items()
                      if name == "lr" or name.startswith("optimizer__")})
    net.batch_size = skorch_params["batch_size"]
    net.max_epochs = skorch_params["max_epochs"]
    net.verbose = skorch_params["verbose"]
    if any(name.startswith("criterion__") for name in changed):
        for attribute in [name for name in vars(net) if name.startswith("criterion__")]:
            delattr(net, attribute)
        criterion = {name: value for name, value in skorch_params.items() if name.startswith("criterion__")}
        for name, value in {**criterion, **criterion_generator(criterion, RandomStreams(net.loader_seed))}.items():
            setattr(net, name, value)
        net.initialize_criterion()
    if changed & {*TRAINING_OPTIONS, "verbose"}:
        net.callbacks = training_callbacks(options, net.verbose)
        net.train_split = _train_split(options, RandomStreams(net.loader_seed))
        net.initialize_callbacks()
    net.training_params = now
    return net


def as_batch(X, x_weights, y_weights):
    """The dict of float32 arrays that skorch slices into batches (float32 data are not copied)."""
    batch = {"X": X.astype(np.float32, copy=False)}
    if x_weights is not None:
        batch["weights"] = x_weights.astype(np.float32)
    if y_weights is not None:
        batch["y_weights"] = y_weights.astype(np.float32)
    return batch
