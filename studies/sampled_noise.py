"""Observation noise known only by a sample of errors: Bayes' rule with densities fitted to the sample.

Run::

    python studies/sampled_noise.py --out studies/results/sampled_noise.csv
    python studies/sampled_noise.py --quick      # about a minute on two cores
    python studies/sampled_noise.py --learned --seeds 111 112 113  # with the shipped learned steps

For each of two noise laws outside the Student-t family, a contaminated one
(:func:`~sklearn_measattn.assimilation.contaminated_errors`: Gaussian errors
of sd 1, 5% gross Cauchy errors of scale 10) and a skewed heavy-tailed one
(:func:`~sklearn_measattn.assimilation.skewed_errors`: a two-piece Student-t
with 3 degrees of freedom, right half 3 times wider than the left, median 0):

- the *user's sample*: ``--n-errors`` errors (10^4) drawn once; everything a
  filter knows of the law comes from it;
- *nature*: ``--n-reference`` errors (10^6), another draw, which the twin
  problems resample (a
  :class:`~sklearn_measattn.assimilation.SampledObservationModel`): the
  observations follow the law itself to within the resampling of 10^6 draws,
  not the user's sample;
- the filters, on 40 variables with 40 members, all observed every 0.05,
  bound to the user's model (its robust scale and variance), on the same
  truth and observations per seed:

  - ``RHF student-t``: the rank histogram filter with the Student-t fitted to
    the user's sample by maximum likelihood (location 0);
  - ``RHF kde``: the rank histogram filter with the kernel density of the
    user's sample;
  - ``robust EnKF``: the Huber-type EnKF, with the user's sample's variance
    (or its robust scale squared when the fitted tails have no variance),
    inflation and clipping tuned on separate problems (seeds 1000 and up;
    fewest divergences, then the lowest mean RMSE);
  - ``RHF reference``: the rank histogram filter with the kernel density of
    nature's 10^6 errors, the best density of the law available: the
    reference the sample-based filters are measured against.

With ``--learned``, a learned scalar update joins them (``learned``): the
package's recipe trained likelihood-free on the user's sample alone
(``fit_learned_analysis(SampledNoise(errors), random_state=0)``: observation
errors resampled from the sample, no density fitted or evaluated; about 3.5
minutes per law on two cores), bound to the user's model, inflation and
relaxation tuned on the tuning problems as the others' parameters are. Its
models ship with the package (``pretrained_analysis("sampled_contaminated")``,
``"sampled_skewed"``) and are used unless ``--models`` names a folder, where
models are trained and saved (``<law>.safetensors``) or reused.
``--train-only`` trains (or loads) the models and stops. The models of an
earlier recipe (energy loss, ranked symlog features) in
``studies/results/sampled_noise_models`` and their rows in
``studies/results/sampled_noise.csv`` and ``sampled_noise_longer_training.*``
are records of code no longer in the repository.

The rank histogram filters share one inflation, tuned the same way with the
user's kernel density. Printed: per law and seed, each filter's time-averaged
RMSE after spin-up, its ratio to the best of the three sample-based filters
on that seed, whether it diverged and its seconds per cycle; then the means.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import time
from pathlib import Path

import numpy as np
from assimilation_reference import LEARNED_GRID

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    KernelDensityObservationModel,
    LearnedAnalysis,
    RankHistogramFilter,
    RobustEnKF,
    SampledNoise,
    SampledObservationModel,
    compare_analyses,
    contaminated_errors,
    fit_learned_analysis,
    make_twin_problem,
    pretrained_analysis,
    skewed_errors,
    tune_analysis,
)

LAWS = {
    "contaminated": lambda n, seed: contaminated_errors(n, gross_fraction=0.05, gross_scale=10.0, random_state=seed),
    "skewed": lambda n, seed: skewed_errors(n, skewness=0.5, df=3.0, random_state=seed),
}
SAMPLE_BASED = ("RHF student-t", "RHF kde", "robust EnKF")
ROBUST_GRID = {"inflation": (1.02, 1.05, 1.1), "clip": (1.0, 1.5, 2.0, 3.0)}


def learned_step(law, user, args):
    """The learned scalar update for the user's sample: shipped, or in ``--models`` (trained there if absent)."""
    if args.models is None:
        return pretrained_analysis(f"sampled_{law}")
    path = args.models / f"{law}.safetensors"
    if not path.exists():
        begin = time.perf_counter()
        step = fit_learned_analysis(SampledNoise(user.errors), n_priors=args.learned_priors,
                                    max_epochs=args.learned_epochs, random_state=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_model(step.estimator, path)
        print(f"trained in {time.perf_counter() - begin:.0f} s; saved to {path}", flush=True)
    return LearnedAnalysis(load_model(path))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--laws", nargs="+", choices=tuple(LAWS), default=list(LAWS))
    parser.add_argument("--n-variables", type=int, default=40)
    parser.add_argument("--ensemble-size", type=int, default=40)
    parser.add_argument("--n-cycles", type=int, default=1000)
    parser.add_argument("--spin-up", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tuning-seeds", type=int, nargs="+", default=[1000, 1001])
    parser.add_argument("--tuning-cycles", type=int, default=500)
    parser.add_argument("--rhf-inflations", type=float, nargs="+", default=[1.01, 1.02, 1.05])
    parser.add_argument("--localization-radius", type=float, default=None)
    parser.add_argument("--n-errors", type=int, default=10_000, help="the user's sample of errors")
    parser.add_argument("--n-reference", type=int, default=1_000_000, help="nature's errors, and the reference's")
    parser.add_argument("--out", type=str, default=None, help="a CSV file for the rows")
    parser.add_argument("--learned", action="store_true", help="add the learned step trained on the user's sample")
    parser.add_argument("--models", type=Path, default=None,
                        help="where the learned models are trained and saved (<law>.safetensors), and reused from; "
                             "default: the package's shipped models (sampled_<law>)")
    parser.add_argument("--learned-priors", type=int, default=30000, help="synthetic priors to train on")
    parser.add_argument("--learned-epochs", type=int, default=5)
    parser.add_argument("--train-only", action="store_true", help="train (or load) the learned models and stop")
    parser.add_argument("--quick", action="store_true",
                        help="one seed, 300 cycles, one tuning problem of 300 cycles, the RHF inflation fixed at 1.02")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.n_cycles, args.spin_up = [0], 300, 100
        args.tuning_seeds, args.tuning_cycles, args.rhf_inflations = [1000], 300, [1.02]
    return args


def records(law, n_errors, n_reference, n_variables, observed="all"):
    """The user's observation model (``n_errors`` errors of ``law``) and nature's (``n_reference``), seeded by the law."""
    seed = 10 * list(LAWS).index(law)
    return (SampledObservationModel(LAWS[law](n_errors, seed), n_variables=n_variables, observed=observed),
            SampledObservationModel(LAWS[law](n_reference, seed + 1), n_variables=n_variables, observed=observed))


def problems_for(nature, user, seeds, n_cycles):
    """Twin problems whose observations nature's model makes, with the user's model for the filters to bind to."""
    return [dataclasses.replace(make_twin_problem(observation_model=nature, n_cycles=n_cycles, random_state=seed),
                                observation_model=user) for seed in seeds]


def tune_filters(law, user, nature, args):
    """The filters of one law, their parameters tuned on the tuning problems (fewest divergences, then mean RMSE)."""
    radius = args.localization_radius
    tuning = problems_for(nature, user, args.tuning_seeds, args.tuning_cycles)

    def tune(step, grid):
        return tune_analysis(step, grid, tuning, ensemble_size=args.ensemble_size,
                             spin_up=min(args.spin_up, args.tuning_cycles // 3), random_state=0)

    student_t, kde = user.fit_student_t(), user.kernel_density()
    reference = KernelDensityObservationModel(nature.errors, n_variables=args.n_variables)
    variance = user.variance
    print(f"user's sample robust scale {user.noise_scale:.3f}, variance "
          f"{'none (fitted df <= 2)' if variance is None else f'{variance:.3f}'}; fitted Student-t df "
          f"{student_t.df:.3f}, scale {student_t.noise_scale:.3f}; kernel bandwidth {kde.bandwidth_:.3f} "
          f"(reference {reference.bandwidth_:.3f})")
    robust = tune(RobustEnKF(localization_radius=radius), ROBUST_GRID).best_step
    rhf = RankHistogramFilter(inflation=args.rhf_inflations[0], localization_radius=radius, likelihood=kde)
    if len(args.rhf_inflations) > 1:
        rhf = tune(rhf, {"inflation": args.rhf_inflations}).best_step
    print(f"tuned: robust EnKF inflation {robust.inflation}, clip {robust.clip}; RHF inflation {rhf.inflation}")
    # the rank histogram filters share the inflation tuned with the user's kernel density
    filters = {"RHF student-t": _with_likelihood(rhf, student_t), "RHF kde": rhf, "robust EnKF": robust,
               "RHF reference": _with_likelihood(rhf, reference)}
    if args.learned:
        learned = tune(learned_step(law, user, args).set_params(localization_radius=radius), LEARNED_GRID)
        filters["learned"] = learned.best_step
        print(f"tuned: learned {learned.best_params}", flush=True)
    return filters


def _with_likelihood(step, likelihood):
    return type(step)(**{**step.get_params(deep=False), "likelihood": likelihood})


def held_out(filters, user, nature, law, args):
    """Rows of every filter on the held-out seeds, with the ratio to the best sample-based filter's RMSE."""
    problems = problems_for(nature, user, args.seeds, args.n_cycles)
    results = compare_analyses(filters, problems, ensemble_size=args.ensemble_size, spin_up=args.spin_up,
                               random_state=0)
    rows = []
    print(f"{'seed':>4}  {'filter':<14} {'rmse':>7} {'ratio':>6} {'diverged':>8} {'s/cycle':>8}")
    for index, seed in enumerate(args.seeds):
        mine = [result for result in results if result["problem"] == index]
        best = min(result["rmse"] for result in mine if result["step"] in SAMPLE_BASED)
        for result in mine:
            row = {"law": law, "seed": seed, "filter": result["step"], "rmse": result["rmse"],
                   "ratio": result["rmse"] / best, "diverged": result["diverged"],
                   "seconds_per_cycle": result["ms_per_cycle"] / 1e3, "spread": result["spread"],
                   "crps": result["crps"]}
            rows.append(row)
            print(f"{seed:>4}  {row['filter']:<14} {row['rmse']:7.4f} {row['ratio']:6.3f} {str(row['diverged']):>8} "
                  f"{row['seconds_per_cycle']:8.4f}")
    for name in filters:
        mine = [row for row in rows if row["filter"] == name]
        print(f"mean  {name:<14} {np.mean([r['rmse'] for r in mine]):7.4f} "
              f"{np.mean([r['ratio'] for r in mine]):6.3f} {sum(r['diverged'] for r in mine):>8} "
              f"{np.mean([r['seconds_per_cycle'] for r in mine]):8.4f}")
    return rows


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    rows = []
    print(f"{args.n_variables} variables, {args.ensemble_size} members, {args.n_cycles} cycles (spin-up "
          f"{args.spin_up}), seeds {args.seeds}; user's sample {args.n_errors} errors, nature's {args.n_reference}")
    for law in args.laws:
        user, nature = records(law, args.n_errors, args.n_reference, args.n_variables)
        if args.train_only:
            learned_step(law, user, args)
            continue
        print(f"\n{law}: ", end="")
        rows += held_out(tune_filters(law, user, nature, args), user, nature, law, args)
    if args.out and rows:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
