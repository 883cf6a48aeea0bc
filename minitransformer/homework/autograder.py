"""Gradescope's autograder zip: setup.sh, run_autograder, this package as a wheel, the seed.

    setup.sh        makes a virtual environment of its own, $ROOT/venv (Python and NumPy, the system's
                    NumPy when it is new enough, else pip installs it there), installs the wheel (no
                    dependencies, no index) into source/grader-lib, and makes source/ readable by
                    root only
    run_autograder  grades $ROOT/submission with that environment's Python on inputs drawn afresh
                    for this run from the instructor's seed (grader.json, never on a command line)
                    and a random nonce (``run_seed``: a student who resubmits cannot leak the inputs
                    of one run through its report and hand in a table of their results for the
                    next), behind the kernel's walls (it refuses to grade without them unless the
                    zip was built --unconfined), and always leaves $ROOT/results/results.json, also
                    after a crash or a timeout, with the nonce in its extra_data (the same inputs
                    again: ``run_seed``'s recipe)
    grader.json     the assignments, the secret seed, the time limits, whether to grade unconfined

Nothing is installed into the system's Python: an externally managed one (PEP 668: Debian 12,
Ubuntu 24.04) refuses ``pip install``, and a venv is where pip installs anywhere. The
environment lies outside source/ because the student's process (``nobody`` when Gradescope
grades as root) imports NumPy from it; it holds nothing of the grader. Where venv lacks pip
(Debian and Ubuntu ship it apart, in python3-venv), setup.sh installs that package as root.

Both scripts read ``AUTOGRADER_ROOT`` (default /autograder); setup.sh reads ``PYTHON``
(default python3), the Python the environment is made from; so a test runs them end to
end in a temporary folder. The wheel is written here from the installed package's files
(a zip with its dist-info), so building the zip needs neither a source checkout nor a
build backend.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path

from .export import PACKAGE_DIR
from .registry import select

VERSION = "0.0.0+grader"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built. Nothing goes into the
# system's Python (an externally managed one refuses pip, PEP 668): a virtual environment of its own.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
PY="${PYTHON:-python3}"
VENV="$ROOT/venv"             # Python and NumPy only: the student's process imports NumPy from it
make_venv() { rm -rf "$VENV" && "$PY" -m venv --system-site-packages "$VENV"; }
if ! make_venv; then          # Debian and Ubuntu ship venv's pip apart, in python3-venv
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && make_venv
  else
    echo "setup.sh: $PY -m venv failed; on Debian or Ubuntu: apt-get install python3-venv" >&2
    exit 1
  fi
fi
VPY="$VENV/bin/python"
"$VPY" -c "import numpy, sys; sys.exit(tuple(map(int, numpy.__version__.split('.')[:2])) < (1, 24))" 2>/dev/null \\
  || "$VPY" -m pip install --quiet "numpy>=1.24"
"$VPY" -m pip install --quiet --no-deps --no-index --target "$SRC/grader-lib" "$SRC"/minitransformer-*.whl
chmod -R go-rwx "$SRC"        # the reference and the seed: out of the student's process's reach
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this per submission, as root. results.json is written whatever happens.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
PY="$ROOT/venv/bin/python"    # setup.sh's environment (its NumPy), never the system's Python
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
START=$(date +%s)
if [ -x "$PY" ]; then
  read -r LIMIT TIMEOUT BUDGET WALLS IDS < <("$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); print(c['limit'], c['timeout'], c['budget'], '--unconfined' if c.get('unconfined') else '--confined', ' '.join(c['assignments']))" "$SRC/grader.json")
  [ "$WALLS" = "--unconfined" ] || WALLS=""
  RUN_SEED="$(mktemp)"              # 0600: this run's seed, from grader.json's and a fresh nonce
  NONCE=$("$PY" -I -c "import sys; sys.path.insert(0, sys.argv.pop(1)); from minitransformer.homework.autograder import run_seed; print(run_seed(*sys.argv[1:]))" "$SRC/grader-lib" "$SRC/grader.json" "$RUN_SEED")
  timeout -k 10 "$LIMIT" "$PY" -I -c "import sys; sys.path.insert(0, sys.argv.pop(1)); from minitransformer.cli import main; sys.exit(main(sys.argv[1:]))" "$SRC/grader-lib" \\
      homework check "$ROOT/submission" $IDS --seed-file "$RUN_SEED" --timeout "$TIMEOUT" --budget "$BUDGET" \\
      $WALLS --json "$RESULTS" > "$ROOT/results/report.txt" 2>&1
  CODE=$?
  rm -f "$RUN_SEED"
  [ -s "$RESULTS" ] && [ -n "$NONCE" ] && "$PY" -I -c "import sys; sys.path.insert(0, sys.argv.pop(1)); from minitransformer.homework.autograder import record_nonce; record_nonce(*sys.argv[1:])" "$SRC/grader-lib" "$RESULTS" "$NONCE"
  WHY=$( [ "$CODE" = 124 ] && echo timeout || echo crash )
else
  CODE=127
  WHY="no $ROOT/venv: setup.sh did not finish"
fi
if [ ! -s "$RESULTS" ]; then
  printf '{"score": 0, "execution_time": %d, "visibility": "visible", "output": "The grader stopped before it could report (exit code %d: %s). Ask your instructor.", "tests": []}\\n' \\
    "$(( $(date +%s) - START ))" "$CODE" "$WHY" > "$RESULTS"
fi
exit 0
"""


