"""The documentation's tables: no cell that reStructuredText would turn into an empty bullet."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in [*DOCS.glob("*.rst"), *DOCS.glob("user_guide/*.rst")])
RULE = re.compile(r"^ *=+( +=+)+ *$")


def simple_table_cells(text):
    """``(line number, cell text)`` of every cell of the simple tables in ``text``.

    A simple table is framed by rule lines of ``=`` runs; the runs give the
    columns, the last one open to the end of the line.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not RULE.match(lines[i]):
            i += 1
            continue
        spans = [m.span() for m in re.finditer(r"=+", lines[i])]
        starts = [a for a, _ in spans]
        bounds = list(zip(starts, starts[1:] + [None]))
        j = i + 1
        rules = 1
        while j < len(lines) and rules < 3:
            if RULE.match(lines[j]):
                rules += 1
            elif lines[j].strip():
                for a, b in bounds:
                    yield j + 1, lines[j][a:b].strip()
            j += 1
        i = j


def test_the_cell_finder_sees_a_lone_dash():
    table = "=====  =====\nname   value\n=====  =====\na      -\nb      1\n=====  =====\n"
    assert [cell for _, cell in simple_table_cells(table)] == ["name", "value", "a", "-", "b", "1"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_no_table_cell_is_a_lone_dash(page):
    # a cell holding only "-" is read as a list item with no text: a bullet and nothing else
    dashes = [line for line, cell in simple_table_cells(page.read_text(encoding="utf-8")) if cell == "-"]
    assert not dashes, f"{page.name}: lines {dashes} have a table cell '-'; write an em dash '\u2014' instead"
