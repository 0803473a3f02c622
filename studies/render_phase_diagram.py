"""Write ``docs/phase_diagram_results.rst`` and the figures ``docs/_static/phase_diagram_*.png`` from the CSV.

Usage (from the repository root; works on a partial CSV, while ``studies/phase_diagram.py`` runs)::

    .venv/bin/python studies/render_phase_diagram.py

Rules fixed here, before reading the numbers:

- a cell's verdict on a face (collapsed, learned) is the package's rule when
  every seed agrees; when seeds disagree (or the learned rule cannot tell) the
  cell is *near a boundary* and is counted apart;
- theory predicts collapse where the tail index is at or below the kernel's
  threshold (:func:`~sklearn_measattn.experiments.kernel_threshold`), none on
  the Gaussian control;
- finding 2 (symlog saves softmax on the matrix inverse but not on the sheared
  swap) is *reproduced* at a setting and tail index where softmax on symlog
  data collapses in every seed on the sheared swap and in no seed on the
  matrix inverse.
"""

from __future__ import annotations

import datetime
import json
import math
import platform
from pathlib import Path

import numpy as np
from phase_diagram import BUDGET, CSV, SEEDS, TAILS, TASKS, read_rows  # studies/ is first on sys.path
from scipy.stats import spearmanr

from sklearn_measattn.experiments import (
    PHASE_KERNELS,
    PhaseDiagramDisplay,
    format_number,
    format_table,
    kernel_threshold,
    phase_agreement,
    phase_cells,
)
from sklearn_measattn.metrics import ATTENTION_ESS_THRESHOLD, COLLAPSE_RULE, LEARNED_RULE

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "phase_diagram_results.rst"
STATIC = ROOT / "docs" / "_static"
_SIZES = ("n_samples", "n_points", "n_test", "epochs", "d_model", "n_heads", "n_layers")
_GRID_TAILS = [math.inf if t == "gaussian" else float(t) for t in TAILS]
#: A missing value in a table cell: reStructuredText reads a lone "-" as an empty list item.
MISSING = "\u2014"
#: Keeps a number and its letter, or the parts of a range, on one line in a narrow column.
NBSP = "\u00a0"


def _float(value):
    return math.nan if value in (None, "") else float(value)


def setting(row):
    """A short name for a row's setting: what differs from the grid's budget."""
    changes = [f"{key} {row[key]}" for key in _SIZES if str(row[key]) != str(BUDGET[key])]
    if row.get("benchmark_params"):
        changes += [f"{k} {tuple(v) if isinstance(v, list) else v}"
                    for k, v in json.loads(row["benchmark_params"]).items()]
    return ", ".join(changes) or "grid budget"


def grid_rows(rows):
    return [r for r in rows if setting(r) == "grid budget" and r["kernel"] in PHASE_KERNELS
            and (r["tail"] == "gaussian" or float(r["tail_index"]) in _GRID_TAILS)]


def _tail_text(tail_index):
    return "Gaussian" if math.isinf(tail_index) else f"{tail_index:g}"


def _learned_flag(cell):
    if cell["learned"] is True:
        return " L"
    return " l*" if cell["learned_split"] else " ?" if cell["learned_undecided"] else ""


def _flag(value, yes, unsure):
    return yes if value is True else unsure if value is None else ""


#: The figures' size in inches and the resolution they are saved at. The page shows
#: them at the content column's width (about 900 px at a 1280 px window), so one
#: inch of figure is about 100 px on screen and an 11 pt label about 15 px high;
#: 150 dpi keeps them sharp on high-density screens.
FIGURE_SIZE, FIGURE_DPI, CELL_FONT = (9.0, 8.0), 150, 11
FACE_TITLES = {"collapse": "attention ESS/n (collapse below 0.05)",
               "learned": "held-out energy / best no-model row (learned below 0.8)"}


def figure_name(task, face):
    return f"phase_diagram_{task}_{face}.png"


