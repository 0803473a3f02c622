"""``measattn fit`` and ``measattn predict``: train a model on your measures, keep it, apply it.

``fit`` reads input and target measures (any format ``load_measures`` reads),
trains a :class:`~sklearn_measattn.MeasureTransformerRegressor` and saves it
as a safetensors file (checkpointing every epoch with ``--checkpoint``);
``predict`` loads a saved model (a pickle only with ``--allow-pickle``) and writes its predictions, or the
images of query points under each measure's map (``--points``), as ``.npy``
(one dense array) or ``.npz`` (one array per measure). Every path and format is
checked before any training or prediction, and the estimator's own errors are
reported as they are, naming the option that brought the data.
"""

from __future__ import annotations

import os
import time

import numpy as np
from skorch.callbacks import Callback

from .._model_files import load_model, save_model
from .._persistence import is_pickle_like
from .._training import check_checkpoint_dir
from ..estimator import MeasureTransformerRegressor
from ..experiments import check_output_path, format_number, print_progress
from ..kernels import KERNEL_NAMES
from ..losses import LOSSES

__all__ = ["add_fit_parser", "add_predict_parser", "run_fit", "run_predict"]

_OUTPUT_FORMATS = (".npy", ".npz")
# Names that say "pickle"; fit writes safetensors only.
_PICKLE_SUFFIXES = (".joblib", ".pkl", ".pickle", ".pt", ".pth")
# Options of ``fit`` and the estimator parameters they set (None: the estimator's default).
_FIT_PARAMETERS = {
    "kernel": "kernel", "transform": "transform", "epochs": "max_epochs", "d_model": "d_model",
    "n_heads": "n_heads", "n_layers": "n_layers", "dim_feedforward": "dim_feedforward", "lr": "lr",
    "batch_size": "batch_size", "loss": "loss", "seed": "random_state", "device": "device",
    "context_size": "context_size",
}


class _EpochProgress(Callback):
    """One line per epoch on stderr: the epoch, its training (and validation) loss and duration."""

    def __init__(self, total):
        self.total = total

    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        valid = f", validation loss {format_number(row['valid_loss'])}" if "valid_loss" in row else ""
        print_progress(f"epoch {row['epoch']}/{self.total}: training loss {format_number(row['train_loss'])}"
                       f"{valid} ({format_number(row['dur'])} s)")


