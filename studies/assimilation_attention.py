"""Attention ESS/n and output spread of the learned analysis models against the size of the innovation.

Run after ``studies/assimilation_study.py`` (it reads the trained models from
its cache)::

    python studies/assimilation_attention.py --out studies/results/assimilation_attention.csv

For every cached model (kernel/transform), scalar forecast ensembles of 40
standardised Gaussian members (20 draws) are given an innovation of growing
size (in prior standard deviations: with a forecast spread of 0.3, unit
Cauchy noise lands beyond 1000 of them, ``|noise| > 300``, with probability
``2 / (300 pi)``, about 0.2% of the observations, once every 12 cycles of 40),
under Cauchy noise with ``log(noise / spread) = 1.3`` (the
typical value in the cycle). Printed and written: the trained attention's
ESS/n (first layer, mean over heads and members, averaged over draws) and the
standard deviation of the predicted posterior members (1 = the prior's).
"""

from __future__ import annotations

import argparse
import csv
import pickle
from pathlib import Path

import numpy as np

from sklearn_measattn.experiments import format_number, format_table

INNOVATIONS = (0.5, 3.0, 30.0, 300.0, 3e3, 3e4)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default="studies/results/assimilation_models")
    parser.add_argument("--out", default="studies/results/assimilation_attention.csv")
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    members = rng.standard_normal((args.draws, 40))
    members = (members - members.mean(axis=1, keepdims=True)) / members.std(axis=1, ddof=1, keepdims=True)
    rows = []
    for path in sorted(Path(args.cache).glob("*.pkl")):
        with open(path, "rb") as f:
            model = pickle.load(f)
        name = path.stem.replace("_", "/", 1)
        for innovation in INNOVATIONS:
            X = np.stack([members, np.full_like(members, innovation), np.full_like(members, 1.3),
                          np.ones_like(members)], axis=-1)
            spread = model.predict(X)[..., 0].std(axis=1, ddof=1).mean()
            ess = model.attention_ess(X).mean()
            rows.append({"model": name, "innovation": innovation, "attention_ess": ess, "spread": spread})
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["model", "innovation", "attention_ess", "spread"])
        writer.writeheader()
        writer.writerows(rows)
    print(format_table(["model", "innovation", "ESS/n", "spread"],
                       [[r["model"], format_number(r["innovation"]), format_number(r["attention_ess"], 2),
                         format_number(r["spread"], 2)] for r in rows]))


if __name__ == "__main__":
    main()
