"""The ``measattn`` parser, built from the command modules, and the entry point that runs a command.

``measattn diagnose FILE`` estimates the tails of the measures in a file and
recommends a kernel and transform; ``measattn compare`` trains one model per
kernel and transform on a benchmark, or with ``--data`` on your own measures,
and prints held-out metrics with a collapse verdict; ``measattn ess`` prints
the attention effective sample size of each kernel on simulated tails, without
training; ``measattn fit`` trains a model on your measures and saves it, and
``measattn predict`` applies a saved model; ``measattn train-analysis``
trains a learned analysis step for a record of observation errors.

Each command lives in its own module, which follows one protocol (its two
functions' docstrings say only what is their own):

- ``add_parser(subparsers)`` adds the command's parser to ``subparsers`` (what
  ``ArgumentParser.add_subparsers`` returned), sets ``run`` as the function
  that runs it, and returns the parser;
- ``run(args, parser)`` runs the command on the parsed command line ``args``
  and returns the exit code 0. A usage error, or a value the library refuses
  before any work, exits through ``parser`` with code 2 (argparse's usage
  errors); a training or prediction that fails once running exits with code 1
  (:func:`~._report.fail`).

:func:`build_parser` also sets ``command_parser``, the command's own parser,
which :func:`main` hands to ``run``.
"""

from __future__ import annotations

import argparse

from . import compare, diagnose, ess, fit, predict, train_analysis

__all__ = ["build_parser", "main"]

# The commands, in the order of the help.
_COMMANDS = (diagnose, compare, fit, predict, ess, train_analysis)


def build_parser():
    """The parser of ``measattn`` / ``python -m sklearn_measattn``.

    Returns
    -------
    parser : argparse.ArgumentParser
        Each command's arguments parse with ``run`` (the function that runs
        it) and ``command_parser`` (its own parser, for usage errors) set.
    """
    parser = argparse.ArgumentParser(
        prog="measattn",
        description=(
            "Attention kernels for heavy-tailed ensembles: diagnose your measures, compare kernels on them or on "
            "benchmarks, and see when softmax attention collapses onto a single point."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command_parser = command.add_parser(subparsers)
        command_parser.set_defaults(command_parser=command_parser)
    return parser


def main(argv=None):
    """Entry point of ``measattn`` / ``python -m sklearn_measattn``.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments (None: ``sys.argv[1:]``).

    Returns
    -------
    code : int
        The exit code; usage errors and failures exit through ``SystemExit``.
    """
    args = build_parser().parse_args(argv)
    return args.run(args, args.command_parser)
