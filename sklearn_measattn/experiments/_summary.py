"""Summaries of kernel comparisons: mean over seeds, the printed table, the recommendation."""

from __future__ import annotations

import math

import numpy as np

from ..metrics import (
    ATTENTION_ESS_THRESHOLD,
    CORRELATION_THRESHOLD,
    LEARNED_MARGIN,
    REFERENCE_NAMES,
    SPREAD_THRESHOLD,
)
from ._report import format_number, format_table

__all__ = [
    "summarize", "comparison_table", "format_comparison", "recommend", "tied_with_best", "COMPARISON_NOTES",
    "TIE_STANDARD_ERRORS",
]

#: Two configurations are tied when their mean held-out energies [symlog] differ by at most this many
#: standard errors of the difference (see :func:`tied_with_best`).
TIE_STANDARD_ERRORS = 2.0

_SUMMARY_METRICS = (
    "energy_symlog", "w1_symlog", "energy", "w1", "attention_ess", "spread_ratio_median", "corr_scale",
    "energy_vs_baseline", "fit_time",
)
_GROUP_KEYS = ("task", "tail", "tail_index", "kernel", "transform")

#: What the columns of :func:`comparison_table` mean, printed under the table.
COMPARISON_NOTES = (
    "energy, W1 [symlog]: energy distance and Wasserstein-1 between the held-out targets and the predictions, "
    "after symlog of every coordinate (on heavy-tailed data the raw distances are dominated by a few extreme "
    "points; the CSV has both); lower is better.",
    "attn ESS/n: how many points each query of the trained first attention layer effectively uses, as a fraction "
    "of the ensemble size (median over held-out measures and heads); 1/n means one point takes all the weight.",
    "spread ratio: spread of the predicted ensemble over the target's (median over held-out measures); 1 is right, "
    "near 0 means the predicted particles sit on one point.",
    "corr(scale): rank correlation, across held-out measures, of predicted and target spread; near 0 means the "
    "predictions no longer follow the input.",
    f"collapsed (why): yes when attn ESS/n < {ATTENTION_ESS_THRESHOLD:g} ('attention') or spread "
    f"ratio < {SPREAD_THRESHOLD:g} ('spread'); k/n when seeds disagree.",
    f"ignores input: seeds with corr(scale) < {CORRELATION_THRESHOLD:g}; shown apart because too "
    "little training does this too.",
    f"learned: seeds whose held-out energy [symlog] is below {LEARNED_MARGIN:g} x the better of the 'pooled' and "
    "'identity' rows; only those have learned the map from input to output measure. \"can't tell\" when even "
    "the 'oracle' row is not that far below them: at this size the distance cannot show learning.",
    "rows that need no model, scored alike: 'pooled' predicts every held-out measure by points drawn from all "
    "training targets (the best that ignores the input); 'identity' predicts the input itself; 'oracle' is a "
    "fresh sample of the true target law (built-in benchmarks only): the two-sample level, what random draws "
    "from the right law score (a model can land below it).",
)

_TABLE_HEADER = (
    "kernel", "transform", "energy [symlog]", "W1 [symlog]", "attn ESS/n", "spread ratio", "corr(scale)",
    "collapsed (why)", "ignores input", "learned", "fit (s)",
)


