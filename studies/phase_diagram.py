"""Phase diagram of collapse and learning: tail index x kernel growth x transform, on both benchmarks.

Three parts, one CSV row per fit in ``studies/results/phase_diagram.csv``
(rows already there are skipped, so an interrupted run resumes):

``grid``
    Pareto tail indices 0.4, 0.7, 1, 1.5, 2, 3 and the Gaussian control x the
    kernels of :data:`~sklearn_measattn.experiments.PHASE_KERNELS` (softmax,
    poly degree 2 and 1, compact, learned_poly, log, sigmoid) x no transform
    and symlog x the matrix inverse and the sheared swap, seeds 0 and 1.
``finding2``
    softmax on symlog data only: where does it cross the collapse threshold?
    Heavier tails (0.2, 0.3, 0.5), wider shear ranges (sheared swap,
    ``scale_range``) and worse-conditioned matrices (matrix inverse,
    ``condition``), a wider model, a deeper one, three times the training,
    and the reproduction's sizes.
``boundary``
    seed 2 at every grid cell near a boundary: seeds disagree on collapse or
    learning (one learned, another did not), or an ESS/n within a factor 2 of
    the collapse threshold, or a learned ratio within 0.1 of the learned
    margin where the learned rule can tell.

Usage (one process, one torch thread; about an hour on a shared CPU)::

    nohup nice -n 10 .venv/bin/python studies/phase_diagram.py > studies/results/phase_diagram.log 2>&1 &
    .venv/bin/python studies/render_phase_diagram.py     # any time: renders what the CSV holds

``--parts grid`` (or ``finding2``, ``boundary``) runs only those parts.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.experiments import (
    PHASE_FIELDS,
    PHASE_KERNELS,
    check_output_path,
    phase_cells,
    phase_diagram,
    print_progress,
    write_csv,
)
from sklearn_measattn.metrics import ATTENTION_ESS_THRESHOLD, LEARNED_MARGIN

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "studies" / "results" / "phase_diagram.csv"

TASKS = ("matrix_inverse", "sheared_swap")
TAILS = (0.4, 0.7, 1.0, 1.5, 2.0, 3.0, "gaussian")
SEEDS = (0, 1)
BOUNDARY_SEED = 2
#: The grid's budget: every kernel learns the Gaussian control at it (see the page).
BUDGET = dict(n_samples=256, n_points=64, n_test=32, epochs=30, d_model=16, n_heads=2, n_layers=2,
              dim_feedforward=32, lr=3e-3, batch_size=16)


def _sweep():
    """The finding-2 settings: (tasks, tail indices, changes to BUDGET, benchmark_params)."""
    wide = dict(d_model=32, n_heads=4, dim_feedforward=64)
    return [
        (TASKS, (0.2, 0.3, 0.5), {}, None),
        (("sheared_swap",), (0.4, 0.7, 1.5), {}, {"scale_range": (0.2, 5.0)}),
        (("sheared_swap",), (0.4, 0.7, 1.5), {}, {"scale_range": (0.05, 20.0)}),
        (("matrix_inverse",), (0.4, 0.7), {}, {"condition": 25.0}),
        (("matrix_inverse",), (0.4, 0.7), {}, {"condition": 400.0}),
        (TASKS, (0.4, 0.7), wide, None),
        (TASKS, (0.4, 0.7), {"n_layers": 4}, None),
        (TASKS, (0.4, 0.7), {"epochs": 90}, None),
        (TASKS, (0.4,), dict(wide, n_samples=512, n_points=128, n_test=64, lr=2e-3), None),
    ]


def read_rows(path=CSV):
    """The rows of the CSV (strings, as written), or [] when there is none yet."""
    if not Path(path).exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _appender(path):
    """Append one row to the CSV as soon as its fit is scored (header first when the file is new)."""
    def append(row):
        write_csv(path, [row], PHASE_FIELDS, append=True)
    return append


def near_boundary(cell):
    """Whether a grid cell sits near the collapse or the learned boundary (by the rules above)."""
    ess_low, ess_high = ATTENTION_ESS_THRESHOLD / 2, ATTENTION_ESS_THRESHOLD * 2
    decidable = cell["learned_undecided"] == 0
    return (cell["collapsed"] is None or cell["learned_split"]
            or ess_low <= cell["ess_min"] <= ess_high or ess_low <= cell["ess_max"] <= ess_high
            or (decidable and abs(cell["energy_vs_baseline"] - LEARNED_MARGIN) <= 0.1))


def _budget(budget):
    """A budget as ``phase_diagram`` keywords: the data sizes, and the rest as the fits' estimator template."""
    data = {key: budget[key] for key in ("n_samples", "n_points", "n_test")}
    model = {("max_epochs" if key == "epochs" else key): value for key, value in budget.items() if key not in data}
    return dict(data, estimator=MeasureTransformerRegressor(**model, device="cpu"))


def run(parts):
    torch.set_num_threads(1)
    check_output_path(CSV, what="CSV")
    append = _appender(CSV)
    common = dict(on_row=append, progress=print_progress, torch_threads=1)
    if "grid" in parts:
        for tail in TAILS:  # tail by tail, so that a partial CSV already draws whole columns
            phase_diagram(tasks=TASKS, kernels=tuple(PHASE_KERNELS), transforms=("none", "symlog"),
                          tail_indices=[tail], seeds=SEEDS, skip=read_rows(), **_budget(BUDGET), **common)
    if "finding2" in parts:
        for tasks, tails, change, extra in _sweep():
            phase_diagram(tasks=tasks, kernels=["softmax"], transforms=["symlog"], tail_indices=tails,
                          seeds=SEEDS, benchmark_params=extra, skip=read_rows(), **_budget(dict(BUDGET, **change)),
                          **common)
    if "boundary" in parts:
        grid = [r for r in read_rows() if r["benchmark_params"] == "" and all(
            str(r[k]) == str(BUDGET[k]) for k in ("n_samples", "n_points", "epochs", "d_model", "n_layers"))]
        for cell in phase_cells(grid):
            if cell["seeds"] >= 3 or not near_boundary(cell):
                continue
            tail = "gaussian" if cell["tail_index"] == float("inf") else cell["tail_index"]
            phase_diagram(tasks=[cell["task"]], kernels=[cell["kernel"]], transforms=[cell["transform"]],
                          tail_indices=[tail], seeds=[BOUNDARY_SEED], skip=read_rows(), **_budget(BUDGET), **common)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=("grid", "finding2", "boundary"),
                        default=("grid", "finding2", "boundary"), help="which parts to run (default: all)")
    args = parser.parse_args()
    CSV.parent.mkdir(parents=True, exist_ok=True)
    run(args.parts)
    print(f"done: {len(read_rows())} rows in {CSV}", flush=True)


if __name__ == "__main__":
    main()
