"""A training step's cost: the energy loss against the model, peak memory, a hand-written baseline, the main job.

Everything is measured in this one process run on this machine, side by side:

1. **loss / model**: the energy loss's forward+backward time over the model's
   forward+backward time (``MeasureTransformer``, log kernel, 2-D points), at
   N = 256, 1024, 4096 and 16384 points, with the loss the package trains with
   and, up to N = 4096, the previous dense implementation (broadcast pairwise
   differences through autograd; kept here only for the comparison);
2. **memory**: the peak resident memory of one training step (model, loss,
   backward, Adam) at each N, each in a fresh subprocess;
3. **baseline**: a training step of the package (log and softmax kernels,
   energy loss) against what a user would write by hand: ``nn.TransformerEncoder``
   (post-norm, softmax) with the same sizes and an energy loss from three
   ``torch.cdist`` calls, at N = 256, B = 16 and N = 2048, B = 8;
4. **main job epoch**: the estimator's epoch on the main job's data (matrix
   inverse, Pareto 0.7, 128 measures x 256 points, batch 16, log/symlog),
   with the package's loss and with the previous one;
5. **FLOPs**: each step's floating-point operations in matrix products and
   their rate against the machine's float32 FMA peak (derived as in
   ``attention_speed.py``).

Times are medians over repeats (min and max beside them). The targets are
printed with each table.

Usage::

    python benchmarks/training_speed.py            # everything, about 10 minutes on 2 cores
    python benchmarks/training_speed.py --quick    # smaller sizes, fewer repeats, about 2 minutes
    python benchmarks/training_speed.py --sections loss baseline --threads 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.losses import energy_loss
from sklearn_measattn.transformer import MeasureTransformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_speed import cpu_description, fma_peak_gflops  # noqa: E402

SECTIONS = ("loss", "memory", "baseline", "epoch")
MODEL = {"d_model": 32, "n_heads": 4, "n_layers": 2, "dim_feedforward": 64}


# --------------------------------------------------------------------------- the two losses
def previous_energy_loss(x, y):
    """The energy loss as the package computed it before: dense pairwise tensors through autograd."""

    def moment(u, v):
        square = (u.unsqueeze(2) - v.unsqueeze(1)).square().sum(-1)
        zero = square == 0
        safe = torch.where(zero, torch.ones_like(square), square)
        return torch.where(zero, torch.zeros_like(square), safe.sqrt()).mean(dim=(1, 2))

    return (2.0 * moment(x, y) - moment(x, x) - moment(y, y)).mean()


def cdist_energy_loss(x, y):
    """What a user writes by hand: three ``torch.cdist`` calls."""
    return (2.0 * torch.cdist(x, y).mean(dim=(1, 2)) - torch.cdist(x, x).mean(dim=(1, 2))
            - torch.cdist(y, y).mean(dim=(1, 2))).mean()


# --------------------------------------------------------------------------- models
def package_model(kernel, d=2):
    return MeasureTransformer(d, d, kernel=kernel, random_state=0, **MODEL)


class HandWritten(nn.Module):
    """Pointwise embedding, ``nn.TransformerEncoder`` (post-norm, softmax), pointwise head."""

    def __init__(self, d=2):
        super().__init__()
        self.embedding = nn.Linear(d, MODEL["d_model"])
        layer = nn.TransformerEncoderLayer(MODEL["d_model"], MODEL["n_heads"], MODEL["dim_feedforward"], dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, MODEL["n_layers"], enable_nested_tensor=False)
        self.head = nn.Linear(MODEL["d_model"], d)

    def forward(self, x):
        return self.head(self.encoder(self.embedding(x)))


def step_flops(n, batch, d=2):
    """Floating-point operations of a step's matrix products (forward + backward = 3x forward)."""
    dm, ff, layers = MODEL["d_model"], MODEL["dim_feedforward"], MODEL["n_layers"]
    linear = d * dm + layers * (3 * dm * dm + dm * dm + 2 * dm * ff) + dm * d
    forward = 2 * batch * n * linear + layers * 4 * batch * n * n * dm  # scores and weighted values
    return 3 * forward


# --------------------------------------------------------------------------- timing
def timed(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times)


def data(n, batch, seed=0, d=2):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, d, generator=generator), torch.randn(batch, n, d, generator=generator) + 0.5


def model_fwd_bwd(model, x, grad_out):
    def run():
        model.zero_grad(set_to_none=True)
        model(x).backward(grad_out)
    return run


def loss_fwd_bwd(loss, pred, y):
    def run():
        pred.grad = None
        loss(pred, y).backward()
    return run


