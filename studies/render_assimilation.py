"""Write ``docs/assimilation_results.rst`` from the CSVs of the assimilation studies.

Usage (from the repository root, after ``studies/assimilation_study.py`` and
``studies/dapper_reproduction.py``)::

    .venv/bin/python studies/render_assimilation.py

Rules fixed here, before reading the numbers:

- the *best tuned baseline* of a noise law and ensemble size is the lowest
  seed-averaged RMSE among the filters that need no training (the package's
  EnKF, robust EnKF and serial EnKFs, DAPPER's EnKF, square-root EnKF and
  LETKF) that diverged in no seed; the free-running ensemble and the Bayes
  particle filter are references, not baselines;
- a learned configuration *meets the heavy-tail goal* when its RMSE and its
  CRPS are both at most 0.8 times the best baseline's and it diverged in no
  seed; *meets the Gaussian goal* when its RMSE is at most 1.15 times;
- ``a ± b``: the mean over seeds and half the range.

Layout: each results table puts the columns it is read by (*diverged*, *RMSE /
best*) right after the method and the long ``setting`` text last, and numbers
keep their ``±`` on one line (non-breaking spaces), so that the tables read at
a 1280 px window without a horizontal scroll bar; a missing value is an em
dash, which reStructuredText does not read as a list item as it does ``-``.
"""

from __future__ import annotations

import csv
import datetime
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from sklearn_measattn.experiments import format_number, format_table

ROOT = Path(__file__).resolve().parents[1]
ATTENTION = ROOT / "studies" / "results" / "assimilation_attention.csv"
#: The held-out comparison with the rank histogram filter has its own columns and page section
#: (``studies/assimilation_reference.py`` renders it).
HELD_OUT = ROOT / "studies" / "results" / "assimilation_reference.csv"
STUDIES = sorted(p for p in (ROOT / "studies" / "results").glob("assimilation*.csv") if p not in (ATTENTION, HELD_OUT))
REPRODUCTION = ROOT / "studies" / "results" / "dapper_reproduction.csv"
DOC = ROOT / "docs" / "assimilation_results.rst"
NOISE_SHORT = {"gaussian": "Gaussian", "student_t": "Student-t", "cauchy": "Cauchy"}
NOISE_TITLES = {"gaussian": "Gaussian noise", "student_t": "Student-t noise, 1.5 degrees of freedom", "cauchy": "Cauchy noise"}
REFERENCES = ("none", "Bayes PF")
HEAVY_GOAL, GAUSSIAN_GOAL = 0.8, 1.15
#: A missing value in a table cell (a lone "-" would render as an empty bullet).
MISSING = "\u2014"
NBSP = "\u00a0"


def _rows(path):
    if not path.exists():
        return []
    with open(path) as handle:
        return list(csv.DictReader(handle))


def _cell(values):
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        return "inf"
    if len(values) == 1:
        return format_number(values[0])
    return f"{format_number(values.mean())}{NBSP}±{NBSP}{format_number((values.max() - values.min()) / 2, 2)}"


def _short_floats(text):
    """``ParticleFilter(jitter=0.5835425877484454)`` -> ``ParticleFilter(jitter=0.584)``."""
    return re.sub(r"\d+\.\d{4,}", lambda m: f"{float(m.group()):.3g}", text)


def _setting_text(setting):
    """The tuned parameters without the class name the method column already gives.

    ``SerialEnKF(clip=2.0, inflation=1.01)`` -> ``clip=2.0, inflation=1.01``;
    ``{'infl': 1.02}`` (DAPPER's) -> ``infl: 1.02``.
    """
    if not setting:
        return MISSING
    text = re.sub(r"^\w+\((.*)\)", r"\1", _short_floats(setting))
    text = re.sub(r"^\{(.*)\}$", r"\1", text).replace("'", "")
    return text or "defaults"


def _download(path):
    """A link to a results file that Sphinx copies into the built site (it reads offline)."""
    return f":download:`studies/results/{path.name} <../studies/results/{path.name}>`"


def _system(row):
    variables, observed, dt_obs = row.get("variables") or "40", row.get("observed") or "all", row.get("dt_obs") or "0.05"
    system = f"{variables} variables, {observed.replace('_', ' ')} observed every {dt_obs}"
    radius = row.get("localization") or ""
    return system + (f", localisation half-width {radius}" if radius else "")


