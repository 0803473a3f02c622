"""Summaries of kernel comparisons: mean over seeds, the verdict, the printed table and its legend."""

from __future__ import annotations

import math
import textwrap

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

#: The widest line the comparison's table, legend and verdict may print: they fit a 120-column terminal.
_LINE_WIDTH = 100

#: What the table of :func:`comparison_table` shows, printed under it (each note wrapped to 100 columns).
COMPARISON_NOTES = (
    "Each cell is the mean over the seeds that ran; ± is the standard deviation (sd) across seeds, not a "
    "standard error. Every column of every fit is in the CSV of --out, one row per seed.",
    "energy: energy distance between held-out target and predicted ensembles after symlog, sign(x) "
    "log(1 + |x|), of every coordinate (raw distances on heavy tails are ruled by a few extreme points; the "
    "CSV has them, and W1); lower is better.",
    "vs base: energy over that of the better no-model row, pooled or identity, of the same seed.",
    "ESS/n: effective sample size of the trained first attention layer over the ensemble size (median over "
    "held-out measures and heads); 1/n means one point takes all the weight.",
    "spread: spread of the predicted ensemble over the target's (median over held-out measures); 1 is "
    "right, near 0 means the predicted points sit on one point.",
    "corr(scale): rank correlation, across held-out measures, of predicted and target spread; near 0 means "
    "the predictions no longer follow the input.",
    f"collapsed: yes when ESS/n < {ATTENTION_ESS_THRESHOLD:g} (ESS: the attention rests on one point) or "
    f"spread < {SPREAD_THRESHOLD:g} (spread); k/n when k of n seeds collapsed; can't judge: the run is too "
    "small for a verdict (--quick).",
    f"ignores: seeds with corr(scale) < {CORRELATION_THRESHOLD:g}; apart from collapse, as too little "
    "training does this too.",
    f"learned: yes when vs base < {LEARNED_MARGIN:g} in every seed (k/n: in k seeds): only then has the "
    "model learned the map from input to output measure; \"can't tell\" when even the oracle row is not that "
    "far below the no-model rows.",
    "no model: rows scored alike without training ('-': does not apply to them): pooled predicts every "
    "measure by points drawn from all training targets (the best that ignores the input); identity predicts "
    "the input itself; oracle is a "
    "fresh random sample of the true target law (benchmarks only). The oracle is the level of sampling "
    "noise, not a floor: two independent samples differ by the noise of both, and a prediction trained to "
    "shrink this very distance can come closer to the held-out sample than a fresh draw does.",
    f"tied (in the verdict): mean energies within {TIE_STANDARD_ERRORS:g} standard errors of their "
    "difference, sqrt(sd1^2/n1 + sd2^2/n2) over n1, n2 seeds: what seed-to-seed noise alone produces.",
)

