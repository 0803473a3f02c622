"""Tests of the command line (``python -m sklearn_measattn``) and the study engine."""

import csv
import math
import subprocess
import sys

import pytest

from sklearn_measattn.__main__ import main
from sklearn_measattn._study import recommend, summarize
from sklearn_measattn.metrics import (
    ATTENTION_ESS_THRESHOLD,
    CORRELATION_THRESHOLD,
    SPREAD_THRESHOLD,
    collapse_verdict,
)


def _exit_code(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "--task", "nope"], "invalid choice: 'nope'"),
        (["compare", "--kernels", "softmax", "gaussian_rbf"], "invalid choice: 'gaussian_rbf'"),
        (["compare", "--epochs", "-3"], "expected a positive integer"),
        (["compare", "--epochs", "0"], "expected a positive integer"),
        (["compare", "--transforms", "log1p"], "invalid choice: 'log1p'"),
        (["compare", "--tail", "cauchy"], "invalid choice: 'cauchy'"),
        (["compare", "--tail-index", "-1"], "expected a finite positive number"),
        (["compare", "--seeds", "0"], "needs N >= 1"),
        (["compare", "--seeds", "a"], "takes integers"),
        (["compare", "--n-test", "2"], "--n-test must be >= 3"),
        (["compare", "--d-model", "10", "--n-heads", "4"], "must divide"),
        (["compare", "--quick", "--preset", "paper"], "not allowed with argument"),
        (["ess", "--n-points", "0"], "expected a positive integer"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_with_message(argv, message, capsys):
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err
    assert message in err
    assert "Traceback" not in err


def test_library_value_error_becomes_usage_error(capsys):
    # An invalid device is rejected by the estimator with a ValueError, which
    # must reach the user as a usage error, not a traceback.
    assert _exit_code(["compare", "--quick", "--task", "sheared_swap", "--device", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "device" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["ess", "--help"]])
def test_help(argv, capsys):
    assert _exit_code(argv) == 0
    out = capsys.readouterr().out
    assert "usage:" in out


def test_help_subprocess():
    result = subprocess.run(
        [sys.executable, "-m", "sklearn_measattn", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0
    assert "compare" in result.stdout and "ess" in result.stdout


def test_compare_quick_end_to_end(tmp_path, capsys):
    out_csv = tmp_path / "results.csv"
    code = main(["compare", "--quick", "--seeds", "1", "--kernels", "softmax", "log", "--out", str(out_csv)])
    assert code == 0
    captured = capsys.readouterr()
    for column in ("kernel", "transform", "energy [symlog]", "W1 [symlog]", "attn ESS/n", "spread ratio",
                   "corr(scale)", "collapsed [faces]", "fit (s)"):
        assert column in captured.out
    assert "fixed in code before any study run" in captured.out
    # A smoke-test size supports no verdict and no recommendation.
    assert "too small to judge" in captured.out and "collapsed [faces]" in captured.out
    assert "recommendation: none: --quick" in captured.out
    # One progress line per fit on stderr.
    assert captured.err.count("seed 0:") == 4
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4
    assert {(r["kernel"], r["transform"]) for r in rows} == {
        ("softmax", "none"), ("softmax", "symlog"), ("log", "none"), ("log", "symlog")
    }
    for row in rows:
        assert row["status"] == "ok"
        assert float(row["energy"]) >= 0 and float(row["w1"]) >= 0
        assert float(row["energy_symlog"]) >= 0 and 0 < float(row["attention_ess"]) <= 1
        assert row["collapsed"] in ("True", "False")


def test_compare_seed_list_and_one_transform(tmp_path, capsys):
    out_csv = tmp_path / "r.csv"
    main(["compare", "--quick", "--seeds", "3,", "--kernels", "sigmoid", "--transforms", "symlog",
          "--out", str(out_csv), "--quiet"])
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["seed"], r["transform"]) for r in rows] == [("3", "symlog")]
    assert capsys.readouterr().err == ""


def test_compare_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "fig.png"
    main(["compare", "--quick", "--kernels", "softmax", "--transforms", "none", "--plot", str(png), "--quiet"])
    assert png.exists() and png.stat().st_size > 1000


def test_ess(tmp_path, capsys):
    out_csv = tmp_path / "ess.csv"
    code = main(["ess", "--n-points", "16", "64", "--kernels", "softmax", "log", "--n-measures", "1",
                 "--out", str(out_csv)])
    assert code == 0
    out = capsys.readouterr().out
    assert "n=16" in out and "n=64" in out and "softmax" in out
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 * 2 * 2  # tails x n_points x kernels
    assert all(0 < float(r["ess_fraction"]) <= 1 for r in rows)


def test_collapse_rule_is_fixed():
    # The thresholds are part of the published study; changing them is a
    # deliberate, documented decision, not a tweak.
    assert (ATTENTION_ESS_THRESHOLD, SPREAD_THRESHOLD, CORRELATION_THRESHOLD) == (0.05, 0.2, 0.2)
    assert collapse_verdict(attention_ess=0.01, spread_ratio=0.9, across_correlation=0.9) == {
        "attention": True, "within": False, "across": False, "collapsed": True}
    assert collapse_verdict(attention_ess=0.5, spread_ratio=0.1)["collapsed"] is True
    # The across-sample face is reported but does not make the verdict on its own.
    verdict = collapse_verdict(attention_ess=0.5, spread_ratio=0.9, across_correlation=0.1)
    assert verdict["across"] is True and verdict["collapsed"] is False
    assert collapse_verdict(attention_ess=math.nan, spread_ratio=math.nan)["collapsed"] is None
    with pytest.raises(TypeError, match="attention_ess"):
        collapse_verdict(attention_ess="low")


def _row(**overrides):
    base = dict(task="t", tail="pareto", tail_index=0.7, kernel="softmax", transform="none", status="ok",
                energy=1.0, w1=1.0, energy_symlog=0.2, w1_symlog=0.5, attention_ess=0.5,
                spread_ratio_median=0.5, corr_scale=0.5, fit_time=1.0, collapse_attention=False,
                collapse_within=False, collapse_across=False, collapsed=False)
    return dict(base, **overrides)


def test_summarize_counts_disagreeing_seeds():
    rows = [_row(collapsed=True, collapse_attention=True, attention_ess=0.004), _row(collapsed=False)]
    (summary,) = summarize(rows)
    assert summary["collapsed"] == "1/2"
    assert summary["n_seeds"] == 2 and summary["energy_std"] == 0.0 and summary["n_attention"] == 1


def test_recommendation_names_best_uncollapsed_and_noise():
    rows = [
        _row(kernel="softmax", collapsed=True, collapse_attention=True, energy_symlog=0.05),
        _row(kernel="log", energy_symlog=0.10), _row(kernel="log", energy_symlog=0.12),
        _row(kernel="sigmoid", energy_symlog=0.30), _row(kernel="sigmoid", energy_symlog=0.32),
    ]
    line = recommend(summarize(rows))
    # softmax has the lowest energy but collapsed: it is not recommended.
    assert line.startswith("recommendation: kernel='log', transform=None")
    assert "beyond seed noise" in line and "softmax/none" in line
    close = recommend(summarize([_row(kernel="log", energy_symlog=e) for e in (0.10, 0.14)]
                                + [_row(kernel="poly", energy_symlog=e) for e in (0.11, 0.13)]))
    assert "within seed noise" in close
    assert recommend(summarize([_row(collapsed=True)])).startswith("recommendation: none")
    one_seed = recommend(summarize([_row(kernel="log"), _row(kernel="poly", energy_symlog=0.3)]))
    assert "one seed: no estimate of seed noise" in one_seed and "none collapsed" in one_seed
