"""Tests of the command line (``measattn`` / ``python -m sklearn_measattn``)."""

import csv
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from sklearn_measattn.__main__ import main
from sklearn_measattn.cli.compare import report
from sklearn_measattn.datasets import load_measures
from sklearn_measattn.experiments import summarize
from sklearn_measattn.metrics import (
    ATTENTION_ESS_THRESHOLD,
    CORRELATION_THRESHOLD,
    REFERENCE_NAMES,
    SPREAD_THRESHOLD,
    collapse_verdict,
)
from tests.experiments.comparison_tables import comparison_rows


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
        (["compare", "--y", "y.npy"], "--y applies only with --data"),
        (["compare", "--data", "X.npy", "--task", "sheared_swap"], "--task describes a benchmark"),
        (["compare", "--quick", "--out", "/no/such/folder/r.csv"], "does not exist"),
        (["compare", "--quick", "--plot", "/no/such/folder/f.png"], "does not exist"),
        (["compare", "--test-size", "2.5", "--data", "X.npy"], "fraction in (0, 1) or a whole number"),
        (["diagnose"], "the following arguments are required: FILE"),
        (["diagnose", "/no/such/file.npy"], "No such file"),
        (["diagnose", "/no/such/file.npy", "--out", "/no/such/folder/d.csv"], "does not exist"),
        (["diagnose", "measures.npy", "--kernels", "gaussian_rbf"], "invalid choice: 'gaussian_rbf'"),
        (["diagnose", "measures.npy", "--n-tail", "many"], "argument --n-tail: takes sqrt"),
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


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"], ["ess", "--help"], ["diagnose", "--help"]])
def test_help(argv, capsys):
    assert _exit_code(argv) == 0
    out = capsys.readouterr().out
    assert "usage:" in out


# The modules whose import costs seconds; --help loads none of them.
_HEAVY = ("torch", "skorch", "sklearn", "scipy", "ot", "numpy")


def _imported(argv):
    """The top-level modules a fresh ``python -X importtime -m sklearn_measattn ARGV`` imports, and its stdout."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "sklearn_measattn", *argv],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line.split("|")[-1] for line in result.stderr.splitlines() if line.startswith("import time:")]
    return {line.strip().split(".")[0] for line in lines}, result.stdout


@pytest.mark.slow
def test_help_answers_without_torch():
    """``measattn --help`` and a command's ``--help`` import no heavy module: they answer at once."""
    for argv in (["--help"], ["fit", "--help"]):
        modules, out = _imported(argv)
        assert "usage: measattn" in out
        assert "sklearn_measattn" in modules  # the check sees the package's own imports...
        assert not set(_HEAVY) & modules, argv  # ...and none of the heavy ones
    assert "compare" in out or "--kernel KERNEL" in out


@pytest.mark.slow
def test_the_check_sees_torch_when_it_is_imported():
    modules, _ = _imported(["ess", "--n-points", "8", "--kernels", "log", "--tails", "gaussian", "--n-draws", "1"])
    assert {"torch", "numpy"} <= modules


def test_help_tables_agree_with_the_library():
    """The names and defaults that --help shows without importing the library are the library's."""
    from sklearn_measattn import MeasureTransformerRegressor
    from sklearn_measattn.cli import _names
    from sklearn_measattn.datasets import BENCHMARK_NAMES, TAILS
    from sklearn_measattn.kernels import ALL_KERNEL_NAMES, KERNEL_NAMES, SPARSE_KERNEL_NAMES
    from sklearn_measattn.losses import LOSSES

    assert _names.KERNEL_NAMES == tuple(KERNEL_NAMES) and _names.ALL_KERNEL_NAMES == tuple(ALL_KERNEL_NAMES)
    assert _names.SPARSE_KERNEL_NAMES == tuple(SPARSE_KERNEL_NAMES)
    assert _names.TAILS == tuple(TAILS) and _names.BENCHMARK_NAMES == tuple(BENCHMARK_NAMES)
    assert _names.LOSS_NAMES == tuple(LOSSES)
    from sklearn_measattn.cli._estimator_options import ESTIMATOR_OPTIONS

    defaults = MeasureTransformerRegressor().get_params()
    shown = {option.parameter: option.estimator_default for option in ESTIMATOR_OPTIONS}
    assert shown == {name: defaults[name] for name in shown}