def summarize(rows):
    """Group per-seed rows by (task, tail, tail_index, kernel, transform).

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`compare_kernels` or :func:`compare_kernels_on_data`.

    Returns
    -------
    summary : list of dict
        One dict per group: the group keys; per metric, ``<metric>_mean`` and
        ``<metric>_std`` (sample standard deviation, ``nan`` for one seed) over
        the seeds whose fit did not diverge; ``n_seeds``, ``n_ok``,
        ``n_collapsed``, ``n_attention``, ``n_within``, ``n_across`` (seeds
        whose verdict fired on each face); ``collapsed``: ``"yes"``,
        ``"no"``, ``"k/n"`` when seeds disagree, or ``"diverged"``;
        ``n_learned`` and ``learned`` (``"yes"``, ``"no"`` or ``"k/n"``) from
        the rows' ``learned`` column; ``reference``: whether the group is a
        row that needs no model (``pooled``, ``identity``, ``oracle``).

    Examples
    --------
    >>> from sklearn_measattn.experiments import summarize
    >>> row = dict(task="t", tail="", tail_index=float("nan"), kernel="log", transform="none", status="ok",
    ...            energy_symlog=0.1, w1_symlog=0.2, energy=0.3, w1=0.4, attention_ess=0.5,
    ...            spread_ratio_median=0.9, corr_scale=0.8, fit_time=1.0, collapsed=False,
    ...            collapse_attention=False, collapse_within=False, collapse_across=False)
    >>> (s,) = summarize([row, dict(row, energy_symlog=0.3)])
    >>> s["collapsed"], s["n_seeds"], round(s["energy_symlog_mean"], 3)
    ('no', 2, 0.2)
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
            values = np.array([r.get(metric, math.nan) for r in source], dtype=float)
            out[f"{metric}_mean"] = float(values.mean()) if len(values) else math.nan
            out[f"{metric}_std"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        n_collapsed = sum(bool(r["collapsed"]) for r in ok)
        out["n_collapsed"] = n_collapsed
        out["n_attention"] = sum(bool(r["collapse_attention"]) for r in ok)
        out["n_within"] = sum(bool(r["collapse_within"]) for r in ok)
        out["n_across"] = sum(bool(r["collapse_across"]) for r in ok)
        out["reference"] = out["kernel"] in REFERENCE_NAMES and out["transform"] == "none"
        n_learned = sum(r.get("learned") is True for r in ok)
        judged = sum(r.get("learned") in (True, False) for r in ok)
        out["n_learned"] = n_learned
        if ok and not judged:
            out["learned"] = "can't tell"
        elif n_learned == judged:
            out["learned"] = "yes" if judged == len(ok) else f"{n_learned}/{len(ok)}"
        else:
            out["learned"] = "no" if not n_learned else f"{n_learned}/{len(ok)}"
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


def _mean_std(mean, std):
    if not np.isfinite(mean):
        return "nan"
    return format_number(mean) + (f" ± {format_number(std)}" if np.isfinite(std) else "")


def _why(s):
    faces = [name for name, n in (("attention", s["n_attention"]), ("spread", s["n_within"])) if n]
    return f" ({', '.join(faces)})" if faces else ""


def comparison_table(summary, *, judge=True):
    """The comparison table as a header and rows of strings.

    Parameters
    ----------
    summary : list of dict
        Output of :func:`summarize`.
    judge : bool, default=True
        ``False`` for runs too small to support a verdict: the numbers are
        shown, the collapse columns say so.

    Returns
    -------
    header : list of str
    body : list of list of str
        Numbers with three significant figures (:func:`format_number`), mean
        ± standard deviation over seeds when there are several.

    Examples
    --------
    >>> from sklearn_measattn.experiments import comparison_table
    >>> header, body = comparison_table([])
    >>> header[:3]
    ['kernel', 'transform', 'energy [symlog]']
    """
    body = []
    for s in sorted(summary, key=lambda s: bool(s.get("reference"))):  # the no-model rows last
        n_ok = s["n_ok"]
        if s.get("reference"):
            body.append([
                s["kernel"], "(no model)",
                _mean_std(s["energy_symlog_mean"], s["energy_symlog_std"]),
                _mean_std(s["w1_symlog_mean"], s["w1_symlog_std"]),
                "-",
                _mean_std(s["spread_ratio_median_mean"], s["spread_ratio_median_std"]),
                _mean_std(s["corr_scale_mean"], s["corr_scale_std"]),
                "-", "-", "-", "-",
            ])
            continue
        learned = s["learned"] if n_ok else "diverged"
        if not judge and n_ok:
            collapsed, ignores, learned = "too small to judge", "-", "-"
        else:
            collapsed = s["collapsed"] + ("" if s["collapsed"] in ("no", "diverged") else _why(s))
            ignores = "diverged" if not n_ok else f"{s['n_across']}/{n_ok}"
        body.append([
            s["kernel"], s["transform"],
            _mean_std(s["energy_symlog_mean"], s["energy_symlog_std"]),
            _mean_std(s["w1_symlog_mean"], s["w1_symlog_std"]),
            _mean_std(s["attention_ess_mean"], s["attention_ess_std"]),
            _mean_std(s["spread_ratio_median_mean"], s["spread_ratio_median_std"]),
            _mean_std(s["corr_scale_mean"], s["corr_scale_std"]),
            collapsed, ignores, learned,
            format_number(s["fit_time_mean"]),
        ])
    return list(_TABLE_HEADER), body


def format_comparison(summary, *, title=None, judge=True):
    """Render :func:`summarize` output as an aligned text table with what the columns mean.

    Parameters
    ----------
    summary : list of dict
        Output of :func:`summarize`.
    title : str, default=None
        First line.
    judge : bool, default=True
        See :func:`comparison_table`.

    Returns
    -------
    text : str

    Examples
    --------
    >>> from sklearn_measattn.experiments import format_comparison
    >>> format_comparison([], title="nothing run").splitlines()[0]
    'nothing run'
    """
    header, body = comparison_table(summary, judge=judge)
    return format_table(header, body, title=title, notes=COMPARISON_NOTES)


def tied_with_best(usable):
    """The configurations whose held-out energy cannot be told apart from the best's by the seeds run.

    ``usable[0]`` is the best (lowest mean held-out energy [symlog]); another
    configuration is tied with it when the difference of the two means is at
    most :data:`TIE_STANDARD_ERRORS` standard errors of that difference,
    ``sqrt(s_best^2 / n_best + s^2 / n)`` with ``s`` the seed-to-seed standard
    deviation and ``n`` the seeds that ran. Why this rule: the seeds change
    the training measures, the initial weights and the batches, and a
    difference of means smaller than about two of its standard errors is
    what such draws produce between equally good configurations about one
    time in twenty; ranking those by the third digit would name a winner that
    the next set of seeds reverses. With one seed there is no standard error
    and nothing is called tied.

    Parameters
    ----------
    usable : list of dict
        Rows of :func:`summarize` that learned and did not collapse, best
        first.

    Returns
    -------
    tied : list of dict
        The rows of ``usable[1:]`` tied with ``usable[0]``, in order.

    Examples
    --------
    >>> from sklearn_measattn.experiments import tied_with_best
    >>> best = {"energy_symlog_mean": 0.043, "energy_symlog_std": 0.002, "n_ok": 3}
    >>> close = {"energy_symlog_mean": 0.045, "energy_symlog_std": 0.002, "n_ok": 3}
    >>> far = {"energy_symlog_mean": 0.060, "energy_symlog_std": 0.002, "n_ok": 3}
    >>> [row["energy_symlog_mean"] for row in tied_with_best([best, close, far])]
    [0.045]
    """
    if not usable:
        return []
    best = usable[0]
    tied = []
    for row in usable[1:]:
        error = _difference_standard_error(best, row)
        if np.isfinite(error) and row["energy_symlog_mean"] - best["energy_symlog_mean"] <= TIE_STANDARD_ERRORS * error:
            tied.append(row)
    return tied


def _difference_standard_error(a, b):
    """Standard error of the difference of two configurations' mean held-out energies (nan with one seed)."""
    parts = [row["energy_symlog_std"] ** 2 / row["n_ok"] for row in (a, b)]
    return math.sqrt(sum(parts)) if all(np.isfinite(parts)) else math.nan


