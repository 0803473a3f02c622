"""Command line: diagnose your measures, compare attention kernels, preview attention collapse.

``measattn diagnose FILE`` (or ``python -m sklearn_measattn diagnose FILE``)
estimates the tails of the measures in a file and recommends a kernel and
transform; ``measattn compare`` trains one model per kernel and transform on a
benchmark, or with ``--data`` on your own measures, and prints held-out metrics
with a collapse verdict; ``measattn ess`` prints the attention effective sample
size of each kernel on simulated tails, without training; ``measattn fit``
trains a model on your measures and saves it, and ``measattn predict`` applies a
saved model (predictions, or the images of query points). The work is done by
:mod:`sklearn_measattn.experiments` and the estimator; this module parses arguments.
"""

from __future__ import annotations

import argparse
import math
import sys

from ..datasets import BENCHMARK_NAMES, TAILS
from ..kernels import KERNEL_NAMES, SPARSE_KERNEL_NAMES
from ._commands import run_compare, run_diagnose, run_ess
from ._model import add_fit_parser, add_predict_parser, run_fit, run_predict

#: Every kernel the command line takes by name: full support, bounded support, and the poly kernel whose
#: degree is learnt.
ALL_KERNEL_NAMES = (*KERNEL_NAMES, *SPARSE_KERNEL_NAMES, "learned_poly")

__all__ = ["main", "build_parser"]

# Sizes of the presets; explicit command-line options override them.
PRESETS = {
    # Three seeds in under 4 minutes on a 2-core CPU (two fits at a time), in the
    # regime where softmax collapses (Pareto tails of index 0.7: infinite mean)
    # and the slow kernels on symlog data learn the map (held-out energy well
    # below the predictions that need no model). The one-cycle schedule reaches
    # in 16 epochs what a constant rate reached in 30. Measured in
    # benchmarks/RESULTS.md.
    "default": {
        "task": "matrix_inverse", "tail": "pareto", "tail_index": 0.7, "n_samples": 512,
        "n_points": 128, "n_test": 64, "epochs": 16, "seeds": [0, 1, 2], "d_model": 32, "n_heads": 4,
        "n_layers": 2, "dim_feedforward": 64, "lr": 4e-3, "lr_schedule": "onecycle", "batch_size": 16,
    },
    # Larger sizes, meant for a GPU.
    "paper": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 1024,
        "n_points": 512, "n_test": 128, "epochs": 200, "seeds": [0, 1, 2], "d_model": 64,
        "n_heads": 4, "n_layers": 2, "dim_feedforward": 128, "lr": 1e-3, "lr_schedule": "constant", "batch_size": 32,
    },
    # Tiny sizes for tests and smoke runs (seconds).
    "quick": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 12,
        "n_points": 16, "n_test": 6, "epochs": 2, "seeds": [0], "d_model": 8, "n_heads": 2,
        "n_layers": 1, "dim_feedforward": 16, "lr": 2e-3, "lr_schedule": "constant", "batch_size": 4,
    },
}

DEFAULT_KERNELS = ("softmax", "poly", "log", "sigmoid")
TRANSFORMS = ("none", "symlog")
#: Options that describe a benchmark, meaningless with --data.
BENCHMARK_OPTIONS = ("task", "tail", "tail_index", "n_samples", "n_points", "n_test")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
    return value


def _test_size(text):
    value = _positive_float(text)
    if value >= 1 and value != int(value):
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1) or a whole number of measures, got {text!r}")
    return int(value) if value >= 1 else value


def seeds_from_args(values):
    """``["3"]`` -> seeds 0, 1, 2; ``["4", "7"]`` or ``["4,7"]`` or ``["7,"]`` -> those seeds."""
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


def _add_loader_options(parser, *, prefix="", what="the file", default="X, then arr_0, arr_1, ..., then a lone array"):
    dash = f"--{prefix}" if prefix else "--"
    parser.add_argument(f"{dash}key", default=None, metavar="NAME",
                        help=f"for an .npz: the array (or per-measure prefix NAME_0, NAME_1, ...) to read from {what} "
                             f"(default: {default}); the report names the array it read")
    parser.add_argument(f"{dash}feature-columns", nargs="+", default=None, metavar="COLUMN",
                        help=f"for a CSV/TSV table: the columns of {what} holding the coordinates "
                             "(default: every column but the measure column)")


