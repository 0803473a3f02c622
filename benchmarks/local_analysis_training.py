"""Time (and make) the shipped local learned analysis: ``fit_local_analysis`` with the shipped recipe, on this CPU.

Prints the CPU, the time of each stage (recording the LETKF forecasts, making
the training pairs, fitting) and the total against the 30-minute budget on 2
cores; ``--out`` saves the model file (the one shipped as
``pretrained_analysis("local")`` is made this way).

Usage::

    python benchmarks/local_analysis_training.py --out local.safetensors
    python benchmarks/local_analysis_training.py --quick       # a small recipe, to check the script (~1 min)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from sklearn_measattn import save_model
from sklearn_measattn.assimilation import fit_local_analysis, record_forecasts

sys.path.insert(0, str(Path(__file__).parent))
from attention_speed import cpu_description  # noqa: E402

BUDGET_SECONDS = 30 * 60


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="save the model file here")
    parser.add_argument("--quick", action="store_true", help="a small recipe (smoke test of the script)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"{cpu_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    start = time.perf_counter()
    if args.quick:
        forecasts = record_forecasts(ensemble_sizes=(10,), dt_obs=(0.1,), observation_spacings=(2,), n_cycles=120,
                                     spin_up=20, random_state=args.seed)
    else:
        forecasts = record_forecasts(random_state=args.seed)
    recorded = time.perf_counter() - start
    print(f"recorded {len(forecasts)} forecasts in {recorded:.0f} s", flush=True)
    params = {"max_epochs": 1, "d_model": 16} if args.quick else {}
    if args.epochs is not None:
        params["max_epochs"] = args.epochs
    step = fit_local_analysis(forecasts=forecasts, random_state=args.seed, verbose=1,
                              **params)
    total = time.perf_counter() - start
    pairs = step.estimator.analysis_recipe_["trained_by"]["n_pairs"]
    print(f"trained on {sum(pairs.values())} windows ({pairs}) in {total - recorded:.0f} s", flush=True)
    print(f"total {total:.0f} s = {total / BUDGET_SECONDS:.2f} of the 30-minute budget", flush=True)
    if args.out:
        save_model(step.estimator, args.out)
        print(f"saved {args.out}")


if __name__ == "__main__":
    main()