def add_fit_parser(sub):
    """Register ``measattn fit``."""
    from ._main import _add_loader_options, _positive_float, _positive_int

    defaults = MeasureTransformerRegressor().get_params()
    fit = sub.add_parser(
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
    fit.add_argument("--checkpoint", metavar="DIR", default=None,
                     help="write a checkpoint to DIR every epoch; the same command rerun resumes from it (a "
                          "checkpoint of other parameters or data is refused)")
    fit.add_argument("--group-column", default=None, metavar="COLUMN",
                     help="for CSV/TSV tables: the column naming each point's measure (default: measure)")
    _add_loader_options(fit, what="--data")
    _add_loader_options(fit, prefix="y-", what="--y (or from --data when --y is left out)",
                        default="y; in a separate --y archive without one, X, then arr_0, arr_1, ..., then a lone array")
    model = fit.add_argument_group("model and training")
    model.add_argument("--kernel", choices=KERNEL_NAMES, default=None,
                       help=f"attention kernel (default {defaults['kernel']})")
    model.add_argument("--transform", choices=("none", "symlog"), default=None,
                       help="pointwise transform of the data, inverted on the predictions (default none; symlog "
                            "for heavy tails)")
    model.add_argument("--epochs", type=_positive_int, default=None,
                       help=f"training epochs (default {defaults['max_epochs']})")
    model.add_argument("--d-model", type=_positive_int, default=None, help=f"model width (default {defaults['d_model']})")
    model.add_argument("--n-heads", type=_positive_int, default=None,
                       help=f"attention heads (default {defaults['n_heads']})")
    model.add_argument("--n-layers", type=_positive_int, default=None, help=f"blocks (default {defaults['n_layers']})")
    model.add_argument("--dim-feedforward", type=_positive_int, default=None,
                       help=f"hidden width of the feed-forward networks (default {defaults['dim_feedforward']})")
    model.add_argument("--lr", type=_positive_float, default=None, help=f"learning rate (default {defaults['lr']})")
    model.add_argument("--batch-size", type=_positive_int, default=None,
                       help=f"measures per batch (default {defaults['batch_size']})")
    model.add_argument("--loss", choices=tuple(LOSSES), default=None,
                       help=f"training loss (default {defaults['loss']}; mse needs targets paired point by point)")
    model.add_argument("--context-size", type=_positive_int, default=None, metavar="N",
                       help="attend to a random subsample of at most N points of each measure (fresh each training "
                            "step; every point still gets its image), for ensembles of many thousand points "
                            "(default: the whole measure)")
    model.add_argument("--seed", type=int, default=None, help="seed of the initial weights and shuffling (default 0)")
    model.add_argument("--device", default=None, help="auto, cpu, cuda or cuda:N (default: auto)")
    model.add_argument("--threads", type=_positive_int, default=None, help="torch threads (default: torch's choice)")
    fit.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def add_predict_parser(sub):
    """Register ``measattn predict``."""
    from ._main import _add_loader_options, _positive_int

    pred = sub.add_parser(
        "predict",
        help="apply a saved model: predicted measures, or the images of query points (--points)",
        description=(
            "Load a model saved by measattn fit (or sklearn_measattn.save_model) and write "
            "the predicted measure of every input measure of --data, or with --points FILE the image of every "
            "query point under the map of its measure (points[i] is moved by the map that measure i defines; the "
            "query points attend to the measure but are not part of it). --out ending in .npy writes one array "
            "(n_samples, n_points, n_features); .npz writes one array per measure, arr_0, arr_1, ... (needed when "
            "the measures have different numbers of points). Both read back with load_measures. A safetensors "
            "model file holds data only; a pickle (joblib.dump) can run code when loaded and is refused unless "
            "--allow-pickle is given."
        ),
    )
    pred.add_argument("model", metavar="MODEL", help="the saved model (.safetensors)")
    pred.add_argument("--allow-pickle", action="store_true",
                      help="also load a pickled model (joblib.dump); a pickle runs code when loaded: only for files "
                           "you made or trust")
    pred.add_argument("--data", required=True, metavar="FILE", help="input measures: .npy, .npz, .csv or .tsv")
    pred.add_argument("--points", metavar="FILE",
                      help="query points, one set per measure of --data (any number of points each)")
    pred.add_argument("--out", required=True, metavar="FILE", help="output file: .npy (dense) or .npz (one array per measure)")
    pred.add_argument("--group-column", default=None, metavar="COLUMN",
                      help="for CSV/TSV tables: the column naming each point's measure (default: measure)")
    _add_loader_options(pred, what="--data")
    _add_loader_options(pred, prefix="points-", what="--points")
    pred.add_argument("--batch-size", type=_positive_int, default=None,
                      help="measures per forward pass (default: the model's batch size)")
    pred.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _say(args, message):
    if not args.quiet:
        print_progress(message)


def _describe(measures):
    lengths = [len(m) for m in measures]
    sizes = f"{lengths[0]} points" if len(set(lengths)) == 1 else f"{min(lengths)} to {max(lengths)} points"
    return f"{len(lengths)} measures of {sizes}, {np.shape(measures[0])[-1]} features"


def _fail(parser, exc):
    """A failure during training or prediction (not a usage error): the message and exit code 1."""
    parser.exit(1, f"{parser.prog}: error: {exc}\n")


def run_fit(args, parser):
    """``measattn fit``: load, check, train, save."""
    from ._commands import _check_outputs, _load_pair

    _check_outputs(parser, save=args.save)
    if os.path.splitext(args.save)[1].lower() in _PICKLE_SUFFIXES:
        parser.error(f"--save {args.save!r}: measattn fit saves a safetensors model file (data only, safe to "
                     "share); name it e.g. model.safetensors. To pickle a model, use joblib.dump in Python.")
    params = {name: getattr(args, option) for option, name in _FIT_PARAMETERS.items()
              if getattr(args, option) is not None}
    if params.get("transform") == "none":
        params["transform"] = None
    params.setdefault("random_state", 0)
    if args.checkpoint is not None:
        try:
            check_checkpoint_dir(args.checkpoint)
        except ValueError as exc:
            parser.error(f"--checkpoint: {exc}")
        params["checkpoint_dir"] = args.checkpoint
    X, y, read = _load_pair(args, parser)
    model = MeasureTransformerRegressor(**params)
    if not args.quiet:
        model.set_params(callbacks=[("cli_progress", _EpochProgress(model.max_epochs))])
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    shown = {k: v for k, v in model.get_params().items()
             if k in ("kernel", "transform", "max_epochs", "d_model", "n_layers", "loss", "random_state")}
    _say(args, f"fit: {read['X']}: {_describe(X)}; targets {read['y']}: {_describe(y)}, paired {read['paired']}")
    _say(args, "fit: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    start = time.perf_counter()
    try:
        model.fit(X, y)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))  # raised before any training: a usage error, as in the Python API
    except FloatingPointError as exc:
        _fail(parser, exc)
    # The saved model carries neither the command-line progress printer nor the checkpoint directory.
    model.set_params(callbacks=None, checkpoint_dir=None)
    save_model(model, args.save)
    loss = model.history_[-1, "train_loss"]
    print(f"trained {len(model.history_)} epochs in {format_number(time.perf_counter() - start)} s "
          f"(final training loss {format_number(loss)}); saved the model to {args.save}")
    return 0