_TABLE_HEADER = (
    "kernel", "transform", "energy ± sd", "vs base", "ESS/n", "spread", "corr(scale)", "collapsed", "ignores",
    "learned",
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


def _mean(mean):
    return format_number(mean) if np.isfinite(mean) else "nan"


def _why(s):
    faces = [name for name, n in (("ESS", s["n_attention"]), ("spread", s["n_within"])) if n]
    return f" ({', '.join(faces)})" if faces else ""


def comparison_table(summary, *, judge=True):
    """The comparison table as a header and rows of strings, narrow enough for a 120-column terminal.

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
        One row per configuration, then the rows that need no model. Numbers
        have three significant figures (:func:`format_number`); the held-out
        energy is the mean ± the standard deviation across seeds (when there
        are several), the other numbers are means; :data:`COMPARISON_NOTES`
        says what each column means, and the per-seed rows hold every metric.

    Examples
    --------
    >>> from sklearn_measattn.experiments import comparison_table
    >>> header, body = comparison_table([])
    >>> header[:3]
    ['kernel', 'transform', 'energy ± sd']
    """
    body = []
    for s in sorted(summary, key=lambda s: bool(s.get("reference"))):  # the no-model rows last
        n_ok = s["n_ok"]
        numbers = [_mean_std(s["energy_symlog_mean"], s["energy_symlog_std"])]
        if s.get("reference"):
            body.append([s["kernel"], "no model", *numbers, "-", "-", _mean(s["spread_ratio_median_mean"]),
                         _mean(s["corr_scale_mean"]), "-", "-", "-"])
            continue
        learned = s["learned"] if n_ok else "diverged"
        if not judge and n_ok:
            collapsed, ignores, learned = "can't judge", "-", "-"
        else:
            collapsed = s["collapsed"] + ("" if s["collapsed"] in ("no", "diverged") else _why(s))
            ignores = "diverged" if not n_ok else f"{s['n_across']}/{n_ok}"
        body.append([
            s["kernel"], s["transform"], *numbers, _mean(s["energy_vs_baseline_mean"]),
            _mean(s["attention_ess_mean"]), _mean(s["spread_ratio_median_mean"]), _mean(s["corr_scale_mean"]),
            collapsed, ignores, learned,
        ])
    return list(_TABLE_HEADER), body


def _wrap(text, *, indent=""):
    """``text`` in lines of at most 100 characters, the lines after the first indented by two more spaces."""
    return textwrap.wrap(text, width=_LINE_WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False)


def format_comparison(summary, *, title=None, judge=True):
    """Render :func:`summarize` output as an aligned text table with a legend of what it shows.

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
        The title, the table, a blank line and the legend
        (:data:`COMPARISON_NOTES`, wrapped to 100 columns); the verdict is
        :func:`recommend`'s.

    Examples
    --------
    >>> from sklearn_measattn.experiments import format_comparison
    >>> format_comparison([], title="nothing run").splitlines()[0]
    'nothing run'
    """
    header, body = comparison_table(summary, judge=judge)
    notes = [line for note in COMPARISON_NOTES for line in _wrap(note)]
    return format_table(header, body, title=title, notes=notes)


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


def _name(s):
    return f"{s['kernel']}/{s['transform']}"


def _fits(summary):
    """The configurations that were trained (not the rows that need no model)."""
    return [s for s in summary if not s.get("reference")]


def _learned(s):
    """Learned the map in every seed, and collapsed and diverged in none."""
    return s["collapsed"] == "no" and s.get("learned") == "yes" and bool(np.isfinite(s["energy_symlog_mean"]))


def _collapsed(s):
    """Collapsed, or diverged, in at least one seed."""
    return s["collapsed"] != "no"


def _did_not_learn(s):
    """Neither collapsed nor learned the map in every seed (``can't tell`` included)."""
    return not _collapsed(s) and not _learned(s)


def _ranked(summary):
    """The configurations that learned, best (lowest mean energy) first."""
    return sorted((s for s in _fits(summary) if _learned(s)), key=lambda s: s["energy_symlog_mean"])


def _transform_words(transform):
    return "without a transform" if transform == "none" else f"with {transform}"


def _seeds_note(s, count):
    """`` (k/n seeds)`` when only some seeds did it."""
    return "" if count in (0, s["n_ok"]) else f" ({count}/{s['n_ok']} seeds)"


def _kernels_by_transform(rows, note=lambda s: ""):
    """E.g. ``"softmax and poly without a transform; log with symlog"``, in the order of the rows."""
    groups = {}
    for s in rows:
        groups.setdefault(s["transform"], []).append(s["kernel"] + note(s))
    parts = []
    for transform, kernels in groups.items():
        names = kernels[0] if len(kernels) == 1 else ", ".join(kernels[:-1]) + " and " + kernels[-1]
        parts.append(f"{names} {_transform_words(transform)}")
    return "; ".join(parts)


def _collapse_faces(rows):
    """How the rows collapsed, in words."""
    faces = []
    if any(s["n_attention"] for s in rows):
        faces.append(f"ESS/n < {ATTENTION_ESS_THRESHOLD:g}: attention on one point")
    if any(s["n_within"] for s in rows):
        faces.append(f"spread < {SPREAD_THRESHOLD:g}: the predicted points sit on one point")
    if any(s["collapsed"].startswith("diverged") or "diverged)" in s["collapsed"] for s in rows):
        faces.append("or the training diverged")
    return "; ".join(faces)


def _best_no_model(summary):
    """The lower mean energy of the ``pooled`` and ``identity`` rows (nan without them)."""
    energies = [s["energy_symlog_mean"] for s in summary
                if s.get("reference") and s["kernel"] in ("pooled", "identity")]
    return min(energies, default=math.nan)


def _learned_line(summary):
    learned = [s for s in _fits(summary) if _learned(s)]
    if not learned:
        return None
    # the transform of the best first, each transform's kernels in the order they ran
    lowest = {}
    for s in learned:
        lowest[s["transform"]] = min(lowest.get(s["transform"], math.inf), s["energy_symlog_mean"])
    learned.sort(key=lambda s: lowest[s["transform"]])
    low, high = (format_number(f(s["energy_symlog_mean"] for s in learned)) for f in (min, max))
    span = low if low == high else f"{low} to {high}"
    return f"{_kernels_by_transform(learned)}, energy {span}"


def _collapsed_line(summary):
    rows = [s for s in _fits(summary) if _collapsed(s)]
    if not rows:
        return "none"
    return f"{_kernels_by_transform(rows, lambda s: _seeds_note(s, s['n_collapsed']))} ({_collapse_faces(rows)})"


def _did_not_learn_line(summary):
    rows = [s for s in _fits(summary) if _did_not_learn(s)]
    if not rows:
        return None
    return (f"{_kernels_by_transform(rows, lambda s: _seeds_note(s, s['n_ok'] - s['n_learned']))} "
            f"(energy not below {LEARNED_MARGIN:g} x the no-model rows)")


def _equally_good(summary):
    """The best configuration and those tied with it within seed noise, best first."""
    ranked = _ranked(summary)
    return ranked[:1] + tied_with_best(ranked)


def _recommendation(summary):
    """What to use, in one sentence, from the configurations that learned."""
    ranked = _ranked(summary)
    if not ranked:
        if not any(s.get("n_learned") for s in _fits(summary)):
            return ("none: no configuration learned the map; train longer or on more measures (raise --epochs, "
                    "--n-samples)")
        return "none: no configuration learned the map in every seed without collapsing"
    best, good = ranked[0], _equally_good(summary)
    transform = None if best["transform"] == "none" else best["transform"]
    if len(good) == 1:
        if len(ranked) == 1:
            return f"kernel={best['kernel']!r}, transform={transform!r}, the only configuration that learned"
        if not np.isfinite(_difference_standard_error(best, ranked[1])):
            return (f"kernel={best['kernel']!r}, transform={transform!r}, the lowest energy; one seed cannot "
                    "tell ties apart: run --seeds 3")
        return (f"kernel={best['kernel']!r}, transform={transform!r}: its energy is below the next "
                f"({_name(ranked[1])}) by more than seed noise")
    if {s["transform"] for s in good} != {best["transform"]}:
        return f"any of {', '.join(_name(s) for s in good)}: they are tied within seed noise"
    if len(good) == len([s for s in _fits(summary) if s["transform"] == best["transform"]]):
        return f"transform={transform!r}, with any kernel tried: they are tied within seed noise"
    kernels = " or ".join(repr(s["kernel"]) for s in good)
    return f"transform={transform!r} with kernel {kernels}: they are tied within seed noise"


def _verb(rows, singular, plural):
    return singular if len({s["kernel"] for s in rows}) == 1 else plural


def _kernel_list(rows):
    kernels = list(dict.fromkeys(s["kernel"] for s in rows))
    return kernels[0] if len(kernels) == 1 else ", ".join(kernels[:-1]) + " and " + kernels[-1]


def _outcomes(rows, good, as_good=("does as well", "do as well")):
    """What became of ``rows``, in words, grouped: as good as the best (``as_good``, singular and plural),
    learned less well, collapsed, did not learn."""
    tied = [s for s in rows if _name(s) in good]
    worse = [s for s in rows if _learned(s) and _name(s) not in good]
    collapsed = [s for s in rows if _collapsed(s)]
    unlearned = [s for s in rows if _did_not_learn(s)]
    parts = []
    if tied:
        parts.append(f"{_kernel_list(tied)} {_verb(tied, *as_good)}")
    if worse:
        parts.append(f"{_kernel_list(worse)} {_verb(worse, 'learns', 'learn')} less well")
    if collapsed:
        parts.append(f"{_kernel_list(collapsed)} {_verb(collapsed, 'collapses', 'collapse')}")
    if unlearned:
        do = _verb(unlearned, "does", "do")
        parts.append(f"{_kernel_list(unlearned)} {f'{do} not collapse but ' if collapsed else ''}{do} not learn")
    return parts


def _transform_matters(summary):
    """Why, when the transform decides more than the kernel: every kernel run with the best configuration's
    transform is tied with it, and without that transform some kernel does worse (``None`` otherwise)."""
    ranked = _ranked(summary)
    if not ranked:
        return None
    best, fits = ranked[0], _fits(summary)
    good = {_name(s) for s in _equally_good(summary)}
    with_it = [s for s in fits if s["transform"] == best["transform"]]
    without = [s for s in fits if s["transform"] != best["transform"]]
    if len(with_it) < 2 or any(_name(s) not in good for s in with_it) or all(_name(s) in good for s in without):
        return None
    parts = _outcomes(without, good)
    lead = "the kernel matters: " if len(parts) > 1 else ""
    return (f"the transform matters more than the kernel here; {_other_transforms(without)}, {lead}"
            f"{', '.join(parts)}")


def _kernel_matters(summary):
    """Why, when the kernel decides: with the best configuration's transform, some kernel fails or is
    beaten beyond seed noise (``None`` otherwise)."""
    ranked = _ranked(summary)
    if not ranked:
        return None
    best = ranked[0]
    good = {_name(s) for s in _equally_good(summary)}
    with_it = [s for s in _fits(summary) if s["transform"] == best["transform"]]
    if all(_name(s) in good for s in with_it):
        return None
    outcomes = _outcomes(with_it, good, as_good=("learns best", "learn best"))
    return f"the kernel matters {_transform_words(best['transform'])}: {', '.join(outcomes)}"


def _nothing_matters(summary):
    """Why, when every configuration run is tied with the best (``None`` otherwise)."""
    fits = _fits(summary)
    good = {_name(s) for s in _equally_good(summary)}
    if len(fits) < 2 or any(_name(s) not in good for s in fits):
        return None
    return "neither the kernel nor the transform matters here: every configuration is tied within seed noise"


def _other_transforms(rows):
    transforms = list(dict.fromkeys(s["transform"] for s in rows))
    if transforms == ["none"]:
        return "without it"
    return "with " + " or ".join("no transform" if t == "none" else t for t in transforms)


def recommend(summary):
    """The verdict of a comparison, in a few lines of at most 100 characters, computed from the results.

    Small rules, each a function of the summary, make the lines:

    - ``learned``: the configurations that learned the map in every seed
      (held-out energy below the no-model rows, see
      :func:`~sklearn_measattn.metrics.learned_verdict`) and neither
      collapsed nor diverged in any, with the range of their energies;
    - ``collapsed``: those that collapsed or diverged in some seed, and how;
    - ``did not learn``: the rest;
    - ``use``: the best (lowest mean energy among those that learned) and
      those tied with it within seed noise (:func:`tied_with_best`), or the
      transform alone when every kernel run with it is tied; when none
      learned, what to raise;
    - ``why``: whether the transform matters more than the kernel (every
      kernel run with the best one's transform is tied with it, and without
      that transform some kernel does worse), or the kernel matters (with
      that transform some kernel fails or is beaten beyond seed noise), or
      neither does (every configuration is tied).

    Parameters
    ----------
    summary : list of dict
        Output of :func:`summarize`.

    Returns
    -------
    text : str
        The verdict: a first line ``"Verdict ..."`` and one labelled line (or
        a few, wrapped) per rule that has something to say.

    Examples
    --------
    >>> from sklearn_measattn.experiments import recommend
    >>> recommend([])
    'Verdict: none: nothing was run.'
    """
    fits = _fits(summary)
    if not fits:
        return "Verdict: none: nothing was run."
    seeds = max(s["n_seeds"] for s in fits)
    items = [
        ("learned", _learned_line(summary)),
        ("collapsed", _collapsed_line(summary)),
        ("did not learn", _did_not_learn_line(summary)),
        ("use", _recommendation(summary)),
        ("why", _transform_matters(summary) or _kernel_matters(summary) or _nothing_matters(summary)),
    ]
    no_model = _best_no_model(summary)
    scale = f": {format_number(no_model)} with no model" if np.isfinite(no_model) else ""
    lines = [f"Verdict ({seeds} seed{'s' if seeds > 1 else ''}; held-out energy, lower is better{scale}; "
             "numbers below):"]
    for label, text in items:
        if text is not None:
            first, *rest = textwrap.wrap(text, width=_LINE_WIDTH - 17, break_on_hyphens=False)
            lines.append(f"  {label + ':':<15}{first}")
            lines += [" " * 17 + line for line in rest]
    return "\n".join(lines)
