"""Time (and make) the shipped local learned analysis with the shipped recipe, on this CPU.

Prints the CPU, the time of each stage (recording the LETKF forecasts, the
first round's fit, the second round) and the total against the 30-minute
budget on 2 cores; ``--out`` saves the model file. The recipe has two
rounds. The first, ``fit_local_analysis``, trains on forecasts of a cycled
LETKF under Gaussian noise, one member of each the stand-in truth. The
second (``--second cycle``, the shipped one) trains through the cycle
(``fit_local_analysis_through_cycle``): every run starts from one of the same
recorded forecasts with a member as the stand-in truth, which the Lorenz-96
model carries forward, and is scored over its first five cycles. The file
shipped as ``pretrained_analysis("local")`` is made this way. ``--second
own-cycle`` is the earlier second round: it records forecasts from the first
step's own cycle under Gaussian and Cauchy noise and trains it further on them
and the first round's forecasts, at a quarter of the learning rate. ``--first
FILE`` takes the first round from a model file (its fitting time is then not
in the total). With ``--target truth`` the rounds on recorded forecasts train
against the recorded truth instead of a stand-in member (same forecasts,
draws and seed): what the stand-in costs, where the truth is known.

Usage::

    python benchmarks/local_analysis_training.py --out local.safetensors
    python benchmarks/local_analysis_training.py --rounds 1    # the first round only
    python benchmarks/local_analysis_training.py --second own-cycle --out earlier.safetensors
    python benchmarks/local_analysis_training.py --rounds 1 --target truth --out truth.safetensors
    python benchmarks/local_analysis_training.py --quick       # a small recipe, to check the script (~1 min)
    python benchmarks/local_analysis_training.py --errors errors.npy --student-t --out mine.safetensors  # your record

``--first-epochs``, ``--iterations`` and ``--sizes`` vary the recipe (the
first round's epochs, the second round's iterations and the ensemble sizes
its batches take in turn, a size named twice drawn twice as often): the
variants the local analysis page compares with the shipped recipe.

    python benchmarks/local_analysis_training.py --first-epochs 5 --iterations 4200 --sizes 10 20 40 10 20
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    CauchyNoise,
    GaussianNoise,
    LocalLearnedAnalysis,
    SampledNoise,
    fit_local_analysis,
    fit_local_analysis_through_cycle,
    record_forecasts,
)

sys.path.insert(0, str(Path(__file__).parent))
from attention_speed import cpu_description  # noqa: E402

BUDGET_SECONDS = 30 * 60
#: The first round's epochs; the second round: its own cycle's forecasts (per law and setting), epochs, learning rate.
FIRST_EPOCHS = 10
SECOND = dict(n_cycles=300, spin_up=50, every=3, max_epochs=3, lr=5e-4)
#: The second round through the cycle: iterations of four runs, each from a recorded forecast, five cycles long.
THROUGH_CYCLE = dict(n_iterations=3600, n_runs=4, unroll=5, lifetime=1, spin_up=0, lr=2e-4)
QUICK = dict(ensemble_sizes=(10,), dt_obs=(0.1,), observation_spacings=(2,), n_cycles=120, spin_up=20)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="save the model file here")
    parser.add_argument("--quick", action="store_true", help="a small recipe (smoke test of the script)")
    parser.add_argument("--rounds", type=int, choices=(1, 2), default=2)
    parser.add_argument("--second", choices=("cycle", "own-cycle"), default="cycle",
                        help="the second round: on forecasts of the first step's own cycle, or through the cycle")
    parser.add_argument("--first", default=None, help="a model file to take as the first round")
    parser.add_argument("--first-epochs", type=int, default=None,
                        help=f"the first round's epochs (default {FIRST_EPOCHS})")
    parser.add_argument("--iterations", type=int, default=THROUGH_CYCLE["n_iterations"],
                        help="the second round's iterations (through the cycle)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="the ensemble sizes the second round's batches take in turn (default: every size "
                             "recorded, 10 20 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="workers for recording the forecasts and making the first round's windows (default -1: "
                             "every core); the model does not depend on it")
    parser.add_argument("--student-t", action="store_true",
                        help="weight the observations of the local ETKF analysis the network corrects by their "
                             "Student-t precision factor (see LETKF(student_t=True))")
    parser.add_argument("--errors", default=None,
                        help="a record of observation errors (.npy, one dimension): train for SampledNoise(errors), "
                             "resampled, instead of the shipped laws")
    parser.add_argument("--target", choices=("stand-in", "truth"), default="stand-in",
                        help="train against a stand-in member (the shipped recipe) or the recorded truth")
    args = parser.parse_args(argv)
    if args.first is not None and args.first_epochs is not None:
        parser.error("--first takes the first round from a file: --first-epochs would not be used, leave it out")
    first_epochs = FIRST_EPOCHS if args.first_epochs is None else args.first_epochs
    if args.rounds == 2 and args.second == "cycle" and args.target == "truth":
        parser.error("--second cycle trains against stand-ins of the recorded forecasts: with --target truth "
                     "pass --second own-cycle (or --rounds 1)")
    noise = None if args.errors is None else SampledNoise(np.load(args.errors))
    print(f"{cpu_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads"
          f"{'' if noise is None else f'; noise: {noise!r}, tail {noise.tail:.3f}'}", flush=True)
    start = time.perf_counter()
    truth = args.target == "truth"
    forecasts, truths = record_forecasts(**(QUICK if args.quick else {}), return_truth=True, random_state=args.seed,
                                         n_jobs=args.n_jobs)
    print(f"recorded {len(forecasts)} LETKF forecasts in {time.perf_counter() - start:.0f} s", flush=True)
    params = {"max_epochs": 1, "d_model": 16} if args.quick else {"max_epochs": first_epochs}
    if args.first is None:
        step = fit_local_analysis(noise, forecasts=forecasts, truths=truths if truth else None, random_state=args.seed,
                                  student_t=args.student_t, verbose=1, n_jobs=args.n_jobs, **params)
    else:
        step = LocalLearnedAnalysis(load_model(args.first))
        if step.estimator.analysis_recipe_.get("letkf_student_t", False) != args.student_t:
            parser.error(f"--first {args.first} was trained with student_t="
                         f"{step.estimator.analysis_recipe_.get('letkf_student_t', False)}: pass --student-t to match")
    pairs = step.estimator.analysis_recipe_["trained_by"]["n_pairs"]
    print(f"first round: trained on {sum(pairs.values())} windows ({pairs}); {time.perf_counter() - start:.0f} s "
          "so far", flush=True)
    if args.rounds == 2 and args.second == "cycle":
        step = fit_local_analysis_through_cycle(step, noise, forecasts=forecasts, random_state=args.seed, verbose=1,
                                                ensemble_sizes=args.sizes,
                                                **{**THROUGH_CYCLE, "n_iterations": 20 if args.quick else args.iterations})
    elif args.rounds == 2:
        own, own_truths = record_forecasts(
            **({**QUICK, "n_cycles": SECOND["n_cycles"] // 2} if args.quick else
               dict(n_cycles=SECOND["n_cycles"], spin_up=SECOND["spin_up"])),
            every=SECOND["every"], analysis=step, noise=[GaussianNoise(), CauchyNoise()], return_truth=True,
            random_state=args.seed + 1, n_jobs=args.n_jobs)
        print(f"recorded {len(own)} forecasts of the first step's own cycle; {time.perf_counter() - start:.0f} s "
              "so far", flush=True)
        step = fit_local_analysis(noise, forecasts=own + forecasts, truths=own_truths + truths if truth else None,
                                  warm_start=step, student_t=args.student_t, random_state=args.seed, verbose=1,
                                  n_jobs=args.n_jobs,
                                  max_epochs=1 if args.quick else SECOND["max_epochs"], lr=SECOND["lr"])
    total = time.perf_counter() - start
    print(f"total {total:.0f} s = {total / BUDGET_SECONDS:.2f} of the 30-minute budget", flush=True)
    if args.out:
        save_model(step.estimator, args.out)
        print(f"saved {args.out}")


if __name__ == "__main__":
    main()