def _load_model(parser, path, *, allow_pickle):
    if not os.path.isfile(path):
        parser.error(f"MODEL {path!r}: no such file")
    if not is_pickle_like(path):
        try:
            return load_model(path)
        except ValueError as exc:
            parser.error(f"MODEL {exc}")
    if not allow_pickle:
        parser.error(f"MODEL {path!r} is a pickle (e.g. joblib.dump), and loading a pickle runs whatever code it "
                     "holds. It was not loaded. Use a model saved by measattn fit (a .safetensors file), or pass "
                     "--allow-pickle if you made this file yourself or trust its source.")
    import joblib

    try:
        model = joblib.load(path)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a model file"
        parser.error(f"MODEL {path!r} could not be loaded ({type(exc).__name__}: {exc}); give a file written by "
                     "measattn fit, save_model or joblib.dump")
    if not isinstance(model, MeasureTransformerRegressor):
        parser.error(f"MODEL {path!r} holds a {type(model).__name__}, not a MeasureTransformerRegressor")
    if not hasattr(model, "net_"):
        parser.error(f"MODEL {path!r} holds an unfitted MeasureTransformerRegressor; fit it first")
    return model


def _write(path, result):
    if path.lower().endswith(".npy"):
        np.save(path, np.asarray(result))
    else:
        np.savez(path, *[np.asarray(m) for m in result])


def run_predict(args, parser):
    """``measattn predict MODEL``: load, check, predict or transport, write."""
    from ._commands import _load, _npz_arrays

    extension = os.path.splitext(args.out)[1].lower()
    if extension not in _OUTPUT_FORMATS:
        parser.error(f"--out {args.out!r}: the output must end in .npy (one dense array) or .npz (one array per "
                     "measure)")
    try:
        check_output_path(args.out, what="--out")
    except ValueError as exc:
        parser.error(str(exc))
    if args.points is None and (args.points_key is not None or args.points_feature_columns is not None):
        parser.error("--points-key and --points-feature-columns apply only with --points FILE")
    model = _load_model(parser, args.model, allow_pickle=args.allow_pickle)
    X, _ = _load(parser, args.data, key=args.key, group_column=args.group_column,
                 feature_columns=args.feature_columns, option="--data")
    Z = None
    if args.points is not None:
        Z, _ = _load(parser, args.points, key=args.points_key, group_column=args.group_column,
                     feature_columns=args.points_feature_columns, option="--points")
    ragged = isinstance(Z if Z is not None else X, list)
    if ragged and extension == ".npy":
        what = "query point sets" if Z is not None else "measures"
        parser.error(f"--out {args.out!r}: the {what} have different numbers of points, so the output is one array "
                     "per measure; write it as .npz")
    _say(args, f"predict: model from {args.model} (kernel {model.kernel!r}, transform {model.transform!r}, "
               f"{model.n_features_in_} features in, {model.n_features_out_} out)")
    _say(args, f"predict: {args.data}{_npz_arrays(args.data, args.key)}: {_describe(X)}")
    if Z is not None:
        _say(args, f"predict: query points {args.points}{_npz_arrays(args.points, args.points_key)}: {_describe(Z)}")
    start = time.perf_counter()
    try:
        if Z is None:
            result = model.predict(X) if args.batch_size is None else _predict_batches(model, X, args.batch_size)
        else:
            result = model.transport(X, Z, batch_size=args.batch_size)
    except (ValueError, TypeError) as exc:
        parser.error(f"{_option_of(str(exc), Z is not None)}: {exc}")
    except FloatingPointError as exc:
        _fail(parser, exc)
    _write(args.out, result)
    shape = f"shape {np.shape(result)}" if not isinstance(result, list) else f"{len(result)} arrays arr_0 ..."
    print(f"wrote {'the images of the query points' if Z is not None else 'the predictions'} ({shape}) to "
          f"{args.out} in {format_number(time.perf_counter() - start)} s")
    return 0


def _option_of(message, with_points):
    """The option whose file an estimator message is about (the API names the arrays X and points)."""
    if with_points and message.startswith("points"):
        return "--points"
    if with_points and "but points has" in message:
        return "--data and --points"
    return "--data"


def _predict_batches(model, X, batch_size):
    """``predict`` with ``batch_size`` measures per forward pass (the images of the measures' own points)."""
    return model.transport(X, X, batch_size=batch_size)
