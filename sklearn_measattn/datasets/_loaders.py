"""Load users' own ensembles from ``.npy``, ``.npz``, CSV/TSV files or a DataFrame.

Every format comes back in the package's layout: a dense float array
``(n_samples, n_points, n_features)`` when every measure has the same number of
points, else a ragged list of ``(n_points_i, n_features)`` float arrays (which
the estimator and the metrics pad and weight themselves).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ._arrays import _read_npy, _read_npz
from ._tables import _read_frame, _read_table

__all__ = ["load_measures", "MEASURE_FILE_FORMATS"]

#: File extensions :func:`load_measures` reads (matched case-insensitively).
MEASURE_FILE_FORMATS = (".npy", ".npz", ".csv", ".tsv")

_DEFAULT_GROUP_COLUMN = "measure"
_SHOWN = 8  # how many names an error message lists before "..."


def load_measures(
    source,
    *,
    key=None,
    group_column=_DEFAULT_GROUP_COLUMN,
    feature_columns=None,
    dtype=float,
    return_labels=False,
    labels=None,
):
    """Load a batch of measures (ensembles, point clouds) from a file or a DataFrame.

    The result is the package's layout for a batch of measures: a dense float
    array of shape ``(n_samples, n_points, n_features)`` when every measure has
    the same number of points, else a list of ``(n_points_i, n_features)`` float
    arrays (a ragged batch, which :class:`~sklearn_measattn.MeasureTransformerRegressor`
    and the metrics accept as is). Targets ``y`` load with the same function.

    Formats, chosen by the file extension (case-insensitive):

    ``.npy``
        One 3-D array ``(n_samples, n_points, n_features)``, as written by
        ``np.save(path, X)``.
    ``.npz``
        The arrays are looked up in this order, with ``K = key`` (``"X"`` when
        ``key`` is None):

        1. an array named ``K``: a dense 3-D batch (``np.savez(path, X=X, y=y)``);
        2. arrays named ``K_0, K_1, ..., K_{n-1}``: one 2-D array
           ``(n_points_i, n_features)`` per measure, in the order of the number
           (``np.savez(path, **{f"X_{i}": x for i, x in enumerate(Xs)})``);
        3. only when ``key`` is None: arrays ``arr_0, arr_1, ...``, one per
           measure, which is what ``np.savez(path, *list_of_arrays)`` writes;
        4. only when ``key`` is None: the only array of an archive holding one.

        Numbers must run from 0 without gaps. Load targets stored beside the
        inputs with ``key="y"``.
    ``.csv`` / ``.tsv``
        A long-format table, comma- or tab-separated, with a header row: one
        row per point, a column ``group_column`` naming the measure the point
        belongs to and one column per feature. Read with the standard library:
        pandas is not needed. Cells may be quoted; surrounding spaces in names
        and values are ignored; blank lines are skipped; a leading byte order
        mark (as Excel writes) is ignored.
    ``pandas.DataFrame``
        The same long format, in memory.

    In a long-format table the measures come in the order in which their names
    first appear, and the points of a measure in row order (a measure's rows
    need not be contiguous). Measure names are compared as text in a CSV and
    as values in a DataFrame.

    Parameters
    ----------
    source : str, os.PathLike or pandas.DataFrame
        Path to a ``.npy``, ``.npz``, ``.csv`` or ``.tsv`` file, or a DataFrame
        in long format.
    key : str or None, default=None
        For ``.npz`` files only: the name of the array (or the prefix of the
        per-measure arrays) to load; see above. None means ``"X"``, then
        ``arr_0, arr_1, ...``, then a lone array.
    group_column : str, default="measure"
        For tables only: the column naming the measure of each row. A
        DataFrame's column may be any hashable label.
    feature_columns : list of str or None, default=None
        For tables only: the columns holding the coordinates of the points, in
        this order. None means every column except ``group_column``, in table
        order. Selecting columns lets one table hold both inputs and targets
        (``feature_columns=["x1", "x2"]``, then ``["y1", "y2"]``).
    dtype : float dtype, default=float
        Floating-point type of the result (``float`` is float64; float32
        halves the memory).
    return_labels : bool, default=False
        If True, also return the name of each measure.
    labels : list or None, default=None
        For tables only: the measure names to return, in this order, e.g. the
        labels of the inputs when loading their targets from another table
        (``y = load_measures("final.csv", labels=X_labels)``), so that the
        pairs are formed by name, not by position. A table whose measure names
        are not exactly these raises ``ValueError`` listing the differences.

    Returns
    -------
    measures : ndarray of shape (n_samples, n_points, n_features) or list of ndarray
        Finite floats of type ``dtype``: dense when all measures have the same
        number of points, else a list of ``(n_points_i, n_features)`` arrays.
    labels : list
        Only when ``return_labels=True``: one name per measure, in the order of
        ``measures``: the values of ``group_column`` for a table, the array
        names for per-measure ``.npz`` arrays, ``0, ..., n_samples - 1`` for a
        dense array. Compare the labels of inputs and targets loaded from
        separate tables to check that they pair up.

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    ValueError
        For an unknown extension, a missing ``.npz`` array or table column (the
        message lists those present), an array of the wrong rank, an empty file,
        table or measure, measures with different numbers of features, NaN or
        infinite values (the message says where), or an option that does not
        apply to the format (``key`` for a table, ``feature_columns`` or
        ``group_column`` for an array file).
    TypeError
        For a source that is neither a path nor a DataFrame, a non-float
        ``dtype``, options of the wrong type, or non-numeric values (the message
        names the column and the row, or the array).

    See Also
    --------
    sklearn_measattn.datasets.make_lorenz96_analysis : Simulated ensembles of the same layout.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import load_measures
    >>> folder = tempfile.TemporaryDirectory()
    >>> table = os.path.join(folder.name, "cells.csv")
    >>> with open(table, "w") as f:
    ...     _ = f.write("measure,x,y\\n"
    ...                 "a,0.1,1.0\\na,0.3,0.5\\n"
    ...                 "b,2.0,1.5\\nb,2.5,1.0\\nb,1.0,0.0\\n")
    >>> measures, labels = load_measures(table, return_labels=True)
    >>> labels, [m.shape for m in measures]
    (['a', 'b'], [(2, 2), (3, 2)])
    >>> archive = os.path.join(folder.name, "ensembles.npz")
    >>> np.savez(archive, X=np.zeros((4, 10, 2)), y=np.ones((4, 5, 2)))
    >>> load_measures(archive).shape, load_measures(archive, key="y").shape
    ((4, 10, 2), (4, 5, 2))
    >>> folder.cleanup()
    """
    dtype = _check_dtype(dtype)
    _check_option_types(key, group_column, feature_columns, return_labels, source)
    if labels is not None and (isinstance(labels, (str, bytes)) or not isinstance(labels, (list, tuple))):
        raise TypeError(f"labels must be a list of measure names or None, got {labels!r}.")
    is_table = _is_dataframe(source)
    if is_table:
        _reject_key(key, "a DataFrame")
        measures, labels_read = _read_frame(source, group_column, feature_columns)
        name = "the DataFrame"
    else:
        path, suffix = _check_path(source)
        name = os.path.basename(path)
        if suffix in (".npy", ".npz"):
            if feature_columns is not None or group_column != _DEFAULT_GROUP_COLUMN:
                option = "feature_columns" if feature_columns is not None else "group_column"
                raise ValueError(
                    f"{option} applies to long-format tables (.csv, .tsv, DataFrame), not to the {suffix} "
                    f"file {path!r}, whose arrays already have the (n_samples, n_points, n_features) layout."
                )
        if labels is not None and suffix in (".npy", ".npz"):
            raise ValueError(
                f"labels= orders the measures of a table by name, but {name} is an array file whose measures "
                "have no names; they pair with others by position."
            )
        if suffix == ".npy":
            _reject_key(key, "a .npy file (it holds a single array)")
            measures, labels_read = _read_npy(path)
        elif suffix == ".npz":
            measures, labels_read = _read_npz(path, key)
        else:
            _reject_key(key, f"a {suffix} table")
            is_table = True
            measures, labels_read = _read_table(path, suffix, group_column, feature_columns)
    if labels is not None:
        measures, labels_read = _in_order(measures, labels_read, labels, name)
    measures = _finish(measures, labels_read, name, dtype)
    return (measures, list(labels_read)) if return_labels else measures


def _in_order(measures, read, wanted, name):
    """The measures of a table reordered to the names ``wanted``, which must be exactly its names."""
    position = {label: i for i, label in enumerate(read)}
    wanted_set = set(wanted)
    if len(wanted_set) != len(wanted):
        duplicated = sorted({str(x) for x in wanted if list(wanted).count(x) > 1})
        raise ValueError(f"labels names {duplicated[:_SHOWN]} more than once; each measure pairs with one.")
    missing = [label for label in wanted if label not in position]
    extra = [label for label in read if label not in wanted_set]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} wanted measure(s) are not in it: {_shown(missing)}")
        if extra:
            parts.append(f"{len(extra)} of its measure(s) are not wanted: {_shown(extra)}")
        raise ValueError(
            f"The measures of {name} do not match the labels they should pair with: {'; '.join(parts)}. Inputs "
            "and targets pair by measure name, so both tables need the same names (compared as text in a CSV)."
        )
    return [measures[position[label]] for label in wanted], list(wanted)


def _shown(values):
    return ", ".join(repr(v) for v in values[:_SHOWN]) + (" ..." if len(values) > _SHOWN else "")


# --------------------------------------------------------------------------- #
# Options
# --------------------------------------------------------------------------- #


def _check_dtype(dtype):
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a floating-point type such as float or np.float32, got {dtype!r}.") from None
    if resolved.kind != "f" or resolved.itemsize < 4:
        raise TypeError(
            f"dtype must be float32 or float64 (measures are real coordinates), got {resolved}. "
            "Use dtype=float (float64) or dtype=np.float32."
        )
    return resolved


def _check_option_types(key, group_column, feature_columns, return_labels, source):
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a string (an array name in an .npz file) or None, got {key!r}.")
    if not isinstance(return_labels, (bool, np.bool_)):
        raise TypeError(f"return_labels must be True or False, got {return_labels!r}.")
    table_labels_any = _is_dataframe(source)  # a DataFrame's columns may be any hashable label
    if not (isinstance(group_column, str) or (table_labels_any and _is_hashable(group_column))):
        raise TypeError(f"group_column must be a column name (a string), got {group_column!r}.")
    if feature_columns is None:
        return
    if isinstance(feature_columns, (str, bytes)) or not isinstance(feature_columns, (list, tuple)):
        raise TypeError(
            f"feature_columns must be a list of column names (e.g. ['x', 'y']) or None, got {feature_columns!r}."
        )
    if len(feature_columns) == 0:
        raise ValueError("feature_columns is empty; name at least one column, or pass None for every other column.")
    for column in feature_columns:
        if not (isinstance(column, str) or (table_labels_any and _is_hashable(column))):
            raise TypeError(f"feature_columns must hold column names (strings), got {column!r} in {feature_columns!r}.")
    duplicated = sorted({str(c) for c in feature_columns if feature_columns.count(c) > 1})
    if duplicated:
        raise ValueError(f"feature_columns names {duplicated} more than once; name each column once.")
    if group_column in feature_columns:
        raise ValueError(
            f"group_column {group_column!r} is also in feature_columns; it names the measures and cannot be a feature."
        )


def _is_hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _is_dataframe(source):
    pandas = sys.modules.get("pandas")  # only a DataFrame needs pandas; never import it here
    return pandas is not None and isinstance(source, pandas.DataFrame)


def _reject_key(key, what):
    if key is not None:
        raise ValueError(
            f"key selects an array inside an .npz file and does not apply to {what}; "
            "for tables, choose columns with feature_columns."
        )


def _check_path(source):
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"source must be a path to a {'/'.join(MEASURE_FILE_FORMATS)} file or a pandas DataFrame, got "
            f"{type(source).__name__}. Arrays already in memory need no loading: pass them to the estimator."
        )
    path = os.fsdecode(os.fspath(source))
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in MEASURE_FILE_FORMATS:
        raise ValueError(
            f"Cannot tell the format of {path!r} from its extension {suffix or '(none)'!r}; supported are "
            f"{list(MEASURE_FILE_FORMATS)}: .npy (a 3-D array), .npz (arrays by name), .csv/.tsv (long format)."
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file: {path!r}. Check the path (relative paths start at {os.getcwd()!r}).")
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a directory; pass the path of a {suffix} file.")
    return path, suffix


# --------------------------------------------------------------------------- #
# Common checks
# --------------------------------------------------------------------------- #


def _finish(measures, labels, name, dtype):
    """Check and convert: dense when every measure has the same number of points."""
    if isinstance(measures, np.ndarray):
        _check_sizes(measures.shape, name, labels)
        _check_finite(measures, name, labels)
        return _convert(measures, dtype, name)
    if not measures:  # pragma: no cover - every reader yields at least one measure
        raise ValueError(f"{name} holds no measures.")
    for array, label in zip(measures, labels):
        _check_sizes((1,) + array.shape, f"{name} measure {label!r}", None)
    n_features = [array.shape[1] for array in measures]
    if len(set(n_features)) > 1:
        first = n_features[0]
        odd = [f"{label!r} ({count})" for label, count in zip(labels, n_features) if count != first]
        raise ValueError(
            f"The measures in {name} have different numbers of features: {labels[0]!r} has {first}, but "
            f"{', '.join(odd[:_SHOWN])}{' ...' if len(odd) > _SHOWN else ''}. Every point must live in the same space."
        )
    for array, label in zip(measures, labels):
        _check_finite(array[np.newaxis], f"{name} measure {label!r}", None)
    if len({array.shape[0] for array in measures}) == 1:
        return _convert(np.stack(measures), dtype, name)
    return [_convert(array, dtype, f"{name} measure {label!r}") for array, label in zip(measures, labels)]


def _convert(array, dtype, name):
    with np.errstate(over="ignore"):
        converted = array.astype(dtype, copy=False)
    if converted.dtype != array.dtype and not np.all(np.isfinite(converted)):
        raise ValueError(
            f"{name} has values of magnitude up to {float(np.max(np.abs(array))):.3g}, beyond the range of {dtype}; "
            "load with dtype=float (float64)."
        )
    return converted


def _check_sizes(shape, name, labels):
    if shape[0] == 0:
        raise ValueError(f"{name} holds no measures (shape {shape}).")
    if shape[1] == 0:
        raise ValueError(f"{name} has empty measures (0 points, shape {shape}); every measure needs a point.")
    if shape[2] == 0:
        raise ValueError(f"{name} has 0 features (shape {shape}); every point needs a coordinate.")


def _check_finite(array, name, labels):
    if array.dtype.kind != "f":
        return
    bad = ~np.isfinite(array)
    if not bad.any():
        return
    sample, point, feature = (int(i) for i in np.argwhere(bad)[0])
    kind = "NaN" if np.isnan(array[sample, point, feature]) else "an infinite value"
    measure = f"measure {labels[sample]!r}, " if labels is not None else ""
    raise ValueError(
        f"{name} has {kind} at {measure}point {point}, feature {feature} ({int(bad.sum())} non-finite value(s) "
        "in all). Remove or impute them first: measures must be finite."
    )