def run_seed(config: str, out: str) -> str:
    """Write this run's seed to the file ``out`` (0600) and return its nonce: the seed is the first 128
    bits of sha256("<grader.json's seed>:<nonce>"), the nonce 128 fresh random bits. Gradescope grades
    every resubmission with the zip's one grader.json; on its one seed, a submission could carry the
    inputs of one run out through its report (an exception message holds 800 characters) and come
    back with a table of their expected results (7 submissions gave softmax 5/5 without a softmax)."""
    import secrets
    nonce = secrets.token_hex(16)
    seed = json.loads(Path(config).read_text(encoding="utf-8"))["seed"]
    derived = int.from_bytes(hashlib.sha256(f"{seed}:{nonce}".encode()).digest()[:16], "big")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"seed": derived}, f)
    return nonce


def record_nonce(results: str, nonce: str) -> None:
    """The run's nonce into results.json's extra_data (not shown to students), to grade the same inputs
    again: --seed-file holding run_seed's derived seed."""
    path = Path(results)
    report = json.loads(path.read_text(encoding="utf-8"))
    report.setdefault("extra_data", {})["inputs_nonce"] = nonce
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)                          # never half a results.json


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, package_dir: Path = PACKAGE_DIR) -> Path:
    """A pure-Python wheel of the package (py3-none-any) in ``folder``."""
    dist = f"minitransformer-{VERSION}.dist-info"
    files = {f"minitransformer/{p.relative_to(package_dir).as_posix()}": p.read_bytes()
             for p in sorted(package_dir.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
             and p.suffix != ".pyc"}
    files[f"{dist}/METADATA"] = (f"Metadata-Version: 2.1\nName: minitransformer\nVersion: {VERSION}\n"
                                 "Requires-Dist: numpy\n").encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: minitransformer-homework\n" \
                             b"Root-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = folder / f"minitransformer-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def build(ids, out, *, seed: int, timeout: float = 20.0, budget: float = 300.0, unconfined: bool = False) -> Path:
    """The zip Gradescope takes: setup.sh, run_autograder, the wheel, grader.json."""
    assignments = select(ids)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = {"assignments": [a.id for a in assignments], "seed": seed, "timeout": timeout,
              "budget": budget, "limit": int(budget + 120), "unconfined": unconfined}
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        wheel = write_wheel(Path(tmp))
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
                info = zipfile.ZipInfo(name)
                info.external_attr = (stat.S_IFREG | 0o755) << 16
                z.writestr(info, text)
            z.writestr("grader.json", json.dumps(config, indent=2) + "\n")
            z.write(wheel, wheel.name)
    return out
