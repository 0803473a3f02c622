"""Filters against Bayes' rule on held-out problems: the rank histogram filter as the reference row.

Run::

    python studies/assimilation_reference.py --out studies/results/assimilation_reference.csv \
        --rst docs/assimilation_reference_results.rst [--learned model.safetensors ...] [--pretrained NAME ...]

Rows already in ``--out`` are kept and not rerun, so a second run with
``--learned`` or ``--pretrained`` adds the learned steps' rows to the
baselines' (delete the file to start afresh).

The protocol, fixed here before any run:

- Settings: 40 variables, all observed every 0.05, 40 members, no
  localisation; observation noise Cauchy at scales 1 and 1.5, Student-t with
  3 degrees of freedom, and Gaussian, all at scale 1 unless said.
- Tuning: every filter, the reference included, is tuned per setting by
  ``tune_analysis`` on the same two problems (seeds 1000 and 1001, 400 cycles
  of which 100 are spin-up) over its own small grid: the fewest divergences,
  then the lowest mean RMSE.
- Evaluation: the seeds given (default 41, 42, 43, never used while the
  package's filters were developed), ``--cycles`` cycles after ``--spin-up``,
  by ``compare_analyses``. Each row gives the per-seed RMSE and CRPS and their
  ratio to the rank histogram filter's on the same seed, divergences and the
  mean time of one analysis.

The rank histogram filter (:class:`~sklearn_measattn.assimilation.RankHistogramFilter`)
is Bayes' rule for each scalar update with the true likelihood, the field's
standard for non-Gaussian observation errors; a learned scalar update is
measured against it. Other studies import this protocol's settings and its
two helpers, :func:`tune_by_protocol` and :func:`held_out_rows`, from here.

The committed ``studies/results/assimilation_reference.csv`` also holds the
rows of ``learned quantile_softmax``, an earlier model no longer shipped; they
stay as a record and are rendered with the others.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import time
from pathlib import Path

import numpy as np

from sklearn_measattn import load_model
from sklearn_measattn.assimilation import (
    LearnedAnalysis,
    RankHistogramFilter,
    RobustEnKF,
    SerialEnKF,
    compare_analyses,
    make_twin_problem,
    pretrained_analysis,
    tune_analysis,
)

SETTINGS = {
    "cauchy, scale 1": {"noise": "cauchy", "noise_scale": 1.0},
    "cauchy, scale 1.5": {"noise": "cauchy", "noise_scale": 1.5},
    "student-t df 3": {"noise": "student_t", "df": 3.0, "noise_scale": 1.0},
    "gaussian": {"noise": "gaussian", "noise_scale": 1.0},
}
SYSTEM = {"n_variables": 40, "observed": "all", "dt_obs": 0.05}
MEMBERS = 40
TUNING_SEEDS = (1000, 1001)
TUNING_CYCLES, TUNING_SPIN_UP = 400, 100
RHF_NAME = "RHF (Bayes, true likelihood)"
#: The grid of every learned scalar update (and of the rank histogram filter).
LEARNED_GRID = {"inflation": (1.0, 1.02, 1.05), "relaxation": (0.0, 0.3)}


def grids():
    """Each baseline's step and tuning grid, made afresh."""
    return {
        RHF_NAME: (RankHistogramFilter(), LEARNED_GRID),
        "RobustEnKF (Huber)": (RobustEnKF(), {"inflation": (1.02, 1.05, 1.1), "clip": (1.0, 1.5, 2.0, 3.0)}),
        "SerialEnKF (+clip)": (SerialEnKF(), {"inflation": (1.01, 1.03, 1.06), "clip": (None, 1.5, 2.0, 3.0)}),
    }


def tune_by_protocol(candidates, law, *, system=SYSTEM, members=MEMBERS, n_jobs=None):
    """Each ``name -> (step, grid)`` of ``candidates`` tuned on the protocol's tuning problems of ``law``.

    Returns
    -------
    dict
        Name to the tuned step (``TuningResult.best_step``).
    """
    problems = [make_twin_problem(**system, **law, n_cycles=TUNING_CYCLES, random_state=seed) for seed in TUNING_SEEDS]
    return {name: tune_analysis(step, grid, problems, ensemble_size=members, spin_up=TUNING_SPIN_UP,
                                n_jobs=n_jobs).best_step
            for name, (step, grid) in candidates.items()}


def held_out_rows(steps, law, seeds, *, cycles, spin_up, system=SYSTEM, members=MEMBERS, reference=None,
                  n_jobs=None):
    """``compare_analyses`` rows of ``steps`` on the held-out problem of every seed, each run seeded by its seed.

    One call per seed keeps each run's ``random_state`` equal to its problem's
    seed, as the committed rows were made. The rows carry ``seed`` in place of
    ``problem``.
    """
    rows = []
    for seed in seeds:
        problem = make_twin_problem(**system, **law, n_cycles=cycles + spin_up, random_state=seed)
        for row in compare_analyses(steps, [problem], ensemble_size=members, spin_up=spin_up, random_state=seed,
                                    reference=reference, n_jobs=n_jobs):
            del row["problem"]
            rows.append({"seed": seed, **row})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[41, 42, 43])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--spin-up", type=int, default=200)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--learned", nargs="*", default=[],
                        help="model files of learned scalar updates (read by the recipe their file holds)")
    parser.add_argument("--pretrained", nargs="*", default=[],
                        help="shipped models by name, read as pretrained_analysis reads them, without the "
                             "far-observation turn")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("studies/results/assimilation_reference.csv"))
    parser.add_argument("--rst", type=Path, default=None, help="also write the tables as reStructuredText")
    args = parser.parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}; "
          f"seeds {args.seeds}, {args.cycles} cycles after {args.spin_up}", flush=True)
    rows = _read(args.out) if args.out.exists() else []
    for setting in args.settings:
        rows += _run_setting(setting, args, rows)
    write_rows(args.out, rows)
    text = render(rows, args)
    print(text)
    if args.rst is not None:
        args.rst.write_text(text)


