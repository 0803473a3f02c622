"""``measattn compare``: train one model per kernel and transform, print a verdict, then held-out metrics.

On a benchmark, sized by a preset that explicit options override, or with
``--data FILE --y FILE`` on the user's own measures. The work is done by
:func:`~sklearn_measattn.experiments.compare_kernels` and
:func:`~sklearn_measattn.experiments.compare_kernels_on_data`, handed a
template estimator built from the preset and the options of the estimator
option table (:mod:`._estimator_options`, shared with ``measattn fit``); the
verdict by :func:`~sklearn_measattn.experiments.recommend`. The experiments
are imported when the command runs, not for ``--help``.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import textwrap
import time

from ._arguments import DEFAULT_KERNELS, add_group_column_option, add_loader_options, positive_float, positive_int
from ._estimator_options import add_estimator_options, estimator_params
from ._files import check_outputs, load_pair
from ._names import ALL_KERNEL_NAMES, BENCHMARK_NAMES, TAILS
from ._report import elapsed, say

__all__ = ["PRESETS", "add_parser", "report", "run", "seeds_from_args"]

# Sizes of the presets, and the estimator parameters of their template ("estimator"); explicit command-line
# options override them.
PRESETS = {
    # Three seeds in under 4 minutes on a 2-core CPU (two fits at a time), in the
    # regime where softmax collapses (Pareto tails of index 0.7: infinite mean)
    # and the slow kernels on symlog data learn the map (held-out energy well
    # below the predictions that need no model). The one-cycle schedule reaches
    # in 16 epochs what a constant rate reached in 30. Measured in
    # benchmarks/RESULTS.md.
    "default": {
        "task": "matrix_inverse", "tail": "pareto", "tail_index": 0.7, "n_samples": 512,
        "n_points": 128, "n_test": 64, "seeds": [0, 1, 2],
        "estimator": {"max_epochs": 16, "d_model": 32, "n_heads": 4, "n_layers": 2, "dim_feedforward": 64,
                      "lr": 4e-3, "lr_schedule": "onecycle", "batch_size": 16},
    },
    # Larger sizes, meant for a GPU.
    "paper": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 1024,
        "n_points": 512, "n_test": 128, "seeds": [0, 1, 2],
        "estimator": {"max_epochs": 200, "d_model": 64, "n_heads": 4, "n_layers": 2, "dim_feedforward": 128,
                      "lr": 1e-3, "lr_schedule": "constant", "batch_size": 32},
    },
    # Tiny sizes for tests and smoke runs (seconds).
    "quick": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 12,
        "n_points": 16, "n_test": 6, "seeds": [0],
        "estimator": {"max_epochs": 2, "d_model": 8, "n_heads": 2, "n_layers": 1, "dim_feedforward": 16,
                      "lr": 2e-3, "lr_schedule": "constant", "batch_size": 4},
    },
}

_TRANSFORMS = ("none", "symlog")
# Options that describe a benchmark, meaningless with --data.
_BENCHMARK_OPTIONS = ("task", "tail", "tail_index", "n_samples", "n_points", "n_test")
# Options that say how to read --data and --y, meaningless on a benchmark.
_DATA_OPTIONS = ("y", "y_key", "y_feature_columns", "key", "feature_columns", "group_column")
# The estimator parameters each fit of the comparison sets itself: no option of the table for them.
_VARIED = ("kernel", "transform", "random_state")


def _test_size(text):
    value = positive_float(text)
    if value >= 1 and value != int(value):
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1) or a whole number of measures, got {text!r}")
    return int(value) if value >= 1 else value


def seeds_from_args(values):
    """The seeds of ``--seeds``: a count N gives seeds 0..N-1, a list gives those seeds.

    Parameters
    ----------
    values : list of str
        As typed: ``["3"]`` (seeds 0, 1, 2), ``["4", "7"]``, ``["4,7"]`` or
        ``["7,"]`` (those seeds).

    Returns
    -------
    seeds : list of int
        The seeds.

    Raises
    ------
    argparse.ArgumentTypeError
        If the values are not integers, or a count is below 1 or a seed below 0.
    """
    items = [item for value in values for item in value.split(",")]
    explicit = len(items) > 1
    items = [item for item in items if item.strip()]
    try:
        numbers = [int(item) for item in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes integers, got {' '.join(values)!r}") from None
    if not numbers:
        raise argparse.ArgumentTypeError("--seeds needs at least one integer")
    if explicit:
        if any(n < 0 for n in numbers):
            raise argparse.ArgumentTypeError(f"seeds must be >= 0, got {numbers}")
        return numbers
    if numbers[0] <= 0:
        raise argparse.ArgumentTypeError(
            f"--seeds N runs N seeds (0..N-1) and needs N >= 1, got {numbers[0]}; "
            "for one specific seed write e.g. --seeds 7,"
        )
    return list(range(numbers[0]))


def add_parser(subparsers):
    """Add ``measattn compare`` to ``subparsers``; return its parser (the command protocol is in :mod:`._main`)."""
    d = PRESETS["default"]
    cmp_ = subparsers.add_parser(
        "compare",
        help="train one model per kernel and transform; print a verdict, then the held-out metrics",
        description=(
            "Train a MeasureTransformerRegressor for every kernel x transform x seed and score it on held-out "
            "measures: on a benchmark, or with --data FILE --y FILE on your own measures (a seeded split of "
            "your measures into training and held-out ones). A model counts as collapsed when its trained "
            "attention gives nearly all the weight to one point or its predicted ensembles shrink onto a point."
        ),
    )
    data = cmp_.add_argument_group("your own measures (instead of a benchmark)")
    data.add_argument("--data", metavar="FILE",
                      help="input measures: .npy, .npz, .csv or .tsv (see the user guide on loading your data)")
    data.add_argument("--y", metavar="FILE",
                      help="target measures, one per input measure; required with --data, except for an .npz "
                           "holding both (then read from its array 'y'). Two tables (CSV/TSV) are paired by measure "
                           "name and must name the same measures; other files pair by position")
    data.add_argument("--test-size", type=_test_size, default=0.25,
                      help="held-out measures: a fraction or a count (default 0.25; at least 3)")
    add_group_column_option(data)
    add_loader_options(data, what="--data")
    add_loader_options(data, prefix="y-", what="--y (or from --data when --y is left out)",
                       default="y; in a separate --y archive without one, X, then arr_0, arr_1, ..., then a lone "
                               "array")
    bench = cmp_.add_argument_group("benchmark")
    bench.add_argument("--task", choices=BENCHMARK_NAMES, default=None, help=f"benchmark (default {d['task']})")
    bench.add_argument("--tail", choices=TAILS, default=None, help=f"base family (default {d['tail']})")
    bench.add_argument("--tail-index", type=positive_float, default=None,
                       help=f"tail exponent a, P(|Z|>t) ~ t^-a (default {d['tail_index']})")
    bench.add_argument("--n-samples", type=positive_int, default=None,
                       help=f"training measures (default {d['n_samples']})")
    bench.add_argument("--n-points", type=positive_int, default=None,
                       help=f"points per measure (default {d['n_points']})")
    bench.add_argument("--n-test", type=positive_int, default=None,
                       help=f"held-out measures, >= 3 (default {d['n_test']})")
    cmp_.add_argument("--kernels", nargs="+", choices=ALL_KERNEL_NAMES, default=list(DEFAULT_KERNELS),
                      metavar="KERNEL",
                      help=f"attention kernels, from {', '.join(ALL_KERNEL_NAMES)} (default: {' '.join(DEFAULT_KERNELS)})")
    cmp_.add_argument("--transforms", nargs="+", choices=_TRANSFORMS, default=list(_TRANSFORMS),
                      metavar="TRANSFORM", help="data transforms: none, symlog (default: both)")
    cmp_.add_argument("--seeds", nargs="+", default=None, metavar="SEED",
                      help="a count N (seeds 0..N-1) or a list of seeds, e.g. --seeds 0 5 9 or --seeds 7, "
                           f"(default {len(d['seeds'])} seed{'s' if len(d['seeds']) > 1 else ''})")
    add_estimator_options(cmp_.add_argument_group("the model of every fit (the preset's unless given)"),
                          leave_out=_VARIED, defaults=d["estimator"])
    cmp_.add_argument("--n-jobs", type=positive_int, default=None,
                      help="parallel fits, joblib processes (default: one per available CPU core, at most one per "
                           "fit); the results do not depend on it")
    cmp_.add_argument("--threads", type=positive_int, default=1,
                      help="torch threads per fit; the models are small, so 1 is about as fast and robust "
                           "on a busy CPU (default: 1)")
    size = cmp_.add_mutually_exclusive_group()
    size.add_argument("--preset", choices=("default", "paper"), default="default",
                      help="size preset (default: default, a few minutes on a 2-core CPU); 'paper' is 1024 training "
                           "measures x 512 points, 200 epochs, d_model 64, 3 seeds, meant for a GPU; explicit options "
                           "override the preset")
    size.add_argument("--quick", action="store_true",
                      help="tiny sizes for smoke tests (seconds): 2 epochs, d_model 8, and on a benchmark 12 "
                           "measures x 16 points; with --data every measure and point of your data is used")
    cmp_.add_argument("--out", metavar="CSV", help="write one row per fit (per seed) to this CSV file")
    cmp_.add_argument("--plot", metavar="PNG", help="save a figure (needs matplotlib)")
    cmp_.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    cmp_.set_defaults(run=run)
    return cmp_


def _resolve_config(args, parser):
    """The preset, overridden by the options given, checked."""
    if args.data is None:
        for option in _DATA_OPTIONS:
            if getattr(args, option) is not None:
                parser.error(f"--{option.replace('_', '-')} applies only with --data FILE")
    else:
        for option in _BENCHMARK_OPTIONS:
            if getattr(args, option) is not None:
                parser.error(f"--{option.replace('_', '-')} describes a benchmark; it does not apply with --data")
    preset = PRESETS["quick" if args.quick else args.preset]
    config = {}
    for key, value in preset.items():
        given = getattr(args, key, None)
        config[key] = value if given is None else given
    config["estimator"] = {**preset["estimator"], **estimator_params(args, leave_out=_VARIED)}
    if args.seeds is not None:
        try:
            config["seeds"] = seeds_from_args(args.seeds)
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if args.data is None and config["n_test"] < 3:
        parser.error(f"--n-test must be >= 3 (the across-sample correlation ranks measures), got {config['n_test']}")
    model = config["estimator"]
    if model["d_model"] % model["n_heads"]:  # before the benchmark or any file is read
        parser.error(f"--n-heads {model['n_heads']} must divide --d-model {model['d_model']}")
    return config


def _available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _settings(config, args, n_fits):
    from .. import MeasureTransformerRegressor
    from ..experiments import print_progress

    settings = {"seeds": config["seeds"], "estimator": MeasureTransformerRegressor(**config["estimator"])}
    n_jobs = args.n_jobs if args.n_jobs is not None else max(1, min(_available_cores(), n_fits))
    settings.update(n_jobs=n_jobs, torch_threads=args.threads,
                    progress=None if args.quiet else print_progress, return_examples=True)
    return settings


def report(summary, title, *, judge=True):
    """What ``measattn compare`` prints on stdout before the time: the verdict first, then the table and its legend.

    Parameters
    ----------
    summary : list of dict
        :func:`~sklearn_measattn.experiments.summarize` of the comparison's rows.
    title : str
        The line above the table: the data, sizes and seeds.
    judge : bool, default=True
        ``False`` for ``--quick``: too small a run for a verdict.

    Returns
    -------
    text : str
        Lines of at most 120 characters.
    """
    from ..experiments import format_comparison, recommend

    verdict = recommend(summary) if judge else (
        "Verdict: none: --quick is a smoke test, too small to judge collapse or rank kernels\n"
        "  (run without --quick for a verdict).")
    title = "\n".join(textwrap.wrap(title, width=120, subsequent_indent="  "))
    return f"{verdict}\n\n{format_comparison(summary, title=title, judge=judge)}"


def run(args, parser):
    """Run ``measattn compare``: on a benchmark, or on the user's measures with ``--data``.

    The command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    from ..experiments import ROW_FIELDS, compare_kernels, compare_kernels_on_data, summarize, write_csv

    config = _resolve_config(args, parser)
    check_outputs(parser, out=args.out, plot=args.plot)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install matplotlib (or sklearn-measattn[plot])")
    transforms = [None if t == "none" else t for t in dict.fromkeys(args.transforms)]
    kernels = list(dict.fromkeys(args.kernels))
    n_fits = len(kernels) * len(transforms) * len(config["seeds"])
    settings = _settings(config, args, n_fits)
    fit_text = f"{config['estimator']['max_epochs']} epochs, seeds {', '.join(map(str, config['seeds']))}"
    if args.data is not None:
        X, y, read = load_pair(args, parser)
        n_samples = len(X)
        n_test = args.test_size if isinstance(args.test_size, int) else math.ceil(args.test_size * n_samples)
        n_points = max(len(x) for x in X)
        n_target_points = max(len(m) for m in y)
        title = (f"{read['X']}: {n_samples} measures of up to {n_points} points; targets {read['y']}: up to "
                 f"{n_target_points} points, paired {read['paired']}; {n_samples - n_test} for training and "
                 f"{n_test} held out, {fit_text}")
        comparison = compare_kernels_on_data
        inputs = (X, y)
        settings.update(test_size=args.test_size, name=os.path.basename(args.data))
    else:
        index = f" (index {config['tail_index']:g})" if config["tail"] != "gaussian" else ""
        title = (f"{config['task']}, tail={config['tail']}{index}, {config['n_samples']} training measures x "
                 f"{config['n_points']} points, {config['n_test']} held out, {fit_text}")
        comparison = compare_kernels
        inputs = (config["task"],)
        settings.update({key: config[key] for key in _BENCHMARK_OPTIONS if key != "task"})
    say(args, "\n".join(textwrap.wrap(f"compare: {n_fits} fits, {settings['n_jobs']} at a time; {title}; energies "
                                      "are held out, in symlog space", width=100, subsequent_indent="  ")))
    start = time.perf_counter()
    try:
        rows, examples = comparison(*inputs, kernels=kernels, transforms=transforms, **settings)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    summary = summarize(rows)
    print(report(summary, title, judge=not args.quick))
    print(elapsed(start))
    if args.out:
        write_csv(args.out, rows, ROW_FIELDS)
        print(f"wrote {len(rows)} rows to {args.out}")
    if args.plot:
        from ._plot import plot_comparison

        plot_comparison(args.plot, examples, summary, title, judge=not args.quick)
        print(f"wrote figure to {args.plot}")
    return 0
