"""The callbacks training runs with: the user's, checked before training, the one-cycle learning-rate
schedule, early stopping, progress output, the non-finite guard and, in a data-parallel fit, the gradient
averaging, in the order they must run."""

from __future__ import annotations

import math

import torch
from skorch.callbacks import Callback, EarlyStopping, ProgressBar

from ._distributed import DistributedTraining, is_first_process
from ._guards import _StopOnNonFinite

__all__ = ["OneCycleSchedule", "check_callbacks", "schedule_epochs", "training_callbacks"]

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



def training_callbacks(options, verbose, distributed=False):
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
    if verbose and is_first_process(distributed):
        callbacks.append(("progress_bar", ProgressBar()))
    return callbacks
