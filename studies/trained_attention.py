"""Attention-level collapse inside trained models: ESS / n of the first block's attention.

Trains softmax and log (no transform, and softmax with symlog) at the default ``compare`` sizes on
matrix_inverse / student_t 1.5 and measures, on held-out measures, the effective sample size
1/sum_j w_ij^2 of every query's attention weights in the first block (mean over queries, heads
and measures, as a fraction of n), next to the output-level spread ratio. Writes
``studies/results/trained_attention.csv``.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python studies/trained_attention.py
"""

import csv
import math
from pathlib import Path

import numpy as np
import torch

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import load_benchmark
from sklearn_measattn.metrics import spread_ratio

OUT = Path(__file__).resolve().parents[1] / "studies" / "results" / "trained_attention.csv"
SIZES = dict(d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=2e-3, batch_size=8, max_epochs=30,
             device="cpu")


def first_block_ess(model, X):
    module = model.net_.module_
    Xm = X if model.transform_X_ is None else model.transform_X_.transform(X.reshape(-1, X.shape[-1])).reshape(X.shape)
    with torch.no_grad():
        h = module.embedding(torch.as_tensor(Xm, dtype=torch.float32))
        attn = module.blocks[0].attention
        b, n, d = h.shape
        qkv = attn.in_proj(h).view(b, n, 3, attn.n_heads, d // attn.n_heads)
        q, k, _ = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        S = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(d // attn.n_heads)
        w = torch.softmax(attn.kernel.log_weight(S), dim=-1)
        ess = 1.0 / (w * w).sum(-1) / n
    return float(ess.mean()), float(ess.median())


def main():
    torch.set_num_threads(1)
    train = load_benchmark("matrix_inverse", n_samples=128, n_points=64, tail="student_t", tail_index=1.5,
                           random_state=0)
    test = load_benchmark("matrix_inverse", n_samples=64, n_points=64, tail="student_t", tail_index=1.5,
                          random_state=1_000_003)
    rows = []
    for kernel, transform in (("softmax", None), ("log", None), ("softmax", "symlog")):
        for trained in (False, True):
            model = MeasureTransformerRegressor(kernel=kernel, transform=transform, random_state=0,
                                                **dict(SIZES, max_epochs=30 if trained else 1))
            model.fit(train.data, train.target)
            ess_mean, ess_median = first_block_ess(model, test.data)
            sr = float(np.nanmedian(spread_ratio(test.target, model.predict(test.data), multioutput="raw_values")))
            row = {"kernel": kernel, "transform": transform or "none", "epochs": 30 if trained else 1,
                   "ess_fraction_mean": ess_mean, "ess_fraction_median": ess_median, "spread_ratio_median": sr}
            print(row, flush=True)
            rows.append(row)
    with open(OUT, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
