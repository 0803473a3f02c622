"""Command line: compare attention kernels on the heavy-tailed benchmarks.

``python -m sklearn_measattn compare`` trains one model per kernel and transform
and prints a table of held-out metrics with a collapse verdict;
``python -m sklearn_measattn ess`` prints the attention-level effective sample
size of each kernel on heavy-tailed ensembles, without training.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time

import numpy as np

from ._study import (
    ROW_FIELDS,
    VERDICT_RULE,
    compare_kernels,
    format_table,
    recommend,
    stderr_progress,
    summarize,
    table_cells,
)
from .datasets import BENCHMARK_NAMES, TAILS
from .kernels import KERNEL_NAMES

__all__ = ["main", "build_parser"]

# Sizes of the presets; explicit command-line options override them.
PRESETS = {
    # Runs in a few minutes on a 2-core CPU, in the regime where softmax collapses:
    # Pareto tails of index 0.7 (infinite mean) and 256 points per measure.
    "default": {
        "task": "matrix_inverse", "tail": "pareto", "tail_index": 0.7, "n_samples": 128,
        "n_points": 256, "n_test": 64, "epochs": 12, "seeds": [0], "d_model": 32, "n_heads": 4,
        "n_layers": 2, "dim_feedforward": 64, "lr": 2e-3, "batch_size": 16,
    },
    # Larger sizes, meant for a GPU.
    "paper": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 1024,
        "n_points": 512, "n_test": 128, "epochs": 200, "seeds": [0, 1, 2], "d_model": 64,
        "n_heads": 4, "n_layers": 2, "dim_feedforward": 128, "lr": 1e-3, "batch_size": 32,
    },
    # Tiny sizes for tests and smoke runs (seconds).
    "quick": {
        "task": "matrix_inverse", "tail": "student_t", "tail_index": 1.5, "n_samples": 12,
        "n_points": 16, "n_test": 6, "epochs": 2, "seeds": [0], "d_model": 8, "n_heads": 2,
        "n_layers": 1, "dim_feedforward": 16, "lr": 2e-3, "batch_size": 4,
    },
}

DEFAULT_KERNELS = ("softmax", "poly", "log", "sigmoid")
TRANSFORMS = ("none", "symlog")


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


def _seeds(values):
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


def build_parser():
    """The argparse parser of ``python -m sklearn_measattn``."""
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_measattn",
        description=(
            "Compare attention kernels on heavy-tailed measure-to-measure benchmarks "
            "(ensemble collapse of softmax attention and its remedies)."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="{compare,ess}")
    sub.required = True

    cmp_ = sub.add_parser(
        "compare",
        help="train one model per kernel and transform, print held-out metrics and a collapse verdict",
        description=(
            "Train a MeasureTransformerRegressor for every kernel x transform x seed on a "
            "benchmark and score it on held-out measures. " + VERDICT_RULE
        ),
    )
    d = PRESETS["default"]
    cmp_.add_argument("--task", choices=BENCHMARK_NAMES, default=None, help=f"benchmark (default {d['task']})")
    cmp_.add_argument("--tail", choices=TAILS, default=None, help=f"base family (default {d['tail']})")
    cmp_.add_argument("--tail-index", type=_positive_float, default=None,
                      help=f"tail exponent alpha, P(|Z|>t) ~ t^-alpha (default {d['tail_index']})")
    cmp_.add_argument("--kernels", nargs="+", choices=KERNEL_NAMES, default=list(DEFAULT_KERNELS),
                      metavar="KERNEL",
                      help=f"attention kernels, from {', '.join(KERNEL_NAMES)} (default: {' '.join(DEFAULT_KERNELS)})")
    cmp_.add_argument("--transforms", nargs="+", choices=TRANSFORMS, default=list(TRANSFORMS),
                      metavar="TRANSFORM", help="data transforms: none, symlog (default: both)")
    cmp_.add_argument("--n-samples", type=_positive_int, default=None,
                      help=f"training measures (default {d['n_samples']})")
    cmp_.add_argument("--n-points", type=_positive_int, default=None,
                      help=f"points per measure (default {d['n_points']})")
    cmp_.add_argument("--n-test", type=_positive_int, default=None,
                      help=f"held-out measures, >= 3 (default {d['n_test']})")
    cmp_.add_argument("--epochs", type=_positive_int, default=None, help=f"training epochs (default {d['epochs']})")
    cmp_.add_argument("--seeds", nargs="+", default=None, metavar="SEED",
                      help="a count N (seeds 0..N-1) or a list of seeds, e.g. --seeds 0 5 9 or --seeds 7, "
                           "(default 1 seed)")
    cmp_.add_argument("--d-model", type=_positive_int, default=None, help=f"model width (default {d['d_model']})")
    cmp_.add_argument("--n-heads", type=_positive_int, default=None, help=f"attention heads (default {d['n_heads']})")
    cmp_.add_argument("--n-layers", type=_positive_int, default=None, help=f"blocks (default {d['n_layers']})")
    cmp_.add_argument("--lr", type=_positive_float, default=None, help=f"learning rate (default {d['lr']})")
    cmp_.add_argument("--batch-size", type=_positive_int, default=None,
                      help=f"measures per batch (default {d['batch_size']})")
    cmp_.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    cmp_.add_argument("--n-jobs", type=_positive_int, default=1, help="parallel fits, joblib processes (default: 1)")
    cmp_.add_argument("--threads", type=_positive_int, default=1,
                      help="torch threads per fit; the models are small, so 1 is about as fast and robust "
                           "on a busy CPU (default: 1)")
    size = cmp_.add_mutually_exclusive_group()
    size.add_argument("--preset", choices=("default", "paper"), default="default",
                      help="size preset (default: default, a few minutes on a 2-core CPU); 'paper' is 1024 training "
                           "measures x 512 points, 200 epochs, d_model 64, 3 seeds, meant for a GPU; explicit options "
                           "override the preset")
    size.add_argument(
        "--quick", action="store_true", help="tiny sizes for smoke tests (seconds): 12 measures x 16 points, 2 epochs"
    )
    cmp_.add_argument("--out", metavar="CSV", help="write one row per fit (per seed) to this CSV file")
    cmp_.add_argument("--plot", metavar="PNG", help="save a figure (needs matplotlib)")
    cmp_.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    ess = sub.add_parser(
        "ess",
        help="attention-level table: effective sample size / n per kernel, tail and n (no training)",
        description=(
            "For random query/key projections, print the mean effective sample size "
            "1/sum_j w_ij^2 of each kernel's attention weights as a fraction of n: "
            "near 1 is flat attention, near 0 means one point takes all the weight."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ess.add_argument("--kernels", nargs="+", choices=KERNEL_NAMES, default=list(DEFAULT_KERNELS), metavar="KERNEL")
    ess.add_argument("--tails", nargs="+", choices=TAILS, default=list(TAILS), metavar="TAIL")
    ess.add_argument("--tail-index", type=_positive_float, default=1.5)
    ess.add_argument("--n-points", nargs="+", type=_positive_int, default=[64, 256, 1024, 4096], metavar="N")
    ess.add_argument("--n-features", type=_positive_int, default=2)
    ess.add_argument("--n-measures", type=_positive_int, default=1, help="measures averaged per cell")
    ess.add_argument("--n-draws", type=_positive_int, default=2, help="random projection pairs per measure")
    ess.add_argument("--seed", type=int, default=0)
    ess.add_argument("--out", metavar="CSV", help="write the table to this CSV file")
    return parser


def _resolve_compare(args, parser):
    preset = PRESETS["quick" if args.quick else args.preset]
    config = {}
    for key, value in preset.items():
        given = getattr(args, key, None)
        config[key] = value if given is None else given
    if args.seeds is not None:
        try:
            config["seeds"] = _seeds(args.seeds)
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if config["n_test"] < 3:
        parser.error(f"--n-test must be >= 3 (the across-sample correlation ranks measures), got {config['n_test']}")
    if config["d_model"] % config["n_heads"]:
        parser.error(f"--n-heads {config['n_heads']} must divide --d-model {config['d_model']}")
    return config


def _write_csv(path, rows, fields):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()})


def _robust_limits(points, q=0.02, pad=0.1):
    lo = np.quantile(points, q, axis=0)
    hi = np.quantile(points, 1 - q, axis=0)
    span = np.maximum(hi - lo, 1e-9)
    return lo - pad * span, hi + pad * span


def plot_comparison(path, examples, summary, title):
    """Scatter target vs predicted ensemble of one held-out measure per model, plus the table."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "--plot needs matplotlib; install it with `pip install matplotlib` "
            "(or `pip install sklearn-measattn[plot]`)."
        ) from None
    keys = [(s["kernel"], s["transform"]) for s in summary if (s["kernel"], s["transform"]) in examples]
    transforms = list(dict.fromkeys(t for _, t in keys))
    kernels = list(dict.fromkeys(k for k, _ in keys))
    n_rows, n_cols = max(len(transforms), 1), max(len(kernels), 1)
    fig = plt.figure(figsize=(3.0 * n_cols, 3.0 * n_rows + 0.35 * (len(summary) + 3)))
    grid = fig.add_gridspec(n_rows + 1, n_cols, height_ratios=[3.0] * n_rows + [0.35 * (len(summary) + 3)])
    for key in keys:
        ex = examples[key]
        ax = fig.add_subplot(grid[transforms.index(key[1]), kernels.index(key[0])])
        y, yp = ex["y"], ex["y_pred"]
        ax.scatter(y[:, 0], y[:, 1], s=6, c="0.6", label="target")
        ax.scatter(yp[:, 0], yp[:, 1], s=6, c="C3", label="predicted")
        lo, hi = _robust_limits(np.vstack([y, yp])[:, :2])
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_title(f"{key[0]} / {key[1]}", fontsize=9)
        ax.tick_params(labelsize=7)
    if keys:
        fig.axes[0].legend(fontsize=7, loc="upper left")
    table_ax = fig.add_subplot(grid[n_rows, :])
    table_ax.axis("off")
    header, body = table_cells(summary)
    table = table_ax.table(cellText=body, colLabels=header, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table_ax.set_title(VERDICT_RULE, fontsize=7)
    fig.suptitle(title + " (one held-out measure, 2% tails clipped from the view)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _run_compare(args, parser):
    config = _resolve_compare(args, parser)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--plot needs matplotlib: pip install matplotlib (or sklearn-measattn[plot])")
    transforms = [None if t == "none" else t for t in dict.fromkeys(args.transforms)]
    kernels = list(dict.fromkeys(args.kernels))
    tail_index = config["tail_index"]
    title = (
        f"{config['task']}, tail={config['tail']}"
        + (f" (index {tail_index:g})" if config["tail"] != "gaussian" else "")
        + f", {config['n_samples']} training measures x {config['n_points']} points, "
        f"{config['n_test']} held-out, {config['epochs']} epochs, seeds {config['seeds']}"
    )
    progress = None if args.quiet else stderr_progress
    if progress:
        progress(f"compare: {len(kernels) * len(transforms) * len(config['seeds'])} fits; {title}")
    start = time.perf_counter()
    try:
        rows, examples = compare_kernels(
            config["task"],
            kernels=kernels,
            transforms=transforms,
            tail=config["tail"],
            tail_index=tail_index,
            n_samples=config["n_samples"],
            n_points=config["n_points"],
            n_test=config["n_test"],
            epochs=config["epochs"],
            seeds=config["seeds"],
            d_model=config["d_model"],
            n_heads=config["n_heads"],
            n_layers=config["n_layers"],
            dim_feedforward=config["dim_feedforward"],
            lr=config["lr"],
            batch_size=config["batch_size"],
            device=args.device,
            n_jobs=args.n_jobs,
            torch_threads=args.threads,
            progress=progress,
            return_examples=True,
        )
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    summary = summarize(rows)
    print(format_table(summary, title=title, judge=not args.quick))
    if args.quick:
        print("recommendation: none: --quick is a smoke test, too small to judge collapse or rank kernels "
              "(run without --quick).")
    else:
        print(recommend(summary))
    print(f"total wall time {time.perf_counter() - start:.1f}s")
    if args.out:
        _write_csv(args.out, rows, ROW_FIELDS)
        print(f"wrote {len(rows)} rows to {args.out}")
    if args.plot:
        plot_comparison(args.plot, examples, summary, title)
        print(f"wrote figure to {args.plot}")
    return 0


def ess_table(kernels, tails, tail_index, n_points, *, n_features=2, n_measures=4, n_draws=4, seed=0):
    """Rows ``{kernel, tail, tail_index, n_points, ess_fraction}`` of mean attention ESS / n."""
    from .datasets import make_matrix_inverse
    from .metrics import attention_ess

    rows = []
    for tail in tails:
        for n in n_points:
            # condition=1 gives A = I: the points are plain draws of the base family.
            X, _ = make_matrix_inverse(
                n_samples=n_measures, n_points=n, n_features=n_features, tail=tail,
                tail_index=tail_index, condition=1.0, random_state=seed,
            )
            for kernel in kernels:
                ess = attention_ess(X, kernel, n_draws=n_draws, max_queries=256, random_state=seed)
                rows.append({
                    "kernel": kernel, "tail": tail,
                    "tail_index": tail_index if tail != "gaussian" else math.nan,
                    "n_points": n, "ess_fraction": float(np.mean(ess)),
                })
    return rows


def _run_ess(args, parser):
    start = time.perf_counter()
    kernels = list(dict.fromkeys(args.kernels))
    tails = list(dict.fromkeys(args.tails))
    n_points = list(dict.fromkeys(args.n_points))
    try:
        rows = ess_table(kernels, tails, args.tail_index, n_points, n_features=args.n_features,
                         n_measures=args.n_measures, n_draws=args.n_draws, seed=args.seed)
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    print(
        f"Attention ESS / n (mean over {args.n_measures} measures x {args.n_draws} random projections, "
        f"{args.n_features} features, tail index {args.tail_index:g} for the heavy tails)"
    )
    header = ["tail", "kernel"] + [f"n={n}" for n in n_points]
    lookup = {(r["tail"], r["kernel"], r["n_points"]): r["ess_fraction"] for r in rows}
    body = [[t, k] + [f"{lookup[(t, k, n)]:.3f}" for n in n_points] for t in tails for k in kernels]
    widths = [max(len(header[j]), *(len(b[j]) for b in body)) for j in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for b in body:
        print("  ".join(c.ljust(w) for c, w in zip(b, widths)))
    print("1 = flat attention (every point counts); near 0 = one point takes all the weight.")
    print(f"total wall time {time.perf_counter() - start:.1f}s")
    if args.out:
        _write_csv(args.out, rows, ("kernel", "tail", "tail_index", "n_points", "ess_fraction"))
        print(f"wrote {len(rows)} rows to {args.out}")
    return 0


def main(argv=None):
    """Entry point of ``python -m sklearn_measattn`` / ``measattn``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    subparser = parser._subparsers._group_actions[0].choices[args.command]
    if args.command == "compare":
        return _run_compare(args, subparser)
    return _run_ess(args, subparser)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
