"""Argument types, shared options and usage errors of the ``measattn`` commands.

Nothing here imports torch or the estimator at module level: the parsers are
built for ``--help`` too, which must answer at once.

The argparse types (:func:`positive_int`, :func:`positive_float`, :func:`seed`,
:func:`device`) each take the text typed and return the value, or raise
``argparse.ArgumentTypeError`` with a message that quotes the text, which
argparse reports as a usage error naming the option.
"""

from __future__ import annotations

import argparse
import math

__all__ = [
    "DEFAULT_KERNELS",
    "add_group_column_option",
    "add_loader_options",
    "device",
    "option_error",
    "positive_float",
    "positive_int",
    "seed",
]

#: The seeds numpy takes, and so scikit-learn's ``random_state``: 0 to 2**32 - 1.
_MAX_SEED = 2**32 - 1

#: The kernels ``compare`` and ``ess`` run when none are named.
DEFAULT_KERNELS = ("softmax", "poly", "log", "sigmoid")


def positive_int(text):
    """An integer ``>= 1`` (an argparse type: see the module docstring)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text):
    """A finite number ``> 0`` (an argparse type: see the module docstring)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
    return value


def seed(text):
    """A seed: an integer from 0 to ``2**32 - 1``, what numpy's generators (so ``random_state``) take (an argparse
    type: see the module docstring)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= _MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed, an integer from 0 to {_MAX_SEED}, got {text!r}")
    return value


def device(text):
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``, unchanged once the estimator's device check takes it (it resolves
    the value again when it trains; an argparse type: see the module docstring, the message is the estimator's)."""
    from ..estimator import resolve_device  # torch: only once a device is read, never for --help

    try:
        resolve_device(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_group_column_option(parser):
    """Add ``--group-column``, the column naming each point's measure in a table.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
        Where the option goes.
    """
    parser.add_argument("--group-column", default=None, metavar="COLUMN",
                        help="for CSV/TSV tables: the column naming each point's measure (default: measure)")


def add_loader_options(parser, *, prefix="", what="the file", default="X, then arr_0, arr_1, ..., then a lone array"):
    """Add the options that say what to read from one measure file: ``--{prefix}key`` and ``--{prefix}feature-columns``.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
        Where the options go.
    prefix : str, default=""
        Put before the option names, e.g. ``"y-"`` for the targets' file.
    what : str, default="the file"
        How the help names the file.
    default : str
        What the help says is read from an .npz without ``--{prefix}key``.
    """
    dash = f"--{prefix}" if prefix else "--"
    parser.add_argument(f"{dash}key", default=None, metavar="NAME",
                        help=f"for an .npz: the array (or per-measure prefix NAME_0, NAME_1, ...) to read from {what} "
                             f"(default: {default}); the report names the array it read")
    parser.add_argument(f"{dash}feature-columns", nargs="+", default=None, metavar="COLUMN",
                        help=f"for a CSV/TSV table: the columns of {what} holding the coordinates "
                             "(default: every column but the measure column)")


def option_error(parser, options, message):
    """Exit with a usage error (code 2) naming the option or options at fault, as argparse words its own.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser, whose usage is printed.
    options : str or tuple of str
        The option (``"--data"``) or options (``("--data", "--points")``) the
        message is about.
    message : str or Exception
        Why the value is refused, as the check that refused it says it.
    """
    options = (options,) if isinstance(options, str) else tuple(options)
    label = "argument" if len(options) == 1 else "arguments"
    parser.error(f"{label} {' and '.join(options)}: {message}")
