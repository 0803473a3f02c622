"""The files of the ``measattn`` commands: reading measures named on the command line, writing results.

Options that do not fit their file (``--key`` for a table, a column the table
lacks, an array the archive lacks) are refused here, naming the option, before
anything is loaded. What :func:`~sklearn_measattn.datasets.load_measures` then
refuses is about the file's contents: its message is shown as it is, after the
option that named the file. numpy, the loader and the output checks are
imported by the functions that use them, not by ``--help``.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

from ._arguments import option_error

__all__ = [
    "DATA_FILE",
    "POINTS_FILE",
    "TARGET_FILE",
    "FileOptions",
    "check_outputs",
    "describe_file",
    "is_table",
    "load",
    "load_pair",
    "table_columns",
    "write_measures",
]

_TABLES = (".csv", ".tsv")
_ARRAY_FILES = (".npy", ".npz")
# What the loader reads without a key, and the column that names the measures without a group column.
_DEFAULT_KEY = "X"
_DEFAULT_GROUP_COLUMN = "measure"
_SHOWN = 20  # names listed before "..."


@dataclass(frozen=True)
class FileOptions:
    """The options that name one measure file and say what to read from it.

    Parameters
    ----------
    file : str
        The option (or positional argument) naming the file, e.g. ``"--data"``.
    key : str
        The option choosing the array of an .npz, e.g. ``"--key"``.
    feature_columns : str
        The option choosing a table's coordinate columns.
    group_column : str, default="--group-column"
        The option naming a table's measure column.
    """

    file: str
    key: str
    feature_columns: str
    group_column: str = "--group-column"


#: The input measures of ``compare``, ``fit`` and ``predict``.
DATA_FILE = FileOptions("--data", "--key", "--feature-columns")
#: The target measures of ``compare`` and ``fit``.
TARGET_FILE = FileOptions("--y", "--y-key", "--y-feature-columns")
#: The query points of ``predict``.
POINTS_FILE = FileOptions("--points", "--points-key", "--points-feature-columns")


def is_table(path):
    """Whether ``path`` names a CSV/TSV table (by its extension, as the loader decides)."""
    return os.path.splitext(path)[1].lower() in _TABLES


def table_columns(path):
    """The column names of a table's header, as the loader reads them.

    Parameters
    ----------
    path : str
        A .csv or .tsv file.

    Returns
    -------
    columns : list of str or None
        None when the header cannot be read; the loader then says why.
    """
    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next((row for row in csv.reader(handle, delimiter=delimiter) if row), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None if header is None else [cell.strip() for cell in header]


def _npz_names(path):
    """The array names of an .npz archive, or None when it cannot be read (the loader then says why)."""
    import zipfile

    import numpy as np

    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a lone .npy array under an .npz name
        return None
    with archive:
        return set(archive.files)


def _is_numbered(name, prefix):
    number = name[len(prefix) + 1:]
    return name.startswith(f"{prefix}_") and number.isdigit()


def _arrays_read(names, key):
    """Which arrays of an archive the loader reads with ``key``, in its documented order; None if none."""
    prefix = _DEFAULT_KEY if key is None else key
    if prefix in names:
        return f"array {prefix!r}"
    for candidate in [prefix] if key is not None else [prefix, "arr"]:
        if any(_is_numbered(name, candidate) for name in names):
            return f"arrays {candidate}_0, {candidate}_1, ..."
    if key is None and len(names) == 1:
        return f"array {next(iter(names))!r}"
    return None


def describe_file(path, key):
    """What the loader reads from ``path``, for the report: ``" (array 'X')"`` for an .npz, else ``""``.

    Parameters
    ----------
    path : str
        The measure file.
    key : str or None
        The key it is read with.

    Returns
    -------
    text : str
        The arrays read, in parentheses after a space, or ``""``.
    """
    if not path.lower().endswith(".npz"):
        return ""
    names = _npz_names(path)
    read = None if names is None else _arrays_read(names, key)
    return "" if read is None else f" ({read})"


def _listed(names):
    names = sorted(map(str, names)) if isinstance(names, set) else [str(name) for name in names]
    return ", ".join(repr(name) for name in names[:_SHOWN]) + (", ..." if len(names) > _SHOWN else "")


def _check_archive_key(parser, path, options, key, given):
    names = _npz_names(path)
    if names is None or _arrays_read(names, key) is not None:
        return
    prefix = _DEFAULT_KEY if key is None else key
    looked_for = f"array {prefix!r} and no arrays {prefix}_0, {prefix}_1, ..."
    if key is None:
        looked_for = f"array {prefix!r}, no arrays {prefix}_0, {prefix}_1, ... or arr_0, arr_1, ... and not a lone array"
    message = f"{os.path.basename(path)} has no {looked_for}; arrays present: {_listed(names)}"
    if given:
        option_error(parser, options.key, message)
    option_error(parser, options.file, f"{message}; choose one with {options.key}")


def _check_feature_columns(parser, options, group_column, feature_columns):
    duplicated = sorted({column for column in feature_columns if feature_columns.count(column) > 1})
    if duplicated:
        option_error(parser, options.feature_columns, f"names {duplicated} more than once; name each column once")
    group = group_column or _DEFAULT_GROUP_COLUMN
    if group in feature_columns:
        option_error(parser, options.feature_columns,
                     f"{group!r} is the column naming the measures ({options.group_column}), not a coordinate")


def _check_table_columns(parser, path, options, group_column, feature_columns):
    columns = table_columns(path)
    if columns is None:
        return
    name = os.path.basename(path)
    present = f"columns present: {_listed(columns)}"
    if group_column is None and _DEFAULT_GROUP_COLUMN not in columns:
        option_error(parser, options.file, f"{name} has no column {_DEFAULT_GROUP_COLUMN!r} naming the measure of "
                                           f"each point; {present}; name that column with {options.group_column}")
    if group_column is not None and group_column not in columns:
        option_error(parser, options.group_column, f"{name} ({options.file}) has no column {group_column!r}; {present}")
    missing = [column for column in feature_columns or () if column not in columns]
    if missing:
        option_error(parser, options.feature_columns, f"{name} ({options.file}) has no column(s) {missing}; {present}")


def _check_options_fit_file(parser, path, options, *, key, key_given, group_column, feature_columns):
    """Refuse, naming the option, what does not apply to this file or names something it lacks."""
    name = os.path.basename(path)
    suffix = os.path.splitext(path)[1].lower()
    if key_given and suffix != ".npz":
        hint = f"; choose a table's columns with {options.feature_columns}" if suffix in _TABLES else ""
        option_error(parser, options.key,
                     f"selects an array inside an .npz archive and does not apply to {options.file} {name}{hint}")
    if suffix in _ARRAY_FILES:
        for option, value in ((options.feature_columns, feature_columns), (options.group_column, group_column)):
            if value is not None:
                option_error(parser, option, f"applies to CSV/TSV tables, not to {options.file} {name}, whose arrays "
                                             "already have the (n_samples, n_points, n_features) layout")
    if feature_columns is not None:
        _check_feature_columns(parser, options, group_column, feature_columns)
    if suffix == ".npz":
        _check_archive_key(parser, path, options, key, key_given)
    elif suffix in _TABLES:
        _check_table_columns(parser, path, options, group_column, feature_columns)


def load(parser, path, options, *, key=None, default_key=None, group_column=None, feature_columns=None, labels=None):
    """Load the measures of one file, refusing with a usage error that names the option at fault.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    path : str
        The file.
    options : FileOptions
        The options that named the file and say how to read it.
    key : str or None, default=None
        The array of an .npz, as given on the command line.
    default_key : str or None, default=None
        The array to read when ``key`` is not given (None: the loader's order).
    group_column : str or None, default=None
        A table's measure column (None: ``measure``).
    feature_columns : list of str or None, default=None
        A table's coordinate columns (None: every other column).
    labels : list or None, default=None
        For a table: the measure names to return, in this order (pairing by name).

    Returns
    -------
    measures : ndarray or list of ndarray
        As :func:`~sklearn_measattn.datasets.load_measures` returns them.
    labels : list
        The name of each measure.
    """
    from ..datasets import load_measures

    read_key = key if key is not None else default_key
    _check_options_fit_file(parser, path, options, key=read_key, key_given=key is not None,
                            group_column=group_column, feature_columns=feature_columns)
    given = {"key": read_key, "group_column": group_column, "feature_columns": feature_columns, "labels": labels}
    try:
        return load_measures(path, return_labels=True, **{k: v for k, v in given.items() if v is not None})
    except (ValueError, TypeError, FileNotFoundError) as exc:
        option_error(parser, options.file, exc)


def load_pair(args, parser):
    """The input and target measures of ``compare --data`` and ``fit``, and how they were read.

    The targets come from ``--y``, or from the array ``y`` of the ``--data``
    archive when ``--y`` is left out. Two tables are paired by measure name,
    other files by position.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line: ``data``, ``y``, ``key``, ``y_key``,
        ``group_column``, ``feature_columns`` and ``y_feature_columns``.
    parser : argparse.ArgumentParser
        The command's parser.

    Returns
    -------
    X, y : ndarray or list of ndarray
        The input and target measures.
    read : dict
        ``"X"`` and ``"y"``: the files (and arrays) read; ``"paired"``: how.
    """
    X, labels = load(parser, args.data, DATA_FILE, key=args.key, group_column=args.group_column,
                     feature_columns=args.feature_columns)
    y_path = args.y
    same_archive = args.data.lower().endswith(".npz") and (
        y_path is None or os.path.abspath(y_path) == os.path.abspath(args.data))
    if y_path is None and not (same_archive and (args.y_key is not None or describe_file(args.data, "y"))):
        parser.error("--y FILE is required with --data (the target measures, one per input measure); it may be "
                     "left out only when --data is an .npz that also holds the targets as array 'y'")
    y_path = y_path or args.data
    # Targets: the array y (or y_0, y_1, ...) when the archive has one.
    default_key = "y" if same_archive or describe_file(y_path, "y") else None
    by_name = is_table(args.data) and is_table(y_path)
    y, _ = load(parser, y_path, TARGET_FILE, key=args.y_key, default_key=default_key, group_column=args.group_column,
                feature_columns=args.y_feature_columns, labels=labels if by_name else None)
    y_key = args.y_key if args.y_key is not None else default_key
    read = {
        "X": os.path.basename(args.data) + describe_file(args.data, args.key),
        "y": os.path.basename(y_path) + describe_file(y_path, y_key),
        "paired": "by measure name" if by_name else "by position",
    }
    return X, y, read


def check_outputs(parser, **paths):
    """Check every output path before any work, as a usage error.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    **paths : str or None
        The output paths by option name (``out="r.csv"``); None is skipped.
    """
    from ..experiments import check_output_path

    for option, path in paths.items():
        if path is not None:
            try:
                check_output_path(path, what=f"--{option}")
            except ValueError as exc:
                parser.error(str(exc))


def write_measures(path, measures):
    """Write measures as ``.npy`` (one dense array) or ``.npz`` (one array per measure, ``arr_0``, ...).

    Parameters
    ----------
    path : str
        Ends in ``.npy`` or ``.npz``.
    measures : ndarray or list of ndarray
        Dense or ragged; a ragged batch needs ``.npz``.
    """
    import numpy as np

    if path.lower().endswith(".npy"):
        np.save(path, np.asarray(measures))
    else:
        np.savez(path, *[np.asarray(m) for m in measures])