def _add_compare(sub):
    d = PRESETS["default"]
    cmp_ = sub.add_parser(
        "compare",
        help="train one model per kernel and transform, print held-out metrics and a collapse verdict",
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
    data.add_argument("--group-column", default=None, metavar="COLUMN",
                      help="for CSV/TSV tables: the column naming each point's measure (default: measure)")
    _add_loader_options(data, what="--data")
    _add_loader_options(data, prefix="y-", what="--y (or from --data when --y is left out)",
                        default="y; in a separate --y archive without one, X, then arr_0, arr_1, ..., then a lone "
                                "array")
    bench = cmp_.add_argument_group("benchmark")
    bench.add_argument("--task", choices=BENCHMARK_NAMES, default=None, help=f"benchmark (default {d['task']})")
    bench.add_argument("--tail", choices=TAILS, default=None, help=f"base family (default {d['tail']})")
    bench.add_argument("--tail-index", type=_positive_float, default=None,
                       help=f"tail exponent a, P(|Z|>t) ~ t^-a (default {d['tail_index']})")
    bench.add_argument("--n-samples", type=_positive_int, default=None,
                       help=f"training measures (default {d['n_samples']})")
    bench.add_argument("--n-points", type=_positive_int, default=None,
                       help=f"points per measure (default {d['n_points']})")
    bench.add_argument("--n-test", type=_positive_int, default=None,
                       help=f"held-out measures, >= 3 (default {d['n_test']})")
    cmp_.add_argument("--kernels", nargs="+", choices=ALL_KERNEL_NAMES, default=list(DEFAULT_KERNELS),
                      metavar="KERNEL",
                      help=f"attention kernels, from {', '.join(ALL_KERNEL_NAMES)} (default: {' '.join(DEFAULT_KERNELS)})")
    cmp_.add_argument("--transforms", nargs="+", choices=TRANSFORMS, default=list(TRANSFORMS),
                      metavar="TRANSFORM", help="data transforms: none, symlog (default: both)")
    cmp_.add_argument("--epochs", type=_positive_int, default=None, help=f"training epochs (default {d['epochs']})")
    cmp_.add_argument("--seeds", nargs="+", default=None, metavar="SEED",
                      help="a count N (seeds 0..N-1) or a list of seeds, e.g. --seeds 0 5 9 or --seeds 7, "
                           f"(default {len(d['seeds'])} seed{'s' if len(d['seeds']) > 1 else ''})")
    cmp_.add_argument("--d-model", type=_positive_int, default=None, help=f"model width (default {d['d_model']})")
    cmp_.add_argument("--n-heads", type=_positive_int, default=None, help=f"attention heads (default {d['n_heads']})")
    cmp_.add_argument("--n-layers", type=_positive_int, default=None, help=f"blocks (default {d['n_layers']})")
    cmp_.add_argument("--lr", type=_positive_float, default=None,
                      help=f"learning rate, the peak with --lr-schedule onecycle (default {d['lr']})")
    cmp_.add_argument("--lr-schedule", choices=("constant", "onecycle"), default=None,
                      help=f"learning-rate schedule (default {d['lr_schedule']})")
    cmp_.add_argument("--batch-size", type=_positive_int, default=None,
                      help=f"measures per batch (default {d['batch_size']})")
    cmp_.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    cmp_.add_argument("--n-jobs", type=_positive_int, default=None,
                      help="parallel fits, joblib processes (default: one per available CPU core, at most one per "
                           "fit); the results do not depend on it")
    cmp_.add_argument("--threads", type=_positive_int, default=1,
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


def _add_diagnose(sub):
    diag = sub.add_parser(
        "diagnose",
        help="estimate the tails of your measures and recommend a kernel and transform (seconds, no training)",
        description=(
            "Read measures from FILE (.npy, .npz, .csv or .tsv; the report names the .npz array it read) and "
            "print: the tail index of each feature (named by its column in a table) and of the point norm with "
            "its uncertainty, within ensembles (the points around their measure's median) and across samples "
            "(the measures' medians, which see shifts of whole measures), and whether the measures' own tails "
            "differ; which kernels' attention integrals diverge at the heavier of the two indices (the basis); "
            "each kernel's attention effective sample size on your data; and a recommended kernel and "
            "transform, saying which tails it rests on."
        ),
    )
    diag.add_argument("file", metavar="FILE", help="the measures: .npy, .npz, .csv or .tsv")
    diag.add_argument("--group-column", default=None, metavar="COLUMN",
                      help="for CSV/TSV tables: the column naming each point's measure (default: measure)")
    _add_loader_options(diag)
    diag.add_argument("--kernels", nargs="+", choices=ALL_KERNEL_NAMES, default=list(KERNEL_NAMES), metavar="KERNEL",
                      help=f"kernels to assess, from {', '.join(ALL_KERNEL_NAMES)} (default: {' '.join(KERNEL_NAMES)})")
    diag.add_argument("--n-tail", default="sqrt", metavar="K",
                      help="order statistics of the tail estimate: sqrt (square root of the number of points), "
                           "a count, or a fraction such as 0.05 (default: sqrt)")
    diag.add_argument("--max-measures", type=_positive_int, default=32,
                      help="measures used for the attention ESS (default: 32)")
    diag.add_argument("--max-queries", type=_positive_int, default=64,
                      help="queries per measure for the attention ESS (default: 64)")
    diag.add_argument("--seed", type=int, default=0, help="seed of the subsamples and projections (default: 0)")
    diag.add_argument("--out", metavar="CSV", help="write the diagnosis to this CSV file")


def _add_ess(sub):
    ess = sub.add_parser(
        "ess",
        help="how much of each ensemble each kernel's attention uses, on simulated tails (no training)",
        description=(
            "For random query/key projections, print the mean effective sample size 1/sum_j w_ij^2 of each "
            "kernel's attention weights as a fraction of n: near 1 is flat attention, near 0 means one point "
            "takes all the weight."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ess.add_argument("--kernels", nargs="+", choices=(*KERNEL_NAMES, *SPARSE_KERNEL_NAMES), default=list(DEFAULT_KERNELS),
                     metavar="KERNEL")
    ess.add_argument("--tails", nargs="+", choices=TAILS, default=list(TAILS), metavar="TAIL")
    ess.add_argument("--tail-index", type=_positive_float, default=1.5)
    ess.add_argument("--n-points", nargs="+", type=_positive_int, default=[64, 256, 1024, 4096], metavar="N")
    ess.add_argument("--n-features", type=_positive_int, default=2)
    ess.add_argument("--n-measures", type=_positive_int, default=1, help="measures averaged per cell")
    ess.add_argument("--n-draws", type=_positive_int, default=2, help="random projection pairs per measure")
    ess.add_argument("--seed", type=int, default=0)
    ess.add_argument("--out", metavar="CSV", help="write the table to this CSV file")


def build_parser():
    """The argparse parser of ``measattn`` / ``python -m sklearn_measattn``."""
    parser = argparse.ArgumentParser(
        prog="measattn",
        description=(
            "Attention kernels for heavy-tailed ensembles: diagnose your measures, compare kernels on them or on "
            "benchmarks, and see when softmax attention collapses onto a single point."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="{diagnose,compare,fit,predict,ess}")
    sub.required = True
    _add_diagnose(sub)
    _add_compare(sub)
    add_fit_parser(sub)
    add_predict_parser(sub)
    _add_ess(sub)
    return parser


def resolve_compare(args, parser):
    """The compare configuration: the preset, overridden by explicit options, checked."""
    if args.data is None:
        for option in ("y", "y_key", "y_feature_columns", "key", "feature_columns", "group_column"):
            if getattr(args, option) is not None:
                parser.error(f"--{option.replace('_', '-')} applies only with --data FILE")
    else:
        for option in BENCHMARK_OPTIONS:
            if getattr(args, option) is not None:
                parser.error(f"--{option.replace('_', '-')} describes a benchmark; it does not apply with --data")
    preset = PRESETS["quick" if args.quick else args.preset]
    config = {}
    for key, value in preset.items():
        given = getattr(args, key, None)
        config[key] = value if given is None else given
    if args.seeds is not None:
        try:
            config["seeds"] = seeds_from_args(args.seeds)
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if args.data is None and config["n_test"] < 3:
        parser.error(f"--n-test must be >= 3 (the across-sample correlation ranks measures), got {config['n_test']}")
    if config["d_model"] % config["n_heads"]:
        parser.error(f"--n-heads {config['n_heads']} must divide --d-model {config['d_model']}")
    return config


def main(argv=None):
    """Entry point of ``measattn`` / ``python -m sklearn_measattn``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    subparser = parser._subparsers._group_actions[0].choices[args.command]
    if args.command == "compare":
        return run_compare(args, subparser, resolve_compare(args, subparser))
    if args.command == "fit":
        return run_fit(args, subparser)
    if args.command == "predict":
        return run_predict(args, subparser)
    if args.command == "diagnose":
        return run_diagnose(args, subparser)
    return run_ess(args, subparser)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
