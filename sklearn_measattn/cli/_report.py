"""What the ``measattn`` commands print besides their results: progress, sizes, time, failures."""

from __future__ import annotations

import time

import numpy as np

from ..experiments import format_number, print_progress

__all__ = ["describe_measures", "elapsed", "fail", "say"]


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
        print_progress(message)


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
    lengths = [len(m) for m in measures]
    sizes = f"{lengths[0]} points" if len(set(lengths)) == 1 else f"{min(lengths)} to {max(lengths)} points"
    return f"{len(lengths)} measures of {sizes}, {np.shape(measures[0])[-1]} features"


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