@pytest.mark.slow
def test_every_choice_of_fit_is_one_the_estimator_takes():
    """Each value an option of ``measattn fit`` offers passes the estimator's own check of its parameter,
    which refuses a value outside them: the static choices are the estimator's."""
    from sklearn_measattn import MeasureTransformerRegressor
    from sklearn_measattn.cli._estimator_options import ESTIMATOR_OPTIONS

    options = [option for option in ESTIMATOR_OPTIONS if option.choices]
    assert {option.parameter for option in options} >= {"kernel", "transform", "loss", "lr_schedule"}
    for option in options:
        for choice in option.choices:
            MeasureTransformerRegressor(**{option.parameter: option.aliases.get(choice, choice)})._check_params()
        with pytest.raises(ValueError, match="no_such_choice"):  # InvalidParameterError is a ValueError
            MeasureTransformerRegressor(**{option.parameter: "no_such_choice"})._check_params()


def test_the_package_root_imports_its_names_on_first_use():
    import sklearn_measattn

    assert set(sklearn_measattn.__all__) <= set(dir(sklearn_measattn))
    assert {"estimator", "kernels", "cli"} <= set(dir(sklearn_measattn))  # submodules, before their import too
    for name in sklearn_measattn.__all__:
        assert getattr(sklearn_measattn, name) is not None
    from sklearn_measattn import MeasureTransformerRegressor
    from sklearn_measattn.estimator import MeasureTransformerRegressor as defined

    assert MeasureTransformerRegressor is defined
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        sklearn_measattn.no_such_name  # noqa: B018


def test_the_default_report_answers_first_and_fits_a_terminal():
    """On a results table shaped like the default run's, compare prints its verdict first, then the table
    and its legend, in lines of at most 120 characters."""
    summary = summarize(comparison_rows())
    title = ("matrix_inverse, tail=pareto (index 0.7), 512 training measures x 128 points, 64 held out, 16 epochs, "
             "seeds 0, 1, 2")
    text = report(summary, title)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    verdict = lines.index(next(line for line in lines if line.startswith("Verdict (")))
    assert verdict == 0 < header
    assert lines[verdict + 1].startswith("  learned:") and lines[header - 1].startswith("matrix_inverse")
    # What the verdict and the table say agrees: the configurations named collapsed are those the table marks.
    collapsed = next(line for line in lines[:header] if line.startswith("  collapsed:"))
    assert "softmax and poly without a transform" in collapsed
    assert {line.split()[0] for line in lines[header + 2:] if line.split()[1:2] == ["none"]
            and "yes (ESS)" in line} == {"softmax", "poly"}
    # Even a wide run (every kernel, many seeds) stays inside the terminal.
    wide = {(k, t): values for k in ("softmax", "poly", "log", "sigmoid", "softplus", "compact", "sparsemax",
                                     "learned_poly") for t, values in (("none", (0.131, 0.00646, 0.0412, 0.15, 0.1)),
                                                                       ("symlog", (0.0451, 0.000912, 0.8, 1.0, 0.6)))}
    text = report(summarize(comparison_rows(wide)), title + ", 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17")
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "yes (ESS, spread)" in text


