"""docs/speed.md stays true: its Python runs as written, and it names every file of the wing."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")


def test_the_pages_python_blocks_run_in_a_fresh_process():
    bodies = re.findall(r"^```python\n(.*?)^```", PAGE, re.S | re.M)
    assert bodies
    for body in bodies:
        done = subprocess.run([sys.executable, "-c", body], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "4 steps" in done.stdout


def test_the_page_names_every_module_of_the_wing():
    wing = ROOT / "minitransformer" / "fast"
    files = [f"fast/{p.name}" for p in wing.glob("*.py") if p.name != "__init__.py"]
    files += [f"fast/{p.name}/" for p in wing.iterdir() if (p / "__init__.py").is_file()]   # a folder as one
    assert len(files) >= 5
    missing = [f for f in files if f not in PAGE and f.rsplit("/", 1)[-1] not in PAGE]
    assert missing == [], f"docs/speed.md does not name {missing}"
