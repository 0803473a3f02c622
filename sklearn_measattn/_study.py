"""Kernel comparison studies: train one model per (kernel, transform, seed), score it.

This is the engine behind ``python -m sklearn_measattn compare`` and the scripts
in ``studies/``; the command line only parses arguments and prints.

The collapse verdict
--------------------
The rule is fixed here, before any study was run, and is never tuned on study
results. A trained model is called *collapsed* on a held-out set when

* ``median_i spread_ratio_i < SPREAD_THRESHOLD`` (= 0.2), i.e. the typical
  predicted ensemble's median pairwise distance is under a fifth of its
  target's (*within-ensemble* collapse: the particles sit near one point), or
* ``across_sample_correlation(statistic="scale") < CORRELATION_THRESHOLD``
  (= 0.2), i.e. the predictions' scales do not rank the samples the way the
  targets' scales do (*across-sample* collapse: one average measure whatever
  the input).

Why these numbers. In both benchmarks the target scale varies across samples
by at most a factor 4 (``condition=4`` gives eigenvalues of ``A^-1`` in
``[1/2, 2]``; ``scale_range=(0.5, 2)``). A model that ignores its input and
outputs one *well-spread* average measure therefore has per-sample spread
ratios of roughly ``[1/4, 4]`` and a median near 1; a median below 0.2 can
only come from particles contracting, not from averaging over samples. The
median over held-out measures (not the mean) is used because heavy-tailed
targets make single ratios explode. For the correlation, 0.2 is about the
one-sided 5% critical value of Spearman's rho under independence for the 64
held-out measures of the default study (``1.645 / sqrt(63) = 0.207``): below it
the prediction's scale is statistically indistinguishable from not depending
on the input at all. Note that an under-trained model which has not yet
learnt the input dependence is flagged by this second face too: it is
reported separately (``collapse_within``, ``collapse_across``) so the two can
be told apart.
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
from .metrics import across_sample_correlation, energy_distance, spread_ratio, wasserstein_distance

__all__ = [
    "SPREAD_THRESHOLD",
    "CORRELATION_THRESHOLD",
    "VERDICT_RULE",
    "collapse_verdict",
    "compare_kernels",
    "summarize",
    "format_table",
]

#: Within-ensemble threshold on the median (over held-out measures) spread ratio.
SPREAD_THRESHOLD = 0.2
#: Across-sample threshold on the Spearman correlation of the scale statistic.
CORRELATION_THRESHOLD = 0.2
#: One-line statement of the rule, printed under every table.
VERDICT_RULE = (
    f"collapsed = median spread ratio < {SPREAD_THRESHOLD} (within-ensemble) OR "
    f"across-sample correlation of scale < {CORRELATION_THRESHOLD} (across-sample); "
    "rule fixed before any study run."
)

#: Exact W1 (network simplex, O(n^3)) up to this many points, sliced W1 above.
EXACT_W1_MAX_POINTS = 512

ROW_FIELDS = (
    "task", "tail", "tail_index", "kernel", "transform", "seed",
    "n_samples", "n_points", "n_test", "epochs", "d_model", "status",
    "energy", "w1", "w1_method", "spread_ratio_median", "spread_ratio_mean",
    "corr_scale", "corr_location", "collapse_within", "collapse_across",
    "collapsed", "fit_time",
)


def collapse_verdict(spread_ratio_median, corr_scale):
    """Apply the fixed collapse rule; return ``(within, across, collapsed)`` booleans.

    ``nan`` inputs (e.g. a diverged fit) give ``nan`` verdicts.

    Examples
    --------
    >>> from sklearn_measattn._study import collapse_verdict
    >>> collapse_verdict(0.05, 0.9)
    (True, False, True)
    >>> collapse_verdict(1.0, 0.6)
    (False, False, False)
    """
    if not (np.isfinite(spread_ratio_median) and np.isfinite(corr_scale)):
        return (math.nan, math.nan, math.nan)
    within = bool(spread_ratio_median < SPREAD_THRESHOLD)
    across = bool(corr_scale < CORRELATION_THRESHOLD)
    return (within, across, within or across)


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
    except FloatingPointError:
        row.update(
            status="diverged", energy=math.nan, w1=math.nan, w1_method="", spread_ratio_median=math.nan,
            spread_ratio_mean=math.nan, corr_scale=math.nan, corr_location=math.nan,
            collapse_within=math.nan, collapse_across=math.nan, collapsed=math.nan,
            fit_time=time.perf_counter() - start,
        )
        return row, None
    fit_time = time.perf_counter() - start
    y_true = test.target
    y_pred = model.predict(test.data)
    w1_method = "exact" if n_points <= EXACT_W1_MAX_POINTS else "sliced"
    ratios = spread_ratio(y_true, y_pred, multioutput="raw_values")
    sr_median = float(np.nanmedian(ratios))
    corr_scale = across_sample_correlation(y_true, y_pred, statistic="scale")
    within, across, collapsed = collapse_verdict(sr_median, corr_scale)
    row.update(
        status="ok",
        energy=float(energy_distance(y_true, y_pred)),
        w1=float(wasserstein_distance(y_true, y_pred, method=w1_method, random_state=seed)),
        w1_method=w1_method,
        spread_ratio_median=sr_median,
        spread_ratio_mean=float(np.nanmean(ratios)),
        corr_scale=float(corr_scale),
        corr_location=float(across_sample_correlation(y_true, y_pred, statistic="location")),
        collapse_within=within,
        collapse_across=across,
        collapsed=collapsed,
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
        Torch intra-op threads per fit (restored afterwards). ``None`` keeps
        torch's setting with ``n_jobs=1`` and uses 1 thread per worker
        otherwise. The models are small: one thread per fit is about as fast
        and far more robust on a busy CPU.
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
            )._validate_params()
    seeds = list(seeds)
    jobs = [
        (kernel, transform, seed, return_examples and seed == seeds[0])
        for seed in seeds
        for kernel in kernels
        for transform in transforms
    ]
    n_threads = torch_threads if torch_threads is not None else (1 if n_jobs != 1 else None)
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
                    f"E={row['energy']:.3g} spread={row['spread_ratio_median']:.2f} "
                    f"corr={row['corr_scale']:.2f} fit {row['fit_time']:.1f}s"
                    if row["status"] == "ok"
                    else f"training diverged (non-finite loss) after {row['fit_time']:.1f}s"
                )
            )
    if return_examples:
        return rows, examples
    return rows


_SUMMARY_METRICS = ("energy", "w1", "spread_ratio_median", "corr_scale", "fit_time")
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


def _cell(mean, std, digits=3):
    if not np.isfinite(mean):
        return "nan"
    text = f"{mean:.{digits}g}"
    if np.isfinite(std):
        text += f" ± {std:.{max(digits - 1, 1)}g}"
    return text


TABLE_COLUMNS = ("kernel", "transform", "energy", "W1", "spread ratio", "corr(scale)", "collapsed", "fit time (s)")


def table_cells(summary):
    """The printed table as a header and a list of string rows."""
    body = []
    for s in summary:
        body.append([
            s["kernel"], s["transform"],
            _cell(s["energy_mean"], s["energy_std"]),
            _cell(s["w1_mean"], s["w1_std"]),
            _cell(s["spread_ratio_median_mean"], s["spread_ratio_median_std"], 2),
            _cell(s["corr_scale_mean"], s["corr_scale_std"], 2),
            s["collapsed"] + ("" if s["collapsed"] in ("no", "diverged") else _faces(s)),
            _cell(s["fit_time_mean"], s["fit_time_std"], 3),
        ])
    return list(TABLE_COLUMNS), body


def _faces(s):
    faces = [name for name, n in (("within", s["n_within"]), ("across", s["n_across"])) if n]
    return f" [{', '.join(faces)}]" if faces else ""


def format_table(summary, *, title=None):
    """Render :func:`summarize` output as an aligned text table plus the rule."""
    header, body = table_cells(summary)
    widths = [max(len(header[j]), *(len(r[j]) for r in body)) for j in range(len(header))]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body)
    lines.append("")
    lines.append("energy: squared energy distance; W1: Wasserstein-1; both on held-out measures, lower is better.")
    lines.append("spread ratio: median over held-out measures of spread(prediction)/spread(target), 1 is right.")
    lines.append("corr(scale): Spearman correlation across held-out measures of predicted vs target scale.")
    lines.append(VERDICT_RULE)
    return "\n".join(lines)


def stderr_progress(message):
    """Default progress printer: one line on stderr, flushed."""
    print(message, file=sys.stderr, flush=True)