def training_step(model, loss, x, y):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def run():
        optimizer.zero_grad(set_to_none=True)
        loss(model(x), y).backward()
        optimizer.step()
    return run


def fmt(triple):
    med, lo, hi = triple
    return f"{med * 1e3:9.1f} ({lo * 1e3:.1f}-{hi * 1e3:.1f})"


# --------------------------------------------------------------------------- sections
def section_loss(args):
    print("\n## 1. energy loss fwd+bwd / model fwd+bwd (log kernel), ms: median (min-max)")
    print("target: at N = 4096, B = 8 the loss at most 0.35x the model (the previous loss: 2.4x)")
    print(f"| {'N':>6} | {'B':>2} | {'model fwd+bwd':>24} | {'loss fwd+bwd':>24} | {'loss/model':>10} | "
          f"{'previous loss':>24} | {'previous/model':>14} |")
    print("|" + "|".join("-" * w for w in (8, 4, 26, 26, 12, 26, 16)) + "|")
    model = package_model("log")
    for n, batch in args.loss_sizes:
        x, y = data(n, batch)
        repeats = args.repeats if n <= 4096 else max(2, args.repeats // 3)
        model_time = timed(model_fwd_bwd(model, x, torch.randn(batch, n, 2)), repeats)
        pred = y.clone().mul_(0.9).requires_grad_(True)
        loss_time = timed(loss_fwd_bwd(energy_loss, pred, y), repeats)
        previous, previous_ratio = "-", "-"
        if n <= args.previous_max_n:
            old = timed(loss_fwd_bwd(previous_energy_loss, pred, y), max(2, repeats // 2))
            previous, previous_ratio = fmt(old), f"{old[0] / model_time[0]:.2f}"
        print(f"| {n:>6} | {batch:>2} | {fmt(model_time):>24} | {fmt(loss_time):>24} | "
              f"{loss_time[0] / model_time[0]:>10.3f} | {previous:>24} | {previous_ratio:>14} |", flush=True)


MEMORY_CHILD = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[5])
from training_speed import package_model, previous_energy_loss, data
from sklearn_measattn.losses import energy_loss
torch.set_num_threads(int(sys.argv[4]))
n, batch, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
loss = energy_loss if which == "package" else previous_energy_loss
model = package_model("log")
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
warm_x, warm_y = data(64, 2)
loss(model(warm_x), warm_y).backward()  # pages in torch's kernels and the fused library
x, y = data(n, batch)

def status_kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))

with open("/proc/self/clear_refs", "w") as clear:  # resets the peak (VmHWM) to the current RSS
    clear.write("5")