def _summaries(rows):
    grouped = defaultdict(list)
    filters = [row for row in rows if row["method"] != "Bayes PF"]
    def group(row):
        return _system(row) + f", {row['members']} members, {row['cycles']} cycles"

    for row in filters:
        grouped[(group(row), row["noise"], row["method"])].append(row)
    # the Bayes reference runs with its own (many) members and cycles: it joins every table of its system and law
    for row in rows:
        if row["method"] == "Bayes PF":
            for other in {group(r) for r in filters if _system(r) == _system(row) and r["noise"] == row["noise"]}:
                grouped[(other, row["noise"], row["method"])].append(row)
    out = {}
    for key, group in grouped.items():
        out[key] = {
            "rows": group,
            "rmse": np.mean([float(r["rmse"]) for r in group]),
            "crps": np.mean([float(r["crps"]) for r in group]),
            "diverged": sum(r["diverged"] == "True" for r in group),
            "seeds": len(group),
        }
    return out


def _is_baseline(method):
    return method not in REFERENCES and not method.startswith("learned")


def render():
    rows = [row for path in STUDIES for row in _rows(path)]
    summaries = _summaries(rows)
    lines = [
        ".. This file is written by studies/render_assimilation.py from the CSVs in studies/results; do not edit.",
        "",
    ]
    if not rows:
        lines += ["No study results yet: run ``studies/assimilation_study.py``.", ""]
    else:
        lines += [f"From {', '.join(_download(p) for p in STUDIES)} (one row per filter and seed, every "
                  "column). "
                  "RMSE, spread, CRPS and energy score are time averages after spin-up over every variable, "
                  "against the truth; ``inf`` means the run blew up and was stopped; *diverged* ``k/n``: ``k`` of "
                  "the ``n`` seeds diverged by the fixed rule (blew up, or lost the truth: RMSE over 50 cycles above "
                  "the climatological standard deviation). *RMSE / best* is against the best tuned baseline of the "
                  "table; *ESS/n* is the trained attention's effective sample size, as a fraction of the members, on "
                  "the scalar ensembles the learned step meets in the cycle, all of them / those whose innovation "
                  "exceeds 10 prior standard deviations (1/n would mean every member attends to one). The parameters "
                  "each filter was tuned to follow each system's tables. "
                  f"{MISSING}: does not apply.", ""]
    verdicts = []
    def standard_first(system):
        members, cycles = (int(part.split()[0]) for part in system.split(", ")[-2:])
        return "40 variables, all" not in system, "localisation" in system, -members, cycles

    systems = sorted({key[0] for key in summaries}, key=standard_first)
    for members in systems:
        settings = {}
        for noise, title in NOISE_TITLES.items():
            methods = [m for (mb, n, m) in summaries if mb == members and n == noise]
            if not methods:
                continue
            baselines = [m for m in methods if _is_baseline(m) and summaries[(members, noise, m)]["diverged"] == 0]
            best = min(baselines, key=lambda m: summaries[(members, noise, m)]["rmse"]) if baselines else None
            best_rmse = summaries[(members, noise, best)]["rmse"] if best else np.nan
            best_crps = summaries[(members, noise, best)]["crps"] if best else np.nan
            bayes = summaries.get((members, noise, "Bayes PF"))
            body = []
            order = sorted(methods, key=lambda m: (m in REFERENCES, summaries[(members, noise, m)]["rmse"]))
            for method in order:
                s = summaries[(members, noise, method)]
                group = s["rows"]
                ratio = s["rmse"] / best_rmse if np.isfinite(s["rmse"]) else np.inf
                ess = group[0].get("attention_ess") or ""
                ess_outliers = group[0].get("attention_ess_outliers") or ""
                if ess or ess_outliers:
                    attention = (f"{format_number(float(ess), 2) if ess else MISSING} / "
                                 f"{format_number(float(ess_outliers), 2) if ess_outliers else MISSING}")
                else:
                    attention = MISSING
                body.append([
                    method, f"{s['diverged']}/{s['seeds']}", format_number(ratio, 3),
                    _cell([r["rmse"] for r in group]), _cell([r["crps"] for r in group]),
                    _cell([r["spread"] for r in group]), _cell([r["energy_score"] for r in group]), attention,
                ])
                settings.setdefault(method, {})[noise] = _setting_text(group[0]["setting"])
            header = ["method", "diverged", f"RMSE{NBSP}/{NBSP}best", "RMSE", "CRPS", "spread", "energy score",
                      "ESS/n"]
            heading = f"{title}: {members}"
            lines += [heading, "-" * len(heading), ""]
            if best is None:
                lines += ["Every tuned baseline diverged in at least one seed: no baseline row to compare with.", ""]
            if best:
                gap = ""
                if bayes is not None and bayes["diverged"]:
                    gap = (f" The particle filter with {bayes['rows'][0]['members']} members and the true likelihood "
                           f"lost the truth in {bayes['diverged']} of {bayes['seeds']} seeds: at this dimension it is "
                           "no Bayes reference (see the smaller system below).")
                elif bayes is not None and np.isfinite(bayes["rmse"]):
                    gap = (f" The Bayes reference (a particle filter with {bayes['rows'][0]['members']} members and the "
                           f"true likelihood, {bayes['rows'][0]['cycles']} cycles) reaches RMSE "
                           f"{format_number(bayes['rmse'])}: the best baseline is "
                           f"{format_number(best_rmse / bayes['rmse'], 3)} times it.")
                    if best_rmse < bayes["rmse"]:
                        gap += (" A filter beating it means the particle filter has not converged to Bayes' rule at "
                                "this size (for Gaussian noise the Kalman filters are near-Bayes already).")
                lines += [f"Best tuned baseline: **{best}** (RMSE {format_number(best_rmse)}).{gap}", ""]
            lines += [format_table(header, body, style="rst"), ""]
            for method in methods:
                if not method.startswith("learned"):
                    continue
                s = summaries[(members, noise, method)]
                goal = GAUSSIAN_GOAL if noise == "gaussian" else HEAVY_GOAL
                rmse_ratio, crps_ratio = s["rmse"] / best_rmse, s["crps"] / best_crps
                if best is None:
                    met = s["diverged"] == 0
                    verdict = "met: every baseline diverged, it did not" if met else "not met: it diverged too"
                else:
                    met = s["diverged"] == 0 and rmse_ratio <= goal and (noise == "gaussian" or crps_ratio <= goal)
                    verdict = "met" if met else "not met"
                short = ", ".join(part for part in members.split(", ") if "observed" not in part)
                verdicts.append([short, noise, method, format_number(rmse_ratio, 3), format_number(crps_ratio, 3),
                                 f"{s['diverged']}/{s['seeds']}", f"<= {goal}", verdict])
        if settings:
            laws = [noise for noise in NOISE_TITLES if any(noise in by_law for by_law in settings.values())]
            lines += [f".. rubric:: Tuned settings: {members}", "",
                      format_table(["method"] + [NOISE_SHORT[noise] for noise in laws],
                                   [[method] + [by_law.get(noise, MISSING) for noise in laws]
                                    for method, by_law in settings.items()], style="rst"), ""]
    if verdicts:
        lines += ["Goals", "-----", "",
                  "Each learned configuration against the best tuned baseline of the same noise law and ensemble size "
                  f"(heavy tails: RMSE and CRPS at most {HEAVY_GOAL} times, no divergence; Gaussian: RMSE at most "
                  f"{GAUSSIAN_GOAL} times).", "",
                  format_table(["system", "noise", "learned", "RMSE ratio", "CRPS ratio", "diverged", "goal", "verdict"],
                               verdicts, style="rst"), ""]
    attention = _rows(ATTENTION)
    if attention:
        innovations = sorted({float(r["innovation"]) for r in attention})
        models = sorted({r["model"] for r in attention})
        cells = {(r["model"], float(r["innovation"])): r for r in attention}
        body = [[model] + [f"{format_number(float(cells[(model, d)]['attention_ess']), 2)}{NBSP}/{NBSP}"
                           f"{format_number(float(cells[(model, d)]['spread']), 2)}" for d in innovations]
                for model in models]
        lines += ["Collapse against the size of the innovation", "-------------------------------------------", "",
                  "Trained attention ESS/n / spread of the predicted members (the prior's is 1) of each learned "
                  "model, on 40-member scalar ensembles under Cauchy noise with innovations of growing size, in "
                  "prior standard deviations (a record of earlier models and their script, no longer in the "
                  "repository). ESS/n below "
                  "0.05 is attention-level collapse by the package's rule.", "",
                  "Columns: the innovation, in prior standard deviations.", "",
                  format_table(["model"] + [f"{d:g}" for d in innovations], body, style="rst"), ""]
    reproduction = _rows(REPRODUCTION)
    if reproduction:
        body = [[r["case"], r["package"], _short_floats(r["analysis"] if r["package"] != "DAPPER" else r["filter"]),
                 r["members"],
                 r["listed_rmse"], format_number(float(r["rmse"])),
                 "yes" if abs(float(r["rmse"]) / float(r["listed_rmse"]) - 1) <= 0.1 else "no", r["n_cycles"]]
                for r in reproduction]
        lines += ["DAPPER's Gaussian numbers, reproduced", "-------------------------------------", "",
                  "Sakov and Oke's configuration (40 variables, all observed every 0.05 with Gaussian noise of "
                  "variance 1) on the package's truth and observations: DAPPER's filters with the settings its "
                  "``Lorenz96.sakov2008`` module lists, and the package's matching filters on the same problem "
                  "(``studies/dapper_reproduction.py``).", "",
                  format_table(["case", "package", "filter", "members", "listed RMSE", "RMSE", "within 10%", "cycles"],
                               body, style="rst"), ""]
    lines += [f"Rendered {datetime.date.today().isoformat()}.", ""]
    DOC.write_text("\n".join(lines))
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    render()
