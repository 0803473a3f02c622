"""A local step fine-tuned through the cycle, against nature runs or against stand-ins of recorded forecasts.

Trains ``fit_local_analysis_through_cycle`` from a model file (``--start``;
default ``pretrained_analysis("local")``) and saves the model file, which
``studies/local_analysis.py --local-model`` then tunes and runs beside the
others. The page's fine-tunes start from the earlier shipped step (its second
round on its own cycle's forecasts), kept as
``studies/results/local_own_cycle.safetensors``::

    python studies/local_through_cycle.py --start studies/results/local_own_cycle.safetensors \
        --out studies/results/local_through_cycle.safetensors
    python studies/local_analysis.py --methods "local learned, through the cycle" \
        --local-model "local learned, through the cycle" studies/results/local_through_cycle.safetensors

``--stand-ins`` starts every batch from LETKF forecasts recorded as for the
shipped step (``record_forecasts(random_state=0)``), one member the stand-in
truth, instead of from a nature run; ``--lifetime 1 --spin-up 0`` makes every batch a fresh draw, scored
from the recorded prior on::

    python studies/local_through_cycle.py --start studies/results/local_own_cycle.safetensors --stand-ins \
        --lifetime 1 --spin-up 0 --out studies/results/local_through_cycle_stand_ins.safetensors

``--start`` trains a model file further (with another ``--seed``, for other runs)::

    python studies/local_through_cycle.py --start studies/results/local_through_cycle.safetensors --seed 1 \
        --out studies/results/local_through_cycle_longer.safetensors
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    LocalLearnedAnalysis,
    fit_local_analysis_through_cycle,
    pretrained_analysis,
    record_forecasts,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from attention_speed import cpu_description  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the model file")
    parser.add_argument("--iterations", type=int, default=2400)
    parser.add_argument("--unroll", type=int, default=5)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lifetime", type=int, default=8, help="iterations a batch of runs serves")
    parser.add_argument("--spin-up", type=int, default=20, help="cycles a new batch runs before it trains")
    parser.add_argument("--stand-ins", action="store_true",
                        help="start the runs from recorded LETKF forecasts, one member the stand-in truth")
    parser.add_argument("--start", default=None,
                        help="a local model file to fine-tune further (default: the shipped step)")
    args = parser.parse_args()
    print(cpu_description(), flush=True)
    start = time.perf_counter()
    start_step = pretrained_analysis("local") if args.start is None else LocalLearnedAnalysis(load_model(args.start))
    forecasts = None
    if args.stand_ins:
        forecasts = record_forecasts(random_state=0)
        print(f"recorded {len(forecasts)} LETKF forecasts in {time.perf_counter() - start:.0f} s", flush=True)
    step = fit_local_analysis_through_cycle(start_step, forecasts=forecasts, n_iterations=args.iterations,
                                            unroll=args.unroll, n_runs=args.runs, lr=args.lr,
                                            lifetime=args.lifetime, spin_up=args.spin_up, random_state=args.seed,
                                            verbose=1)
    save_model(step.estimator, args.out)
    print(f"trained in {time.perf_counter() - start:.0f} s; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
