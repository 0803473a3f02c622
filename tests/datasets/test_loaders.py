"""Tests for ``load_measures``: users' ensembles from .npy, .npz, CSV/TSV and DataFrames."""

import numpy as np
import pandas as pd
import pytest

from sklearn_measattn._validation import check_measures
from sklearn_measattn.datasets import MEASURE_FILE_FORMATS, load_measures


def write_long_csv(path, measures, names=None, *, delimiter=",", columns=None, group="measure"):
    """Write measures in long format: one row per point."""
    n_features = measures[0].shape[1]
    columns = columns or [f"x{j}" for j in range(n_features)]
    names = names or [f"m{i}" for i in range(len(measures))]
    lines = [delimiter.join([group, *columns])]
    for name, points in zip(names, measures):
        for point in points:
            lines.append(delimiter.join([str(name), *(repr(float(v)) for v in point)]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def dense(rng):
    return rng.standard_t(1.5, size=(4, 6, 3))


@pytest.fixture
def ragged(rng):
    return [rng.standard_normal((n, 2)) for n in (3, 5, 1, 4)]


def assert_ragged_equal(loaded, expected):
    assert isinstance(loaded, list) and len(loaded) == len(expected)
    for a, b in zip(loaded, expected):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- #
# Round trips
# --------------------------------------------------------------------------- #


def test_npy_round_trip(tmp_path, dense):
    np.save(tmp_path / "X.npy", dense)
    loaded = load_measures(tmp_path / "X.npy")
    assert loaded.dtype == np.float64
    np.testing.assert_array_equal(loaded, dense)
    loaded, labels = load_measures(str(tmp_path / "X.npy"), return_labels=True)
    assert labels == [0, 1, 2, 3]


def test_npy_integers_and_float32(tmp_path):
    with open(tmp_path / "X.NPY", "wb") as handle:  # np.save would append .npy to the name
        np.save(handle, np.arange(24, dtype=np.int32).reshape(2, 4, 3))
    loaded = load_measures(tmp_path / "X.NPY", dtype=np.float32)
    assert loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, np.arange(24).reshape(2, 4, 3))


def test_npz_dense_inputs_and_targets(tmp_path, dense):
    y = dense[:, :2, :2] * 2
    np.savez(tmp_path / "data.npz", X=dense, y=y)
    np.testing.assert_array_equal(load_measures(tmp_path / "data.npz"), dense)
    np.testing.assert_array_equal(load_measures(tmp_path / "data.npz", key="y"), y)


def test_npz_ragged_positional(tmp_path, ragged):
    np.savez(tmp_path / "r.npz", *ragged)
    loaded, labels = load_measures(tmp_path / "r.npz", return_labels=True)
    assert_ragged_equal(loaded, ragged)
    assert labels == ["arr_0", "arr_1", "arr_2", "arr_3"]


def test_npz_ragged_numbered_in_numeric_order(tmp_path, rng):
    measures = [rng.standard_normal((i + 1, 2)) for i in range(12)]  # y_10 must come after y_9
    np.savez(tmp_path / "r.npz", **{f"y_{i}": m for i, m in enumerate(measures)}, X=np.zeros((12, 3, 2)))
    assert_ragged_equal(load_measures(tmp_path / "r.npz", key="y"), measures)


def test_npz_equal_counts_become_dense(tmp_path, dense):
    np.savez(tmp_path / "r.npz", *dense)
    loaded = load_measures(tmp_path / "r.npz")
    assert isinstance(loaded, np.ndarray)
    np.testing.assert_array_equal(loaded, dense)


def test_npz_exact_key_wins_and_lone_array(tmp_path, dense):
    np.savez(tmp_path / "both.npz", X=dense, X_0=dense[0])
    np.testing.assert_array_equal(load_measures(tmp_path / "both.npz"), dense)
    np.savez(tmp_path / "lone.npz", ensembles=dense)
    np.testing.assert_array_equal(load_measures(tmp_path / "lone.npz"), dense)


@pytest.mark.parametrize("suffix, delimiter", [(".csv", ","), (".tsv", "\t")])
def test_table_round_trip_dense_and_ragged(tmp_path, dense, ragged, suffix, delimiter):
    path = write_long_csv(tmp_path / f"d{suffix}", list(dense), delimiter=delimiter)
    loaded, labels = load_measures(path, return_labels=True)
    assert isinstance(loaded, np.ndarray) and loaded.shape == dense.shape
    np.testing.assert_array_equal(loaded, dense)
    assert labels == ["m0", "m1", "m2", "m3"]
    path = write_long_csv(tmp_path / f"r{suffix}", ragged, delimiter=delimiter)
    assert_ragged_equal(load_measures(path), ragged)


def test_table_order_of_first_appearance_and_row_order(tmp_path):
    (tmp_path / "t.csv").write_text("x,cell,y\n1,b,10\n2,a,20\n3,b,30\n4,c,40\n5,a,50\n6,b,60\n")
    loaded, labels = load_measures(tmp_path / "t.csv", group_column="cell", return_labels=True)
    assert labels == ["b", "a", "c"]
    np.testing.assert_array_equal(loaded[0], [[1, 10], [3, 30], [6, 60]])
    np.testing.assert_array_equal(loaded[1], [[2, 20], [5, 50]])
    np.testing.assert_array_equal(loaded[2], [[4, 40]])


def test_table_feature_columns_select_and_order(tmp_path):
    (tmp_path / "t.csv").write_text("measure,x1,x2,y1,note\na,1,2,3,ok\na,4,5,6,ok\n")
    np.testing.assert_array_equal(load_measures(tmp_path / "t.csv", feature_columns=["x2", "x1"]), [[[2, 1], [5, 4]]])
    np.testing.assert_array_equal(load_measures(tmp_path / "t.csv", feature_columns=("y1",)), [[[3], [6]]])


def test_csv_quirks_quotes_spaces_bom_blank_lines(tmp_path):
    text = '\ufeff measure , "x" ,y\n"a", 1.5 ,"2e3"\n\n a ,-3, 4\n'
    (tmp_path / "t.csv").write_text(text, encoding="utf-8")
    loaded, labels = load_measures(tmp_path / "t.csv", return_labels=True)
    assert labels == ["a"]
    np.testing.assert_array_equal(loaded, [[[1.5, 2000.0], [-3.0, 4.0]]])


def test_csv_numeric_measure_names_stay_text(tmp_path):
    (tmp_path / "t.csv").write_text("measure,x\n10,1\n2,2\n10,3\n2,4\n")
    _, labels = load_measures(tmp_path / "t.csv", return_labels=True)
    assert labels == ["10", "2"]


def test_dataframe_round_trip(dense, ragged):
    rows = [(f"s{i}", *point) for i, measure in enumerate(ragged) for point in measure]
    frame = pd.DataFrame(rows, columns=["measure", "u", "v"])
    assert_ragged_equal(load_measures(frame), ragged)
    rows = [(i, *point) for i, measure in enumerate(dense) for point in measure]
    frame = pd.DataFrame(rows, columns=["sample", 0, 1, 2]).set_index(pd.Index(range(100, 100 + len(rows))))
    loaded, labels = load_measures(frame, group_column="sample", feature_columns=[0, 1, 2], return_labels=True)
    np.testing.assert_array_equal(loaded, dense)
    assert labels == [0, 1, 2, 3]


def test_loaded_batches_pass_the_package_validation(tmp_path, ragged):
    np.savez(tmp_path / "r.npz", *ragged)
    padded, weights = check_measures(load_measures(tmp_path / "r.npz"))
    assert padded.shape == (4, 5, 2)
    np.testing.assert_array_equal(weights.sum(axis=1), [3, 5, 1, 4])


def test_formats_constant():
    assert set(MEASURE_FILE_FORMATS) == {".npy", ".npz", ".csv", ".tsv"}


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("name", ["absent.npy", "absent.npz", "absent.csv", "absent.tsv"])
def test_a_missing_file_raises_the_builtin_file_not_found_error(tmp_path, name):
    with pytest.raises(FileNotFoundError, match="No such file") as info:
        load_measures(tmp_path / name)
    assert type(info.value) is FileNotFoundError


def test_directory_and_unknown_extension(tmp_path):
    (tmp_path / "dir.npy").mkdir()
    with pytest.raises(ValueError, match="directory"):
        load_measures(tmp_path / "dir.npy")
    (tmp_path / "data.xlsx").write_text("")
    with pytest.raises(ValueError, match=r"extension '\.xlsx'.*\.npy"):
        load_measures(tmp_path / "data.xlsx")
    with pytest.raises(ValueError, match=r"\(none\)"):
        load_measures(tmp_path / "data")


@pytest.mark.parametrize(
    "text, kwargs, error, match",
    [
        ("cell,x\na,1\n", {}, ValueError, r"no column 'measure'.*\['cell', 'x'\]"),
        ("measure,x\na,1\n", {"feature_columns": ["x", "z"]}, ValueError, r"no feature column\(s\) \['z'\].*\['measure', 'x'\]"),
        ("measure,x\na,1\na,oops\n", {}, TypeError, r"column 'x', line 3: 'oops' is not a number"),
        ("measure,x,y\na,1,2\na,,3\n", {}, ValueError, r"column 'x', line 3: an empty cell, a missing value"),
        ("measure,x\na,1\nb,nan\n", {}, ValueError, r"column 'x', line 3: NaN"),
        ("measure,x\na,1\nb,-inf\n", {}, ValueError, r"column 'x', line 3: an infinite value"),
        ("", {}, ValueError, "is empty"),
        ("measure,x\n", {}, ValueError, "no rows"),
        ("measure\na\n", {}, ValueError, "only the column 'measure'"),
        ("measure,x\na,1,2\n", {}, ValueError, r"line 2 has 3 fields but the header has 2"),
        ("measure,x,x\na,1,2\n", {}, ValueError, r"duplicate column names \['x'\]"),
        ("measure,x\n,1\n", {}, ValueError, r"line 2: the column 'measure' is empty"),
        ("measure,x\na,1\n", {"key": "X"}, ValueError, "key selects an array inside an .npz"),
    ],
)
def test_csv_errors(tmp_path, text, kwargs, error, match):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(error, match=match):
        load_measures(tmp_path / "t.csv", **kwargs)


def test_dataframe_errors():
    frame = pd.DataFrame({"measure": ["a", "a", "b"], "x": [1.0, 2.0, 3.0], "label": ["u", "v", "w"]})
    with pytest.raises(TypeError, match=r"column 'label', row 0 \(index 0\): 'u' is not a number"):
        load_measures(frame)
    with pytest.raises(ValueError, match=r"no column 'cell'.*\['measure', 'x', 'label'\]"):
        load_measures(frame, group_column="cell")
    with pytest.raises(ValueError, match="no feature column"):
        load_measures(frame, feature_columns=["y"])
    with pytest.raises(ValueError, match=r"row 1 \(index 'q'\): NaN"):
        load_measures(pd.DataFrame({"measure": ["a", "a"], "x": [1.0, np.nan]}, index=["p", "q"]))
    with pytest.raises(ValueError, match=r"row 1 .*'measure' is missing"):
        load_measures(pd.DataFrame({"measure": ["a", None], "x": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="no rows"):
        load_measures(pd.DataFrame({"measure": [], "x": []}))
    with pytest.raises(ValueError, match="key selects"):
        load_measures(frame, key="X", feature_columns=["x"])


def test_mixed_feature_counts(tmp_path, rng):
    np.savez(tmp_path / "r.npz", rng.standard_normal((3, 2)), rng.standard_normal((4, 3)), rng.standard_normal((2, 2)))
    with pytest.raises(ValueError, match=r"different numbers of features: 'arr_0' has 2, but 'arr_1' \(3\)"):
        load_measures(tmp_path / "r.npz")


@pytest.mark.parametrize(
    "arrays, kwargs, error, match",
    [
        ({"X": np.zeros((3, 4))}, {}, ValueError, r"shape \(3, 4\) \(2-D\); expected 3-D"),
        ({"arr_0": np.zeros((3, 2)), "arr_1": np.zeros(5)}, {}, ValueError, r"'arr_1'\] has shape \(5,\).*reshape"),
        ({"arr_0": np.zeros((3, 2)), "arr_1": np.zeros((0, 2))}, {}, ValueError, r"measure 'arr_1' has empty measures"),
        ({"X_0": np.zeros((3, 2)), "X_2": np.zeros((3, 2))}, {}, ValueError, r"gaps: X_1 missing"),
        ({"X": np.zeros((2, 3, 1)), "y": np.zeros((2, 3, 1))}, {"key": "z"}, ValueError, r"no array 'z'.*arrays present: \['X', 'y'\]"),
        ({"inputs": np.zeros((2, 3, 1)), "targets": np.zeros((2, 3, 1))}, {}, ValueError, r"arrays present: \['inputs', 'targets'\]"),
        ({"X": np.array([[["a"]]])}, {}, TypeError, "dtype <U1"),
        ({"X": np.full((1, 2, 2), np.inf)}, {}, ValueError, "an infinite value at measure 0, point 0, feature 0"),
        ({"X": np.zeros((1, 2, 2))}, {"feature_columns": ["x"]}, ValueError, "feature_columns applies to long-format"),
        ({"X": np.zeros((1, 2, 2))}, {"group_column": "cell"}, ValueError, "group_column applies to long-format"),
    ],
)
def test_npz_errors(tmp_path, arrays, kwargs, error, match):
    np.savez(tmp_path / "a.npz", **arrays)
    with pytest.raises(error, match=match):
        load_measures(tmp_path / "a.npz", **kwargs)


@pytest.mark.parametrize(
    "array, kwargs, error, match",
    [
        (np.zeros((5, 2)), {}, ValueError, r"\(5, 2\) \(2-D\).*X\[np.newaxis\]"),
        (np.zeros((2, 3, 4, 5)), {}, ValueError, r"4-D"),
        (np.zeros((0, 3, 2)), {}, ValueError, "holds no measures"),
        (np.zeros((2, 0, 2)), {}, ValueError, "empty measures"),
        (np.zeros((2, 3, 0)), {}, ValueError, "0 features"),
        (np.array([[[1.0, np.nan]], [[0.0, 1.0]]]), {}, ValueError, r"NaN at measure 0, point 0, feature 1"),
        (np.ones((1, 1, 1), dtype=complex), {}, TypeError, "complex"),
        (np.full((1, 1, 1), 1e300), {"dtype": np.float32}, ValueError, "beyond the range of float32"),
        (np.zeros((1, 1, 1)), {"key": "X"}, ValueError, "key selects an array"),
    ],
)
def test_npy_errors(tmp_path, array, kwargs, error, match):
    np.save(tmp_path / "a.npy", array)
    with pytest.raises(error, match=match):
        load_measures(tmp_path / "a.npy", **kwargs)


def test_object_arrays_are_refused_with_a_hint(tmp_path):
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.zeros((2, 2)), np.zeros((3, 2))
    np.save(tmp_path / "o.npy", ragged, allow_pickle=True)
    with pytest.raises(ValueError, match=r"np.savez\(path, \*list_of_arrays\)"):
        load_measures(tmp_path / "o.npy")


def test_corrupt_files(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(ValueError, match="Could not read bad.npy"):
        load_measures(tmp_path / "bad.npy")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="Could not read bad.npz"):
        load_measures(tmp_path / "bad.npz")
    (tmp_path / "latin.csv").write_bytes("measure,x\n\xe9,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        load_measures(tmp_path / "latin.csv")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"dtype": int}, TypeError, "dtype must be float32 or float64"),
        ({"dtype": np.float16}, TypeError, "dtype must be float32 or float64"),
        ({"dtype": "no such type"}, TypeError, "floating-point type"),
        ({"key": 3}, TypeError, "key must be a string"),
        ({"group_column": 3}, TypeError, "group_column must be a column name"),
        ({"feature_columns": "x"}, TypeError, "list of column names"),
        ({"feature_columns": []}, ValueError, "feature_columns is empty"),
        ({"feature_columns": ["x", "x"]}, ValueError, r"names \['x'\] more than once"),
        ({"feature_columns": ["measure"]}, ValueError, "also in feature_columns"),
        ({"feature_columns": [1]}, TypeError, "must hold column names"),
        ({"return_labels": "yes"}, TypeError, "return_labels"),
    ],
)
def test_option_errors_come_before_reading(tmp_path, monkeypatch, kwargs, error, match):
    (tmp_path / "t.csv").write_text("measure,x\na,1\n")

    def fail(*args, **kwargs):
        raise AssertionError("the file was opened before the options were checked")

    monkeypatch.setattr("builtins.open", fail)
    with pytest.raises(error, match=match):
        load_measures(tmp_path / "t.csv", **kwargs)


def test_source_type_error():
    with pytest.raises(TypeError, match="pass them to the estimator"):
        load_measures(np.zeros((2, 3, 1)))
    with pytest.raises(TypeError, match="path to a"):
        load_measures(42)


# --------------------------------------------------------------------------- #
# Tables written by pandas, and pairing inputs with targets by name
# --------------------------------------------------------------------------- #
def _long_frame(measures, names):
    return pd.DataFrame(
        [{"measure": name, **{f"x{j}": v for j, v in enumerate(point)}} for name, m in zip(names, measures)
         for point in m]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "write",
    [
        lambda frame, path: (frame.to_csv(path), load_measures(path))[1],  # index column, empty header
        lambda frame, path: (frame.to_csv(path), load_measures(pd.read_csv(path)))[1],  # "Unnamed: 0"
    ],
    ids=["to_csv-with-index", "read_csv-of-it"],
)
def test_the_index_pandas_writes_is_not_a_feature(tmp_path, dense, write):
    frame = _long_frame(dense, [f"m{i}" for i in range(len(dense))])
    loaded = write(frame, tmp_path / "t.csv")
    np.testing.assert_allclose(loaded, dense)


def test_an_unnamed_column_elsewhere_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("measure,x,,y\na,1,2,3\n")
    with pytest.raises(ValueError, match="column without a name.*column 3 of 4"):
        load_measures(tmp_path / "t.csv")
    assert load_measures(tmp_path / "t.csv", feature_columns=["x", "y"]).shape == (1, 1, 2)


@pytest.mark.parametrize("as_frame", [False, True])
def test_targets_pair_with_inputs_by_name(tmp_path, dense, as_frame):
    """Targets in another order come back in the inputs' order; different name
    sets are refused, listing the differences, never paired by position."""
    names = [f"m{i}" for i in range(len(dense))]
    targets = dense * 10.0
    order = [2, 0, 3, 1]
    shuffled = _long_frame(targets[order], [names[i] for i in order])
    source = shuffled if as_frame else (shuffled.to_csv(tmp_path / "y.csv", index=False), tmp_path / "y.csv")[1]
    y, labels = load_measures(source, labels=names, return_labels=True)
    assert labels == names
    np.testing.assert_allclose(y, targets)
    fewer = _long_frame(targets[:3], names[:3])
    other = _long_frame(targets, names[:3] + ["z"])
    for frame, match in [(fewer, r"1 wanted measure\(s\) are not in it: 'm3'"),
                         (other, r"'m3'.*1 of its measure\(s\) are not wanted: 'z'")]:
        with pytest.raises(ValueError, match=match):
            load_measures(frame, labels=names)


def test_labels_do_not_apply_to_arrays(tmp_path, dense):
    np.save(tmp_path / "X.npy", dense)
    with pytest.raises(ValueError, match="array file whose measures have no names"):
        load_measures(tmp_path / "X.npy", labels=[0, 1, 2, 3])
    with pytest.raises(TypeError, match="labels must be a list"):
        load_measures(tmp_path / "X.npy", labels="m0")