@pytest.mark.slow
def test_compare_quick_end_to_end(tmp_path, capsys):
    out_csv = tmp_path / "results.csv"
    code = main(["compare", "--quick", "--seeds", "1", "--kernels", "softmax", "log", "--out", str(out_csv)])
    assert code == 0
    captured = capsys.readouterr()
    header = next(line for line in captured.out.splitlines() if line.startswith("kernel"))
    for column in ("kernel", "transform", "energy ± sd", "vs base", "ESS/n", "spread", "corr(scale)", "collapsed",
                   "ignores", "learned"):
        assert column in header
    # users' words: what the columns mean, no study jargon
    assert "before any study run" not in captured.out and "face" not in captured.out
    assert "\nignores: seeds with corr(scale)" in captured.out and "\ncollapsed: yes when" in captured.out
    # A smoke-test size supports no verdict and no recommendation, and says so first.
    assert captured.out.startswith("Verdict: none: --quick is a smoke test, too small to judge")
    assert "can't judge" in captured.out
    # Every line fits a 120-column terminal, progress lines included.
    assert max(len(line) for line in (captured.out + captured.err).splitlines()) <= 120
    # One progress line per fit on stderr, and one for the no-model rows.
    lines = captured.err.splitlines()
    assert sum(line.startswith("[") and line[1].isdigit() and "seed 0:" in line for line in lines) == 4
    assert sum(line.startswith("[no model]") for line in lines) == 1
    with open(out_csv) as handle:
        every = list(csv.DictReader(handle))
    rows = [r for r in every if r["kernel"] not in REFERENCE_NAMES]
    assert [r["kernel"] for r in every[len(rows):]] == ["pooled", "identity", "oracle"]
    assert len(rows) == 4
    assert {(r["kernel"], r["transform"]) for r in rows} == {
        ("softmax", "none"), ("softmax", "symlog"), ("log", "none"), ("log", "symlog")
    }
    for row in rows:
        assert row["status"] == "ok"
        assert float(row["energy"]) >= 0 and float(row["w1"]) >= 0
        assert float(row["energy_symlog"]) >= 0 and 0 < float(row["attention_ess"]) <= 1
        assert row["collapsed"] in ("True", "False")


@pytest.mark.slow
def test_compare_seed_list_and_one_transform(tmp_path, capsys):
    out_csv = tmp_path / "r.csv"
    main(["compare", "--quick", "--seeds", "3,", "--kernels", "sigmoid", "--transforms", "symlog",
          "--out", str(out_csv), "--quiet"])
    with open(out_csv) as handle:
        rows = [r for r in csv.DictReader(handle) if r["kernel"] not in REFERENCE_NAMES]
    assert [(r["seed"], r["transform"]) for r in rows] == [("3", "symlog")]
    assert capsys.readouterr().err == ""


@pytest.mark.slow
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


# --------------------------------------------------------------------------- #
# Numbers: one rounding everywhere
# --------------------------------------------------------------------------- #

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]\d+)?(?![\w.])")


def _significant_digits(token):
    mantissa = token.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


@pytest.mark.slow
def test_progress_and_table_round_the_same_way(capsys):
    main(["compare", "--quick", "--kernels", "log", "--transforms", "none"])
    captured = capsys.readouterr()
    progress = re.search(r"\] log/none seed 0: energy (\S+), ESS/n (\S+),", captured.err)
    assert progress, captured.err
    row = next(line for line in captured.out.splitlines() if line.startswith("log "))
    cells = row.split()
    # the same value, printed by progress line and table alike
    assert cells[2] == progress.group(1) and cells[4] == progress.group(2)
    # every number in the table row carries three significant figures (0.960, never 0.96 next to 1)
    numbers = [c for c in cells[2:] if _NUMBER.fullmatch(c) and c not in ("0",)]
    assert numbers and all(_significant_digits(c) == 3 for c in numbers), row


# --------------------------------------------------------------------------- #
# diagnose
# --------------------------------------------------------------------------- #


def _student_t(df, shape, seed):
    rng = np.random.default_rng(seed)
    gauss = rng.standard_normal(shape)
    chi2 = rng.chisquare(df, size=shape[:-1] + (1,))
    return gauss / np.sqrt(chi2 / df)


def _diagnose(tmp_path, X, name, capsys, *extra):
    path = tmp_path / name
    np.save(path, X)
    out_csv = tmp_path / (name + ".csv")
    assert main(["diagnose", str(path), "--out", str(out_csv), *extra]) == 0
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    return capsys.readouterr().out, rows


