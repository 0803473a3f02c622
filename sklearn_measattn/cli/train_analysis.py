"""``measattn train-analysis``: train a learned scalar analysis for a record of observation errors, save the model.

Reads the errors (a 1-D ``.npy`` array, or one column of a ``.csv``/``.tsv``
table), checks them and the output path before any work, trains with
:func:`~sklearn_measattn.assimilation.fit_learned_analysis` on the law that
resamples them, and saves the model file, which holds its recipe:
``LearnedAnalysis(load_model(path))`` reads it with nothing passed beside it.
The heavy modules are imported when the command runs, not for ``--help``.
"""

from __future__ import annotations

import csv
import os
import time

from ._arguments import positive_int, seed
from ._files import check_outputs
from ._report import elapsed, fail, say

__all__ = ["add_parser", "run", "read_errors"]


def add_parser(subparsers):
    """Add ``measattn train-analysis`` to ``subparsers``; return its parser (the protocol is in :mod:`._main`)."""
    command = subparsers.add_parser(
        "train-analysis",
        help="train a learned analysis step for your record of observation errors and save it",
        description=(
            "Train a learned scalar analysis (a LearnedAnalysis step for ensemble filters) for the noise law of a "
            "record of observation errors (observation minus true value): likelihood-free, from synthetic priors "
            "observed with errors resampled from the record, no density fitted. The model file holds how to read "
            "it: in Python, LearnedAnalysis(load_model(MODEL)). About 4 minutes on 2 CPU cores with the defaults."
        ),
    )
    command.add_argument("--errors", required=True, metavar="FILE",
                         help="the recorded errors: a 1-D .npy array, or a .csv/.tsv table of one column (or "
                              "--column), with or without a header line; at least 100 finite values")
    command.add_argument("--column", default=None, metavar="NAME",
                         help="the column of the errors in a table with a header line")
    command.add_argument("--save", required=True, metavar="MODEL", help="where to save the model (.safetensors)")
    training = command.add_argument_group("training")
    training.add_argument("--n-priors", type=positive_int, default=30000,
                          help="synthetic priors (default 30000; four training pairs each, reflected for a "
                               "symmetric record)")
    training.add_argument("--max-epochs", type=positive_int, default=5, help="epochs (default 5)")
    training.add_argument("--ensemble-size", type=positive_int, default=40,
                          help="members of the synthetic priors (default 40; the model serves other sizes)")
    training.add_argument("--seed", type=seed, default=0, help="seeds the pairs and the network (default 0)")
    training.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)")
    command.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    command.set_defaults(run=run)
    return command


def read_errors(path, column=None):
    """The recorded errors of ``path``: a 1-D ``.npy`` array or one column of a ``.csv``/``.tsv`` table.

    Parameters
    ----------
    path : str
        The file.
    column : str or None, default=None
        The column's name (the table's first line is then its header); None:
        the table must have one column, its first line a header if it is not a number.

    Returns
    -------
    errors : ndarray of shape (n_errors,)

    Raises
    ------
    ValueError
        If the file cannot be read as such, naming what was found.
    """
    import numpy as np

    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        errors = np.load(path, allow_pickle=False)
        if errors.ndim == 2 and 1 in errors.shape:
            errors = errors.reshape(-1)
        return errors
    if suffix not in (".csv", ".tsv", ".txt"):
        raise ValueError(f"--errors {path!r}: read .npy, .csv, .tsv or .txt files; got a {suffix or 'suffix-less'} file.")
    with open(path, newline="") as handle:
        rows = [row for row in csv.reader(handle, delimiter="\t" if suffix == ".tsv" else ",") if row]
    if not rows:
        raise ValueError(f"--errors {path!r} is empty.")
    header = rows[0]
    if column is not None:
        if column not in header:
            raise ValueError(f"--column {column!r} is not in the header of {path!r}: its columns are {header}.")
        index, body = header.index(column), rows[1:]
    else:
        if len(header) != 1:
            raise ValueError(f"{path!r} has {len(header)} columns ({header}); name the one of the errors with --column.")
        index = 0
        body = rows[1:] if not _is_number(header[0]) else rows
    try:
        return np.array([float(row[index]) for row in body], dtype=np.float64)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"--errors {path!r}: a value of the errors' column is not a number ({exc}).") from None


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def run(args, parser):
    """Run ``measattn train-analysis``: check and read the errors, train, save.

    A failed training exits with code 1; the command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    check_outputs(parser, save=args.save)
    if os.path.splitext(args.save)[1].lower() != ".safetensors":
        parser.error(f"--save {args.save!r}: the model is saved as a safetensors file; name it e.g. model.safetensors.")
    if not os.path.isfile(args.errors):
        parser.error(f"--errors {args.errors!r} does not exist or is not a file.")
    import torch

    from .. import save_model
    from ..assimilation import SampledNoise, fit_learned_analysis
    from ._epoch_progress import EpochProgress

    try:
        errors = read_errors(args.errors, args.column)
        law = SampledNoise(errors)
    except (ValueError, TypeError, OSError) as exc:
        parser.error(str(exc))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    say(args, f"train-analysis: {len(law.errors)} errors from {os.path.basename(args.errors)}: robust scale "
              f"{law.scale:.4g}, tail {law.tail:.3f}, {'symmetric' if law.symmetric else 'not symmetric'}")
    start = time.perf_counter()
    try:
        step = fit_learned_analysis(law, n_priors=args.n_priors, max_epochs=args.max_epochs,
                                    ensemble_size=args.ensemble_size, random_state=args.seed,
                                    callbacks=[("cli_progress", EpochProgress(args.max_epochs, quiet=args.quiet))])
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    except FloatingPointError as exc:
        fail(parser, exc)
    step.estimator.set_params(callbacks=None)  # the saved model does not carry the progress printer
    save_model(step.estimator, args.save)
    say(args, f"train-analysis: {elapsed(start)}")
    print(f"saved the learned analysis to {args.save}; in Python: LearnedAnalysis(load_model({args.save!r}))")
    return 0
