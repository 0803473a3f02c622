"""The progress printer of ``measattn fit``: a skorch callback, in a module of its own so that ``--help`` needs no skorch."""

from __future__ import annotations

from skorch.callbacks import Callback

from ..experiments import format_number, print_progress

__all__ = ["EpochProgress"]


class EpochProgress(Callback):
    """Note where this run's training starts; print one line per epoch on stderr unless quiet.

    Parameters
    ----------
    total : int
        The fit's ``max_epochs``, shown as ``epoch 3/12``.
    quiet : bool, default=False
        Print nothing (``--quiet``); where training started is noted all the same.

    Attributes
    ----------
    epochs_before_ : int or None
        The epochs the history held when this run's training began: 0 for a
        fresh fit, those of the checkpoint for a resumed one, ``None`` when no
        training began (a checkpoint of a finished fit is loaded as it is).
    """

    def __init__(self, total, quiet=False):
        self.total = total
        self.quiet = quiet
        self.epochs_before_ = None

    def on_train_begin(self, net, **kwargs):
        # A resumed fit's history holds the checkpoint's epochs by now.
        self.epochs_before_ = len(net.history)

    def on_epoch_end(self, net, **kwargs):
        if self.quiet:
            return
        row = net.history[-1]
        valid = f", validation loss {format_number(row['valid_loss'])}" if "valid_loss" in row else ""
        print_progress(f"epoch {row['epoch']}/{self.total}: training loss {format_number(row['train_loss'])}"
                       f"{valid} ({format_number(row['dur'])} s)")
