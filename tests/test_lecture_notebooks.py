"""Opened as notebooks, the lectures show every figure they write, inline.

lectures/_lecture.py decides with ``in_notebook()`` (is an IPython kernel running
this code?) and shows a PNG with ``IPython.display.display(Image(filename=...))``.
These tests need no Jupyter: a fake ``IPython`` module stands in for the kernel
(a shell whose config names ``IPKernelApp``, as a real kernel's does) and records
what is displayed. Each lecture then runs in fast mode under that fake kernel,
and the PNGs it displayed must be exactly the PNGs it wrote, each once.

The same check with a real kernel (jupytext + nbconvert + ipykernel, not
dependencies of this package): convert a lecture with ``jupytext --to ipynb``,
execute it with ``jupyter nbconvert --to notebook --execute`` and count the
``image/png`` outputs; lectures/README.md shows the commands.
"""
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from matplotlib.figure import Figure

LECTURES_DIR = Path(__file__).resolve().parent.parent / "lectures"
LECTURES = sorted(LECTURES_DIR.glob("[0-9][0-9]_*.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Run in a child process: install the fake kernel, run the lecture, write what was shown.
FAKE_KERNEL = """
import json, runpy, sys, types
lecture, shown_file = sys.argv[1], sys.argv[2]
shown = []

class Image:                                   # like IPython's: reads the file when made
    def __init__(self, filename):
        with open(filename, "rb") as f:
            self.data, self.filename = f.read(), filename

class Shell:
    config = {"IPKernelApp": {}}

ipython = types.ModuleType("IPython")
ipython.version_info = (9, 0, 0)                # matplotlib asks for it
ipython.get_ipython = lambda: Shell()
ipython.display = types.ModuleType("IPython.display")
ipython.display.Image = Image
ipython.display.display = lambda obj: shown.append([obj.filename, obj.data[:8].hex()])
sys.modules.update({"IPython": ipython, "IPython.display": ipython.display})
sys.argv = [lecture]
sys.path.insert(0, lecture.rsplit("/", 1)[0])
try:
    runpy.run_path(lecture, run_name="__main__")
finally:
    with open(shown_file, "w") as f:
        json.dump(shown, f)
"""


@pytest.fixture
def lecture_module(monkeypatch, tmp_path):
    """lectures/_lecture.py, imported with its figure folder in tmp_path."""
    monkeypatch.setenv("MINITRANSFORMER_LECTURE_OUT", str(tmp_path))
    monkeypatch.syspath_prepend(str(LECTURES_DIR))
    monkeypatch.delitem(sys.modules, "_lecture", raising=False)
    import _lecture
    yield _lecture
    sys.modules.pop("_lecture", None)


@pytest.fixture
def fake_kernel(monkeypatch):
    """A fake IPython whose kernel is running; returns the list of displayed objects."""
    shown = []
    ipython = types.ModuleType("IPython")
    ipython.version_info = (9, 0, 0)                           # matplotlib asks for it
    ipython.get_ipython = lambda: types.SimpleNamespace(config={"IPKernelApp": {}})
    ipython.display = types.ModuleType("IPython.display")
    ipython.display.Image = lambda filename: ("Image", filename)
    ipython.display.display = shown.append
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython.display)
    return shown


def _figure():
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [1, 0])
    return fig


def test_in_notebook_needs_a_running_kernel(lecture_module, monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert not lecture_module.in_notebook()                    # a script: IPython not imported
    ipython = types.ModuleType("IPython")
    ipython.version_info = (9, 0, 0)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    ipython.get_ipython = lambda: None
    assert not lecture_module.in_notebook()                    # imported, but no shell
    ipython.get_ipython = lambda: types.SimpleNamespace(config={"TerminalIPythonApp": {}})
    assert not lecture_module.in_notebook()                    # a terminal IPython: no inline images
    ipython.get_ipython = lambda: types.SimpleNamespace(config={"IPKernelApp": {}})
    assert lecture_module.in_notebook()                        # a Jupyter kernel


def test_save_figure_writes_and_shows_the_png_once_in_a_notebook(lecture_module, fake_kernel, tmp_path):
    path = lecture_module.save_figure(_figure(), "one.png")
    assert path == tmp_path / "one.png" and path.read_bytes().startswith(PNG_SIGNATURE)
    assert fake_kernel == [("Image", str(tmp_path / "one.png"))]
    lecture_module.show_png(tmp_path / "one.png")
    assert len(fake_kernel) == 2


def test_as_a_script_the_figure_is_written_and_nothing_is_displayed(lecture_module, monkeypatch, tmp_path):
    monkeypatch.setattr(lecture_module, "in_notebook", lambda: False)
    display_calls = []
    monkeypatch.setitem(sys.modules, "IPython.display",
                        types.SimpleNamespace(display=display_calls.append, Image=lambda filename: filename))
    path = lecture_module.save_figure(_figure(), "two.png")
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert display_calls == []


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_as_a_notebook_shows_every_figure_it_writes(path, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "MINITRANSFORMER_FAST": "1", "MINITRANSFORMER_LECTURE_OUT": str(out),
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    shown_file = tmp_path / "shown.json"
    run = subprocess.run([sys.executable, "-c", FAKE_KERNEL, str(path), str(shown_file)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{path.name} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    shown = json.loads(shown_file.read_text())
    written = sorted(p.name for p in out.glob("*.png"))
    assert written, f"{path.name} wrote no figure"
    assert sorted(Path(name).name for name, _ in shown) == written, "each written PNG shown exactly once"
    assert all(signature == PNG_SIGNATURE.hex() for _, signature in shown)
