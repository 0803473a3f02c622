"""Filters against Bayes' rule on held-out problems: the rank histogram filter as the reference row.

Run::

    python studies/assimilation_reference.py --out studies/results/assimilation_reference.csv \
        --rst docs/assimilation_reference_results.rst [--learned model.safetensors ...]

Rows already in ``--out`` are kept and not rerun, so a second run with
``--learned`` adds the learned steps' rows to the baselines' (delete the file
to start afresh).

The protocol, fixed here before any run:

- Settings: 40 variables, all observed every 0.05, 40 members, no
  localisation; observation noise Cauchy at scales 1 and 1.5, Student-t with
  3 degrees of freedom, and Gaussian, all at scale 1 unless said. The learned
  models of the package's assimilation study were trained on Gaussian,
  Student-t (1.5) and Cauchy noise at scales 0.5, 1 and 2: Cauchy at 1.5 and
  Student-t with 3 degrees of freedom are outside their training set.
- Tuning: every filter, the reference included, is tuned per setting on the
  same two problems (seeds 1000 and 1001, 400 cycles after 100 of spin-up)
  over its own small grid; the choice is the fewest divergences, then the
  lowest mean RMSE.
- Evaluation: the seeds given (default 41, 42, 43, never used while the
  package's filters were developed), ``--cycles`` cycles after ``--spin-up``.
  Each row gives the per-seed RMSE and CRPS and their ratio to the rank
  histogram filter's on the same seed, divergences and the mean time of one
  analysis.

The rank histogram filter (:class:`~sklearn_measattn.assimilation.RankHistogramFilter`)
is Bayes' rule for each scalar update with the true likelihood, the field's
standard for non-Gaussian observation errors; a learned scalar update is
measured against it.
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
import time
from pathlib import Path

import numpy as np

from sklearn_measattn import load_model
from sklearn_measattn.assimilation import (
    LearnedAnalysis,
    RankHistogramFilter,
    RobustEnKF,
    SerialEnKF,
    make_twin_problem,
    pretrained_analysis,
    twin_experiment,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from attention_speed import cpu_description  # noqa: E402

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


def grids():
    """Each filter's tuning grid, made afresh (steps are bound copies, but the grids stay unshared)."""
    return {
        "RHF (Bayes, true likelihood)": [RankHistogramFilter(inflation=i, relaxation=r)
                                         for i in (1.0, 1.02, 1.05) for r in (0.0, 0.3)],
        "RobustEnKF (Huber)": [RobustEnKF(inflation=i, clip=c) for i in (1.02, 1.05, 1.1) for c in (1.0, 1.5, 2.0, 3.0)],
        "SerialEnKF (+clip)": [SerialEnKF(inflation=i, clip=c) for i in (1.01, 1.03, 1.06) for c in (None, 1.5, 2.0, 3.0)],
    }


def learned_grid(model, step=LearnedAnalysis):
    return [step(model, inflation=i, relaxation=r) for i in (1.0, 1.02, 1.05) for r in (0.0, 0.3)]


def tuned(candidates, law, seed, *, system=SYSTEM, members=MEMBERS):
    best = None
    for candidate in candidates:
        results = []
        for tuning_seed in TUNING_SEEDS:
            problem = make_twin_problem(**system, **law, n_cycles=TUNING_CYCLES, random_state=tuning_seed)
            results.append(twin_experiment(candidate, problem, ensemble_size=members, spin_up=TUNING_SPIN_UP,
                                           random_state=seed))
        key = (sum(r.diverged for r in results), float(np.mean([r.rmse for r in results])))
        if best is None or key < best[0]:
            best = (key, candidate)
    return best[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[41, 42, 43])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--spin-up", type=int, default=200)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--learned", nargs="*", default=[], help="model files of learned scalar updates")
    parser.add_argument("--pretrained", nargs="*", default=[],
                        help="shipped models by name, read as pretrained_analysis reads them, without the "
                             "far-observation turn (as the page's rows were made)")
    parser.add_argument("--out", type=Path, default=Path("studies/results/assimilation_reference.csv"))
    parser.add_argument("--rst", type=Path, default=None, help="also write the tables as reStructuredText")
    args = parser.parse_args(argv)
    print(f"{cpu_description()}, {platform.python_version()}; seeds {args.seeds}, {args.cycles} cycles after "
          f"{args.spin_up}", flush=True)
    rows = _read(args.out) if args.out.exists() else []
    for setting in args.settings:
        law = SETTINGS[setting]
        candidates = grids()
        for path in args.learned:
            candidates[f"learned {Path(path).stem}"] = learned_grid(load_model(path))
        for name in args.pretrained:
            candidates[f"learned {name}"] = [pretrained_analysis(name, far_innovation=None, inflation=i, relaxation=r)
                                             for i in (1.0, 1.02, 1.05) for r in (0.0, 0.3)]
        done = {(row["method"], row["seed"]) for row in rows if row["setting"] == setting}
        chosen = {name: tuned(grid, law, seed=0) for name, grid in candidates.items()
                  if any((name, seed) not in done for seed in args.seeds)}
        for seed in args.seeds:
            problem = make_twin_problem(**SYSTEM, **law, n_cycles=args.cycles + args.spin_up, random_state=seed)
            for name, step in chosen.items():
                if (name, seed) in done:
                    continue
                result = twin_experiment(step, problem, ensemble_size=MEMBERS, spin_up=args.spin_up, random_state=seed)
                rows.append({"setting": setting, "method": name, "params": _params(step), "seed": seed,
                             "rmse": result.rmse, "crps": result.crps, "spread": result.spread,
                             "diverged": result.diverged, "ms_per_cycle": 1e3 * result.seconds_per_cycle})
                print(f"{setting:18s} {seed:3d} {name:30s} rmse {result.rmse:.3f} crps {result.crps:.3f} "
                      f"{'DIVERGED ' if result.diverged else ''}{1e3 * result.seconds_per_cycle:.1f} ms", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    text = render(rows, args)
    print(text)
    if args.rst is not None:
        args.rst.write_text(text)


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


def _params(step):
    params = step.get_params(deep=False)
    params.pop("estimator", None)
    return ", ".join(f"{key}={value}" for key, value in sorted(params.items()) if value is not None
                     and key not in ("localization_radius", "n_grid", "bandwidth", "variance_factor", "update",
                                     "likelihood", "prior", "relevel", "spread_floor", "noise_ratio_range")
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
