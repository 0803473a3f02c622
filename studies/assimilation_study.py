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
3. learned analyses (:class:`~sklearn_measattn.assimilation.LearnedAnalysis`)
   with log/symlog, softmax/symlog and softmax/none: one model per kernel
   configuration, trained once for all noise laws and scales on
   :func:`~sklearn_measattn.assimilation.make_analysis_training_data` pairs,
   inflation and relaxation tuned like the baselines; the trained attention
   ESS/n of each model on the scalar ensembles it sees in the cycle;
4. the Bayes reference: a particle filter with many members and the true
   likelihood (shorter runs: it costs about a second a cycle).

Trained models are cached in ``--cache`` and rows already in ``--out`` are
skipped, so an interrupted run resumes. ``--shipped`` takes the three models
shipped with the package instead (trained by this script's recipe), so that
the learned rows rerun without training.
"""

from __future__ import annotations

import argparse
import csv
import os
import pickle
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone

from sklearn_measattn import MeasureTransformerRegressor, load_model
from sklearn_measattn.assimilation import (
    EnKF,
    LearnedAnalysis,
    ParticleFilter,
    RobustEnKF,
    SerialEnKF,
    analysis_features,
    analysis_model_path,
    make_analysis_training_data,
    make_twin_problem,
    run_dapper,
    twin_experiment,
)

NOISES = {"gaussian": {"noise": "gaussian"}, "student_t": {"noise": "student_t", "df": 1.5}, "cauchy": {"noise": "cauchy"}}

# Each configuration of a learned analysis: the estimator's kernel and transform, and its training budget.
LEARNED = {
    "log/symlog": {"kernel": "log", "transform": "symlog", "max_epochs": 12, "fraction": 1.0},
    "softmax/symlog": {"kernel": "softmax", "transform": "symlog", "max_epochs": 4, "fraction": 1 / 3},
    "softmax/none": {"kernel": "softmax", "transform": None, "max_epochs": 4, "fraction": 1 / 3},
}
TRAINING_SCALES = (0.5, 1.0, 2.0)

BASELINE_GRIDS = {
    "EnKF": [EnKF(inflation=i) for i in (1.02, 1.06, 1.1, 1.2)],
    "RobustEnKF": [RobustEnKF(inflation=i, clip=c) for i in (1.02, 1.05, 1.1) for c in (1.0, 1.5, 2.0, 3.0)],
    "SerialEnKF": [SerialEnKF(inflation=i) for i in (1.01, 1.03, 1.06)],
    "SerialEnKF+clip": [SerialEnKF(inflation=i, clip=c) for i in (1.01, 1.03, 1.06) for c in (1.0, 1.5, 2.0)],
}


def localized(grid, radius):
    """New steps: those of ``grid`` with ``localization_radius=radius`` (the grid itself is left as it is)."""
    if radius is None:
        return [clone(step) for step in grid]
    return [clone(step).set_params(localization_radius=radius) for step in grid]
LEARNED_GRID = [(1.0, 0.3), (1.0, 0.5), (1.02, 0.3)]  # (inflation, relaxation)
DAPPER_GRIDS = {
    "EnKF": [{"infl": i} for i in (1.02, 1.06, 1.1)],
    "EnKF_sqrt": [{"infl": i} for i in (1.01, 1.03, 1.06)],
    "LETKF": [{"infl": i, "loc_rad": 4.0} for i in (1.02, 1.04, 1.08)],
}


def training_data(fraction, seed=0):
    """Pairs from every noise law and scale, reflected (x -> -x) to double them."""
    Xs, ys = [], []
    for law in NOISES.values():
        for scale in TRAINING_SCALES:
            rng = np.random.RandomState(seed)  # one generator draws the problem, then runs the teacher
            problem = make_twin_problem(**law, noise_scale=scale, n_cycles=150, random_state=rng)
            X, y = make_analysis_training_data(problem, spin_up=50, random_state=rng)
            Xs.append(X)
            ys.append(y)
    X, y = np.concatenate(Xs), np.concatenate(ys)
    if fraction < 1:
        keep = np.random.default_rng(seed).permutation(len(X))[: int(round(fraction * len(X)))]
        X, y = X[keep], y[keep]
    return np.concatenate([X, X * np.array([-1.0, -1.0, 1.0, 1.0])]), np.concatenate([y, -y])


def trained_model(name, cache):
    from skorch.callbacks import LRScheduler

    config = LEARNED[name]
    path = cache / f"{name.replace('/', '_')}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)
    X, y = training_data(config["fraction"])
    start = time.perf_counter()
    model = MeasureTransformerRegressor(
        kernel=config["kernel"], transform=config["transform"], d_model=32, n_heads=4, n_layers=2,
        dim_feedforward=64, batch_size=256, max_epochs=config["max_epochs"], lr=2e-3, random_state=0,
        callbacks=[LRScheduler(policy="CosineAnnealingLR", T_max=config["max_epochs"])],
    ).fit(X, y)
    model.fit_seconds_ = time.perf_counter() - start
    model.n_training_pairs_ = len(X)
    cache.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(model, f)
    return model


def tuned(candidates, run, problems):
    """The candidate with the fewest divergences, then the lowest mean RMSE, over the tuning problems.

    Several tuning problems, so that a setting that wins on one trajectory
    and diverges on another is not chosen: what a practitioner tuning a
    filter for heavy-tailed noise would want.
    """
    best = None
    for candidate in candidates:
        results = [run(candidate, problem) for problem in problems]
        key = (sum(r.diverged for r in results), float(np.mean([r.rmse for r in results])))
        if best is None or key < best[0]:
            best = (key, candidate)
    return best[1]


def in_cycle_ess(model, law, cycles, members):
    """Trained attention ESS/n of ``model`` on the scalar ensembles a learned filter feeds it."""
    problem = make_twin_problem(**law, n_cycles=cycles, random_state=99)
    bound = LearnedAnalysis(model, inflation=1.0, relaxation=0.3).bind(problem.observation_model, random_state=0)
    with bound.recording() as priors:  # (prior, observation, variable) per scalar update
        twin_experiment(lambda forecast, observation: bound(forecast, observation), problem, ensemble_size=members,
                        spin_up=0)
    model_law = problem.observation_model
    X, _, _ = analysis_features(np.stack([p for p, _, _ in priors]), np.array([o for _, o, _ in priors]),
                                noise_scale=model_law.noise_scale, noise_tail=model_law.tail)
    innovation = np.abs(X[:, 0, 1])
    ess = model.attention_ess(X).mean(axis=1)
    outlying = innovation > 10
    return float(ess.mean()), float(ess[outlying].mean()) if outlying.any() else float("nan")


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
    parser.add_argument("--learned", nargs="*", default=list(LEARNED))
    parser.add_argument("--out", default="studies/results/assimilation.csv")
    parser.add_argument("--cache", default="studies/results/assimilation_models")
    parser.add_argument("--shipped", action="store_true",
                        help="use the models shipped with the package (assimilation.analysis_model_path) instead of "
                             "training them: the same recipe, trained once")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the learned step runs many small networks: threads cost more than they give
    out, cache = Path(args.out), Path(args.cache)
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
    if args.shipped:
        models = {name: load_model(analysis_model_path(name.replace("/", "_"))) for name in args.learned}
    else:
        models = {name: trained_model(name, cache) for name in args.learned}
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

        def run_step(step, problem):
            return twin_experiment(step, problem, ensemble_size=args.members, spin_up=50, random_state=0)

        chosen = {name: tuned(localized(grid, args.localization_radius), run_step, tuning)
                  for name, grid in BASELINE_GRIDS.items()}
        learned_chosen = {
            name: tuned([LearnedAnalysis(model, inflation=i, relaxation=r, localization_radius=args.localization_radius)
                         for i, r in LEARNED_GRID], run_step, tuning)
            for name, model in models.items()
        }
        dapper_chosen = {}
        if has_dapper:
            for name, grid in DAPPER_GRIDS.items():
                dapper_chosen[name] = tuned(grid, lambda params, problem, name=name: run_dapper(
                    name, problem, ensemble_size=args.members, spin_up=50, random_state=0, **params), tuning)
        ess = {name: in_cycle_ess(model, {**law, **system}, 20, args.members) for name, model in models.items()}
        for seed in range(args.seeds):
            if all((noise, str(seed), m, str(args.members)) in done for m in ["none", *chosen]):
                continue
            problem = make_twin_problem(**law, **system, n_cycles=args.cycles, random_state=seed)
            run = {"ensemble_size": args.members, "spin_up": args.spin_up, "random_state": seed}
            emit(noise, seed, "none", "", twin_experiment("none", problem, **run))
            for name, step in chosen.items():
                emit(noise, seed, name, repr(step), twin_experiment(step, problem, **run))
            for name, params in dapper_chosen.items():
                emit(noise, seed, f"DAPPER {name}", repr(params), run_dapper(name, problem, **run, **params))
            for name, step in learned_chosen.items():
                result = twin_experiment(step, problem, **run)
                emit(noise, seed, f"learned {name}", f"inflation={step.inflation}, relaxation={step.relaxation}",
                     result, attention_ess=ess[name][0], attention_ess_outliers=ess[name][1],
                     fit_seconds=getattr(step.estimator, "fit_seconds_", ""))
            if args.bayes_members:
                emit_bayes(noise, seed, law, system)
    handle.close()
    print(f"# total {time.perf_counter() - start_all:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
