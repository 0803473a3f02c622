"""``measattn diagnose FILE``: estimate the tails of your measures and recommend a kernel and transform.

Seconds, no training; the work is done by
:func:`~sklearn_measattn.experiments.diagnose_measures`.
"""

from __future__ import annotations

import argparse
import time

from ._arguments import add_group_column_option, add_loader_options, positive_int
from ._files import FileOptions, check_outputs, describe_file, is_table, load, table_columns
from ._names import ALL_KERNEL_NAMES, KERNEL_NAMES
from ._report import elapsed

__all__ = ["add_parser", "run"]

_FILE = FileOptions("FILE", "--key", "--feature-columns")


def _n_tail(text):
    """``sqrt``, a count or a fraction (the order statistics of the tail estimate)."""
    if text == "sqrt":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes sqrt, a count or a fraction, got {text!r}") from None
    return int(value) if value >= 1 and value == int(value) else value


def add_parser(subparsers):
    """Add ``measattn diagnose`` to ``subparsers``; return its parser (the command protocol is in :mod:`._main`)."""
    diag = subparsers.add_parser(
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
    add_group_column_option(diag)
    add_loader_options(diag)
    diag.add_argument("--kernels", nargs="+", choices=ALL_KERNEL_NAMES, default=list(KERNEL_NAMES), metavar="KERNEL",
                      help=f"kernels to assess, from {', '.join(ALL_KERNEL_NAMES)} (default: {' '.join(KERNEL_NAMES)})")
    diag.add_argument("--n-tail", type=_n_tail, default="sqrt", metavar="K",
                      help="order statistics of the tail estimate: sqrt (square root of the number of points), "
                           "a count, or a fraction such as 0.05 (default: sqrt)")
    diag.add_argument("--max-measures", type=positive_int, default=32,
                      help="measures used for the attention ESS (default: 32)")
    diag.add_argument("--max-queries", type=positive_int, default=64,
                      help="queries per measure for the attention ESS (default: 64)")
    diag.add_argument("--seed", type=int, default=0, help="seed of the subsamples and projections (default: 0)")
    diag.add_argument("--out", metavar="CSV", help="write the diagnosis to this CSV file")
    diag.set_defaults(run=run)
    return diag


def _feature_names(args):
    """The feature columns of a table, as the loader reads them (None for arrays)."""
    if args.feature_columns is not None:
        return list(args.feature_columns)
    if not is_table(args.file):
        return None
    header = table_columns(args.file) or []
    group = args.group_column or "measure"
    # A leading unnamed column is the row index of df.to_csv(path), which the loader skips.
    return [c for i, c in enumerate(header) if c != group and not (i == 0 and c in ("", "Unnamed: 0"))]


def run(args, parser):
    """Run ``measattn diagnose FILE``.

    The command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    from ..experiments import diagnose_measures, format_diagnosis, write_csv

    check_outputs(parser, out=args.out)
    start = time.perf_counter()
    X, _ = load(parser, args.file, _FILE, key=args.key, group_column=args.group_column,
                feature_columns=args.feature_columns)
    try:
        diagnosis = diagnose_measures(X, kernels=list(dict.fromkeys(args.kernels)), n_tail=args.n_tail,
                                      max_measures=args.max_measures, max_queries=args.max_queries,
                                      random_state=args.seed, feature_names=_feature_names(args))
    except (ValueError, TypeError) as exc:
        parser.error(f"{args.file}: {exc}")
    print(f"{args.file}{describe_file(args.file, args.key)}: " + format_diagnosis(diagnosis))
    print(elapsed(start))
    if args.out:
        rows = diagnosis.rows()
        write_csv(args.out, rows)
        print(f"wrote {len(rows)} rows to {args.out}")
    return 0
