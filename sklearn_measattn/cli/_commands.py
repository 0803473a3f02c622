"""The commands of ``measattn``: each checks its outputs, runs :mod:`sklearn_measattn.experiments`, prints."""

from __future__ import annotations

import csv
import math
import os
import re
import time
import zipfile

import numpy as np

from ..datasets import load_measures
from ..experiments import (
    ROW_FIELDS,
    attention_ess_table,
    check_output_path,
    compare_kernels,
    compare_kernels_on_data,
    diagnose_measures,
    format_comparison,
    format_diagnosis,
    format_number,
    format_table,
    print_progress,
    recommend,
    summarize,
    write_csv,
)

__all__ = ["run_compare", "run_diagnose", "run_ess"]


def _check_outputs(parser, **paths):
    """Every output path checked before any work, as a usage error."""
    for option, path in paths.items():
        if path is not None:
            try:
                check_output_path(path, what=f"--{option}")
            except ValueError as exc:
                parser.error(str(exc))


def _elapsed(start):
    return f"total time {format_number(time.perf_counter() - start)} s"


# The loader's keyword arguments as the command line spells them, per file option.
_LOADER_OPTIONS = {
    "--y": {"group_column": "--group-column", "feature_columns": "--y-feature-columns", "key": "--y-key"},
    None: {"group_column": "--group-column", "feature_columns": "--feature-columns", "key": "--key"},
}


def _as_options(message, option):
    """A loader message with its keyword arguments (``group_column=``) named as options (``--group-column``)."""
    names = _LOADER_OPTIONS.get(option, _LOADER_OPTIONS[None])
    message = message.replace("key='y' for targets", "--y-key y for the targets")
    return re.sub(r"\b(group_column|feature_columns|key)\b=?", lambda match: names[match.group(1)], message)


def _is_table(path):
    return os.path.splitext(path)[1].lower() in (".csv", ".tsv")


def _npz_arrays(path, key):
    """Which arrays of an .npz the loader reads with ``key`` (its documented order), for the report."""
    if not path.lower().endswith(".npz"):
        return ""
    try:
        with np.load(path, allow_pickle=False) as archive:
            files = set(archive.files)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return ""
    for prefix in ([key] if key is not None else ["X", "arr"]):
        if prefix in files:
            return f" (array {prefix!r})"
        if f"{prefix}_0" in files:
            return f" (arrays {prefix}_0, {prefix}_1, ...)"
    if key is None and len(files) == 1:
        return f" (array {next(iter(files))!r})"
    return ""


def _load(parser, path, *, key, group_column, feature_columns, option, labels=None):
    options = {"key": key, "feature_columns": feature_columns, "labels": labels}
    if group_column is not None:
        options["group_column"] = group_column
    try:
        return load_measures(path, return_labels=True, **{k: v for k, v in options.items() if v is not None})
    except (ValueError, TypeError, FileNotFoundError) as exc:
        message = _as_options(str(exc), option)
        parser.error(f"{option}: {message}" if option else message)


def _load_pair(args, parser):
    """``(X, y)`` from --data and --y (or the 'y' array of the same .npz), and how they were read."""
    X, labels = _load(parser, args.data, key=args.key, group_column=args.group_column,
                      feature_columns=args.feature_columns, option="--data")
    y_path, y_key = args.y, args.y_key
    same_npz = args.data.lower().endswith(".npz") and (
        y_path is None or os.path.abspath(y_path) == os.path.abspath(args.data))
    if y_path is None:
        if not same_npz:
            parser.error("--y FILE is required with --data (the target measures, one per input measure); it may be "
                         "left out only when --data is an .npz that also holds the targets as array 'y'")
        y_path = args.data
    if y_key is None and (same_npz or _npz_arrays(y_path, "y")):
        y_key = "y"  # targets: the array y (or y_0, y_1, ...) when the archive has one
    # Two tables name their measures: pair them by name, not by row order.
    by_name = _is_table(args.data) and _is_table(y_path)
    y, _ = _load(parser, y_path, key=y_key, group_column=args.group_column, feature_columns=args.y_feature_columns,
                 option="--y", labels=labels if by_name else None)
    read = {
        "X": os.path.basename(args.data) + _npz_arrays(args.data, args.key),
        "y": os.path.basename(y_path) + _npz_arrays(y_path, y_key),
        "paired": "by measure name" if by_name else "by position",
    }
    return X, y, read


def _available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _compare_settings(config, args, n_fits):
    keys = ("epochs", "seeds", "d_model", "n_heads", "n_layers", "dim_feedforward", "lr", "lr_schedule", "batch_size")
    settings = {key: config[key] for key in keys}
    n_jobs = args.n_jobs if args.n_jobs is not None else max(1, min(_available_cores(), n_fits))
    settings.update(device=args.device, n_jobs=n_jobs, torch_threads=args.threads,
                    progress=None if args.quiet else print_progress, return_examples=True)
    return settings


