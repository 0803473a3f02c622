"""``measattn predict``: apply a saved model.

Loads a model saved by ``measattn fit`` (a pickle only with ``--allow-pickle``)
and writes its predictions, or the images of query points under each measure's
map (``--points``), as ``.npy`` (one dense array) or ``.npz`` (one array per
measure). The model, the files and the output path are checked before any
prediction, and a file the model refuses is reported with the estimator's
message, naming the option that brought it. The model's code (torch, skorch)
is imported when the command runs, not for ``--help``.
"""

from __future__ import annotations

import os
import time

from ._arguments import add_group_column_option, add_loader_options, option_error, positive_int
from ._files import DATA_FILE, POINTS_FILE, check_outputs, describe_file, load, write_measures
from ._report import describe_measures, fail, say

__all__ = ["add_parser", "run"]

_OUTPUT_FORMATS = (".npy", ".npz")


def add_parser(subparsers):
    """Add ``measattn predict`` to ``subparsers``; return its parser (the command protocol is in :mod:`._main`)."""
    pred = subparsers.add_parser(
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
    pred.add_argument("--out", required=True, metavar="FILE",
                      help="output file: .npy (dense) or .npz (one array per measure)")
    add_group_column_option(pred)
    add_loader_options(pred, what="--data")
    add_loader_options(pred, prefix="points-", what="--points")
    pred.add_argument("--batch-size", type=positive_int, default=None,
                      help="measures per forward pass (default: the model's batch size)")
    pred.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    pred.set_defaults(run=run)
    return pred


def _load_model(parser, path, *, allow_pickle):
    from .. import load_model

    if not os.path.isfile(path):
        parser.error(f"MODEL {path!r}: no such file")
    try:
        return load_model(path, allow_pickle=allow_pickle)
    except ValueError as exc:
        hint = (" It was not loaded: loading a pickle runs whatever code it holds. Use a model saved by measattn "
                "fit (a .safetensors file), or pass --allow-pickle if you made this file yourself or trust its "
                "source.") if "is a pickle" in str(exc) and not allow_pickle else ""
        parser.error(f"MODEL {exc}{hint}")


def _check_inputs(parser, model, X, points):
    """The measures, then the query points, each checked against the model on its own, so that a refusal
    names the option that brought the file. Whether they pair up is left to ``transport``."""
    from ..datasets import check_measures

    for option, measures, name in ((DATA_FILE.file, X, "X"), (POINTS_FILE.file, points, "points")):
        if measures is not None:
            try:
                check_measures(measures, input_name=name, n_features=model.n_features_in_)
            except (ValueError, TypeError) as exc:
                option_error(parser, option, exc)


def _options_at_fault(X, points):
    """The options a refusal of ``predict`` or ``transport`` is about, once each file has passed its own checks."""
    if points is None:
        return DATA_FILE.file
    if len(points) != len(X):
        return DATA_FILE.file, POINTS_FILE.file  # one set of query points per measure
    return POINTS_FILE.file


def _check_output(parser, args, ragged, with_points):
    if ragged and args.out.lower().endswith(".npy"):
        what = "query point sets" if with_points else "measures"
        parser.error(f"--out {args.out!r}: the {what} have different numbers of points, so the output is one array "
                     "per measure; write it as .npz")


def run(args, parser):
    """Run ``measattn predict MODEL``: check, load, predict or transport, write.

    A failed prediction exits with code 1; the command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    import numpy as np

    from ..experiments import format_number

    if os.path.splitext(args.out)[1].lower() not in _OUTPUT_FORMATS:
        parser.error(f"--out {args.out!r}: the output must end in .npy (one dense array) or .npz (one array per "
                     "measure)")
    check_outputs(parser, out=args.out)
    if args.points is None and (args.points_key is not None or args.points_feature_columns is not None):
        parser.error("--points-key and --points-feature-columns apply only with --points FILE")
    model = _load_model(parser, args.model, allow_pickle=args.allow_pickle)
    X, _ = load(parser, args.data, DATA_FILE, key=args.key, group_column=args.group_column,
                feature_columns=args.feature_columns)
    points = None
    if args.points is not None:
        points, _ = load(parser, args.points, POINTS_FILE, key=args.points_key, group_column=args.group_column,
                         feature_columns=args.points_feature_columns)
    _check_output(parser, args, isinstance(points if points is not None else X, list), points is not None)
    _check_inputs(parser, model, X, points)
    say(args, f"predict: model from {args.model} (kernel {model.kernel!r}, transform {model.transform!r}, "
              f"{model.n_features_in_} features in, {model.n_features_out_} out)")
    say(args, f"predict: {args.data}{describe_file(args.data, args.key)}: {describe_measures(X)}")
    if points is not None:
        say(args, f"predict: query points {args.points}{describe_file(args.points, args.points_key)}: "
                  f"{describe_measures(points)}")
    start = time.perf_counter()
    try:
        if points is None:
            result = model.predict(X, batch_size=args.batch_size)
        else:
            result = model.transport(X, points, batch_size=args.batch_size)
    except (ValueError, TypeError) as exc:
        option_error(parser, _options_at_fault(X, points), exc)
    except FloatingPointError as exc:
        fail(parser, exc)
    write_measures(args.out, result)
    shape = f"shape {np.shape(result)}" if not isinstance(result, list) else f"{len(result)} arrays arr_0 ..."
    print(f"wrote {'the images of the query points' if points is not None else 'the predictions'} ({shape}) to "
          f"{args.out} in {format_number(time.perf_counter() - start)} s")
    return 0
