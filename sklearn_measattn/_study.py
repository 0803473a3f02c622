"""Kernel comparison studies: train one model per (kernel, transform, seed), score it.

This is the engine behind ``python -m sklearn_measattn compare`` and the scripts
in ``studies/``; the command line only parses arguments and prints. Each fit is
judged by the fixed collapse rule of :func:`sklearn_measattn.metrics.collapse_verdict`
(its thresholds and their reasons are documented there), and its distances are
reported in symlog space (where they are finite on infinite-moment data) and
in raw space.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import torch
from joblib import Parallel, delayed

from .datasets import load_benchmark
from .estimator import MeasureTransformerRegressor
from .metrics import (
    COLLAPSE_RULE,
    across_sample_correlation,
    collapse_diagnostics,
    energy_distance,
    spread_ratio,
    wasserstein_distance,
)

__all__ = [
    "VERDICT_RULE",
    "compare_kernels",
    "summarize",
    "format_table",
    "recommend",
]

#: One-line statement of the rule, printed under every table.
VERDICT_RULE = COLLAPSE_RULE + " Thresholds fixed in code before any study run."

#: Exact W1 (network simplex, O(n^3)) up to this many points, sliced W1 above.
EXACT_W1_MAX_POINTS = 512

ROW_FIELDS = (
    "task", "tail", "tail_index", "kernel", "transform", "seed",
    "n_samples", "n_points", "n_test", "epochs", "d_model", "status",
    "energy_symlog", "w1_symlog", "energy", "w1", "w1_method", "attention_ess",
    "attention_ess_min_head", "spread_ratio_median", "spread_ratio_mean",
    "corr_scale", "corr_location", "collapse_attention", "collapse_within", "collapse_across",
    "collapsed", "fit_time",
)


def _transform_name(transform):
    return "none" if transform in (None, "none") else str(transform)


def _fit_one(task, data_params, kernel, transform, seed, n_test, model_params, keep_example, n_threads):
    """Train and evaluate one model; return (row, example or None)."""
    previous_threads = torch.get_num_threads()
    if n_threads is not None:
        torch.set_num_threads(n_threads)
    try:
        return _fit_one_inner(task, data_params, kernel, transform, seed, n_test, model_params, keep_example)
    finally:
        torch.set_num_threads(previous_threads)


def _fit_one_inner(task, data_params, kernel, transform, seed, n_test, model_params, keep_example):
    train = load_benchmark(task, **data_params, random_state=seed)
    # Held-out measures come from a separate stream of the same distribution.
    test_params = dict(data_params, n_samples=n_test)
    test = load_benchmark(task, **test_params, random_state=1_000_003 + seed)
    n_points = data_params["n_points"]
    row = {
        "task": task,
        "tail": data_params["tail"],
        "tail_index": data_params["tail_index"] if data_params["tail"] != "gaussian" else math.nan,
        "kernel": kernel,
        "transform": _transform_name(transform),
        "seed": seed,
        "n_samples": data_params["n_samples"],
        "n_points": n_points,
        "n_test": n_test,
        "epochs": model_params["max_epochs"],
        "d_model": model_params["d_model"],
    }
    model = MeasureTransformerRegressor(
        kernel=kernel,
        transform=None if transform in (None, "none") else transform,
        random_state=seed,
        **model_params,
    )
    start = time.perf_counter()
    try:
        model.fit(train.data, train.target)
    except FloatingPointError as exc:
        row.update({field: math.nan for field in ROW_FIELDS if field not in row})
        row.update(status="diverged", w1_method="", error=str(exc), fit_time=time.perf_counter() - start)
        return row, None
    fit_time = time.perf_counter() - start
    y_true = test.target
    y_pred = model.predict(test.data)
    w1_method = "exact" if n_points <= EXACT_W1_MAX_POINTS else "sliced"
    report = collapse_diagnostics(
        model, test.data, y_true, y_pred=y_pred, space="symlog", max_queries=256, random_state=seed
    )
    ratios = spread_ratio(y_true, y_pred, multioutput="raw_values")
    row.update(
        status="ok",
        energy_symlog=report["energy"],
        w1_symlog=report["w1"],
        energy=float(energy_distance(y_true, y_pred)),
        w1=float(wasserstein_distance(y_true, y_pred, method=w1_method, random_state=seed)),
        w1_method=w1_method,
        attention_ess=report["attention_ess"],
        attention_ess_min_head=report["attention_ess_min_head"],
        spread_ratio_median=report["spread_ratio"],
        spread_ratio_mean=float(np.nanmean(ratios)),
        corr_scale=report["corr_scale"],
        corr_location=float(across_sample_correlation(y_true, y_pred, statistic="location")),
        collapse_attention=report["attention"],
        collapse_within=report["within"],
        collapse_across=report["across"],
        collapsed=report["collapsed"],
        fit_time=fit_time,
    )
    example = None
    if keep_example:
        example = {"X": test.data[0], "y": y_true[0], "y_pred": y_pred[0]}
    return row, example


def compare_kernels(
    task="matrix_inverse",
    *,
    kernels=("softmax", "poly", "log", "sigmoid"),
    transforms=(None, "symlog"),
    tail="student_t",
    tail_index=1.5,
    n_samples=128,
    n_points=64,
    n_test=64,
    epochs=40,
    seeds=(0,),
    d_model=32,
    n_heads=4,
    n_layers=2,
    dim_feedforward=64,
    lr=1e-3,
    batch_size=16,
    device="auto",
    n_jobs=1,
    torch_threads=None,
    progress=None,
    return_examples=False,
):
    """Train one :class:`MeasureTransformerRegressor` per kernel, transform and seed.

    For every seed ``s`` the training measures are ``load_benchmark(task, ...,
    random_state=s)`` and the held-out measures an independent draw
    (``random_state=1_000_003 + s``); the model is seeded with ``s`` too. Each
    fitted model is scored on the held-out measures with the energy distance,
    W1 (exact up to 512 points, sliced above), the spread ratio (median and
    mean over measures) and the across-sample correlations of scale and
    location, and judged by the fixed rule :func:`collapse_verdict`.

    Parameters
    ----------
    task : {"matrix_inverse", "sheared_swap"}
        Benchmark.
    kernels : sequence of str
        Attention kernels.
    transforms : sequence of {None, "none", "symlog"}
        Data transforms.
    tail, tail_index : str, float
        Base family of the benchmark and its tail exponent.
    n_samples, n_points, n_test : int
        Training measures, points per measure, held-out measures (>= 3).
    epochs : int
        Training epochs (no early stopping).
    seeds : sequence of int
        One run per seed.
    d_model, n_heads, n_layers, dim_feedforward, lr, batch_size, device
        Passed to the estimator.
    n_jobs : int
        joblib workers over fits.
    torch_threads : int or None
        Torch intra-op threads per fit (restored afterwards). ``None`` means 1
        whatever ``n_jobs``: the models are small, one thread per fit is about
        as fast and far more robust on a busy CPU, and the same thread count
        makes a parallel run give the same numbers as a serial one (float
        reductions split over other thread counts round differently).
    progress : callable or None
        Called with a one-line string after each finished fit.
    return_examples : bool
        Also return, for the first seed, the first held-out measure, its target
        and each model's prediction: ``{(kernel, transform): {"X", "y",
        "y_pred"}}``.

    Returns
    -------
    rows : list of dict
        One row per fit, keys :data:`ROW_FIELDS`.
    examples : dict
        Only with ``return_examples=True``.

    Examples
    --------
    >>> from sklearn_measattn._study import compare_kernels
    >>> rows = compare_kernels(kernels=["log"], transforms=[None], n_samples=8,
    ...                        n_points=16, n_test=4, epochs=1, d_model=8, n_heads=2)
    >>> rows[0]["kernel"], rows[0]["status"]
    ('log', 'ok')
    """
    if int(n_test) < 3:
        raise ValueError(f"n_test must be >= 3 (the across-sample correlation ranks measures), got {n_test}.")
    data_params = {"n_samples": n_samples, "n_points": n_points, "tail": tail, "tail_index": tail_index}
    # Validate data parameters once, cheaply, before launching any fit.
    load_benchmark(task, **dict(data_params, n_samples=1, n_points=2), random_state=0)
    model_params = {
        "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers, "dim_feedforward": dim_feedforward,
        "lr": lr, "batch_size": batch_size, "max_epochs": epochs, "device": device,
    }
    # Validate the estimator parameters (kernel names included) before any fit.
    for kernel in kernels:
        for transform in transforms:
            MeasureTransformerRegressor(
                kernel=kernel, transform=None if transform in (None, "none") else transform, **model_params
            )._check_params()
    seeds = list(seeds)
    jobs = [
        (kernel, transform, seed, return_examples and seed == seeds[0])
        for seed in seeds
        for kernel in kernels
        for transform in transforms
    ]
    n_threads = torch_threads if torch_threads is not None else 1
    calls = (
        delayed(_fit_one)(task, data_params, k, t, s, n_test, model_params, keep, n_threads)
        for k, t, s, keep in jobs
    )
    if n_jobs == 1:
        results_iter = (fn(*args, **kw) for fn, args, kw in calls)
    else:
        results_iter = Parallel(n_jobs=n_jobs, return_as="generator")(calls)
    rows, examples = [], {}
    for done, (row, example) in enumerate(results_iter, start=1):
        rows.append(row)
        if example is not None:
            examples[(row["kernel"], row["transform"])] = example
        if progress is not None:
            progress(
                f"[{done}/{len(jobs)}] {task} {tail} {row['kernel']}/{row['transform']} seed {row['seed']}: "
                + (
                    f"energy(symlog)={row['energy_symlog']:.3f} attention ESS/n={row['attention_ess']:.3f} "
                    f"spread={row['spread_ratio_median']:.2f} corr={row['corr_scale']:.2f} "
                    f"fit {row['fit_time']:.1f}s"
                    if row["status"] == "ok"
                    else f"diverged after {row['fit_time']:.1f}s: {row.get('error', '')}"
                )
            )
    if return_examples:
        return rows, examples
    return rows


_SUMMARY_METRICS = (
    "energy_symlog", "w1_symlog", "energy", "w1", "attention_ess", "spread_ratio_median", "corr_scale", "fit_time",
)
_GROUP_KEYS = ("task", "tail", "tail_index", "kernel", "transform")


def summarize(rows):
    """Group per-seed rows by (task, tail, tail_index, kernel, transform).

    Returns a list of dicts with, per metric, ``<metric>_mean`` and
    ``<metric>_std`` (sample std, ``nan`` for one seed) over the seeds whose fit
    did not diverge, plus ``n_seeds``, ``n_ok``, ``n_collapsed`` and
    ``collapsed`` ("yes", "no", "k/n" when seeds disagree, "diverged").
    """
    groups = {}
    for row in rows:
        key = tuple("" if (isinstance(row[k], float) and math.isnan(row[k])) else row[k] for k in _GROUP_KEYS)
        groups.setdefault(key, []).append(row)
    summary = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        out = dict(zip(_GROUP_KEYS, key))
        out["n_seeds"] = len(members)
        out["n_ok"] = len(ok)
        for metric in _SUMMARY_METRICS:
            source = members if metric == "fit_time" else ok
            values = np.array([r[metric] for r in source], dtype=float)
            out[f"{metric}_mean"] = float(values.mean()) if len(values) else math.nan
            out[f"{metric}_std"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        n_collapsed = sum(bool(r["collapsed"]) for r in ok)
        out["n_collapsed"] = n_collapsed
        out["n_attention"] = sum(bool(r["collapse_attention"]) for r in ok)
        out["n_within"] = sum(bool(r["collapse_within"]) for r in ok)
        out["n_across"] = sum(bool(r["collapse_across"]) for r in ok)
        if not ok:
            out["collapsed"] = "diverged"
        elif n_collapsed == len(ok):
            out["collapsed"] = "yes"
        elif n_collapsed == 0:
            out["collapsed"] = "no"
        else:
            out["collapsed"] = f"{n_collapsed}/{len(ok)}"
        if ok and len(ok) < len(members):
            out["collapsed"] += f" ({len(members) - len(ok)} diverged)"
        summary.append(out)
    return summary


TABLE_COLUMNS = (
    "kernel", "transform", "energy [symlog]", "W1 [symlog]", "attn ESS/n", "spread ratio", "corr(scale)",
    "collapsed [faces]", "across face", "fit (s)",
)


def _fixed(mean, std, digits=3):
    """Fixed decimals, so that columns line up and compare (0.960, not 0.96 next to 1)."""
    if not np.isfinite(mean):
        return "nan"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if np.isfinite(std) else "")


def table_cells(summary, *, judge=True):
    """The printed table as a header and a list of string rows (``judge=False``: no verdicts)."""
    body = []
    for s in summary:
        n_ok = s["n_ok"]
        body.append([
            s["kernel"], s["transform"],
            _fixed(s["energy_symlog_mean"], s["energy_symlog_std"]),
            _fixed(s["w1_symlog_mean"], s["w1_symlog_std"]),
            _fixed(s["attention_ess_mean"], s["attention_ess_std"]),
            _fixed(s["spread_ratio_median_mean"], s["spread_ratio_median_std"], 2),
            _fixed(s["corr_scale_mean"], s["corr_scale_std"], 2),
            (s["collapsed"] + ("" if s["collapsed"] in ("no", "diverged") else _faces(s)))
            if judge or not n_ok else "too small to judge",
            ("diverged" if not n_ok else f"{s['n_across']}/{n_ok}") if judge else "-",
            _fixed(s["fit_time_mean"], math.nan, 1),
        ])
    return list(TABLE_COLUMNS), body


def _faces(s):
    faces = [name for name, n in (("attention", s["n_attention"]), ("within", s["n_within"])) if n]
    return f" [{', '.join(faces)}]" if faces else ""


def format_table(summary, *, title=None, judge=True):
    """Render :func:`summarize` output as an aligned text table plus the rule.

    ``judge=False`` (runs too small to support a verdict) prints the numbers
    but no collapse verdict.
    """
    header, body = table_cells(summary, judge=judge)
    widths = [max(len(header[j]), *(len(r[j]) for r in body)) for j in range(len(header))]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body)
    lines.append("")
    lines.append(
        "energy, W1 [symlog]: squared energy distance and Wasserstein-1 between held-out targets and predictions, "
        "both after symlog of every coordinate (raw-space distances of infinite-moment data are dominated by a "
        "few extreme points; the CSV has both); lower is better."
    )
    lines.append(
        "attn ESS/n: trained first-layer attention effective sample size / n (median over held-out measures "
        "and heads); 1/n means one point takes all the weight."
    )
    lines.append("spread ratio: median over held-out measures of spread(prediction)/spread(target), 1 is right.")
    lines.append("corr(scale): Spearman correlation across held-out measures of predicted vs target scale.")
    lines.append(VERDICT_RULE)
    return "\n".join(lines)


def recommend(summary):
    """One line naming the best kernel and transform, with the evidence for it.

    The best is the lowest mean symlog energy distance among the (kernel,
    transform) pairs that neither collapsed nor diverged in any seed; the line
    says which pairs collapsed, and whether the margin over the runner-up is
    larger than the seed-to-seed standard deviation (with one seed there is no
    noise estimate, and the line says so).
    """
    usable = [s for s in summary if s["collapsed"] == "no" and np.isfinite(s["energy_symlog_mean"])]
    failed = [f"{s['kernel']}/{s['transform']}" for s in summary if s["collapsed"] != "no"]
    failed_text = f"; collapsed or diverged: {', '.join(failed)}" if failed else "; none collapsed"
    if not usable:
        return "recommendation: none: every kernel and transform collapsed or diverged" + failed_text + "."
    usable.sort(key=lambda s: s["energy_symlog_mean"])
    best = usable[0]
    name = f"kernel={best['kernel']!r}, transform={best['transform'] if best['transform'] != 'none' else None!r}"
    evidence = (
        f"lowest held-out energy [symlog] {best['energy_symlog_mean']:.3f} with attention ESS/n "
        f"{best['attention_ess_mean']:.3f}"
    )
    if len(usable) > 1:
        runner = usable[1]
        margin = runner["energy_symlog_mean"] - best["energy_symlog_mean"]
        stds = [v for v in (best["energy_symlog_std"], runner["energy_symlog_std"]) if np.isfinite(v)]
        noise = max(stds) if stds else math.nan
        evidence += f", next {runner['kernel']}/{runner['transform']} at {runner['energy_symlog_mean']:.3f}"
        if not np.isfinite(noise):
            evidence += " (one seed: no estimate of seed noise, run --seeds 3 to tell)"
        elif margin <= noise:
            evidence += f" (margin {margin:.3f} within seed noise {noise:.3f}: about as good)"
        else:
            evidence += f" (margin {margin:.3f} beyond seed noise {noise:.3f})"
    return f"recommendation: {name}: {evidence}{failed_text}."


def stderr_progress(message):
    """Default progress printer: one line on stderr, flushed."""
    print(message, file=sys.stderr, flush=True)
