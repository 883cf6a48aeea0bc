"""docs/models.md's code runs as written: every Python block, in-process, in order of the page."""
import re
from pathlib import Path

import pytest

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", PAGE, re.S | re.M)


def test_the_page_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_python_block_runs(n, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                     # a block that writes a file writes it here
    exec(compile(BLOCKS[n], f"docs/models.md block {n}", "exec"), {"__name__": "__docs__"})