@pytest.mark.slow
def test_diagnose_student_t_finds_the_tail_and_avoids_raw_softmax(tmp_path, capsys):
    out, rows = _diagnose(tmp_path, _student_t(1.0, (48, 200, 2), seed=0), "t1.npy", capsys)
    norm = next(r for r in rows if r["what"] == "tail_index" and r["of"] == "norm")
    assert abs(float(norm["value"]) - 1.0) < 0.3
    assert float(norm["ci_lower"]) < 1.0 < float(norm["ci_upper"])
    features = [r for r in rows if r["what"] == "tail_index" and r["of"].startswith("feature")]
    assert len(features) == 2 and all(abs(float(r["value"]) - 1.0) < 0.3 for r in features)
    (recommendation,) = [r for r in rows if r["what"] == "recommendation"]
    kernel, transform = recommendation["of"].split("/")
    assert not (kernel == "softmax" and transform == "none")
    softmax = next(r for r in rows if r["what"] == "integrals" and r["of"] == "softmax")
    assert softmax["detail"].startswith("diverge")
    assert "heavy tails" in out and "Recommendation:" in out and "softmax" in out
    assert "total time" in out


@pytest.mark.slow
def test_diagnose_gaussian_says_every_kernel_is_fine(tmp_path, capsys):
    X = np.random.default_rng(1).standard_normal((48, 200, 3))
    out, rows = _diagnose(tmp_path, X, "gauss.npy", capsys)
    assert "every kernel is fine" in out
    integrals = [r for r in rows if r["what"] == "integrals"]
    assert len(integrals) == 5 and all(r["detail"].startswith("converge") for r in integrals)
    assert all(r["detail"].endswith("light") for r in rows if r["what"] == "tail_index")


def test_diagnose_reads_tables_with_their_options(tmp_path, capsys):
    X = _student_t(2.0, (20, 50, 2), seed=3)
    lines = ["cloud,a,b,ignored"] + [f"c{i},{x[0]:.17g},{x[1]:.17g},7" for i, m in enumerate(X) for x in m]
    table = tmp_path / "cells.csv"
    table.write_text("\n".join(lines) + "\n")
    assert main(["diagnose", str(table), "--group-column", "cloud", "--feature-columns", "a", "b",
                 "--kernels", "softmax", "log"]) == 0
    out = capsys.readouterr().out
    assert "20 measures x 50 points x 2 features" in out
    assert "sigmoid" not in out.split("Recommendation")[0]
    assert _exit_code(["diagnose", str(table)]) == 2  # no 'measure' column
    assert "measure" in capsys.readouterr().err


# --------------------------------------------------------------------------- #
# compare --data
# --------------------------------------------------------------------------- #

_TINY = ["--quick", "--kernels", "log", "--transforms", "symlog", "--quiet"]


@pytest.mark.slow
def test_compare_on_npz_holding_x_and_y(tmp_path, capsys):
    X = _student_t(3.0, (16, 12, 2), seed=0)
    archive = tmp_path / "pairs.npz"
    np.savez(archive, X=X, y=-2.0 * X)
    out_csv = tmp_path / "r.csv"
    assert main(["compare", "--data", str(archive), "--test-size", "4", "--out", str(out_csv), *_TINY]) == 0
    out = capsys.readouterr().out
    assert ("pairs.npz (array 'X'): 16 measures of up to 12 points; targets pairs.npz (array 'y'): up to 12 "
            "points, paired by position; 12 for training and 4 held out") in " ".join(out.split())
    with open(out_csv) as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["kernel"] not in REFERENCE_NAMES]
    assert row["task"] == "pairs.npz" and row["n_samples"] == "12" and row["n_test"] == "4"
    assert row["status"] == "ok" and float(row["energy_symlog"]) >= 0
    assert row["learned"] in ("True", "False")
    # own data: the no-model rows, scored alike, but no oracle (the true target law is unknown)
    with open(out_csv) as handle:
        references = {r["kernel"]: r for r in csv.DictReader(handle) if r["kernel"] in REFERENCE_NAMES}
    assert set(references) == {"pooled", "identity"}
    assert all(r["transform"] == "none" and float(r["energy_symlog"]) > 0 for r in references.values())
    table = out.splitlines()
    header = next(line for line in table if line.startswith("kernel"))
    assert "learned" in header.split()
    assert any(line.startswith("pooled") and "no model" in line for line in table)
    assert any(line.startswith("identity") for line in table) and not any(line.startswith("oracle") for line in table)


