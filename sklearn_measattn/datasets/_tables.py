"""Reading long-format tables (CSV/TSV files, DataFrames): one row per point."""

from __future__ import annotations

import csv
import os

import numpy as np


def _is_index_column(columns, position):
    """Whether column ``position`` is the index pandas writes with ``df.to_csv(path)``:
    the first column, with an empty name (``"Unnamed: 0"`` once read back by pandas)."""
    return position == 0 and len(columns) > 1 and columns[0] in ("", "Unnamed: 0")


def _resolve_columns(columns, group_column, feature_columns, where):
    shown = [str(c) for c in columns[:20]] + (["..."] if len(columns) > 20 else [])
    unnamed = [i for i, c in enumerate(columns) if c == "" and not _is_index_column(columns, i)]
    if unnamed and feature_columns is None:
        raise ValueError(
            f"{where} has a column without a name (column {unnamed[0] + 1} of {len(columns)}); name every "
            "column in the header, or choose the feature columns with feature_columns=."
        )
    duplicated = sorted({str(c) for c in columns if columns.count(c) > 1})
    if duplicated:
        raise ValueError(f"{where} has duplicate column names {duplicated}; give every column its own name.")
    if group_column not in columns:
        raise ValueError(
            f"{where} has no column {group_column!r} naming the measure of each row; columns present: {shown}. "
            "Pass group_column= with the right name."
        )
    if feature_columns is None:
        # A leading unnamed column is the row index of df.to_csv(path), not a coordinate.
        features = [c for i, c in enumerate(columns) if c != group_column and not _is_index_column(columns, i)]
        if not features:
            raise ValueError(f"{where} has only the column {group_column!r}; add at least one feature column.")
        return features
    missing = [c for c in feature_columns if c not in columns]
    if missing:
        raise ValueError(f"{where} has no feature column(s) {missing}; columns present: {shown}.")
    return list(feature_columns)


def _read_table(path, suffix, group_column, feature_columns):
    name = os.path.basename(path)
    delimiter = "\t" if suffix == ".tsv" else ","
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            header = next((row for row in reader if row), None)
            if header is None:
                raise ValueError(f"{name} is empty; expected a header row, then one row per point.")
            header = [cell.strip() for cell in header]
            features = _resolve_columns(header, group_column, feature_columns, name)
            group_index = header.index(group_column)
            feature_indices = [header.index(c) for c in features]
            groups, cells, lines = [], [], []
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if len(row) != len(header):
                    raise ValueError(
                        f"{name} line {reader.line_num} has {len(row)} fields but the header has {len(header)}; "
                        f"every row needs one value per column (delimiter {delimiter!r})."
                    )
                groups.append(row[group_index].strip())
                cells.append([row[i] for i in feature_indices])
                lines.append(reader.line_num)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not UTF-8 text ({exc}); save the table as UTF-8 CSV.") from None
    except csv.Error as exc:
        raise ValueError(f"{name} is not a well-formed {suffix} table: {exc}") from None
    if not groups:
        raise ValueError(f"{name} has a header but no rows; expected one row per point.")
    for group, line in zip(groups, lines):
        if not group:
            raise ValueError(f"{name} line {line}: the column {group_column!r} is empty; every point needs a measure name.")
    values = np.empty((len(cells), len(features)))
    cells = np.array(cells, dtype=np.str_)
    for j, column in enumerate(features):
        values[:, j] = _to_float_column(cells[:, j], column, name, lambda i: f"line {lines[i]}")
    return _split_groups(groups, values)


def _read_frame(frame, group_column, feature_columns):
    where = "The DataFrame"
    columns = list(frame.columns)
    features = _resolve_columns(columns, group_column, feature_columns, where)
    if len(frame) == 0:
        raise ValueError(f"{where} has no rows; expected one row per point.")
    index = frame.index

    def row_name(i):
        return f"row {i} (index {index[i]!r})"

    groups = frame[group_column].tolist()
    for i, group in enumerate(groups):
        if group is None or (isinstance(group, float) and np.isnan(group)) or type(group).__name__ in ("NAType", "NaTType"):
            raise ValueError(f"{where} {row_name(i)}: the column {group_column!r} is missing; every point needs a measure.")
    values = np.empty((len(frame), len(features)))
    for j, column in enumerate(features):
        values[:, j] = _to_float_column(frame[column].to_numpy(), column, where, row_name)
    return _split_groups(groups, values)


def _to_float_column(raw, column, where, row_name):
    """One column as float64; a TypeError names the first cell that is not a number."""
    try:
        values = np.asarray(raw, dtype=np.float64)
    except (ValueError, TypeError):
        values = None
    if values is not None:
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            kind = "NaN (a missing value)" if np.isnan(values[bad[0]]) else "an infinite value"
            raise ValueError(
                f"{where}, column {column!r}, {row_name(int(bad[0]))}: {kind} ({bad.size} non-finite value(s) in "
                "this column). Remove or impute them first: measures must be finite."
            )
        return values
    for i, cell in enumerate(raw):
        try:
            float(cell)
        except (ValueError, TypeError):
            if isinstance(cell, str) and not cell.strip():
                empty = sum(1 for c in raw if isinstance(c, str) and not c.strip())
                raise ValueError(
                    f"{where}, column {column!r}, {row_name(i)}: an empty cell, a missing value (pandas writes NaN "
                    f"as an empty cell; {empty} empty cell(s) in this column). Remove or impute them first: "
                    "measures must be finite."
                ) from None
            shown = repr(str(cell)) if isinstance(cell, str) else repr(cell)
            raise TypeError(
                f"{where}, column {column!r}, {row_name(i)}: {shown} is not a number. Feature columns must be "
                "numeric; pass feature_columns= to leave other columns out."
            ) from None
    raise TypeError(f"{where}, column {column!r}: values of type {raw.dtype} are not numbers.")  # pragma: no cover


def _split_groups(groups, values):
    """Rows grouped by measure: measures in order of first appearance, rows in order."""
    codes = {}
    row_codes = np.fromiter((codes.setdefault(g, len(codes)) for g in groups), dtype=np.intp, count=len(groups))
    order = np.argsort(row_codes, kind="stable")
    counts = np.bincount(row_codes, minlength=len(codes))
    measures = np.split(values[order], np.cumsum(counts)[:-1])
    return measures, list(codes)
