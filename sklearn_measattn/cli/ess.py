"""``measattn ess``: how much of each ensemble each kernel's attention uses, on simulated tails.

No training; the work is done by
:func:`~sklearn_measattn.experiments.attention_ess_table`.
"""

from __future__ import annotations

import argparse
import time

from ._arguments import DEFAULT_KERNELS, positive_float, positive_int
from ._files import check_outputs
from ._names import KERNEL_NAMES, SPARSE_KERNEL_NAMES, TAILS
from ._report import elapsed

__all__ = ["add_parser", "run"]

# Random projections have no learnt degree, so learned_poly, which every other command takes, is left out.
_KERNELS = (*KERNEL_NAMES, *SPARSE_KERNEL_NAMES)


def add_parser(subparsers):
    """Add ``measattn ess`` to ``subparsers``; return its parser (the command protocol is in :mod:`._main`)."""
    ess = subparsers.add_parser(
        "ess",
        help="how much of each ensemble each kernel's attention uses, on simulated tails (no training)",
        description=(
            "For random query/key projections, print the mean effective sample size 1/sum_j w_ij^2 of each "
            "kernel's attention weights as a fraction of n: near 1 is flat attention, near 0 means one point "
            "takes all the weight."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ess.add_argument("--kernels", nargs="+", choices=_KERNELS, default=list(DEFAULT_KERNELS), metavar="KERNEL")
    ess.add_argument("--tails", nargs="+", choices=TAILS, default=list(TAILS), metavar="TAIL")
    ess.add_argument("--tail-index", type=positive_float, default=1.5)
    ess.add_argument("--n-points", nargs="+", type=positive_int, default=[64, 256, 1024, 4096], metavar="N")
    ess.add_argument("--n-features", type=positive_int, default=2)
    ess.add_argument("--n-measures", type=positive_int, default=1, help="measures averaged per cell")
    ess.add_argument("--n-draws", type=positive_int, default=2, help="random projection pairs per measure")
    ess.add_argument("--seed", type=int, default=0)
    ess.add_argument("--out", metavar="CSV", help="write the table to this CSV file")
    ess.set_defaults(run=run)
    return ess


def run(args, parser):
    """Run ``measattn ess``: attention ESS / n per kernel, tail and ensemble size.

    The command protocol (arguments, exit codes) is in :mod:`._main`.
    """
    from ..experiments import attention_ess_table, format_number, format_table, write_csv

    check_outputs(parser, out=args.out)
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
    print(elapsed(start))
    if args.out:
        write_csv(args.out, rows, ("kernel", "tail", "tail_index", "n_points", "ess_fraction"))
        print(f"wrote {len(rows)} rows to {args.out}")
    return 0