def run_compare(args, parser, config):
    """``measattn compare``: a benchmark, or the user's measures with --data."""
    _check_outputs(parser, out=args.out, plot=args.plot)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib (or sklearn-measattn[plot])")
    transforms = [None if t == "none" else t for t in dict.fromkeys(args.transforms)]
    kernels = list(dict.fromkeys(args.kernels))
    n_fits = len(kernels) * len(transforms) * len(config["seeds"])
    settings = _compare_settings(config, args, n_fits)
    fit_text = f"{config['epochs']} epochs, seeds {', '.join(map(str, config['seeds']))}"
    if args.data is not None:
        X, y, read = _load_pair(args, parser)
        n_samples = len(X)
        n_test = args.test_size if isinstance(args.test_size, int) else math.ceil(args.test_size * n_samples)
        n_points = max(len(x) for x in X)
        n_target_points = max(len(m) for m in y)
        title = (f"{read['X']}: {n_samples} measures of up to {n_points} points; targets {read['y']}: up to "
                 f"{n_target_points} points, paired {read['paired']}; {n_samples - n_test} for training and "
                 f"{n_test} held out, {fit_text}")
        run = compare_kernels_on_data
        inputs = (X, y)
        settings.update(test_size=args.test_size, name=os.path.basename(args.data))
    else:
        index = f" (index {config['tail_index']:g})" if config["tail"] != "gaussian" else ""
        title = (f"{config['task']}, tail={config['tail']}{index}, {config['n_samples']} training measures x "
                 f"{config['n_points']} points, {config['n_test']} held out, {fit_text}")
        run = compare_kernels
        inputs = (config["task"],)
        settings.update({key: config[key] for key in ("tail", "tail_index", "n_samples", "n_points", "n_test")})
    if not args.quiet:
        print_progress(f"compare: {n_fits} fits, {settings['n_jobs']} at a time; {title}")
    start = time.perf_counter()
    try:
        rows, examples = run(*inputs, kernels=kernels, transforms=transforms, **settings)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    summary = summarize(rows)
    print(format_comparison(summary, title=title, judge=not args.quick))
    if args.quick:
        print("recommendation: none: --quick is a smoke test, too small to judge collapse or rank kernels "
              "(run without --quick).")
    else:
        print(recommend(summary))
    print(_elapsed(start))
    if args.out:
        write_csv(args.out, rows, ROW_FIELDS)
        print(f"wrote {len(rows)} rows to {args.out}")
    if args.plot:
        from ._plot import plot_comparison

        plot_comparison(args.plot, examples, summary, title, judge=not args.quick)
        print(f"wrote figure to {args.plot}")
    return 0


def _n_tail(text, parser):
    if text == "sqrt":
        return text
    try:
        value = float(text)
    except ValueError:
        parser.error(f"--n-tail takes sqrt, a count or a fraction, got {text!r}")
    return int(value) if value >= 1 and value == int(value) else value


def _feature_names(args):
    """The feature columns of a table, as the loader reads them (None for arrays)."""
    if args.feature_columns is not None:
        return list(args.feature_columns)
    if not _is_table(args.file):
        return None
    delimiter = "\t" if args.file.lower().endswith(".tsv") else ","
    with open(args.file, newline="", encoding="utf-8-sig") as handle:
        header = [cell.strip() for cell in next((row for row in csv.reader(handle, delimiter=delimiter) if row), [])]
    group = args.group_column or "measure"
    return [c for i, c in enumerate(header) if c != group and not (i == 0 and c in ("", "Unnamed: 0"))]


def run_diagnose(args, parser):
    """``measattn diagnose FILE``."""
    _check_outputs(parser, out=args.out)
    n_tail = _n_tail(args.n_tail, parser)
    start = time.perf_counter()
    X, _ = _load(parser, args.file, key=args.key, group_column=args.group_column,
                 feature_columns=args.feature_columns, option=None)
    try:
        diagnosis = diagnose_measures(X, kernels=list(dict.fromkeys(args.kernels)), n_tail=n_tail,
                                      max_measures=args.max_measures, max_queries=args.max_queries,
                                      random_state=args.seed, feature_names=_feature_names(args))
    except (ValueError, TypeError) as exc:
        parser.error(f"{args.file}: {exc}")
    print(f"{args.file}{_npz_arrays(args.file, args.key)}: " + format_diagnosis(diagnosis))
    print(_elapsed(start))
    if args.out:
        rows = diagnosis.rows()
        write_csv(args.out, rows)
        print(f"wrote {len(rows)} rows to {args.out}")
    return 0


def run_ess(args, parser):
    """``measattn ess``: attention ESS / n per kernel, tail and ensemble size."""
    _check_outputs(parser, out=args.out)
    start = time.perf_counter()
    kernels = list(dict.fromkeys(args.kernels))
    tails = list(dict.fromkeys(args.tails))
    n_points = list(dict.fromkeys(args.n_points))
    try:
        rows = attention_ess_table(kernels=kernels, tails=tails, tail_index=args.tail_index, n_points=n_points,
                                   n_features=args.n_features, n_measures=args.n_measures, n_draws=args.n_draws,
                                   random_state=args.seed)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    lookup = {(r["tail"], r["kernel"], r["n_points"]): r["ess_fraction"] for r in rows}
    print(format_table(
        ["tail", "kernel"] + [f"n={n}" for n in n_points],
        [[t, k] + [format_number(lookup[(t, k, n)]) for n in n_points] for t in tails for k in kernels],
        title=(f"Attention ESS/n (mean over {args.n_measures} measures x {args.n_draws} random projections, "
               f"{args.n_features} features, tail index {args.tail_index:g} for the heavy tails)"),
        notes=["1 = flat attention (every point counts); near 0 = one point takes all the weight."],
    ))
    print(_elapsed(start))
    if args.out:
        write_csv(args.out, rows, ("kernel", "tail", "tail_index", "n_points", "ess_fraction"))
        print(f"wrote {len(rows)} rows to {args.out}")
    return 0
