"""A retrained learned model against the file it replaces: the same filter settings, the same held-out problems.

Each model file is read by the recipe it holds (``LearnedAnalysis(load_model(path))``)
and run by ``compare_analyses`` beside the rank histogram filter with the
kernel density of the same record (the page's reference), on the page's
held-out setting of ``studies/sampled_noise.py``: 40 variables, all observed
every 0.05, 40 members, 1000 cycles of which the first 200 are spin-up,
nature's errors resampled from 10^6 draws of the law while the filters know
the user's 10^4.

Usage (the earlier file taken from git, the new one from the package)::

    git show <commit>:sklearn_measattn/assimilation/models/sampled_contaminated.safetensors > old.safetensors
    python studies/retrained_models.py --law contaminated --models earlier=old.safetensors \
        retrained=sklearn_measattn/assimilation/models/sampled_contaminated.safetensors \
        --out studies/results/retrained_models.csv
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from sampled_noise import LAWS, problems_for, records

from sklearn_measattn import load_model
from sklearn_measattn.assimilation import (
    LearnedAnalysis,
    RankHistogramFilter,
    compare_analyses,
)

#: How the residual recipe's files were read before they held their recipe.
EARLIER_READING = {"noise_ratio_range": (0.1, 100.0), "level_offset": 0.45}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--law", choices=tuple(LAWS), required=True)
    parser.add_argument("--models", nargs="+", required=True, help="name=path of each model file")
    parser.add_argument("--seeds", type=int, nargs="+", default=[111, 112, 113])
    parser.add_argument("--n-cycles", type=int, default=1000)
    parser.add_argument("--spin-up", type=int, default=200)
    parser.add_argument("--inflation", type=float, default=1.02)
    parser.add_argument("--localization-radius", type=float, default=2.0)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="a CSV the rows are appended to")
    args = parser.parse_args(argv)
    user, nature = records(args.law, 10_000, 1_000_000, 40)  # the sampled-noise study's records of the law
    settings = dict(inflation=args.inflation, localization_radius=args.localization_radius)
    steps = {"RHF kde": RankHistogramFilter(likelihood=user.kernel_density(), **settings)}
    for spec in args.models:
        name, path = spec.split("=", 1)
        estimator = load_model(path)
        # a file made before model files held their recipe is read as the residual recipe's files were
        reading = {} if hasattr(estimator, "analysis_recipe_") else EARLIER_READING
        steps[name] = LearnedAnalysis(estimator, **settings, **reading)
    problems = problems_for(nature, user, args.seeds, args.n_cycles)
    rows = compare_analyses(steps, problems, ensemble_size=40, spin_up=args.spin_up, reference="RHF kde",
                            n_jobs=args.n_jobs)
    table = [{"law": args.law, "seed": args.seeds[row["problem"]], "step": row["step"], "rmse": row["rmse"],
              "crps": row["crps"], "rmse_ratio": row["rmse_ratio"], "diverged": row["diverged"]} for row in rows]
    for row in table:
        print(f"{row['law']:12s} seed {row['seed']} {row['step']:12s} rmse {row['rmse']:.3f} "
              f"ratio {row['rmse_ratio']:.3f}{' DIVERGED' if row['diverged'] else ''}", flush=True)
    if args.out is not None:
        new = not args.out.exists()
        with open(args.out, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(table[0]))
            if new:
                writer.writeheader()
            writer.writerows(table)


if __name__ == "__main__":
    main()
