"""A whole class: every submission folder graded, one JSON each, one CSV gradebook.

Submissions are graded ``jobs`` at a time, each in a worker process of this
(trusted) installation that runs one child for the submission; a hanging
submission costs its own time budget, once, and delays no other. A worker that
dies (killed, out of memory) breaks the pool for the submissions in flight: they
are graded again, each alone, and only one that kills its worker again is lost,
with a note saying so; the gradebook is always written.
"""
from __future__ import annotations

import csv
import json
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .assignments import select
from .grade import grade
from .report import gradescope, printable
from .sandbox import Limits


def submissions_in(folder) -> list:
    """The sub-folders of ``folder``, one per student, by name."""
    return sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))


def _grade_one(args) -> tuple:
    submission, ids, limits, seed = args
    notes: list = []
    try:
        results = grade(submission, ids, limits=limits, seed=seed, notes=notes)
    except Exception as e:                     # a folder we cannot stage: zero, said so
        return submission.name, [], [f"could not grade: {type(e).__name__}: {e}"]
    return submission.name, results, notes


def cell(text: str) -> str:
    """A text cell of the gradebook: on one line, and never read as a formula by a spreadsheet
    (a file named "=HYPERLINK(...).py" lands in the notes)."""
    text = printable(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def grade_class(folder, ids=(), out="gradebook", *, jobs: int = 1, limits: Limits = Limits(),
                seed: int = 0, progress=None) -> Path:
    """Grade every submission in ``folder``; write out/<student>.json and out/gradebook.csv."""
    assignments = select(ids)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = [(s, [a.id for a in assignments], limits, seed) for s in submissions_in(folder)]
    rows = {}

    def record(name, results, notes):
        report = gradescope(results, notes)
        (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        by_id = {r["id"]: r for r in results}
        rows[name] = ([cell(name)] + [by_id[a.id]["score"] if a.id in by_id else 0 for a in assignments]
                      + [report["score"], cell("; ".join(notes)[:300])])
        if progress:
            progress(name, report)

    for task in _in_pool(tasks, jobs, record):      # their worker died: again, each alone
        if _in_pool([task], 1, record):
            record(task[0].name, [], ["could not grade: the grading process died twice "
                                      "(killed, or out of memory)"])
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student"] + [a.id for a in assignments] + ["total", "notes"])
        writer.writerows(rows[task[0].name] for task in tasks)
    return out / "gradebook.csv"


def _in_pool(tasks, jobs: int, record) -> list:
    """Grade ``tasks`` in a pool of ``jobs`` workers, ``record(name, results, notes)`` in order;
    returns the tasks lost to a worker that died."""
    lost = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_grade_one, task) for task in tasks]
        for task, future in zip(tasks, futures):
            try:
                record(*future.result())
            except BrokenProcessPool:
                lost.append(task)
    return lost
