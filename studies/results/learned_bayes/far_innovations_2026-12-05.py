"""One step under far innovations: the shipped and fit-route residual updates against Bayes' rule (2026-12-05).

Run from the repository root: ``python studies/results/learned_bayes/far_innovations_2026-12-05.py``; writes
``far_innovations_2026-12-05.csv`` beside it and prints the mean quantile errors and the Gaussian table.
"""

import csv
import sys
from pathlib import Path

import numpy as np

from sklearn_measattn import load_model
from sklearn_measattn.assimilation import LearnedAnalysis, SerialEnKF, analysis_model_path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
import learned_bayes as lb  # noqa: E402

models = {"shipped": load_model(analysis_model_path("quantile_residual")),
          "fit route": load_model(HERE / "residual_fit_route.safetensors"),
          "fit route, t priors": load_model(analysis_model_path("quantile_residual_fit"))}
steps = {name: LearnedAnalysis(model, level_offset=0.45, noise_ratio_range=lb.RESIDUAL_RATIO_RANGE)
         for name, model in models.items()}
steps["SerialEnKF"] = SerialEnKF()
rows = []
for law in ("gaussian", "cauchy"):
    for ratio in (0.3, 1.0, 3.0):
        rows += lb.one_step_diagnostic(steps, law=law, ratio=ratio, innovations=(1.0, 3.0, 5.0, 8.0, 15.0, 100.0))
with open(HERE / "far_innovations_2026-12-05.csv", "w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
for law in ("gaussian", "cauchy"):
    for method in steps:
        mine = [r for r in rows if r["method"] == method and r["law"] == law]
        near = [r["quantile_error"] for r in mine if r["innovation"] / np.sqrt(1 + r["ratio"] ** 2) < 4]
        print(f"{law:9s} {method:20s} mean quantile error: all {np.mean([r['quantile_error'] for r in mine]):.3f}  "
              f"within 4 innovation sd {np.mean(near):.3f}")
lb.print_table([r for r in rows if r["law"] == "gaussian" and r["ratio"] == 1.0])
