"""The phase diagram: thresholds, cells, the agreement table, resuming, the display, bad input."""

import csv
import math

import numpy as np
import pytest

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.experiments import (
    PHASE_FIELDS,
    PhaseDiagramDisplay,
    _phase,
    compare_kernels,
    kernel_threshold,
    phase_agreement,
    phase_cells,
    phase_diagram,
    phase_key,
    write_csv,
)

TINY_NETWORK = dict(max_epochs=1, d_model=8, n_heads=2, n_layers=1, dim_feedforward=16, device="cpu")
TINY = dict(n_samples=8, n_points=16, n_test=4, estimator=MeasureTransformerRegressor(**TINY_NETWORK))


def _row(alpha, collapsed, *, kernel="log", transform="none", seed=0, task="matrix_inverse", ess=0.5, ratio=1.0,
         learned=False, status="ok", degree=math.nan):
    return {"task": task, "tail": "gaussian" if alpha is None else "pareto",
            "tail_index": math.nan if alpha is None else alpha, "kernel": kernel, "transform": transform,
            "seed": seed, "collapsed": collapsed, "learned": learned, "attention_ess": ess,
            "energy_vs_baseline": ratio, "status": status, "learned_degree": degree}


def test_thresholds_follow_the_kernels_growth():
    raw = [kernel_threshold(k) for k in ("softmax", "poly2", "poly", "compact", "log", "sigmoid")]
    assert raw == [math.inf, 3.0, 2.0, 2.0, 1.0, 1.0]
    assert kernel_threshold("learned_poly") is None
    assert kernel_threshold("learned_poly", learned_degree=0.5) == 1.5
    assert kernel_threshold("log", transform="symlog") == 0.0
    assert kernel_threshold("softmax", transform="symlog") is None


def test_agreement_counts_each_way_of_failing():
    rows = [
        _row(0.7, True),  # log diverges at 0.7 and collapsed: agree
        _row(1.5, False),  # converges, not collapsed: agree
        _row(2.0, True),  # converges but collapsed: collapsed above
        _row(3.0, False, kernel="softmax"),  # diverges (inf) but did not collapse: survived below
        _row(0.4, True, seed=0), _row(0.4, False, seed=1),  # seeds disagree: near boundary
        _row(None, False, kernel="softmax"),  # Gaussian control: converges, agree
        _row(0.7, False, kernel="softmax", transform="symlog"),  # no fixed threshold
        _row(0.7, None, kernel="poly", status="diverged"),  # diverged counts as collapsed; 0.7 <= 2: agree
    ]
    table = phase_agreement(rows)
    total = table[-1]
    assert (total["task"], total["kernel"]) == ("all", "all")
    assert total["cells"] == 8
    assert (total["agree"], total["collapsed_above"], total["survived_below"]) == (4, 1, 1)
    assert (total["near_boundary"], total["no_threshold"]) == (1, 1)
    per_kernel = {(t["transform"], t["kernel"]): t for t in table if t["task"] == "matrix_inverse"}
    assert per_kernel[("none", "softmax")]["survived_below"] == 1
    assert per_kernel[("none", "log")]["cells"] == 4
    assert per_kernel[("none", "all")]["cells"] == 7


def test_agreement_on_the_weights_threshold():
    rows = [_row(0.7, False), _row(1.5, False, kernel="poly"), _row(0.7, True, kernel="poly")]
    values = phase_agreement(rows)[-1]
    weights = phase_agreement(rows, integral="weights")[-1]
    assert (values["agree"], values["survived_below"]) == (1, 2)
    assert (weights["agree"], weights["survived_below"]) == (3, 0)
    with pytest.raises(ValueError, match="integral"):
        phase_agreement(rows, integral="both")


def test_learned_poly_threshold_comes_from_its_degree():
    low = [_row(1.5, False, kernel="learned_poly", degree=0.2)]  # threshold 1.2 < 1.5: agree
    high = [_row(1.5, False, kernel="learned_poly", degree=1.0)]  # threshold 2.0 >= 1.5: survived below
    assert phase_agreement(low)[-1]["agree"] == 1
    assert phase_agreement(high)[-1]["survived_below"] == 1


def test_cells_combine_seeds_from_csv_text():
    rows = [{k: str(v) for k, v in _row(0.7, c, seed=s, ess=e).items()}
            for s, c, e in ((0, True, 0.02), (1, True, 0.04))]
    cell, = phase_cells(rows)
    assert cell["collapsed"] is True and cell["learned"] is False
    assert cell["seeds"] == 2 and cell["ess_min"] == pytest.approx(0.02) and cell["ess_max"] == pytest.approx(0.04)


def test_phase_key_survives_a_csv_round_trip(tmp_path):
    row = {field: "" for field in PHASE_FIELDS}
    row.update(task="sheared_swap", tail="gaussian", tail_index=math.nan, kernel="poly2", transform="symlog", seed=1,
               n_samples=8, n_points=16, n_test=4, epochs=1, d_model=8, n_heads=2, n_layers=1,
               benchmark_params='{"scale_range": [0.2, 5.0]}', attention_ess=0.25)
    path = tmp_path / "rows.csv"
    write_csv(path, [row], PHASE_FIELDS, append=True)
    with open(path, newline="") as handle:
        back, = list(csv.DictReader(handle))
    assert phase_key(back) == phase_key(row)


