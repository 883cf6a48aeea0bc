"""Grade a student's copy: one subprocess per assignment.

Each assignment runs in ``python -c`` with the student's copy first on the path
(PYTHONPATH=DIR), a fresh temporary working directory and a time limit, so an
infinite loop, a crash or a ``sys.exit`` in student code costs that assignment's
points and nothing else. The subprocess loads the reference package (the one this
file belongs to) from its own folder under a private name, runs
homework/checks.py, and prints one JSON line after a marker; the grader reads the
last such line (student prints before it are ignored).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .assignments import select
from .checks import MARKER

PACKAGE_DIR = Path(__file__).resolve().parents[1]     # the reference: this installation's package
REFERENCE_NAME = "_minitransformer_reference"

_PROGRAM = """
import importlib.util, sys
sys.path.insert(0, {student!r})
spec = importlib.util.spec_from_file_location({name!r}, {init!r}, submodule_search_locations=[{pkg!r}])
ref = importlib.util.module_from_spec(spec)
sys.modules[{name!r}] = ref
spec.loader.exec_module(ref)
import minitransformer
if not minitransformer.__file__.startswith({student!r}):
    raise SystemExit("the student's copy was not imported: " + minitransformer.__file__)
from {name}.homework.checks import main
main({assignment!r}, {seed!r}, {examples!r})
"""


def program(student_dir, assignment_id: str, seed: int = 0, examples: int = 3) -> str:
    return _PROGRAM.format(student=str(Path(student_dir).resolve()), name=REFERENCE_NAME,
                           init=str(PACKAGE_DIR / "__init__.py"), pkg=str(PACKAGE_DIR),
                           assignment=assignment_id, seed=seed, examples=examples)


def grade_one(student_dir, assignment, *, timeout: float = 30.0, seed: int = 0, examples: int = 3) -> dict:
    """The result record of one assignment (see checks.run), with its wall time."""
    env = dict(os.environ, PYTHONPATH=str(Path(student_dir).resolve()), MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1")
    start = time.perf_counter()
    base = {"id": assignment.id, "max_score": assignment.points, "score": 0.0, "rows": []}
    with tempfile.TemporaryDirectory() as cwd:
        try:
            proc = subprocess.run([sys.executable, "-c", program(student_dir, assignment.id, seed, examples)],
                                  cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)   # input() in student code must not wait
        except subprocess.TimeoutExpired:
            return dict(base, status="timeout", message=f"timed out after {timeout:g} s (an infinite loop?)",
                        seconds=time.perf_counter() - start)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if not lines:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        result = dict(base, status="crashed",
                      message=f"the check exited with code {proc.returncode} before reporting: {last}")
    else:
        result = json.loads(lines[-1][len(MARKER):])
    result["seconds"] = time.perf_counter() - start
    return result


def require_copy(student_dir) -> None:
    """FileNotFoundError unless ``student_dir`` holds a minitransformer/ package (else the
    subprocess would silently grade the installed package instead)."""
    if not (Path(student_dir) / "minitransformer" / "__init__.py").is_file():
        raise FileNotFoundError(f"{student_dir}: no minitransformer/ package in it (export one with "
                                "`homework export ... --out DIR`)")


def grade(student_dir, ids=(), *, timeout: float = 30.0, seed: int = 0, examples: int = 3,
          jobs: int = 1, progress=None) -> list:
    """Every selected assignment, in table order, ``jobs`` subprocesses at a time (each has
    its own time limit); ``progress(result)`` is called after each, in table order."""
    require_copy(student_dir)
    assignments = select(ids)
    results = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(lambda a: grade_one(student_dir, a, timeout=timeout, seed=seed,
                                                   examples=examples), assignments):
            results.append(result)
            if progress:
                progress(result)
    return results