def _candidates(args):
    candidates = grids()
    for path in args.learned:
        candidates[f"learned {Path(path).stem}"] = (LearnedAnalysis(load_model(path)), LEARNED_GRID)
    for name in args.pretrained:
        candidates[f"learned {name}"] = (pretrained_analysis(name, far_innovation=None), LEARNED_GRID)
    return candidates


def _run_setting(setting, args, rows):
    """The rows of one setting that ``rows`` lacks: the missing methods tuned, then run on the missing seeds."""
    done = {(row["method"], row["seed"]) for row in rows if row["setting"] == setting}
    candidates = {name: pair for name, pair in _candidates(args).items()
                  if any((name, seed) not in done for seed in args.seeds)}
    chosen = tune_by_protocol(candidates, SETTINGS[setting], n_jobs=args.n_jobs)
    new = []
    for seed in args.seeds:
        steps = {name: step for name, step in chosen.items() if (name, seed) not in done}
        if not steps:
            continue
        for row in held_out_rows(steps, SETTINGS[setting], [seed], cycles=args.cycles, spin_up=args.spin_up,
                                 n_jobs=args.n_jobs):
            new.append({"setting": setting, "method": row["step"], "params": _params(chosen[row["step"]]),
                        "seed": seed, **{key: row[key] for key in ("rmse", "crps", "spread", "diverged",
                                                                   "ms_per_cycle")}})
            print(f"{setting:18s} {seed:3d} {row['step']:30s} rmse {row['rmse']:.3f} crps {row['crps']:.3f} "
                  f"{'DIVERGED ' if row['diverged'] else ''}{row['ms_per_cycle']:.1f} ms", flush=True)
    return new


def write_rows(path, rows):
    """``rows`` (dicts of the same keys) as a CSV file at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _read(path):
    """Rows of an earlier run, so that a rerun adds only the methods and seeds it lacks."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["seed"] = int(row["seed"])
        row["diverged"] = row["diverged"] == "True"
        for key in ("rmse", "crps", "spread", "ms_per_cycle"):
            row[key] = float(row[key])
    return rows


# parameters no filter of the page tunes: left out of its "tuned" column
_UNSHOWN_PARAMS = ("localization_radius", "n_grid", "bandwidth", "update", "likelihood", "prior",
                   "noise_ratio_range", "variance_factor", "batch_disjoint", "level_offset", "reflect", "far_innovation")


def _params(step):
    params = step.get_params(deep=False)
    params.pop("estimator", None)
    return ", ".join(f"{key}={value}" for key, value in sorted(params.items()) if value is not None
                     and key not in _UNSHOWN_PARAMS
                     and not (key == "relaxation" and value == 0.0))


def _per_seed(values):
    return " / ".join("div." if not np.isfinite(v) else f"{v:.3f}" for v in values)


def render(rows, args):
    """One table per setting: per-seed RMSE and CRPS, their ratio to the reference's on the same seed."""
    lines = [
        f"Seeds {', '.join(map(str, args.seeds))}; {args.cycles} cycles after {args.spin_up} of spin-up; "
        f"40 variables, all observed every 0.05, {MEMBERS} members. Values per seed, in seed order; "
        "ratio: to the RHF on the same seed (min-max over seeds); div.: diverged.",
        "",
    ]
    for setting in dict.fromkeys(row["setting"] for row in rows):
        block = [row for row in rows if row["setting"] == setting]
        reference = {row["seed"]: row for row in block if row["method"].startswith("RHF")}
        table = []
        for method in dict.fromkeys(row["method"] for row in block):
            mine = sorted((row for row in block if row["method"] == method), key=lambda row: row["seed"])
            rmse_ratio = [row["rmse"] / reference[row["seed"]]["rmse"] for row in mine]
            crps_ratio = [row["crps"] / reference[row["seed"]]["crps"] for row in mine]
            table.append([
                method, mine[0]["params"] or "\u2014", _per_seed([row["rmse"] for row in mine]), _range(rmse_ratio),
                _range(crps_ratio), f"{sum(row['diverged'] for row in mine)}/{len(mine)}",
                f"{np.median([row['ms_per_cycle'] for row in mine]):.1f}",
            ])
        header = ["method", "tuned", "RMSE per seed", "RMSE / RHF", "CRPS / RHF", "diverged", "ms/cycle"]
        lines += [f"**{setting}**", "", *_rst_table(header, table), ""]
    return "\n".join(lines)


def _range(values):
    finite = [v for v in values if np.isfinite(v)]
    if not finite:
        return "div."
    low, high = min(finite), max(finite)
    text = f"{low:.2f}" if abs(high - low) < 0.005 else f"{low:.2f}-{high:.2f}"
    return text + (" (div.)" if len(finite) < len(values) else "")


def _rst_table(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    rule = "  ".join("=" * w for w in widths)
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [rule, fmt(header), rule, *map(fmt, rows), rule]


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"took {time.perf_counter() - start:.0f} s")
