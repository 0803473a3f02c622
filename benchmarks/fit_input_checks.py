"""What a fit call spends on its input before training, against an epoch of training, on a large training set.

A warm-started fit (``warm_start=True``, one epoch a call, as
``fit_local_analysis`` trains one ensemble size after another) checks and
converts its whole training set on every call. On hundreds of megabytes
those passes are not free: every temporary as large as the data is written
into fresh pages. This script times, on windows shaped as the local
analysis's (``--n-windows`` measures of 40 members and 48 features, float64,
the size of one ensemble size's share of the shipped recipe by default):

1. the float32-range check as the package runs it (two reductions, no
   temporary) and as it ran before (an elementwise finiteness test, then the
   largest absolute value: two temporaries);
2. the conversion to float32 that a float64 training set pays every call
   (a float32 one is not copied);
3. one epoch of ``MeasureTransformerRegressor.fit`` on float64 and on float32
   data (the recipe's network: softmax, energy loss, ``d_model=32``, 2 layers,
   batch 256), and the epoch's time over the first.

Each figure is the median of ``--repeats`` calls (min and max beside it),
all in this one process on this machine.

Usage::

    python benchmarks/fit_input_checks.py                  # 168480 windows, about 5 minutes on 2 cores
    python benchmarks/fit_input_checks.py --n-windows 20000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from sklearn_measattn import MeasureTransformerRegressor

sys.path.insert(0, str(Path(__file__).parent))
from attention_speed import cpu_description  # noqa: E402
from training_speed import timed  # noqa: E402

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def float32_range_check(X):
    """The check as the package runs it before training: two reductions, no temporary (NaN propagates through both)."""
    low, high = float(np.min(X)), float(np.max(X))
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError("non-finite")
    if max(-low, high) > _FLOAT32_MAX:
        raise ValueError("beyond float32")


def previous_float32_range_check(X):
    """The check as it was: an elementwise finiteness test, then the largest absolute value."""
    if not np.all(np.isfinite(X)):
        raise ValueError("non-finite")
    if float(np.max(np.abs(X))) > _FLOAT32_MAX:
        raise ValueError("beyond float32")


def show(label, figures, against=None):
    median, low, high = figures
    ratio = "" if against is None else f"; {median / against:.3f} of an epoch"
    print(f"{label:<44} median {median:8.3f} s (min {low:.3f}, max {high:.3f}){ratio}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-windows", type=int, default=168480)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epoch-repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"{cpu_description()}; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"{args.n_windows} windows of 40 members x 48 features", flush=True)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n_windows, 40, 48))
    y = rng.standard_normal((args.n_windows, 1, 1))
    X32 = X.astype(np.float32)
    model = MeasureTransformerRegressor(kernel="softmax", residual=True, loss="energy", d_model=32, n_heads=4,
                                        n_layers=2, dim_feedforward=64, batch_size=256, max_epochs=1,
                                        warm_start=True, random_state=0)
    model.fit(X32[:512], y[:512])
    epochs = {"float64": [], "float32": []}
    for _ in range(args.epoch_repeats):  # interleaved, so that neither is always the first
        for name, data in (("float64", X), ("float32", X32)):
            epochs[name].append(timed(lambda data=data: model.fit(data, y), 1, warmup=0)[0])
    epoch64, epoch32 = ((statistics.median(t), min(t), max(t)) for t in epochs.values())
    epoch = epoch32[0]
    show("float32-range check, now", timed(lambda: float32_range_check(X), args.repeats, warmup=0), epoch)
    show("float32-range check, before", timed(lambda: previous_float32_range_check(X), args.repeats, warmup=0), epoch)
    show("conversion to float32 (float64 data)", timed(lambda: X.astype(np.float32), args.repeats, warmup=0), epoch)
    show("fit, one epoch, float64 data", epoch64, epoch)
    show("fit, one epoch, float32 data", epoch32, epoch)


if __name__ == "__main__":
    main()