def recommend(summary):
    """One line naming the best kernel and transform, with the evidence for it.

    The candidates are the (kernel, transform) pairs that learned the map in
    every seed (held-out energy below the no-model rows, see
    :func:`~sklearn_measattn.metrics.learned_verdict`) and neither collapsed
    nor diverged in any; the best is the one with the lowest mean symlog
    energy distance. The line names the configurations tied with it within
    seed noise (:func:`tied_with_best`) instead of ranking them by the third
    digit, or says that the runner-up's margin is beyond seed noise (with one
    seed there is no noise estimate, and the line says so); it says which
    pairs collapsed or did not learn, and, where an ``oracle`` row exists, how far the best is from the
    two-sample level. When no pair learned, it says so and what to raise.

    Parameters
    ----------
    summary : list of dict
        Output of :func:`summarize`.

    Returns
    -------
    line : str
        Starts with ``"recommendation: "``.

    Examples
    --------
    >>> from sklearn_measattn.experiments import recommend
    >>> recommend([])
    'recommendation: none: nothing was run.'
    """
    fits = [s for s in summary if not s.get("reference")]
    if not fits:
        return "recommendation: none: nothing was run."
    collapsed = [f"{s['kernel']}/{s['transform']}" for s in fits if s["collapsed"] != "no"]
    unlearned = [f"{s['kernel']}/{s['transform']}" for s in fits
                 if s["collapsed"] == "no" and s.get("learned") != "yes"]
    usable = [s for s in fits
              if s["collapsed"] == "no" and s.get("learned") == "yes" and np.isfinite(s["energy_symlog_mean"])]
    failed_text = f"; collapsed or diverged: {', '.join(collapsed)}" if collapsed else "; none collapsed"
    if unlearned:
        failed_text += f"; did not learn: {', '.join(unlearned)}"
    if not usable:
        if not any(s.get("n_learned") for s in fits):
            return ("recommendation: none: no configuration learned the map (held-out energy [symlog] not clearly "
                    "below the 'pooled'/'identity' rows that need no model); the table ranks untrained models. "
                    f"Train longer or on more measures (raise --epochs, --n-samples){failed_text}.")
        return ("recommendation: none: no configuration learned the map in every seed without collapsing"
                + failed_text + ".")
    usable.sort(key=lambda s: s["energy_symlog_mean"])
    best = usable[0]
    name = f"kernel={best['kernel']!r}, transform={best['transform'] if best['transform'] != 'none' else None!r}"
    evidence = (
        f"lowest held-out energy [symlog] {format_number(best['energy_symlog_mean'])} among the configurations "
        f"that learned, {format_number(best['energy_vs_baseline_mean'])} x the best no-model row, with attn "
        f"ESS/n {format_number(best['attention_ess_mean'])}"
    )
    oracle = next((s for s in summary if s.get("reference") and s["kernel"] == "oracle"
                   and all(s[k] == best[k] for k in ("task", "tail", "tail_index"))), None)
    if oracle is not None and oracle["energy_symlog_mean"] > 0:
        evidence += (f"; {format_number(best['energy_symlog_mean'] / oracle['energy_symlog_mean'])} x the "
                     f"oracle's two-sample level {format_number(oracle['energy_symlog_mean'])}")
    tied = tied_with_best(usable)
    if tied:
        shown = ", ".join(f"{s['kernel']}/{s['transform']} {_mean_std(s['energy_symlog_mean'], s['energy_symlog_std'])}"
                          for s in tied)
        name += (f", tied within seed noise with {shown} (means within {TIE_STANDARD_ERRORS:g} standard errors of "
                 f"their difference over {best['n_ok']} seeds: any of them does as well here)")
    elif len(usable) > 1:
        runner = usable[1]
        margin = runner["energy_symlog_mean"] - best["energy_symlog_mean"]
        error = _difference_standard_error(best, runner)
        evidence += f"; next {runner['kernel']}/{runner['transform']} at {format_number(runner['energy_symlog_mean'])}"
        if not np.isfinite(error):
            evidence += " (one seed: no estimate of seed noise, run --seeds 3 to tell ties apart)"
        else:
            evidence += (f" (margin {format_number(margin)} beyond seed noise: {TIE_STANDARD_ERRORS:g} standard "
                         f"errors are {format_number(TIE_STANDARD_ERRORS * error)})")
    return f"recommendation: {name}: {evidence}{failed_text}."
