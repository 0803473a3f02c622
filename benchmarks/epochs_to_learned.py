"""Epochs to the learned verdict on the main job, with a constant learning rate and with the one-cycle schedule.

The main job (``make run``: matrix inverse, Pareto 0.7, 512 training measures x
128 points, d_model 32, batch 16) is trained once per schedule; after every
epoch the 64 held-out measures are predicted and scored (energy distance in
symlog space). A fit has learned when that energy is below 0.8 x the better of
the no-model rows (pooled targets, identity), the rule of the comparison table.
Prints, per schedule, the held-out energy per epoch, the first epoch that meets
the rule, the first epoch within 5% of the constant schedule's final energy
and the seconds per epoch (one torch thread).

Usage::

    python benchmarks/epochs_to_learned.py [--kernel log] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from skorch.callbacks import Callback

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import load_benchmark
from sklearn_measattn.metrics import LEARNED_MARGIN, energy_distance, to_space
from sklearn_measattn.preprocessing import SymlogTransformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_speed import cpu_description  # noqa: E402

SCHEDULES = {  # name: (lr_schedule, lr, epochs)
    "constant 2e-3, 30 epochs (before)": ("constant", 2e-3, 30),
    "onecycle 4e-3, 16 epochs (after)": ("onecycle", 4e-3, 16),
}


def symlog_energy(y_true, y_pred):
    return float(energy_distance(to_space(y_true, "symlog"), to_space(y_pred, "symlog")))


class HeldOutEnergy(Callback):
    """The held-out energy [symlog] after every epoch.

    The estimator is not fitted during its fit, so this runs the net on symlog inputs and inverts symlog on
    its outputs, as ``predict`` does with ``transform="symlog"`` (a stateless transform).
    """

    def __init__(self, X_test, y_test):
        self.X_test, self.y_test = X_test, y_test
        self.energies = []

    def on_epoch_end(self, net, **kwargs):
        transform_X = transform_y = SymlogTransformer().fit(self.X_test.reshape(-1, 2))
        X_model = transform_X.transform(self.X_test.reshape(-1, 2)).reshape(self.X_test.shape)
        with torch.no_grad():
            net.module_.eval()
            out = net.module_(torch.as_tensor(X_model, dtype=torch.float32)).numpy().astype(np.float64)
            net.module_.train()
        y_pred = transform_y.inverse_transform(out.reshape(-1, 2)).reshape(out.shape)
        self.energies.append(symlog_energy(self.y_test, y_pred))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="log")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    common = {"tail": "pareto", "tail_index": 0.7, "n_points": 128}
    train = load_benchmark("matrix_inverse", n_samples=512, random_state=args.seed, **common)
    test = load_benchmark("matrix_inverse", n_samples=64, random_state=1_000_003 + args.seed, **common)
    X, y, X_test, y_test = train.data, train.target, test.data, test.target
    pool = y.reshape(-1, 2)
    pooled = np.stack([pool[np.random.default_rng(i).choice(len(pool), 128, replace=False)] for i in range(64)])
    threshold = LEARNED_MARGIN * min(symlog_energy(y_test, pooled), symlog_energy(y_test, X_test))
    print(f"CPU: {cpu_description()['model']}; 1 torch thread; kernel={args.kernel!r}, symlog, seed {args.seed}; "
          f"learned when held-out energy [symlog] < {threshold:.4f} ({LEARNED_MARGIN:g} x the best no-model row)")
    curves = {}
    for name, (schedule, lr, epochs) in SCHEDULES.items():
        model = MeasureTransformerRegressor(
            kernel=args.kernel, transform="symlog", d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=lr,
            lr_schedule=schedule, batch_size=16, max_epochs=epochs, random_state=args.seed, device="cpu",
        )
        recorder = HeldOutEnergy(X_test, y_test)
        model.set_params(callbacks=[recorder])
        start = time.perf_counter()
        model.fit(X, y)
        seconds = time.perf_counter() - start
        first = next((i + 1 for i, e in enumerate(recorder.energies) if e < threshold), None)
        final = symlog_energy(y_test, model.predict(X_test))
        print(f"\n{name}: learned at epoch {first} of {epochs}; final held-out energy {final:.4f}; "
              f"{seconds / epochs:.2f} s per epoch (with the per-epoch scoring)")
        print("  energy per epoch: " + " ".join(f"{e:.4f}" for e in recorder.energies))
        curves[name] = recorder.energies
    # The learned rule is met within a few epochs either way; what the epochs buy is the last few percent.
    before = next(iter(curves.values()))
    target = 1.05 * before[-1]
    print(f"\nfirst epoch within 5% of the constant schedule's final held-out energy ({target:.4f}):")
    for name, energies in curves.items():
        reached = next((i + 1 for i, e in enumerate(energies) if e <= target), None)
        print(f"  {name}: epoch {reached} of {len(energies)}")


if __name__ == "__main__":
    main()
