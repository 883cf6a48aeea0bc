"""How long a class takes to grade: N submissions, every assignment, `homework check-class --jobs J`.

Each submission is the files of a solutions copy that hold the assignments' targets
(``export all --with-solutions``, then only the files a student hands in; ``--whole``: the
whole copy): a student who did everything right, so every case and example runs, with its
numerical check, the slowest honest submission. The grader comes from each ``--roots`` folder (a checkout, or a tree
unpacked with ``git archive``), run as ``python -m minitransformer`` with that folder on
PYTHONPATH, so two versions are timed alternately on the same machine (ABAB: the rounds
interleave the roots). The seed is a 128-bit secret in a file, as both versions read it.
Prints JSON: per root, each round's wall-clock seconds, the CPU seconds of every process it
ran (which a shared machine's load moves much less: on J quiet cores the wall clock is about
CPU / J), how many submissions got full marks, the medians, and the machine. Progress goes
to stderr.

    python benchmarks/grade_class.py --students 200 --jobs 2 --roots /tmp/base . --rounds 2
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]       # this checkout's package, then train_step
from train_step import machine  # noqa: E402

from minitransformer.homework.export import export  # noqa: E402
from minitransformer.homework.registry import select  # noqa: E402


def submissions(folder: Path, students: int, whole: bool = False, ids=("all",)) -> Path:
    """``students`` folders, each holding the target files of a solutions copy, or with ``whole`` the
    whole copy (hard links)."""
    solutions = folder / "solutions"
    export(["all"], solutions, with_solutions=True)
    files = sorted({f"minitransformer/{t.module.replace('.', '/')}.py" for a in select(ids) for t in a.targets})
    if whole:
        files = sorted(p.relative_to(solutions).as_posix() for p in solutions.rglob("*") if p.is_file())
    root = folder / "class"
    for i in range(students):
        for rel in files:
            target = root / f"student{i:03d}" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(solutions / rel, target)
    return root


def grade(root: Path, subs: Path, out: Path, seed_file: Path, jobs: int, ids=(), full: float = 95) -> dict:
    """One timed check-class of the assignments ``ids`` (every one when empty) with the grader of
    ``root``: seconds, students at full marks (a total of ``full``)."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(root), OPENBLAS_NUM_THREADS="1")
    argv = [sys.executable, "-m", "minitransformer", "homework", "check-class", str(subs), *(ids or ["all"]), "--out", str(out),
            "--jobs", str(jobs), "--seed-file", str(seed_file)]
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, env=env, cwd=out.parent, capture_output=True, text=True)
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)   # every process it ran
    if done.returncode != 0:
        raise SystemExit(f"check-class with {root} failed:\n{done.stderr[-2000:]}")
    rows = list(csv.DictReader((out / "gradebook.csv").read_text().splitlines()))
    at_full = sum(1 for r in rows if r["total"] not in ("not graded", "") and float(r["total"]) == full)
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "full_marks": at_full, "students": len(rows)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="rounds over the roots, alternating (ABAB)")
    p.add_argument("--whole", action="store_true", help="hand in the whole solutions copy, not only the target files")
    p.add_argument("--roots", nargs="+", default=[os.path.dirname(HERE)],
                   help="folders holding a minitransformer/ to grade with (default: this checkout)")
    p.add_argument("--assignments", nargs="+", default=[], metavar="ID",
                   help="grade these only (default: every one; name them to time two trees on the same set)")
    args = p.parse_args(argv)
    chosen = select(args.assignments)
    full = sum(a.points for a in chosen)
    work = Path(tempfile.mkdtemp(prefix="mt-class-"))
    try:
        subs = submissions(work, args.students, args.whole, [a.id for a in chosen])
        seed_file = work / "seed.json"
        seed_file.write_text(json.dumps({"seed": secrets.randbits(128)}))
        runs: dict = {str(Path(r).resolve()): [] for r in args.roots}
        for n in range(args.rounds):
            for root in runs:
                result = grade(Path(root), subs, work / "gradebook", seed_file, args.jobs, args.assignments, full)
                print(f"round {n + 1}, {root}: {result}", file=sys.stderr, flush=True)
                runs[root].append(result)
        print(json.dumps({"students": args.students, "jobs": args.jobs, "rounds": args.rounds, "whole": args.whole,
                          "assignments": [a.id for a in chosen],
                          "runs": {root: {"seconds": [r["seconds"] for r in rs],
                                          "median_s": statistics.median(r["seconds"] for r in rs),
                                          "cpu_seconds": [r["cpu_seconds"] for r in rs],
                                          "median_cpu_s": statistics.median(r["cpu_seconds"] for r in rs),
                                          "full_marks": [r["full_marks"] for r in rs]} for root, rs in runs.items()},
                          "load_average": os.getloadavg(), "machine": machine()}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
