"""Screenshot the built documentation in headless Chromium and check that its pages read.

Usage (from the repository root, after ``make docs`` or ``make -C docs html-noplot``)::

    .venv/bin/pip install playwright          # the Python package only; no browser download
    apt-get install chromium                  # or any Chromium/Chrome; pass --chromium PATH
    .venv/bin/python tools/doc_screenshots.py                   # the study pages, 1280 px wide
    .venv/bin/python tools/doc_screenshots.py --all --width 1280 --width 1920
    .venv/bin/python tools/doc_screenshots.py phase_diagram auto_examples/plot_sample_size

Each page is loaded from ``docs/_build/html`` (``--html``) into a browser
window of the given width, with every network request refused, and a
full-page screenshot goes to ``--out`` (default ``/tmp/doc_screenshots``),
one ``<page>-<width>.png`` per page and width, plus a close-up of each table
that fails. The script then measures what a reader sees and prints one line
per finding:

- ``FAIL key column hidden``: a table is wider than the content column and one
  of its key columns (``--key``, by default ``diverged``, ``RMSE / best``,
  ``RMSE / RHF`` and ``verdict``) lies beyond the right edge, behind the
  horizontal scroll bar (measured: the column's right edge against the
  table box's visible width);
- ``FAIL cell wraps``: a short table cell (``--short``, by default 40
  characters or fewer: a number, a label, a header) whose text runs onto three
  lines or more (its text boxes grouped by line): its column is squeezed.
  Longer cells are prose, and prose wraps;
- ``FAIL empty bullet``: a table cell holding an empty list item, what
  reStructuredText makes of a lone ``-`` in a cell;
- ``FAIL math``: a formula left as TeX source (MathJax absent or failed);
- ``FAIL network``: the page asked for anything but a local file (the
  documentation must read offline);
- ``WARN table scrolls``: a table wider than the column whose key columns
  are visible, with the columns cut;
- ``WARN code scrolls``: how many code blocks are wider than the column, and
  the widest (every one with ``--code``);
- ``INFO figure``: each image's natural and displayed width.

The exit status is 1 when any page has a ``FAIL`` line, 2 when the browser or
a page cannot be loaded, 0 otherwise. Nothing here runs in CI, which has no
browser; run it after changing a page's tables or figures and look at the
screenshots.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The pages with figures or wide tables, checked when no page is named.
STUDY_PAGES = ("reproduction", "phase_diagram", "sample_size", "assimilation", "kernel_study")

#: Header texts (case-insensitive) of the columns a results table is read by.
KEY_COLUMNS = ("diverged", "RMSE / best", "RMSE / RHF", "verdict")

#: Flags that keep a headless Chromium quiet and off the network.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--hide-scrollbars")

_MEASURE = r"""
([keyNames, shortCell]) => {
  const keys = keyNames.map((k) => k.toLowerCase());
  const article = document.querySelector("article.bd-article") || document.body;
  const headingOf = (el) => {
    let node = el, text = "";
    while (node && node !== document.body) {
      let sib = node.previousElementSibling;
      while (sib) {
        const h = sib.matches("h1,h2,h3,h4,h5,p.rubric") ? sib : sib.querySelector("h1,h2,h3,h4,h5");
        if (h) { text = h.textContent; break; }
        sib = sib.previousElementSibling;
      }
      if (text) break;
      node = node.parentElement;
      const own = node && node.matches("section") ? node.querySelector(":scope > h1,:scope > h2,:scope > h3,:scope > h4") : null;
      if (own && own.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) { text = own.textContent; break; }
    }
    return text.replace(/[#¶]/g, "").replace(/\s+/g, " ").trim();
  };
  // The lines a cell's text runs onto: its text boxes grouped by vertical centre. Inline code sits a
  // pixel or two off the text beside it (its own font and padding), so boxes whose centres lie within
  // half a box height of a line's first box are on that line.
  const lines = (cell) => {
    const boxes = [];
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      if (!walker.currentNode.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(walker.currentNode);
      for (const r of range.getClientRects()) if (r.width > 0) boxes.push([r.top + r.height / 2, r.height]);
    }
    boxes.sort((a, b) => a[0] - b[0]);
    let count = 0, centre = -Infinity;
    for (const [c, h] of boxes) if (c - centre > h / 2) { count += 1; centre = c; }
    return count;
  };
  const tables = [...article.querySelectorAll("table")].map((table, index) => {
    const box = table.closest(".pst-scrollable-table-container") || table.parentElement;
    const visibleRight = box.getBoundingClientRect().left + box.clientWidth;
    const headerRow = table.querySelector("thead tr") || table.querySelector("tr");
    const headers = headerRow ? [...headerRow.children].map((c) => ({
      text: c.textContent.replace(/\s+/g, " ").trim(),
      right: c.getBoundingClientRect().right,
    })) : [];
    const cut = headers.filter((h) => h.right > visibleRight + 1).map((h) => h.text);
    const keysCut = cut.filter((t) => keys.includes(t.toLowerCase()));
    const wrapped = [];
    const bullets = new Set();
    const squeeze = (el) => el.textContent.replace(/\s+/g, " ").trim();
    for (const cell of table.querySelectorAll("td, th")) {
      const n = lines(cell);
      if (n >= 3 && squeeze(cell).length <= shortCell) wrapped.push([squeeze(cell), n]);
      const empty = [...cell.querySelectorAll("li")].some((li) => !li.textContent.trim());
      if (empty) bullets.add(squeeze(cell.closest("tr")).slice(0, 60));
    }
    return {
      index, heading: headingOf(table), columns: headers.map((h) => h.text),
      overflow: table.scrollWidth > box.clientWidth + 1, tableWidth: table.scrollWidth, boxWidth: box.clientWidth,
      cut, keysCut, wrapped, bullets: [...bullets],
    };
  });
  const code = [...article.querySelectorAll("pre")].filter((p) => p.scrollWidth > p.clientWidth + 1).map((p) => ({
    heading: headingOf(p), first: p.textContent.split("\n")[0].slice(0, 60), width: p.scrollWidth, box: p.clientWidth,
  }));
  const figures = [...article.querySelectorAll("img")].map((img) => ({
    src: img.getAttribute("src"), natural: img.naturalWidth, shown: Math.round(img.getBoundingClientRect().width),
  }));
  const mathSpans = article.querySelectorAll("span.math, div.math").length;
  const typeset = article.querySelectorAll("mjx-container").length;
  const texLeft = [...article.querySelectorAll("span.math, div.math")].filter((m) => !m.querySelector("mjx-container")).length;
  return {article: article.clientWidth, tables, code, figures, mathSpans, typeset, texLeft,
          mathjax: typeof window.MathJax !== "undefined"};
}
"""


def _page_file(html, page):
    path = Path(page if page.endswith(".html") else page + ".html")  # not with_suffix: names hold dots
    return path if path.is_absolute() else html / path


def _all_pages(html):
    skip = ("genindex.html", "search.html", "py-modindex.html")
    return sorted(str(p.relative_to(html))[:-len(".html")] for p in html.rglob("*.html")
                  if p.name not in skip and not p.relative_to(html).parts[0].startswith("_"))


def check_page(page, url, width, keys, out, name, *, short=40, all_code=False):
    """Load one page at one width; screenshot it and return the finding lines and whether any failed."""
    refused = []

    def refuse(route):
        if route.request.url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.set_viewport_size({"width": width, "height": 900})
    page.route("**/*", refuse)
    page.goto(url, wait_until="load")
    page.evaluate("() => (window.MathJax && MathJax.startup && MathJax.startup.promise) || null")
    page.evaluate("() => document.fonts.ready.then(() => null)")
    page.unroute("**/*")
    m = page.evaluate(_MEASURE, [list(keys), short])
    shot = out / f"{name}-{width}.png"
    page.screenshot(path=str(shot), full_page=True)
    findings, failed = [], False

    def say(level, text):
        nonlocal failed
        failed |= level == "FAIL"
        findings.append(f"  {level} {text}")

    for t in m["tables"]:
        where = f"table {t['index'] + 1} under '{t['heading']}' ({', '.join(t['columns'][:4])}...)"
        if t["keysCut"]:
            say("FAIL", f"key column hidden: {where}: {', '.join(t['keysCut'])} beyond the right edge "
                        f"(table {t['tableWidth']} px in a {t['boxWidth']} px box)")
            page.locator("article table").nth(t["index"]).screenshot(path=str(out / f"{name}-{width}-table{t['index'] + 1}.png"))
        elif t["overflow"]:
            say("WARN", f"table scrolls: {where}: {t['tableWidth']} px in a {t['boxWidth']} px box; "
                        f"cut: {', '.join(t['cut']) or 'part of the last column'}")
        for text, n in t["wrapped"][:5]:
            say("FAIL", f"cell wraps: {where}: '{text}' runs onto {n} lines")
        if len(t["wrapped"]) > 5:
            say("FAIL", f"cell wraps: {where}: {len(t['wrapped']) - 5} more short cells of 3+ lines")
        for row in t["bullets"]:
            say("FAIL", f"empty bullet: {where}: in the row '{row}'")
    if all_code:
        for c in m["code"]:
            say("WARN", f"code scrolls: under '{c['heading']}': '{c['first']}' ({c['width']} px in {c['box']} px)")
    elif m["code"]:
        c = max(m["code"], key=lambda c: c["width"])
        say("WARN", f"code scrolls: {len(m['code'])} code block(s) wider than the column; the widest under "
                    f"'{c['heading']}': '{c['first']}' ({c['width']} px in {c['box']} px); --code lists them")
    if m["texLeft"]:
        say("FAIL", f"math: {m['texLeft']} of {m['mathSpans']} formulas not typeset "
                    f"({'MathJax loaded' if m['mathjax'] else 'no MathJax on the page'})")
    for url_ in sorted(set(refused)):
        say("FAIL", f"network: the page asked for {url_}")
    for f in m["figures"]:
        say("INFO", f"figure {f['src']}: {f['natural']} px wide, shown at {f['shown']} px")
    ok_tables = sum(1 for t in m["tables"] if not t["overflow"])
    summary = (f"{name} at {width} px: content {m['article']} px, {len(m['tables'])} tables "
               f"({ok_tables} fit), {m['mathSpans']} formulas, {len(m['figures'])} images -> "
               f"{'FAIL' if failed else 'ok'}; screenshot {shot}")
    return [summary] + findings, failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", help=f"pages relative to --html, without .html (default: {', '.join(STUDY_PAGES)})")
    parser.add_argument("--all", action="store_true", help="every page of the built site")
    parser.add_argument("--html", type=Path, default=ROOT / "docs" / "_build" / "html", help="the built site")
    parser.add_argument("--out", type=Path, default=Path("/tmp/doc_screenshots"), help="where the screenshots go")
    parser.add_argument("--width", type=int, action="append", help="window width in px (repeatable; default 1280)")
    parser.add_argument("--key", action="append", help=f"key column header (repeatable; default {', '.join(KEY_COLUMNS)})")
    parser.add_argument("--short", type=int, default=40,
                        help="a cell of at most this many characters fails when it runs onto 3 lines (default 40)")
    parser.add_argument("--code", action="store_true", help="list every code block wider than the column")
    parser.add_argument("--chromium", default=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                        help="the browser executable (default $CHROMIUM or /usr/bin/chromium)")
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("needs the playwright package: .venv/bin/pip install playwright (no browser download: "
              "it drives the Chromium given by --chromium)", file=sys.stderr)
        return 2
    html = args.html.resolve()
    pages = _all_pages(html) if args.all else args.pages or list(STUDY_PAGES)
    widths = args.width or [1280]
    keys = args.key or list(KEY_COLUMNS)
    args.out.mkdir(parents=True, exist_ok=True)
    missing = [p for p in pages if not _page_file(html, p).is_file()]
    if missing:
        print(f"not built under {html}: {', '.join(missing)} (run make docs first)", file=sys.stderr)
        return 2
    any_failed = False
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=list(CHROMIUM_ARGS))
        tab = browser.new_page()
        try:
            for name in pages:
                for width in widths:
                    lines, failed = check_page(tab, _page_file(html, name).as_uri(), width, keys, args.out,
                                               name.replace("/", "__"), short=args.short, all_code=args.code)
                    any_failed |= failed
                    print("\n".join(lines), flush=True)
        finally:
            browser.close()
    print("some pages do not read: see the FAIL lines above" if any_failed else "every page checked reads")
    return 1 if any_failed else 0


if __name__ == "__main__":
    sys.exit(main())
