"""What the ``measattn`` commands print besides their results: progress, sizes, time, failures.

``--help`` loads this module, so it imports nothing heavy at module level: the
number format comes from :mod:`sklearn_measattn.experiments` when a command
prints one.
"""

from __future__ import annotations

import sys
import time

__all__ = ["describe_measures", "describe_training", "elapsed", "fail", "say"]


def say(args, message):
    """Print a progress line on stderr unless ``--quiet`` was given.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line, with a ``quiet`` flag.
    message : str
        The line.
    """
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)  # as experiments.print_progress, without importing it


def describe_measures(measures):
    """How many measures, points and features, in words.

    Parameters
    ----------
    measures : ndarray of shape (n_samples, n_points, n_features) or list of ndarray
        A batch of measures, dense or ragged.

    Returns
    -------
    text : str
        E.g. ``"10 measures of 16 points, 2 features"``.
    """
    import numpy as np

    lengths = [len(m) for m in measures]
    sizes = f"{lengths[0]} points" if len(set(lengths)) == 1 else f"{min(lengths)} to {max(lengths)} points"
    return f"{len(lengths)} measures of {sizes}, {np.shape(measures[0])[-1]} features"


def describe_training(epochs_before, epochs, max_epochs, seconds):
    """What a fit trained in this run, in words: fresh, resumed from a checkpoint, or loaded finished.

    Parameters
    ----------
    epochs_before : int or None
        The epochs the history held when training began (those of the
        checkpoint a fit resumed from, 0 for a fresh fit), or ``None`` when no
        training began (the checkpoint of a finished fit, loaded as it is).
    epochs : int
        The epochs in the fitted model's history, those of the checkpoint included.
    max_epochs : int
        The fit's ``max_epochs``.
    seconds : float
        How long the fit took.

    Returns
    -------
    text : str
        E.g. ``"trained 12 epochs in 36.3 s"``, ``"resumed at epoch 7 of 12,
        trained 6 epochs in 36.3 s, 12 in all"`` or ``"trained no epochs: the
        checkpoint holds the finished fit (12 epochs), loaded in 1.54 s"``.
    """
    from ..experiments import format_number

    duration = format_number(seconds)
    trained = 0 if epochs_before is None else epochs - epochs_before
    if trained <= 0:
        return f"trained no epochs: the checkpoint holds the finished fit ({_epochs(epochs)}), loaded in {duration} s"
    if epochs_before == 0:
        return f"trained {_epochs(trained)} in {duration} s"
    return (f"resumed at epoch {epochs_before + 1} of {max_epochs}, trained {_epochs(trained)} in {duration} s, "
            f"{epochs} in all")


def _epochs(count):
    return f"{count} epoch" if count == 1 else f"{count} epochs"


def elapsed(start):
    """The time since ``start`` (a ``time.perf_counter()`` reading), as the commands print it.

    Parameters
    ----------
    start : float
        When the work started.

    Returns
    -------
    text : str
        E.g. ``"total time 1.23 s"``.
    """
    from ..experiments import format_number

    return f"total time {format_number(time.perf_counter() - start)} s"


def fail(parser, exc):
    """Exit with code 1 on a failure during training or prediction (not a usage error).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser, which names the program.
    exc : Exception
        The failure; its message is printed.
    """
    parser.exit(1, f"{parser.prog}: error: {exc}\n")
