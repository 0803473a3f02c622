"""``measattn fit``: train a model on your measures and save it.

Reads input and target measures (any format ``load_measures`` reads), trains a
:class:`~sklearn_measattn.MeasureTransformerRegressor` and saves it as a
safetensors file, checkpointing every epoch with ``--checkpoint``. Every path,
file and option is checked before training; the options that set estimator
hyper-parameters come from :data:`~._estimator_options.ESTIMATOR_OPTIONS`.
torch, skorch and the estimator are imported when the command runs, not for
``--help``.
"""

from __future__ import annotations

import argparse
import os
import time

from ._arguments import add_group_column_option, add_loader_options, positive_int
from ._estimator_options import add_estimator_options, estimator_params
from ._files import check_outputs, load_pair
from ._report import describe_measures, describe_training, fail, say

__all__ = ["add_parser", "run"]

# Names that say "pickle"; fit writes safetensors only.
_PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle", ".pt", ".pth")
# The parameters the progress line shows before training.
_SHOWN_PARAMETERS = ("kernel", "transform", "max_epochs", "d_model", "n_layers", "loss", "random_state")


def _checkpoint_dir(text):
    """A ``--checkpoint`` directory the estimator can write to, checked as the command line is read."""
    from ..estimator import check_checkpoint_dir

    try:
        check_checkpoint_dir(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_parser(subparsers):
    """Add ``measattn fit`` to ``subparsers``; return its parser (the command protocol is in :mod:`._main`)."""
    fit = subparsers.add_parser(
        "fit",
        help="train a model on your measures and save it (then apply it with measattn predict)",
        description=(
            "Train a MeasureTransformerRegressor on your input measures (--data) and their target measures (--y), "
            "each in a format that load_measures reads (.npy, .npz, .csv, .tsv), and save the fitted model as a "
            "safetensors file (--save), which holds data only and is safe to share. With --checkpoint DIR a "
            "checkpoint is written every epoch, and rerunning the same command after a crash resumes from it. The "
            "paths, the files and the parameters are checked before training."
        ),
    )
    fit.add_argument("--data", required=True, metavar="FILE", help="input measures: .npy, .npz, .csv or .tsv")
    fit.add_argument("--y", metavar="FILE",
                     help="target measures, one per input measure; may be left out only when --data is an .npz "
                          "that also holds them as array 'y'. Two tables (CSV/TSV) are paired by measure name")
    fit.add_argument("--save", required=True, metavar="MODEL",
                     help="where to save the fitted model, a safetensors file (e.g. model.safetensors)")
    fit.add_argument("--checkpoint", metavar="DIR", default=None, type=_checkpoint_dir,
                     help="write a checkpoint to DIR every epoch; the same command rerun resumes from it (a "
                          "checkpoint of other parameters or data is refused)")
    add_group_column_option(fit)
    add_loader_options(fit, what="--data")
    add_loader_options(fit, prefix="y-", what="--y (or from --data when --y is left out)",
                       default="y; in a separate --y archive without one, X, then arr_0, arr_1, ..., then a lone array")
    model = fit.add_argument_group("model and training")
    add_estimator_options(model)
    model.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)")
    fit.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    fit.set_defaults(run=run)
    return fit


def run(args, parser):
    """Run ``measattn fit``: check, load, train, save.

    A failed training exits with code 1; the command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    import torch

    from .. import MeasureTransformerRegressor, save_model
    from ..experiments import format_number
    from ._epoch_progress import EpochProgress

    params = estimator_params(args)
    check_outputs(parser, save=args.save)
    if os.path.splitext(args.save)[1].lower() in _PICKLE_SUFFIXES:
        parser.error(f"--save {args.save!r}: measattn fit saves a safetensors model file (data only, safe to "
                     "share); name it e.g. model.safetensors. To pickle a model, use joblib.dump in Python.")
    if args.checkpoint is not None:
        params["checkpoint_dir"] = args.checkpoint
    X, y, read = load_pair(args, parser)
    model = MeasureTransformerRegressor(**params)
    progress = EpochProgress(model.max_epochs, quiet=args.quiet)
    model.set_params(callbacks=[("cli_progress", progress)])
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    shown = {name: value for name, value in model.get_params().items() if name in _SHOWN_PARAMETERS}
    say(args, f"fit: {read['X']}: {describe_measures(X)}; targets {read['y']}: {describe_measures(y)}, "
              f"paired {read['paired']}")
    say(args, "fit: " + ", ".join(f"{name}={value}" for name, value in shown.items()))
    start = time.perf_counter()
    try:
        model.fit(X, y)
    except (ValueError, TypeError) as exc:
        # Raised before any training (parameters that must agree, data the estimator refuses): a usage error,
        # as in the Python API.
        parser.error(str(exc))
    except FloatingPointError as exc:
        fail(parser, exc)
    # The saved model carries neither the command-line progress printer nor the checkpoint directory.
    model.set_params(callbacks=None, checkpoint_dir=None)
    save_model(model, args.save)
    summary = describe_training(progress.epochs_before_, len(model.history_), model.max_epochs,
                                time.perf_counter() - start)
    print(f"{summary} (final training loss {format_number(model.history_[-1, 'train_loss'])}); "
          f"saved the model to {args.save}")
    return 0