def figures(rows):
    """One figure per benchmark and face, without a transform (top) and on symlog data (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    with plt.rc_context({"font.size": CELL_FONT, "axes.titlesize": CELL_FONT + 1}):
        for task in TASKS:
            for face in ("collapse", "learned"):
                fig, axes = plt.subplots(2, 1, figsize=FIGURE_SIZE, constrained_layout=True)
                scale = {}
                if face == "learned":  # one colour scale for both panels: one colour, one value
                    ratios = [c["energy_vs_baseline"] for c in phase_cells(rows) if c["task"] == task
                              and np.isfinite(c["energy_vs_baseline"])]
                    scale = {"vmin": min([0.3, *ratios]), "vmax": max([1.5, *ratios])}
                for ax, transform in zip(axes, ("none", "symlog")):
                    if not any(r["task"] == task and r["transform"] == transform for r in rows):
                        ax.set_axis_off()
                        continue
                    PhaseDiagramDisplay.from_rows(rows, task=task, transform=transform, face=face,
                                                  kernels=list(PHASE_KERNELS), tail_indices=list(TAILS), ax=ax,
                                                  fontsize=CELL_FONT, **scale)
                    ax.set_title(f"{task}, {'no transform' if transform == 'none' else 'symlog data'}: "
                                 f"{FACE_TITLES[face]}")
                path = STATIC / figure_name(task, face)
                fig.savefig(path, dpi=FIGURE_DPI)
                plt.close(fig)
                written.append(path)
    return written


def cell_table(cells, task, face):
    """One face of one benchmark, both transforms: mean value and verdict letters per (kernel, tail index)."""
    body = []
    for transform in ("none", "symlog"):
        by = {(c["kernel"], c["tail_index"]): c for c in cells if c["task"] == task and c["transform"] == transform}
        for kernel in PHASE_KERNELS:
            if not any(k == kernel for k, _ in by):
                continue
            degrees = [c["learned_degree"] for (k, t), c in by.items()
                       if k == kernel and not math.isinf(t) and not math.isnan(c["learned_degree"])]
            threshold = kernel_threshold(kernel, transform=transform,
                                         learned_degree=float(np.mean(degrees)) if degrees else None)
            line = [kernel, transform, MISSING if threshold is None else f"{threshold:.3g}"]
            for tail in _GRID_TAILS:
                c = by.get((kernel, tail))
                if c is None:
                    line.append(MISSING)
                elif c["diverged"] == c["seeds"]:
                    line.append(f"diverged{NBSP}C" if face == "collapse" else "diverged")
                elif face == "collapse":
                    line.append(format_number(c["attention_ess"], 2) + _flag(c["collapsed"], f"{NBSP}C", f"{NBSP}c?"))
                else:
                    line.append(format_number(c["energy_vs_baseline"], 2) + _learned_flag(c).replace(" ", NBSP))
            body.append(line)
    return format_table(["kernel", "transform", "threshold"] + [_tail_text(t) for t in _GRID_TAILS], body,
                        style="rst")


def detail_table(cells, task, transform):
    """Every cell of one benchmark and transform, one row per (kernel, tail index)."""
    body = []
    for c in sorted((c for c in cells if c["task"] == task and c["transform"] == transform),
                    key=lambda c: (list(PHASE_KERNELS).index(c["kernel"]), c["tail_index"])):
        body.append([c["kernel"], _tail_text(c["tail_index"]),
                     str(c["seeds"]) + (f" ({c['diverged']} diverged)" if c["diverged"] else ""),
                     f"{format_number(c['ess_min'], 2)}{NBSP}-{NBSP}{format_number(c['ess_max'], 2)}",
                     format_number(c["energy_vs_baseline"], 2),
                     f"{NBSP}>{NBSP}".join(format_number(v, 2) for v in c["hidden_similarity"]) or MISSING,
                     MISSING if math.isnan(c["learned_degree"]) else format_number(c["learned_degree"], 2),
                     format_number(c["log_weight_rate"], 2), format_number(c["fit_time"], 2)])
    return format_table(["kernel", "tail", "seeds", "ESS/n min-max", "ratio", "hidden similarity, embedding > blocks",
                         "degree", "rate c", "fit (s)"], body, style="rst")


def _with_extras(rows, cells):
    """Add the mean hidden similarity per depth and the mean fit time to each cell."""
    groups = {}
    for r in rows:
        tail = math.inf if r["tail"] == "gaussian" else float(r["tail_index"])
        groups.setdefault((r["task"], tail, r["kernel"], r["transform"]), []).append(r)
    for c in cells:
        group = groups[(c["task"], c["tail_index"], c["kernel"], c["transform"])]
        sims = [json.loads(r["hidden_similarity"]) for r in group if r["hidden_similarity"]]
        c["hidden_similarity"] = list(np.mean(sims, axis=0)) if sims else []
        c["fit_time"] = float(np.mean([_float(r["fit_time"]) for r in group]))
    return cells


def agreement_text(rows):
    table = phase_agreement(rows)
    weights = phase_agreement(rows, integral="weights")
    body = [[t["task"], t["transform"], t["kernel"], str(t["cells"]), str(t["near_boundary"]), str(t["no_threshold"]),
             f"{t['agree']}{NBSP}/{NBSP}{w['agree']}", f"{t['collapsed_above']}{NBSP}/{NBSP}{w['collapsed_above']}",
             f"{t['survived_below']}{NBSP}/{NBSP}{w['survived_below']}"] for t, w in zip(table, weights)]
    text = format_table(["task", "transform", "kernel", "cells", "near boundary", "no threshold",
                         "agree", "collapsed above", "survived below"], body, style="rst")
    return table, weights, text


def boundary_table(cells):
    """Per (task, transform, kernel): the measured collapse boundary against the threshold."""
    body = []
    for task in TASKS:
        for transform in ("none", "symlog"):
            for kernel in PHASE_KERNELS:
                group = sorted((c for c in cells if (c["task"], c["transform"], c["kernel"]) == (task, transform, kernel)
                                and not math.isinf(c["tail_index"])), key=lambda c: c["tail_index"])
                if not group:
                    continue
                collapsed = [c["tail_index"] for c in group if c["collapsed"] is True]
                survived = [c["tail_index"] for c in group if c["collapsed"] is False]
                unsure = [c["tail_index"] for c in group if c["collapsed"] is None]
                degrees = [c["learned_degree"] for c in group if not math.isnan(c["learned_degree"])]
                degree = float(np.mean(degrees)) if degrees else None
                threshold = kernel_threshold(kernel, transform=transform, learned_degree=degree)
                weight = kernel_threshold(kernel, transform=transform, learned_degree=degree, integral="weights")
                body.append([task, transform, kernel, MISSING if threshold is None else f"{threshold:.3g}",
                             MISSING if weight is None else f"{weight:.3g}",
                             ", ".join(f"{t:g}" for t in collapsed) or "none",
                             ", ".join(f"{t:g}" for t in survived) or "none",
                             ", ".join(f"{t:g}" for t in unsure) or MISSING])
    return format_table(["task", "transform", "kernel", "threshold (values)", "threshold (weights)", "collapsed at",
                         "not collapsed at", "seeds disagree at"], body, style="rst")


def reading(cells, total, weights_total):
    """What the grid says, in sentences computed from the cells."""
    lines = []
    for transform in ("none", "symlog"):
        for kernel in PHASE_KERNELS:
            spans = []
            for task in TASKS:
                group = [c for c in cells if (c["task"], c["transform"], c["kernel"]) == (task, transform, kernel)
                         and not math.isinf(c["tail_index"])]
                hit = max((c["tail_index"] for c in group if c["collapsed"] is True), default=None)
                miss = min((c["tail_index"] for c in group if c["collapsed"] is False
                            and (hit is None or c["tail_index"] > hit)), default=None)
                unsure = sorted(c["tail_index"] for c in group if c["collapsed"] is None)
                text = ("never collapsed" if hit is None and not unsure else
                        f"collapsed up to {hit:g}" if hit is not None else "")
                if miss is not None and hit is not None:
                    text += f", not from {miss:g}"
                if unsure:
                    text += (", " if text else "") + "seeds disagree at " + ", ".join(f"{t:g}" for t in unsure)
                spans.append(text)
            where = ("never collapsed on either benchmark" if spans[0] == spans[1] == "never collapsed" else
                     f"{spans[0]} on both benchmarks" if spans[0] == spans[1] else
                     f"{spans[0]} on the matrix inverse, {spans[1]} on the sheared swap")
            lines.append(f"{kernel}, {'no transform' if transform == 'none' else 'symlog'}: {where}")
    lines = [line for line in lines if not line.endswith("never collapsed on either benchmark")
             or ", no transform" in line]
    symlog_quiet = all(c["collapsed"] is False for c in cells if c["transform"] == "symlog")
    if symlog_quiet:
        lines.append("on symlog data no kernel collapsed at any tail index of the grid (softmax included)")
    direction = (f"direction of the failures: {total['collapsed_above']} cells collapsed above the values' "
                 f"threshold and {weights_total['collapsed_above']} above the weights'")
    if total["collapsed_above"] == 0:
        direction += ("; every disagreement is a kernel that kept its attention spread (ESS/n >= 0.05) at a tail "
                      "where theory says the integral diverges: on 64-point ensembles the measured boundary lies at "
                      "heavier tails than the theory's")
    lines.append(direction)
    control = [c for c in cells if math.isinf(c["tail_index"])]
    lines.append(f"Gaussian control: {sum(c['learned'] is True for c in control)} of {len(control)} cells "
                 f"(kernel x transform x benchmark) learned in every seed, with learned ratios "
                 f"{format_number(min(c['energy_vs_baseline'] for c in control), 2)}-"
                 f"{format_number(max(c['energy_vs_baseline'] for c in control), 2)}")
    for task in TASKS:
        for transform in ("none", "symlog"):
            group = [c for c in cells if c["task"] == task and c["transform"] == transform]
            learned = sum(c["learned"] is True for c in group)
            undecided = sum(c["learned_undecided"] > 0 for c in group)
            tails = sorted({c["tail_index"] for c in group if c["learned"] is True})
            lines.append(f"learned face, {task}, {transform}: {learned} of {len(group)} cells learned in every seed "
                         f"(at tails {', '.join(_tail_text(t) for t in tails) or 'none'}); the learned rule cannot "
                         f"tell in some seed of {undecided}")
    sims = {flag: [c["hidden_similarity"][-1] for c in cells if c["collapsed"] is flag and c["hidden_similarity"]]
            for flag in (True, False)}
    if sims[True] and sims[False]:
        lines.append(f"depth: the hidden similarity after the last block is {format_number(float(np.mean(sims[True])), 2)} "
                     f"on average in collapsed cells against {format_number(float(np.mean(sims[False])), 2)} in the "
                     "others (post-norm blocks keep the points of a measure apart even when attention is one-hot)")
    return lines


# -- finding 2 -------------------------------------------------------------------------------------------------


def softmax_symlog(rows):
    return [r for r in rows if r["kernel"] == "softmax" and r["transform"] == "symlog"]


def finding_2(rows):
    """The sweep of softmax on symlog data: (verdict, table text, crossing lines, mechanism lines)."""
    rows = softmax_symlog(rows)
    if not rows:
        return "not run", "", [], []
    groups = {}
    for r in rows:
        tail = math.inf if r["tail"] == "gaussian" else float(r["tail_index"])
        groups.setdefault((setting(r), r["task"], tail), []).append(r)
    bodies, verdicts = {task: [] for task in TASKS}, {}
    for (name, task, tail), group in sorted(groups.items(), key=lambda kv: (kv[0][0] != "grid budget", kv[0])):
        cell, = phase_cells(group)
        verdicts[(name, task, tail)] = cell["collapsed"]
        rates = [_float(r["log_weight_rate"]) for r in group]
        bodies.setdefault(task, []).append([
            name, _tail_text(tail), {True: "yes", False: "no", None: "seeds disagree"}[cell["collapsed"]],
            MISSING if math.isinf(tail) else format_number(float(np.nanmean(rates)) / tail, 2),
            format_number(float(np.nanmean(rates)), 2),
            f",{NBSP}".join(format_number(_float(r["attention_ess"]), 2) for r in group),
            format_number(cell["energy_vs_baseline"], 2),
            {True: "yes", False: "no", None: "mixed"}[cell["learned"]]])
    # one table per benchmark: the setting, the longest text, gets the room a task column would take
    table = "\n\n".join(
        f".. rubric:: {task}\n\n" + format_table(["setting", "tail", "collapsed", "c / tail", "rate c", "ESS/n per seed",
                                                   "ratio", "learned"], body, style="rst")
        for task, body in bodies.items() if body)
    crossings = []
    for name in sorted({k[0] for k in verdicts}, key=lambda n: (n != "grid budget", n)):
        for task in TASKS:
            tails = sorted(t for (n, k, t) in verdicts if n == name and k == task and not math.isinf(t))
            if not tails:
                continue
            states = [verdicts[(name, task, t)] for t in tails]
            words = ", ".join(f"{t:g}: {_state(s)}" for t, s in zip(tails, states))
            crossings.append(f"{name}, {task}: {words}")
    reproduced = [(n, t) for (n, k, t), v in verdicts.items() if k == "sheared_swap" and v is True
                  and verdicts.get((n, "matrix_inverse", t)) is False]
    ss_collapsed = [(n, t) for (n, k, t), v in verdicts.items() if k == "sheared_swap" and v is True]
    mi_collapsed = [(n, t) for (n, k, t), v in verdicts.items() if k == "matrix_inverse" and v is True]
    n_settings = len({(n, t) for (n, _, t) in verdicts})
    disagree = {task: sorted(f"{n}, tail {t:g}" for (n, k, t), v in verdicts.items() if k == task and v is None)
                for task in TASKS}
    if reproduced:
        verdict = ("reproduced where the sheared swap collapses and the matrix inverse does not: "
                   + "; ".join(f"{n}, tail {t:g}" for n, t in reproduced))
    else:
        verdict = (f"not reproduced: in none of {n_settings} (setting, tail index) pairs tried does softmax on symlog "
                   "data collapse on the sheared swap while the matrix inverse does not")
        if ss_collapsed or mi_collapsed:
            verdict += ("; where it collapses, it does so on " + ", ".join(
                f"{name} ({', '.join(sorted({f'{n}, tail {t:g}' for n, t in where}))})"
                for name, where in (("the sheared swap", ss_collapsed), ("the matrix inverse", mi_collapsed))
                if where))
        for task in TASKS:
            if disagree[task]:
                verdict += f"; on the {task.replace('_', ' ')} its seeds disagree (near the boundary) at " + \
                    " and ".join(disagree[task])
            elif not disagree[task] and not (ss_collapsed if task == "sheared_swap" else mi_collapsed):
                verdict += f"; on the {task.replace('_', ' ')} it collapses in no setting tried"
    return verdict, table, crossings, mechanism(rows)


def _state(value):
    return {True: "collapsed", False: "not collapsed", None: "seeds disagree"}[value]


def mechanism(rows):
    """How the attention ESS/n of softmax on symlog data follows the rate c against the tail index."""
    heavy = [r for r in rows if r["tail"] == "pareto" and r["status"] == "ok"]
    if len(heavy) < 4:
        return []
    ratio = np.array([_float(r["log_weight_rate"]) / float(r["tail_index"]) for r in heavy])
    ess = np.array([_float(r["attention_ess"]) for r in heavy])
    ok = np.isfinite(ratio) & np.isfinite(ess)
    rho = spearmanr(ratio[ok], ess[ok]).statistic
    lines = [f"over the {ok.sum()} softmax/symlog fits on Pareto tails, the Spearman correlation of the "
             f"attention ESS/n with c / tail index is {format_number(rho)}"]
    bins = ((0, 1), (1, 3), (3, 6), (6, math.inf))
    lines.append("median attention ESS/n by c / tail index: " + "; ".join(
        f"{low:g}-{high:g}: {format_number(float(np.median(ess[ok & (ratio >= low) & (ratio < high)])), 2)} "
        f"({int((ok & (ratio >= low) & (ratio < high)).sum())} fits)"
        for low, high in bins if (ok & (ratio >= low) & (ratio < high)).any()))
    collapsed = ok & (ess < ATTENTION_ESS_THRESHOLD)
    if collapsed.any():
        lines.append(f"the {int(collapsed.sum())} collapsed fits (ESS/n < {ATTENTION_ESS_THRESHOLD:g}) all have "
                     f"c / tail index >= {format_number(ratio[collapsed].min(), 2)}")

    def rate(name, task, tail):
        group = [r for r in heavy if r["task"] == task and float(r["tail_index"]) == tail and setting(r) == name]
        return float(np.mean([_float(r["log_weight_rate"]) for r in group])) if group else math.nan

    for tail in (0.4, 0.7):
        lines.append(f"at tail {tail:g} and the grid budget, c is "
                     f"{format_number(rate('grid budget', 'matrix_inverse', tail), 2)} "
                     f"on the matrix inverse against {format_number(rate('grid budget', 'sheared_swap', tail), 2)} "
                     "on the sheared swap")
    cond = [rate(n, "matrix_inverse", 0.4) for n in ("grid budget", "condition 25.0", "condition 400.0")]
    lines.append("on the matrix inverse at tail 0.4, c grows with the condition number of A (4, 25, 400): "
                 + ", ".join(format_number(v, 2) for v in cond))
    shear = [rate(n, "sheared_swap", 0.4) for n in ("grid budget", "scale_range (0.2, 5.0)",
                                                     "scale_range (0.05, 20.0)")]
    lines.append("on the sheared swap at tail 0.4, c falls as the shear range widens (scale_range (0.5, 2), "
                 "(0.2, 5), (0.05, 20)): " + ", ".join(format_number(v, 2) for v in shear))
    big = "n_samples 512, n_points 128, n_test 64, d_model 32, n_heads 4"
    lines.append(f"at the reproduction's size ({big}) and tail 0.4, c is "
                 f"{format_number(rate(big, 'matrix_inverse', 0.4), 2)} on the matrix inverse against "
                 f"{format_number(rate(big, 'sheared_swap', 0.4), 2)} on the sheared swap")
    return lines


def _cpu():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _heading(title, underline="-"):
    return [title, underline * len(title)]


def render(rows):
    grid = grid_rows(rows)
    cells = _with_extras(grid, phase_cells(grid))
    expected = len(TASKS) * len(TAILS) * len(PHASE_KERNELS) * 2
    fit_minutes = sum(_float(r["fit_time"]) for r in rows if r["fit_time"]) / 60
    seeds = sorted({int(r["seed"]) for r in grid})
    out = [
        ".. This file is generated by studies/render_phase_diagram.py from studies/results/phase_diagram.csv;",
        "   edit the script, not this file.",
        "",
        "Runs",
        "----",
        "",
        f"Rendered on {datetime.date.today().isoformat()} from ``studies/results/phase_diagram.csv`` "
        f"({len(rows)} fits, {fit_minutes:.0f} minutes of training, summed) on a shared {_cpu()} "
        "(2 cores, one torch thread, no GPU), written by::",
        "",
        "    nohup nice -n 10 .venv/bin/python studies/phase_diagram.py > studies/results/phase_diagram.log 2>&1 &",
        "    .venv/bin/python studies/render_phase_diagram.py",
        "",
        f"Grid: {len(cells)} of {expected} cells "
        f"({len(TASKS)} benchmarks x {len(TAILS) - 1} Pareto tail indices and the Gaussian control x "
        f"{len(PHASE_KERNELS)} kernels x 2 transforms), seeds {', '.join(map(str, seeds))} "
        f"(seeds {', '.join(map(str, SEEDS))} everywhere, seed 2 at cells near a boundary). Budget: "
        f"{BUDGET['n_samples']} training and {BUDGET['n_test']} held-out measures of {BUDGET['n_points']} points "
        f"in 2-D, ``d_model={BUDGET['d_model']}``, {BUDGET['n_heads']} heads, {BUDGET['n_layers']} post-norm "
        f"blocks, {BUDGET['epochs']} epochs, ``lr={BUDGET['lr']}``, batch {BUDGET['batch_size']}, energy loss.",
        "",
        f"Collapse rule: ``{COLLAPSE_RULE}``",
        "",
        f"Learned rule: ``{LEARNED_RULE}``",
        "",
    ]
    if len(cells) < expected:
        out += [f".. note:: The CSV is partial: {expected - len(cells)} grid cells have not run yet.", ""]
    out += ["The diagram", "-----------", "",
            "Two faces per benchmark, each a figure with the cells without a transform (top) and on symlog data "
            "(bottom): kernels by decreasing growth, top to bottom, against the Pareto tail index, the Gaussian "
            "control last. The number in a cell is the mean over seeds; ``*``: the seeds disagree on that face's "
            "verdict, ``?``: the learned rule cannot tell in some seed (even the oracle row is not clearly below "
            "the no-model rows at this size). In each kernel's row a solid bar marks its threshold: the integral "
            "of the values diverges in the columns left of it; a dashed bar marks where the normaliser, which "
            "sets the weights, diverges, where that differs. Softmax on symlog data has no fixed threshold, "
            "hence no bar.", ""]
    captions = {
        "collapse": "the collapse face: attention ESS/n of the trained first layer (log colour scale; collapse "
                    "below 0.05).",
        "learned": "the learned face: held-out energy over the best no-model row (blue: lower, learned below "
                   "0.8; red: worse than ignoring the input).",
    }
    for task in TASKS:
        title = task
        out += [title, "~" * len(title), ""]
        for face in ("collapse", "learned"):
            out += [f".. figure:: _static/{figure_name(task, face)}", "   :width: 100%",
                    f"   :alt: {task}, {face} face of the phase diagram", "",
                    f"   {task}, {captions[face]}", ""]
    out += [
        "The same cells as tables, with the verdicts: ``C``: collapsed in every seed, ``c?``: seeds disagree; "
        "``L``: learned in every seed, ``l*``: some seeds learned and others did not, ``?``: the learned rule "
        "cannot tell in some seed, no letter: did not learn. ``threshold``: the tail index at or below which "
        "the kernel's attention integrals diverge (learned_poly: its mean learnt first-layer degree + 1; "
        "symlog data: every Pareto tail becomes exponential, which all but softmax integrate; softmax on "
        f"symlog data has no fixed threshold, {MISSING}).",
        "",
    ]
    for task in TASKS:
        if any(c["task"] == task for c in cells):
            for face, what in (("collapse", "attention ESS/n"), ("learned", "learned ratio")):
                title = f"{task}: {what}"
                out += [f".. rubric:: {title}", "", cell_table(cells, task, face), ""]
    table, weights, text = agreement_text(grid)
    total = table[-1] if table else None
    out += ["Agreement with the theory", "-------------------------", ""]
    if total:
        w = weights[-1]
        out += [
            f"Over all {total['cells']} cells (tail index x kernel x transform x benchmark, seeds combined): "
            f"{total['agree']} agree with ``collapsed == (tail index <= threshold)`` for the threshold of the "
            f"values' integral (the solid bars), {total['collapsed_above']} collapsed above it and "
            f"{total['survived_below']} did not collapse at or below it; {total['near_boundary']} are near a "
            f"boundary (seeds disagree) and {total['no_threshold']} have no fixed threshold (softmax on symlog "
            "data). The attention ESS/n measures the weights, which only the normaliser "
            ":math:`\\int \\kappa\\, d\\mu` sets, and that integral diverges one power later than the values' "
            "(``kernel_threshold(..., integral=\"weights\")``, the dashed bars: :math:`p` for poly, 0 for log and "
            f"sigmoid, still every Pareto tail for softmax). Against it, {w['agree']} agree, "
            f"{w['collapsed_above']} collapsed above it and {w['survived_below']} did not collapse at or below it. "
            "In the table, each count is for the values' threshold / the weights'.",
            "",
            text,
            "",
            "Where each kernel collapsed (every seed), did not (no seed), and where its seeds disagree, "
            "against its threshold (Pareto tail indices of the grid):",
            "",
            boundary_table(cells),
            "",
            "Reading, computed from the cells above (a boundary is measured between two grid tail indices; "
            "independent runs in between may fall on either side):",
            "",
            *[f"* {line}." for line in reading(cells, total, w)],
            "",
        ]
    verdict, f2_table, crossings, lines = finding_2(rows)
    out += [
        *_heading("Finding 2: where softmax on symlog data crosses the collapse threshold"),
        "",
        f"Verdict: **{verdict}**.",
        "",
        "The sweep (softmax, symlog; the grid budget unless the setting says otherwise). ``rate c``: "
        "median over queries of the largest coordinate of the least-squares slope of the first layer's "
        "log-weights along the keys in symlog space, i.e. the learnt :math:`q \\cdot k` scale per unit of "
        "symlog key; the symlog of a Pareto(:math:`\\alpha`) coordinate has an exponential tail of rate "
        ":math:`\\alpha`, so the attention integral diverges where :math:`c \\ge \\alpha` (``c / tail`` "
        ":math:`\\ge 1`).",
        "",
        f2_table,
        "",
        "Crossings, by setting and benchmark:",
        "",
    ] + [f"* {c}" for c in crossings] + [""] + ["Mechanism, measured:", ""] + [f"* {line}" for line in lines] + [""]
    out += ["All cells", "---------", "",
            "Per cell: seeds, attention ESS/n range over seeds, mean learned ratio, the mean pairwise cosine "
            "similarity of one measure's hidden states after the embedding and after each block (median over "
            "held-out measures, mean over seeds), the learnt first-layer degree (learned_poly), the log-weight "
            "rate c and the mean fit time. Every fit's row, with more columns, is in "
            ":download:`studies/results/phase_diagram.csv <../studies/results/phase_diagram.csv>`.", ""]
    for task in TASKS:
        for transform in ("none", "symlog"):
            if any(c["task"] == task and c["transform"] == transform for c in cells):
                out += [f".. rubric:: {task}, transform {transform}", "", detail_table(cells, task, transform), ""]
    DOC.write_text("\n".join(out), encoding="utf-8")
    return DOC


def main():
    rows = read_rows(CSV)
    if not rows:
        raise SystemExit(f"no rows in {CSV}: run studies/phase_diagram.py first")
    STATIC.mkdir(parents=True, exist_ok=True)
    for path in figures(grid_rows(rows)):
        print(f"wrote {path}")
    print(f"wrote {render(rows)} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
