"""The learned scalar update with and without its turn to Bayes' rule for far observations, in cycled filters.

The page's held-out setting (40 variables, all observed every 0.05, 40
members, 1000 cycles after 200) on seeds 91-93, the learned step at the
setting tuned for the page (inflation 1.02 under heavy tails, 1.0 under
Gaussian noise, no relaxation), beside the rank histogram filter at the same
inflation. Per seed: RMSE, CRPS, divergence, the ratios.

Usage::

    python studies/far_innovation_cycles.py --out studies/results/learned_bayes/far_innovation_cycles.csv
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from assimilation_reference import MEMBERS, SYSTEM
from learned_bayes import HELDOUT_SETTINGS

from sklearn_measattn.assimilation import RankHistogramFilter, compare_analyses, make_twin_problem, pretrained_analysis

#: name -> (noise law, the inflation tuned for the page)
SETTINGS = {"cauchy, scale 1": (HELDOUT_SETTINGS["cauchy, scale 1"], 1.02),
            "student_t, df 2.5": (HELDOUT_SETTINGS["student-t df 2.5"], 1.02),
            "gaussian": (HELDOUT_SETTINGS["gaussian"], 1.0)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[91, 92, 93])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--model", default="quantile_residual_fit")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", nargs="+", default=None, help="run only these steps (default: all three)")
    parser.add_argument("--out", type=Path, default=None,
                        help="CSV; rows of the same setting, seed and step already there are replaced")
    args = parser.parse_args(argv)
    rows = []
    for setting in args.settings:
        law, inflation = SETTINGS[setting]
        problems = [make_twin_problem(**SYSTEM, **law, n_cycles=args.cycles + 200,
                                      random_state=seed) for seed in args.seeds]
        steps = {"RHF": RankHistogramFilter(inflation=inflation),
                 "learned": pretrained_analysis(args.model, inflation=inflation),
                 "learned, no turn to Bayes": pretrained_analysis(args.model, inflation=inflation,
                                                                  far_innovation=None)}
        steps = {name: step for name, step in steps.items() if args.steps is None or name in args.steps}
        for row in compare_analyses(steps, problems, ensemble_size=MEMBERS, spin_up=200,
                                    reference="RHF" if "RHF" in steps else None,
                                    n_jobs=args.n_jobs):
            row = {"setting": setting, "seed": args.seeds[row.pop("problem")], **row}
            rows.append(row)
            print(f"{setting:18s} {row['seed']} {row['step']:26s} rmse {row['rmse']:.3f} crps {row['crps']:.3f} "
                  f"{' DIVERGED' if row['diverged'] else ''}", flush=True)
    if args.out is not None:
        write(args.out, rows)


def write(path, rows):
    """Rows into the CSV at ``path``, replacing those of the same setting, seed and step; the ratios to the RHF
    recomputed from the RHF rows of the file."""
    key = ("setting", "seed", "step")
    kept = []
    if path.exists():
        with open(path, newline="") as handle:
            new = {tuple(str(row[k]) for k in key) for row in rows}
            kept = [row for row in csv.DictReader(handle) if tuple(row[k] for k in key) not in new]
    everything = kept + [{k: str(v) for k, v in row.items()} for row in rows]
    rhf = {(row["setting"], row["seed"]): row for row in everything if row["step"] == "RHF"}
    for row in everything:
        reference = rhf.get((row["setting"], row["seed"]))
        for score in ("rmse", "crps"):
            row[f"{score}_ratio"] = "" if reference is None else str(float(row[score]) / float(reference[score]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(everything[0]))
        writer.writeheader()
        writer.writerows(everything)


if __name__ == "__main__":
    main()