before = status_kib("VmRSS")
start = time.perf_counter()
optimizer.zero_grad()
loss(model(x), y).backward()
optimizer.step()
elapsed = time.perf_counter() - start
peak = status_kib("VmHWM")
print(json.dumps({"peak_mib": peak / 1024, "step_mib": max(peak - before, 0) / 1024, "seconds": elapsed}))
"""


def section_memory(args):
    print("\n## 2. peak memory of one training step (model log kernel + energy loss + backward + Adam), fresh process")
    print("target: N = 16384, B = 4 well under 6 GiB")
    print("process peak: the resident memory's high-water mark during the step (reset just before it, Linux);")
    print("step: that peak minus the resident memory before the step")
    print(f"| {'N':>6} | {'B':>2} | {'loss':>8} | {'process peak MiB':>16} | {'step MiB':>9} | {'step s':>7} |")
    print("|" + "|".join("-" * w for w in (8, 4, 10, 18, 11, 9)) + "|")
    here = str(Path(__file__).resolve().parent)
    for n, batch in args.memory_sizes:
        for which in ("package", "previous"):
            if which == "previous" and n > args.previous_max_n:
                continue
            result = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(n), str(batch), which,
                                     str(torch.get_num_threads()), here], capture_output=True, text=True)
            if result.returncode != 0:
                print(f"| {n:>6} | {batch:>2} | {which:>8} | failed: {result.stderr.strip()[-200:]}")
                continue
            row = json.loads(result.stdout.strip().splitlines()[-1])
            print(f"| {n:>6} | {batch:>2} | {which:>8} | {row['peak_mib']:>16.0f} | {row['step_mib']:>9.0f} | "
                  f"{row['seconds']:>7.2f} |", flush=True)


def section_baseline(args, peak):
    print("\n## 3. training step (forward, energy loss, backward, Adam) against a hand-written one, ms")
    print("hand-written: nn.TransformerEncoder post-norm softmax, same sizes, energy from three torch.cdist calls")
    print("target: package log step / hand-written at most 1.0x at N = 256, B = 16 and 0.8x at N = 2048, B = 8")
    print(f"| {'N':>5} | {'B':>2} | {'step':>22} | {'median (min-max) ms':>24} | {'/ hand-written':>14} | "
          f"{'GFLOP/s':>8} | {'% FMA peak':>10} |")
    print("|" + "|".join("-" * w for w in (7, 4, 24, 26, 16, 10, 12)) + "|")
    for n, batch in args.baseline_sizes:
        x, y = data(n, batch)
        torch.manual_seed(0)
        steps = {
            "hand-written softmax": training_step(HandWritten(), cdist_energy_loss, x, y),
            "package log": training_step(package_model("log"), energy_loss, x, y),
            "package softmax": training_step(package_model("softmax"), energy_loss, x, y),
        }
        # interleave the repeats so that load from elsewhere hits all alike
        samples = {name: [] for name in steps}
        for fn in steps.values():
            fn()
        for _ in range(args.repeats):
            for name, fn in steps.items():
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
        base = statistics.median(samples["hand-written softmax"])
        flops = step_flops(n, batch)
        for name, values in samples.items():
            med = statistics.median(values)
            gflops = flops / med / 1e9
            share = f"{100 * gflops / peak:.1f}" if peak else "-"
            print(f"| {n:>5} | {batch:>2} | {name:>22} | {fmt((med, min(values), max(values))):>24} | "
                  f"{med / base:>14.2f} | {gflops:>8.1f} | {share:>10} |", flush=True)


def section_epoch(args):
    print("\n## 4. the main job's epoch: estimator fit, matrix inverse Pareto(0.7), 128 x 256, batch 16, log/symlog")
    print("target: the package's loss at least 2x faster per epoch than the previous one; median epoch after the first")
    X, y = make_matrix_inverse(n_samples=128, n_points=256, tail="pareto", tail_index=0.7, random_state=0)
    X, y = np.asarray(X, np.float32), np.asarray(y, np.float32)
    epochs = {"package": [], "previous": []}
    losses = {"package": "energy", "previous": lambda x, y_, *weights: previous_energy_loss(x, y_)}
    for _ in range(args.epoch_rounds):
        for name, loss in losses.items():
            model = MeasureTransformerRegressor(kernel="log", transform="symlog", batch_size=16, lr=2e-3,
                                                max_epochs=args.epochs, loss=loss, random_state=0, **MODEL)
            model.fit(X, y)
            epochs[name].extend(float(d) for d in model.history_[1:, "dur"])
    for name, values in epochs.items():
        print(f"{name:>9} loss: median epoch {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f}, {len(values)} epochs)")
    ratio = statistics.median(epochs["previous"]) / statistics.median(epochs["package"])
    print(f"summary: epoch speed-up {ratio:.2f}x ({'met' if ratio >= 2 else 'NOT met'})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (default 7)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    parser.add_argument("--peak-gflops", type=float, default=None, help="the machine's float32 peak, if known")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    args.repeats = args.repeats or (3 if args.quick else 7)
    if args.quick:
        args.loss_sizes = [(256, 8), (1024, 8), (4096, 2)]
        args.memory_sizes = [(1024, 8), (4096, 4)]
        args.baseline_sizes = [(256, 16), (1024, 8)]
        args.previous_max_n, args.epochs, args.epoch_rounds = 1024, 3, 1
    else:
        args.loss_sizes = [(256, 8), (1024, 8), (4096, 8), (16384, 2)]
        args.memory_sizes = [(256, 8), (1024, 8), (4096, 8), (16384, 4)]
        args.baseline_sizes = [(256, 16), (2048, 8)]
        args.previous_max_n, args.epochs, args.epoch_rounds = 4096, 4, 2

    cpu = cpu_description()
    threads = torch.get_num_threads()
    peak, how = (args.peak_gflops, f"{args.peak_gflops:.0f} GFLOP/s (given)") if args.peak_gflops else \
        fma_peak_gflops(cpu, threads)
    print(f"# training_speed: {cpu['model']} ({cpu['vector']}), torch {torch.__version__}, {threads} threads, "
          f"python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"# model: MeasureTransformer(2, 2, {', '.join(f'{k}={v}' for k, v in MODEL.items())}), 2-D points")
    print(f"# FMA peak: {how}")
    print(f"# command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    start = time.perf_counter()
    if "loss" in args.sections:
        section_loss(args)
    if "memory" in args.sections:
        section_memory(args)
    if "baseline" in args.sections:
        section_baseline(args, peak)
    if "epoch" in args.sections:
        section_epoch(args)
    print(f"\n# total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
