"""The lectures: each runs top to bottom as a script in fast mode and exits 0.

Every lecture ends with asserts that check what it claimed, so "exit 0" means the
claims hold, not only that the code runs. Fast mode (MINITRANSFORMER_FAST=1) keeps
each one to a few seconds; figures go to a temporary folder, not into the tree.
A lecture is a jupytext percent-format script: markdown cells above code cells,
no ``__main__`` guard, no ``plt.show()``.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

LECTURES_DIR = Path(__file__).resolve().parent.parent / "lectures"
LECTURES = sorted(LECTURES_DIR.glob("[0-9][0-9]_*.py"))
TIMEOUT_S = 120      # fast mode takes a few seconds; this only stops a hang


def test_the_lectures_are_numbered_without_gaps():
    assert [p.name[:2] for p in LECTURES] == [f"{n:02d}" for n in range(1, 11)], LECTURES
    assert LECTURES[0].name == "01_attention.py" and LECTURES[-1].name == "10_beyond_text.py"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_runs_in_fast_mode(path, tmp_path):
    env = {**os.environ, "MINITRANSFORMER_FAST": "1", "MINITRANSFORMER_LECTURE_OUT": str(tmp_path),
           "MPLBACKEND": "Agg",
           # Tiny matrices: one BLAS thread is faster than two fighting over a shared CPU.
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, f"{path.name} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert "all claims check out" in run.stdout           # it reached its final checks
    assert list(tmp_path.glob("*.png")), f"{path.name} wrote no figure"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_is_a_percent_format_script(path):
    source = path.read_text(encoding="utf-8")
    cells = re.split(r"^# %%", source, flags=re.M)[1:]
    markdown = [c for c in cells if c.startswith(" [markdown]")]
    code = [c for c in cells if not c.startswith(" [markdown]")]
    assert markdown and code, "expected markdown cells (# %% [markdown]) and code cells (# %%)"
    assert cells[0].startswith(" [markdown]"), "a lecture opens with its markdown introduction"
    assert "__main__" not in source, "a lecture is a script top to bottom: no __main__ guard"
    assert ".show(" not in source, "figures are saved (Agg), never shown"
    assert 'matplotlib.use("Agg")' in source


def test_readme_lists_every_lecture():
    readme = (LECTURES_DIR / "README.md").read_text(encoding="utf-8")
    for path in LECTURES:
        assert path.name in readme, f"lectures/README.md does not mention {path.name}"
