"""lectures/ERRATA.md: every cell it names exists, and every erratum's cell asserts.

The page names a lecture cell as `NN_name.py` › *title*, the title being the cell's
markdown heading (``# ## title`` or ``# ### title`` in the percent-format script).
For the errata table the code cell right under that heading must compute the deck's
claim and the right value and assert the difference: it must contain an ``assert``.
"""
import re
from pathlib import Path

import pytest

LECTURES_DIR = Path(__file__).resolve().parent.parent / "lectures"
ERRATA = (LECTURES_DIR / "ERRATA.md").read_text(encoding="utf-8")
CELL_REFERENCE = re.compile(r"`(\d\d_\w+\.py)` › \*(.+?)\*(?=;|\s*\||\s*\(|\s*$)")


def _errata_rows():
    """(number, deck, line, cell text) of each row of the first table, the errata."""
    section = ERRATA.split("## Errata", 1)[1].split("\n## ", 1)[0]
    return [row for row in re.findall(r"^\| (\d+) \| (00[0-4]):([\d, ]+) \|(.*)$", section, flags=re.M)]


def _cells(path):
    """The percent-format cells of a lecture: (is_markdown, text) in order."""
    parts = re.split(r"^# %%", path.read_text(encoding="utf-8"), flags=re.M)[1:]
    return [(p.startswith(" [markdown]"), p) for p in parts]


def _cell_after_heading(file, title):
    """The code cell under the markdown cell whose heading is ``title``; None if there is no such heading."""
    cells = _cells(LECTURES_DIR / file)
    heading = re.compile(r"^# #+ " + re.escape(title) + r"\s*$", flags=re.M)
    for k, (is_markdown, text) in enumerate(cells):
        if is_markdown and heading.search(text):
            return next((t for md, t in cells[k + 1:] if not md), "")
    return None


def _references(text):
    return [(file, title.replace("\\|", "|")) for file, title in CELL_REFERENCE.findall(text)]


def test_the_errata_table_has_every_listed_deck_error():
    rows = _errata_rows()
    assert len(rows) >= 29, f"expected at least 29 errata rows, found {len(rows)}"
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1)), "rows numbered 1, 2, ... in order"
    decks = {deck for _, deck, _, _ in rows}
    assert decks == {"000", "001", "002", "003", "004"}, decks
    for _, deck, lines, cell in rows:
        assert all(int(n) > 0 for n in lines.split(",")), (deck, lines)
        assert len(_references(cell)) == 1, f"row {deck}:{lines} names no lecture cell (or several): {cell}"


@pytest.mark.parametrize("file, title", sorted({ref for row in _errata_rows() for ref in _references(row[3])}))
def test_each_erratum_cell_exists_and_asserts(file, title):
    code = _cell_after_heading(file, title)
    assert code is not None, f"{file} has no cell titled {title!r}"
    assert re.search(r"^\s*assert ", code, flags=re.M), f"{file} › {title}: the cell under it asserts nothing"


def test_every_cell_the_page_names_exists():
    references = _references(ERRATA)
    assert len(references) >= 80, f"expected the errata, examples and concordance to name 80+ cells, got {len(references)}"
    missing = [(f, t) for f, t in set(references) if _cell_after_heading(f, t) is None]
    assert not missing, f"cells named in ERRATA.md but not found: {missing}"


def test_the_concordance_covers_all_five_decks():
    concordance = ERRATA.split("## Concordance", 1)[1]
    for deck in ("000", "001", "002", "003", "004"):
        assert re.search(rf"^### {deck}, ", concordance, flags=re.M), f"no concordance section for deck {deck}"


STATUSES = ("covered", "partial", "missing", "out of scope")
CONCORDANCE_ROW = re.compile(r"^\| ([\d, -]+) \| (.+?) \| (covered|partial|missing|out of scope) \| (.*?) ?\|$",
                             flags=re.M)


def _concordance_rows():
    """(deck, lines, item, status, where) of every item row of the concordance, deck by deck."""
    concordance = ERRATA.split("## Concordance", 1)[1]
    rows = []
    for deck, section in re.findall(r"^### (00[0-4]), [^\n]*\n(.*?)(?=^### |\Z)", concordance, flags=re.M | re.S):
        rows += [(deck, *row) for row in CONCORDANCE_ROW.findall(section)]
    return rows


def test_the_concordance_counts_are_those_of_its_rows():
    rows = _concordance_rows()
    stated = re.search(r"\*\*Counts: (\d+) items: (\d+) covered, (\d+) partial, (\d+) missing, (\d+) out of scope\.\*\*",
                       ERRATA)
    assert stated, "the concordance states no counts line (**Counts: N items: ... out of scope.**)"
    tally = [len(rows)] + [sum(status == s for *_, status, _ in rows) for s in STATUSES]
    assert [int(n) for n in stated.groups()] == tally, f"stated {stated.group(0)}, the rows give {tally}"
    assert {deck for deck, *_ in rows} == {"000", "001", "002", "003", "004"}
    item_lines = [line for line in ERRATA.split("## Concordance", 1)[1].splitlines()
                  if line.startswith("| ") and not line.startswith(("| lines", "| file", "| 00"))]
    assert len(item_lines) == len(rows), "a concordance row whose status is not one of " + ", ".join(STATUSES)


@pytest.mark.parametrize("deck, lines, item, status, where", _concordance_rows(), ids=lambda v: str(v)[:30])
def test_each_concordance_row_says_where_or_why(deck, lines, item, status, where):
    cells = _references(where)
    first_line = int(re.match(r"\d+", lines).group())
    assert first_line > 0 and item.strip(), (deck, lines, item)
    if status in ("covered", "partial"):
        assert cells, f"{deck}:{lines} {item!r} is {status} but names no lecture cell"
    elif status == "missing":
        assert not where.strip(), f"{deck}:{lines} {item!r} is missing but names {where!r}"
    else:
        assert where.strip() and not cells, f"{deck}:{lines} {item!r} is out of scope: give the reason, no cell"
