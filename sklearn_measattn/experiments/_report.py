"""Plain-text reports: one number format, one table layout, one CSV writer.

Every table and progress line of the command line and of the scripts in
``studies/`` goes through these three functions, so that numbers round the same
way everywhere (three significant figures: ``0.960`` next to ``1.00``, never
``0.96`` next to ``1``).
"""

from __future__ import annotations

import csv
import math
import numbers
import os
import tempfile

__all__ = ["format_number", "format_table", "write_csv", "check_output_path"]

_TABLE_STYLES = ("plain", "rst")


def format_number(value, digits=3):
    """Format a number with ``digits`` significant figures, keeping trailing zeros.

    Parameters
    ----------
    value : float, int or None
        The number. ``None`` and ``nan`` print as ``"nan"``; infinities as
        ``"inf"`` / ``"-inf"``.
    digits : int, default=3
        Significant figures.

    Returns
    -------
    text : str
        ``0.96`` is ``"0.960"`` and ``1`` is ``"1.00"``, so that numbers in one
        column carry the same precision; magnitudes of ``10**digits`` and above,
        or below ``1e-4``, use scientific notation.

    Examples
    --------
    >>> from sklearn_measattn.experiments import format_number
    >>> [format_number(v) for v in (1, 0.96, 0.0123456, 23.04, 1234.5)]
    ['1.00', '0.960', '0.0123', '23.0', '1.23e+03']
    >>> format_number(float("nan")), format_number(0.5, digits=2)
    ('nan', '0.50')
    """
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return "nan"
    value = float(value)
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = f"{value:#.{int(digits)}g}"
    if "e" not in text:
        text = text.rstrip(".")
    return text


def format_table(header, body, *, title=None, notes=(), style="plain"):
    """Lay out a table of strings as aligned text.

    Parameters
    ----------
    header : sequence of str
        Column names.
    body : sequence of sequences of str
        Rows, each with one cell per column (format numbers with
        :func:`format_number` first).
    title : str, default=None
        A line printed above the table.
    notes : sequence of str, default=()
        Lines printed under the table, after a blank line (what the columns mean).
    style : {"plain", "rst"}, default="plain"
        ``"plain"``: columns separated by two spaces with a dashed rule under the
        header, for a terminal. ``"rst"``: a reStructuredText simple table (rules
        of ``=`` above and below the header and under the body), for the docs.

    Returns
    -------
    text : str
        The table, lines joined by newlines, without a trailing newline.

    Raises
    ------
    ValueError
        For an unknown ``style`` or a row whose length differs from the header's.

    Examples
    --------
    >>> from sklearn_measattn.experiments import format_table
    >>> print(format_table(["kernel", "ESS/n"], [["softmax", "0.0120"], ["log", "0.850"]]))
    kernel   ESS/n
    -------  ------
    softmax  0.0120
    log      0.850
    """
    if style not in _TABLE_STYLES:
        raise ValueError(f"style must be one of {', '.join(map(repr, _TABLE_STYLES))}, got {style!r}.")
    header = [str(h) for h in header]
    body = [[str(cell) for cell in row] for row in body]
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise ValueError(f"table row {i} has {len(row)} cells for {len(header)} columns: {row!r}.")
    widths = [max([len(h)] + [len(row[j]) for row in body]) for j, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    lines = [title] if title else []
    if style == "rst":
        rule = "  ".join("=" * w for w in widths)
        lines += [rule, line(header), rule] + [line(row) for row in body] + [rule]
    else:
        lines += [line(header), "  ".join("-" * w for w in widths)] + [line(row) for row in body]
    notes = list(notes)
    if notes:
        lines += [""] + notes
    return "\n".join(lines)


def check_output_path(path, *, what="output file"):
    """Raise a ``ValueError`` now if ``path`` cannot be written later.

    Meant to run before any long computation, so that a typo in an output path
    does not cost the run. Checks that the folder exists and is writable and
    that ``path`` is not a folder; it creates nothing.

    Parameters
    ----------
    path : str or path-like
        The file to be written.
    what : str, default="output file"
        How the message names the file (e.g. ``"--out"``).

    Returns
    -------
    path : str
        The path, as a string.

    Raises
    ------
    ValueError
        If the folder is missing or not writable, or ``path`` is a folder or an
        existing file that cannot be overwritten.

    Examples
    --------
    >>> from sklearn_measattn.experiments import check_output_path
    >>> check_output_path("/no/such/folder/results.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: output file '/no/such/folder/results.csv': the folder '/no/such/folder' does not exist; ...
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{what} {path!r} is a folder; give a file name, e.g. {os.path.join(path, 'results.csv')!r}.")
    if not os.path.isdir(folder):
        raise ValueError(f"{what} {path!r}: the folder {folder!r} does not exist; create it first or choose another path.")
    # Try it rather than trust permission bits: as root, os.access says yes on a
    # read-only file system, and ACLs can say no where the bits say yes.
    try:
        if os.path.exists(path):
            with open(path, "a"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".measattn-write-check-"):
                pass
    except OSError as exc:
        raise ValueError(f"{what} {path!r} cannot be written ({exc.strerror or exc}); choose another path.") from exc
    return path


def write_csv(path, rows, fields=None, *, append=False):
    """Write dictionaries as CSV rows, one per dict.

    Parameters
    ----------
    path : str or path-like
        The CSV file (overwritten).
    rows : sequence of dict
        The rows. Keys outside ``fields`` are left out; missing keys are empty.
        ``nan`` and ``None`` are written as empty cells, other floats in full
        precision (``repr``), so that the file can be read back exactly.
    fields : sequence of str, default=None
        Columns, in order. ``None``: the keys of the rows, in order of first
        appearance.
    append : bool, default=False
        Add the rows at the end of ``path`` instead of overwriting it; the
        header is written only when the file is new or empty (so a study can
        write each row as soon as it has it, and resume from the file).

    Returns
    -------
    n_rows : int
        Number of rows written.

    Examples
    --------
    >>> import csv, os, tempfile
    >>> from sklearn_measattn.experiments import write_csv
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.csv")
    >>> write_csv(path, [{"kernel": "log", "ess": 0.85}, {"kernel": "softmax", "ess": float("nan")}])
    2
    >>> with open(path) as handle:
    ...     [dict(row) for row in csv.DictReader(handle)]
    [{'kernel': 'log', 'ess': '0.85'}, {'kernel': 'softmax', 'ess': ''}]
    >>> write_csv(path, [{"kernel": "poly", "ess": 0.5}], ["kernel", "ess"], append=True)
    1
    >>> with open(path) as handle:
    ...     [row["kernel"] for row in csv.DictReader(handle)]
    ['log', 'softmax', 'poly']
    """
    rows = list(rows)
    if fields is None:
        fields = list(dict.fromkeys(key for row in rows for key in row))
    path = os.fspath(path)
    header = not append or not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a" if append else "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        if header:
            writer.writeheader()
        for row in rows:
            writer.writerow({key: _csv_cell(value) for key, value in row.items()})
    return len(rows)


def _csv_cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, numbers.Integral)):
        return repr(float(value))
    return value
