"""A learned analysis step in a cycled Lorenz-96 filter, against tuned baselines and DAPPER's filters.

Run (DAPPER's filters need its extra; without it their rows are left out and
the script says so)::

    python studies/assimilation_study.py --out studies/results/assimilation.csv

For each observation-noise law (Gaussian, Student-t with 1.5 degrees of
freedom, Cauchy; scale 1; 40 variables, all observed every 0.05 time units),
and every seed, on the same truth and observations:

1. the package's baselines, each tuned on a small grid (inflation, clipping
   threshold) on separate tuning problems of the same law (fewest
   divergences first, then the lowest mean RMSE): the stochastic
   EnKF, the robust (Huber-type) EnKF, the serial EnKF with and without
   clipping; a free-running ensemble;
2. DAPPER's EnKF (perturbed observations and square root), LETKF and
   particle filter, inflation tuned the same way;
3. learned analyses shipped with the package (``--learned``, by name; default
   ``quantile_residual_fit``), inflation and relaxation tuned like the
   baselines;
4. the Bayes reference: a particle filter with many members and the true
   likelihood (shorter runs: it costs about a second a cycle).

Rows already in ``--out`` are skipped, so an interrupted run resumes.

The learned rows of the committed ``studies/results/assimilation*.csv`` and
``assimilation_attention.csv`` (configurations log/symlog, softmax/symlog and
softmax/none, trained on cycled-filter priors) are records of models and
code no longer in the repository.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from joblib import Parallel, delayed

from sklearn_measattn.assimilation import (
    EnKF,
    ParticleFilter,
    RobustEnKF,
    SerialEnKF,
    make_twin_problem,
    pretrained_analysis,
    run_dapper,
    tune_analysis,
    twin_experiment,
)

NOISES = {"gaussian": {"noise": "gaussian"}, "student_t": {"noise": "student_t", "df": 1.5}, "cauchy": {"noise": "cauchy"}}

#: name -> (step, tuning grid) of the package's baselines.
BASELINE_GRIDS = {
    "EnKF": (EnKF(), {"inflation": (1.02, 1.06, 1.1, 1.2)}),
    "RobustEnKF": (RobustEnKF(), {"inflation": (1.02, 1.05, 1.1), "clip": (1.0, 1.5, 2.0, 3.0)}),
    "SerialEnKF": (SerialEnKF(), {"inflation": (1.01, 1.03, 1.06)}),
    "SerialEnKF+clip": (SerialEnKF(), {"inflation": (1.01, 1.03, 1.06), "clip": (1.0, 1.5, 2.0)}),
}
#: The learned steps' (inflation, relaxation) candidates.
LEARNED_GRID = [{"inflation": (1.0,), "relaxation": (0.3, 0.5)}, {"inflation": (1.02,), "relaxation": (0.3,)}]
DAPPER_GRIDS = {
    "EnKF": [{"infl": i} for i in (1.02, 1.06, 1.1)],
    "EnKF_sqrt": [{"infl": i} for i in (1.01, 1.03, 1.06)],
    "LETKF": [{"infl": i, "loc_rad": 4.0} for i in (1.02, 1.04, 1.08)],
}
TUNING_SPIN_UP = 50


def dapper_params(name, grid, problems, members, spin_up=TUNING_SPIN_UP, n_jobs=None):
    """DAPPER's parameters of ``grid`` by the package's tuning rule (``TUNING_RULE``) on ``problems``.

    ``tune_analysis`` tunes the package's steps; DAPPER's filters run
    through ``run_dapper``, so their candidates are ranked here (the runs in
    parallel through joblib).
    """
    results = Parallel(n_jobs=n_jobs)(
        delayed(run_dapper)(name, problem, ensemble_size=members, spin_up=spin_up, random_state=0, **params)
        for params in grid for problem in problems)
    scores = [(sum(r.diverged for r in chunk), float(np.mean([r.rmse for r in chunk])))
              for chunk in (results[k:k + len(problems)] for k in range(0, len(results), len(problems)))]
    return grid[min(range(len(grid)), key=scores.__getitem__)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--spin-up", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tune-cycles", type=int, default=400)
    parser.add_argument("--tune-problems", type=int, default=2)
    parser.add_argument("--variables", type=int, default=40)
    parser.add_argument("--observed", default="all", choices=["all", "every_other"])
    parser.add_argument("--dt-obs", type=float, default=0.05)
    parser.add_argument("--members", type=int, default=40)
    parser.add_argument("--localization-radius", type=float, default=None,
                        help="Gaspari-Cohn half-width for the package's filters and the learned ones (fewer members "
                        "than variables need one); DAPPER's LETKF keeps loc_rad=4")
    parser.add_argument("--bayes-members", type=int, default=1000)
    parser.add_argument("--bayes-cycles", type=int, default=200)
    parser.add_argument("--noises", nargs="*", default=list(NOISES))
    parser.add_argument("--no-dapper", action="store_true")
    parser.add_argument("--only-bayes", action="store_true", help="run only the Bayes reference (particle filter)")
    parser.add_argument("--learned", nargs="*", default=["quantile_residual_fit"],
                        help="shipped learned models by name (pretrained_analysis)")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--out", default="studies/results/assimilation.csv")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the learned step runs many small networks: threads cost more than they give
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        with open(out) as f:
            done = {(r["noise"], r["seed"], r["method"], r["members"]) for r in csv.DictReader(f)}
    fields = ["variables", "observed", "dt_obs", "localization",
              "noise", "seed", "method", "setting", "rmse", "spread", "crps", "energy_score", "diverged", "diverged_at",
              "cycles", "members", "seconds_per_cycle", "attention_ess", "attention_ess_outliers", "fit_seconds"]
    new_file = not out.exists()
    handle = open(out, "a", newline="")
    writer = csv.DictWriter(handle, fieldnames=fields)
    if new_file:
        writer.writeheader()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}; "
          f"{args.cycles} cycles, spin-up {args.spin_up}, {args.seeds} seeds", flush=True)
    try:
        import dapper  # noqa: F401

        has_dapper = not args.no_dapper
    except ImportError:
        has_dapper = False
        print("# DAPPER is not installed (pip install sklearn-measattn[assimilation]): its rows are left out", flush=True)
    start_all = time.perf_counter()

    def emit(noise, seed, method, setting, result, **extra):
        row = {"variables": args.variables, "observed": args.observed, "dt_obs": args.dt_obs,
               "localization": args.localization_radius or "",
               "noise": noise, "seed": seed, "method": method, "setting": setting, **result.summary(),
               "cycles": len(result.rmse_per_cycle), "members": result.ensemble_size, **extra}
        row = {k: row.get(k, "") for k in fields}
        writer.writerow(row)
        handle.flush()
        print(f"{noise:10s} seed {seed} {method:16s} rmse {result.rmse:7.3f} spread {result.spread:6.3f} "
              f"crps {result.crps:6.3f} es {result.energy_score:7.3f} diverged {result.diverged!s:5s} {setting}",
              flush=True)

    def emit_bayes(noise, seed, law, system):
        short = make_twin_problem(**law, **system, n_cycles=args.bayes_cycles, random_state=seed)
        jitter = 0.7 * args.bayes_members ** (-1 / (args.variables + 4))  # DAPPER's reg=0.7, in our units
        emit(noise, seed, "Bayes PF", f"ParticleFilter(jitter={jitter:.3f}), {args.bayes_members} members",
             twin_experiment(ParticleFilter(jitter=jitter), short, ensemble_size=args.bayes_members,
                             spin_up=min(50, args.bayes_cycles // 4), random_state=seed))

    for noise in args.noises:
        law = NOISES[noise]
        system = {"n_variables": args.variables, "observed": args.observed, "dt_obs": args.dt_obs}
        if args.only_bayes:
            for seed in range(args.seeds):
                emit_bayes(noise, seed, law, system)
            continue
        tuning = [make_twin_problem(**law, **system, n_cycles=args.tune_cycles, random_state=1000 + i)
                  for i in range(args.tune_problems)]

        candidates = {**BASELINE_GRIDS, **{f"learned {name}": (pretrained_analysis(name), LEARNED_GRID)
                                           for name in args.learned}}
        chosen = {name: tune_analysis(step.set_params(localization_radius=args.localization_radius), grid, tuning,
                                      ensemble_size=args.members, spin_up=TUNING_SPIN_UP, n_jobs=args.n_jobs).best_step
                  for name, (step, grid) in candidates.items()}
        dapper_chosen = {name: dapper_params(name, grid, tuning, args.members)
                         for name, grid in DAPPER_GRIDS.items() if has_dapper}
        for seed in range(args.seeds):
            if all((noise, str(seed), m, str(args.members)) in done for m in ["none", *chosen]):
                continue
            problem = make_twin_problem(**law, **system, n_cycles=args.cycles, random_state=seed)
            run = {"ensemble_size": args.members, "spin_up": args.spin_up, "random_state": seed}
            emit(noise, seed, "none", "", twin_experiment("none", problem, **run))
            for name, step in chosen.items():
                setting = (f"inflation={step.inflation}, relaxation={step.relaxation}" if name.startswith("learned")
                           else repr(step))
                emit(noise, seed, name, setting, twin_experiment(step, problem, **run))
            for name, params in dapper_chosen.items():
                emit(noise, seed, f"DAPPER {name}", repr(params), run_dapper(name, problem, **run, **params))
            if args.bayes_members:
                emit_bayes(noise, seed, law, system)
    handle.close()
    print(f"# total {time.perf_counter() - start_all:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
