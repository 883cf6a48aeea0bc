"""The trace page of each family: its size and how long `python -m minitransformer trace` takes to write it.

    python benchmarks/trace_pages.py                    # the tiny built-in model of each family
    python benchmarks/trace_pages.py --runs runs        # also runs/<family>/checkpoint.npz where train wrote one
    python benchmarks/trace_pages.py --repeats 5

Each command runs in a fresh process (the time a user waits: start, import, trace,
page), the families taken in turn within each repeat, so a machine shared with other
work slows them all alike. Prints one JSON line per page: family, source, steps,
bytes, the median and the spread (min, max) of the wall seconds, and the machine.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_step import machine  # noqa: E402

FAMILIES = ("gpt", "encoder", "seq2seq", "vit")


def _pages(runs) -> list:
    pages = [(family, "tiny", ["--model", family]) for family in FAMILIES]
    if runs is not None:
        for family in FAMILIES:
            checkpoint = Path(runs) / family / "checkpoint.npz"
            if checkpoint.is_file():
                pages.append((family, str(checkpoint), ["--checkpoint", str(checkpoint)]))
    return pages


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=None, help="a folder of train's runs (runs/<family>/checkpoint.npz)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each command (default: 3)")
    args = p.parse_args(argv)
    pages = _pages(args.runs)
    seconds = {i: [] for i in range(len(pages))}
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for i, (family, source, flags) in enumerate(pages):
                out = Path(folder) / f"{i}.html"
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "minitransformer", "trace", *flags, "--out", str(out)],
                                      capture_output=True, text=True, check=True)
                seconds[i].append(time.perf_counter() - start)
                found[i] = (int(re.search(r": (\d+) steps", done.stdout).group(1)), out.stat().st_size)
    for i, (family, source, _) in enumerate(pages):
        s = seconds[i]
        print(json.dumps({"family": family, "source": source, "steps": found[i][0], "bytes": found[i][1],
                          "seconds_median": round(statistics.median(s), 2), "seconds_min": round(min(s), 2),
                          "seconds_max": round(max(s), 2), "repeats": len(s), "machine": machine()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