def test_resuming_skips_rows_present(monkeypatch):
    calls = []

    def fake_fit(row, extra, **model):
        calls.append(row["seed"])
        return dict(row, status="ok")

    monkeypatch.setattr(_phase, "_fit_cell", fake_fit)
    grid = dict(tasks=["sheared_swap"], kernels=["log"], transforms=["none"], tail_indices=[0.7], **TINY)
    first = phase_diagram(seeds=[0], **grid)
    assert calls == [0]
    as_text = [{k: str(v) for k, v in row.items()} for row in first]
    written = []
    again = phase_diagram(seeds=[0, 1], skip=as_text, on_row=written.append, **grid)
    assert calls == [0, 1]  # seed 0 was present, only seed 1 ran
    assert [r["seed"] for r in again] == [1] and written == again
    longer = MeasureTransformerRegressor(**dict(TINY_NETWORK, max_epochs=2))
    other_size = phase_diagram(seeds=[0], skip=as_text, **dict(grid, estimator=longer))
    assert len(other_size) == 1  # another budget is another fit


def test_one_tiny_fit_fills_the_row():
    rows = phase_diagram(tasks=["matrix_inverse"], kernels=["learned_poly"], transforms=["symlog"],
                         tail_indices=["gaussian"], seeds=[0], **TINY)
    row, = rows
    assert set(PHASE_FIELDS) <= set(row)
    assert row["tail"] == "gaussian" and math.isnan(row["tail_index"])
    assert row["learned_degree"] > 0 and row["threshold"] == 0.0
    assert 0 < row["attention_ess"] <= 1 and row["log_weight_rate"] >= 0


@pytest.mark.parametrize("bad, match", [
    (dict(tasks=["inverse"]), "tasks"),
    (dict(kernels=["poly3"]), "kernels"),
    (dict(transforms=["log"]), "transforms"),
    (dict(tail_indices=[-1.0]), "tail_indices"),
    (dict(tail_indices=["gauss"]), "gaussian"),
    (dict(seeds=[0.5]), "seeds"),
    (dict(benchmark_params={"shear": 2}), "benchmark_params"),
    (dict(benchmark_params=[1]), "benchmark_params"),
])
def test_bad_parameters_fail_before_any_fit(monkeypatch, bad, match):
    monkeypatch.setattr(_phase, "_fit_cell", lambda *a, **k: pytest.fail("fitted despite bad parameters"))
    params = dict(tasks=["sheared_swap"], kernels=["log"], transforms=["none"], tail_indices=[0.7], seeds=[0])
    with pytest.raises(ValueError, match=match):
        phase_diagram(**dict(params, **bad))


def test_compare_kernels_rejects_overlapping_benchmark_params():
    with pytest.raises(ValueError, match="benchmark_params"):
        compare_kernels(kernels=["log"], benchmark_params={"tail_index": 2.0})


def test_display_draws_a_threshold_bar_per_kernel():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    rows = [_row(a, a <= kernel_threshold(k), kernel=k, ess=0.01 if k == "softmax" else 0.5)
            for k in ("softmax", "poly", "log") for a in (0.7, 1.5, 3.0)]
    rows += [_row(None, False, kernel=k) for k in ("softmax", "poly", "log")]
    display = PhaseDiagramDisplay.from_rows(rows, task="matrix_inverse", transform="none")
    assert display.kernels == ["softmax", "poly", "log"]
    assert display.tail_indices == [0.7, 1.5, 3.0, math.inf]
    x = {k: line.get_xdata()[0] for k, line in display.threshold_lines_.items()}
    assert x == {"softmax": 2.5, "poly": 1.5, "log": 0.5}  # right of the last divergent Pareto column
    dashed = {k: line.get_xdata()[0] for k, line in display.weight_lines_.items()}
    assert dashed == {"poly": 0.5, "log": -0.5}  # the weights diverge one power later; softmax's at the same place
    assert np.isclose(display.values[0, 0], 0.01)
    texts = [t.get_text() for t in display.ax_.texts]
    assert texts.count("0.010") == 3 and "0.50" in texts  # one text per cell
    symlog = [dict(r, transform="symlog") for r in rows]
    display = PhaseDiagramDisplay.from_rows(symlog, task="matrix_inverse", transform="symlog", face="learned",
                                            colorbar=False)
    assert sorted(display.threshold_lines_) == ["log", "poly"]  # softmax on symlog data: no fixed threshold
    assert all(line.get_xdata()[0] == -0.5 for line in display.threshold_lines_.values())
    matplotlib.pyplot.close("all")


def test_display_rejects_bad_input():
    pytest.importorskip("matplotlib")
    rows = [_row(0.7, True)]
    with pytest.raises(ValueError, match="face"):
        PhaseDiagramDisplay.from_rows(rows, task="matrix_inverse", transform="none", face="energy")
    with pytest.raises(ValueError, match="no rows"):
        PhaseDiagramDisplay.from_rows(rows, task="sheared_swap", transform="none")
    two_settings = [dict(_row(0.7, True), epochs=1), dict(_row(0.7, True), epochs=2)]
    with pytest.raises(ValueError, match="several settings"):
        PhaseDiagramDisplay.from_rows(two_settings, task="matrix_inverse", transform="none")