@pytest.mark.slow
def test_compare_on_separate_files_and_ragged_measures(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = [rng.standard_t(3, size=(n, 2)) for n in rng.integers(8, 14, size=14)]
    archive_x, archive_y = tmp_path / "x.npz", tmp_path / "y.npz"
    np.savez(archive_x, *X)
    np.savez(archive_y, *[x[:5] * 3.0 for x in X])
    out_csv = tmp_path / "r.csv"
    assert main(["compare", "--data", str(archive_x), "--y", str(archive_y), "--seeds", "2",
                 "--out", str(out_csv), *_TINY]) == 0
    with open(out_csv) as handle:
        rows = [r for r in csv.DictReader(handle) if r["kernel"] not in REFERENCE_NAMES]
    assert [r["seed"] for r in rows] == ["0", "1"] and all(r["status"] == "ok" for r in rows)
    assert {r["n_test"] for r in rows} == {"4"}  # ceil(0.25 * 14)


def test_compare_data_needs_y_unless_npz_holds_it(tmp_path, capsys):
    path = tmp_path / "X.npy"
    np.save(path, np.zeros((10, 4, 2)))
    assert _exit_code(["compare", "--data", str(path), *_TINY]) == 2
    assert "--y FILE is required with --data" in capsys.readouterr().err
    archive = tmp_path / "only_x.npz"
    np.savez(archive, X=np.zeros((10, 4, 2)))
    assert _exit_code(["compare", "--data", str(archive), *_TINY]) == 2
    assert "'y'" in capsys.readouterr().err
    y_path = tmp_path / "y.npy"
    np.save(y_path, np.zeros((9, 4, 2)))
    assert _exit_code(["compare", "--data", str(path), "--y", str(y_path), *_TINY]) == 2
    assert "X has 10 measures but y has 9" in capsys.readouterr().err


# --------------------------------------------------------------------------- #
# own data: pairing, messages in the command line's words, what was read
# --------------------------------------------------------------------------- #
class _Captured(Exception):
    pass


@pytest.fixture
def captured_inputs(monkeypatch):
    """Stops compare before training and keeps the (X, y) it would have trained on."""
    seen = {}

    def fake(X, y, **kwargs):
        seen["X"], seen["y"] = X, y
        raise _Captured

    monkeypatch.setattr("sklearn_measattn.experiments.compare_kernels_on_data", fake)  # compare imports it when run
    return seen


def _long_csv(path, measures, names, columns=("x0", "x1")):
    lines = [",".join(["measure", *columns])]
    lines += [",".join([name, *(f"{v:.17g}" for v in point)]) for name, m in zip(names, measures) for point in m]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compare_pairs_two_tables_by_measure_name(tmp_path, captured_inputs, capsys):
    """Targets listed in another order are paired with their inputs by name;
    tables that name different measures are refused before any training."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 5, 2))
    names = [f"m{i}" for i in range(8)]
    order = rng.permutation(8)
    x_csv = _long_csv(tmp_path / "initial.csv", X, names)
    y_csv = _long_csv(tmp_path / "final.csv", 10.0 * X[order], [names[i] for i in order])
    with pytest.raises(_Captured):
        main(["compare", "--data", str(x_csv), "--y", str(y_csv), "--quick", "--kernels", "log"])
    np.testing.assert_allclose(captured_inputs["y"], 10.0 * captured_inputs["X"])
    assert "paired by measure name" in capsys.readouterr().err
    _long_csv(tmp_path / "other.csv", X, names[:7] + ["extra"])
    assert _exit_code(["compare", "--data", str(x_csv), "--y", str(tmp_path / "other.csv"), *_TINY]) == 2
    err = capsys.readouterr().err
    assert "--y:" in err and "'m7'" in err and "'extra'" in err and "Traceback" not in err


def _write_files(tmp_path, files):
    paths = {}
    for name, content in files.items():
        if content == "npz":
            paths[name] = tmp_path / f"{name}.npz"
            np.savez(paths[name], X=np.zeros((6, 4, 1)), y=np.zeros((6, 4, 1)))
        elif content == "npz-without-y":
            paths[name] = tmp_path / f"{name}.npz"
            np.savez(paths[name], a=np.zeros((6, 4, 1)), b=np.zeros((6, 4, 1)))
        else:
            paths[name] = tmp_path / f"{name}.csv"
            paths[name].write_text(content)
    return paths


@pytest.mark.parametrize(
    "argv, files, expected",
    [
        (["diagnose", "{t}"], {"t": "cloud,x\na,1\n"}, "name that column with --group-column"),
        (["diagnose", "{t}", "--group-column", "cell"], {"t": "cloud,x\na,1\n"},
         "argument --group-column: t.csv (FILE) has no column 'cell'"),
        (["diagnose", "{t}", "--key", "X"], {"t": "measure,x\na,1\n"},
         "argument --key: selects an array inside an .npz archive"),
        (["diagnose", "{t}", "--feature-columns", "x", "measure"], {"t": "measure,x\na,1\n"},
         "argument --feature-columns: 'measure' is the column naming the measures"),
        (["compare", "--data", "{a}", "--y", "{t}", "--y-feature-columns", "q", *_TINY],
         {"a": "npz", "t": "measure,x\na,1\n"}, "argument --y-feature-columns: t.csv (--y) has no column(s) ['q']"),
        (["compare", "--data", "{a}", "--y", "{b}", *_TINY], {"a": "npz", "b": "npz-without-y"}, "choose one with --y-key"),
        (["compare", "--data", "{a}", "--y", "{a}", "--y-key", "z", *_TINY], {"a": "npz"},
         "argument --y-key: a.npz has no array 'z'"),
        (["compare", "--data", "{a}", "--group-column", "cell", *_TINY], {"a": "npz"},
         "argument --group-column: applies to CSV/TSV tables"),
    ],
    ids=["no-group-column", "wrong-group-column", "key-for-a-table", "group-as-feature", "y-feature-columns",
         "npz-without-default", "npz-key", "group-column-for-an-archive"],
)
def test_options_that_do_not_fit_their_file_are_refused_naming_the_option(tmp_path, capsys, argv, files, expected):
    paths = _write_files(tmp_path, files)
    assert _exit_code([arg.format(**paths) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert not re.search(r"\b(group_column|feature_columns|key)=", err), err


@pytest.mark.parametrize("table", ["measure,x,y\na,1,\n", "measure,x,y\na,1,b\n"], ids=["empty-cell", "text-cell"])
def test_a_file_the_loader_refuses_keeps_its_message_after_the_files_option(tmp_path, capsys, table):
    path = _write_files(tmp_path, {"t": table})["t"]
    with pytest.raises((ValueError, TypeError)) as api:
        load_measures(path)
    assert _exit_code(["diagnose", str(path)]) == 2
    assert f"argument FILE: {api.value}" in capsys.readouterr().err


def test_a_missing_file_is_a_usage_error(tmp_path, capsys):
    assert _exit_code(["compare", "--data", str(tmp_path / "no.csv"), "--y", str(tmp_path / "no.csv"), *_TINY]) == 2
    err = capsys.readouterr().err
    assert "--data: No such file" in err and "Traceback" not in err


def test_help_says_what_the_options_do(capsys):
    assert _exit_code(["compare", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--y-key NAME for an .npz: the array (or per-measure prefix NAME_0, NAME_1, ...) to read from --y" in text
    assert "(default: y;" in text
    assert "with --data every measure and point of your data is used" in text
    assert "paired by measure name" in text
    assert _exit_code(["diagnose", "--help"]) == 0
    assert "names the .npz array it read" in " ".join(capsys.readouterr().out.split())


def test_compare_and_diagnose_say_what_they_read(tmp_path, captured_inputs, capsys):
    archive = tmp_path / "ens.npz"
    np.savez(archive, forecast=np.zeros((6, 9, 2)), analysis=np.ones((6, 4, 2)))
    with pytest.raises(_Captured):
        main(["compare", "--data", str(archive), "--key", "forecast", "--y-key", "analysis", "--quick",
              "--kernels", "log"])
    err = " ".join(capsys.readouterr().err.split())  # the line is wrapped to fit a terminal
    assert ("ens.npz (array 'forecast'): 6 measures of up to 9 points; targets ens.npz (array 'analysis'): up to "
            "4 points") in err
    X = _student_t(1.0, (20, 100, 2), seed=1)
    np.savez(archive, X=X)
    assert main(["diagnose", str(archive), "--kernels", "log"]) == 0
    assert f"{archive} (array 'X'): 20 measures" in capsys.readouterr().out


def test_diagnose_names_table_columns_and_reports_differing_tails(tmp_path, capsys):
    rng = np.random.default_rng(0)
    light = rng.normal(size=(20, 100, 2))
    heavy = _student_t(0.8, (20, 100, 2), seed=2)
    table = _long_csv(tmp_path / "mixed.csv", np.concatenate([light, heavy]), [f"m{i}" for i in range(40)],
                      columns=("speed", "angle"))
    out_csv = tmp_path / "d.csv"
    assert main(["diagnose", str(table), "--kernels", "log", "--out", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "speed" in out and "angle" in out and "feature 0" not in out
    assert "The measures' tails differ" in out
    with open(out_csv) as handle:
        rows = list(csv.DictReader(handle))
    (spread,) = [r for r in rows if r["what"] == "tail_index_per_measure"]
    assert spread["detail"] == "differ"
    same = _long_csv(tmp_path / "same.csv", heavy, [f"m{i}" for i in range(20)], columns=("speed", "angle"))
    assert main(["diagnose", str(same), "--kernels", "log"]) == 0
    assert "tails differ" not in capsys.readouterr().out


@pytest.mark.slow
def test_compare_and_ess_take_bounded_support_and_learnt_degree_kernels(tmp_path, capsys):
    out_csv = tmp_path / "r.csv"
    assert main(["compare", "--quick", "--quiet", "--kernels", "compact", "learned_poly", "--transforms", "symlog",
                 "--out", str(out_csv)]) == 0
    with open(out_csv) as handle:
        kernels = [r["kernel"] for r in csv.DictReader(handle) if r["kernel"] not in REFERENCE_NAMES]
    assert kernels == ["compact", "learned_poly"]
    assert main(["ess", "--kernels", "sparsemax", "--n-points", "16", "--tails", "gaussian"]) == 0
    assert "sparsemax" in capsys.readouterr().out
    assert _exit_code(["ess", "--kernels", "learned_poly"]) == 2  # a random projection has no learnt degree


@pytest.mark.parametrize("argv, expected", [
    (["--quick"], {"max_epochs": 2, "d_model": 8, "n_heads": 2, "n_layers": 1, "dim_feedforward": 16, "lr": 2e-3,
                   "lr_schedule": "constant", "batch_size": 4, "loss": "energy", "device": "auto"}),
    ([], {"max_epochs": 16, "d_model": 32, "n_heads": 4, "lr": 4e-3, "lr_schedule": "onecycle", "batch_size": 16}),
    (["--quick", "--loss", "sliced", "--context-size", "8", "--epochs", "3", "--lr-schedule", "onecycle",
      "--device", "cpu"],
     {"loss": "sliced", "context_size": 8, "max_epochs": 3, "lr_schedule": "onecycle", "device": "cpu",
      "d_model": 8}),
])
def test_compare_hands_the_experiments_a_template_from_the_preset_and_the_estimator_options(
        argv, expected, monkeypatch, capsys):
    """Every option of the estimator option table reaches compare's template, over the preset's value."""
    from sklearn_measattn import MeasureTransformerRegressor, experiments

    seen = {}

    def fake(*args, estimator, **kwargs):
        seen.update(estimator=estimator, kwargs=kwargs)
        raise ValueError("stop here")

    monkeypatch.setattr(experiments, "compare_kernels", fake)
    assert _exit_code(["compare", "--kernels", "log", "--quiet", *argv]) == 2
    assert "stop here" in capsys.readouterr().err
    template = seen["estimator"]
    assert isinstance(template, MeasureTransformerRegressor)
    assert {name: template.get_params()[name] for name in expected} == expected
    assert template.random_state is None and "seeds" in seen["kwargs"]  # the comparison seeds each fit


def test_compare_offers_every_option_of_the_estimator_table_but_what_it_varies(capsys):
    from sklearn_measattn.cli._estimator_options import ESTIMATOR_OPTIONS

    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = capsys.readouterr().out
    offered = {option.parameter for option in ESTIMATOR_OPTIONS if f"{option.flag} " in help_text}
    assert offered == {option.parameter for option in ESTIMATOR_OPTIONS} - {"kernel", "transform", "random_state"}
