"""Gradescope on any image: the autograder zip's setup.sh on an externally managed Python.

Debian 12 and Ubuntu 24.04 mark their Python as externally managed (PEP 668): `pip install
numpy` there errors out, and setup.sh did exactly that when NumPy was missing. Now setup.sh
makes a virtual environment of its own, installs NumPy there (pip installs into a venv on
any image), and run_autograder grades with that environment's Python.

The test takes an externally managed Python of this machine without NumPy (Debian's python3
is one), shows pip refusing it, and runs the zip end to end from it, offline: NumPy comes from
a wheel packed here from this Python's own NumPy (pip's `--find-links`, no index).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_homework_attacks import CORRECT, CORRECT_BACKWARD, autograder_root, submission  # noqa: E402

PROBE = ("import json, os, sys, sysconfig; print(json.dumps({'managed': os.path.isfile(os.path.join("
         "sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')), 'venv': sys.prefix != sys.base_prefix, "
         "'version': list(sys.version_info[:2])}))")


def _describe(python: str) -> dict | None:
    try:
        done = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True, timeout=30)
        found = json.loads(done.stdout)
        found["numpy"] = subprocess.run([python, "-I", "-c", "import numpy"], capture_output=True,
                                        timeout=30).returncode == 0
        return found
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def externally_managed_python() -> str | None:
    """A Python of this machine that pip refuses to install into (PEP 668), of this Python's
    version (the NumPy wheel packed from this one fits it), without NumPy where there is one."""
    found = []
    for python in dict.fromkeys(filter(None, ("/usr/bin/python3", shutil.which("python3"), "/usr/local/bin/python3",
                                              getattr(sys, "_base_executable", None)))):
        info = _describe(python)
        if info and info["managed"] and not info["venv"] and info["version"] == list(sys.version_info[:2]):
            found.append((info["numpy"], python))
    return min(found)[1] if found else None


def numpy_wheel(folder: Path) -> Path:
    """This Python's installed NumPy packed back into a wheel (its own files and tags, a fresh RECORD)."""
    dist = metadata.distribution("numpy")
    tags = [ln.split(":", 1)[1].strip() for ln in dist.read_text("WHEEL").splitlines() if ln.startswith("Tag:")]
    info = next(str(f).split("/")[0] for f in dist.files if str(f).endswith(".dist-info/METADATA"))
    path = folder / f"numpy-{dist.version}-{tags[0]}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for f in dist.files:
            name = str(f)
            if name.startswith("..") or "__pycache__" in name or name == f"{info}/RECORD":
                continue
            data = Path(f.locate()).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
            z.writestr(name, data)
        z.writestr(f"{info}/RECORD", "\n".join(record + [f"{info}/RECORD,,"]) + "\n")
    return path


def test_the_zip_sets_up_and_grades_on_an_externally_managed_python(tmp_path):
    python = externally_managed_python()
    if python is None:
        pytest.skip(f"no externally managed Python {sys.version_info[0]}.{sys.version_info[1]} here "
                    "(PEP 668: Debian 12's or Ubuntu 24.04's python3 is one)")
    had_numpy = _describe(python)["numpy"]
    offline = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(numpy_wheel(tmp_path)))
    old_setup = subprocess.run([python, "-m", "pip", "install", "--quiet", "numpy"], env=offline,
                               capture_output=True, text=True, timeout=120)
    assert old_setup.returncode != 0, "pip installed into an externally managed Python"  # the old setup.sh's line
    assert "externally-managed-environment" in old_setup.stderr or "No module named pip" in old_setup.stderr

    root = autograder_root(tmp_path, "softmax")
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=dict(offline, AUTOGRADER_ROOT=str(root),
                           PYTHON=python), capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    where = subprocess.run([str(root / "venv" / "bin" / "python"), "-c", "import numpy; print(numpy.__file__)"],
                           capture_output=True, text=True, timeout=60)
    if not had_numpy:                                        # installed into the environment, not the system
        assert where.stdout.startswith(str(root / "venv")), where
        assert _describe(python)["numpy"] is False

    submission(root / "submission", CORRECT, backward_body=CORRECT_BACKWARD)
    graded = subprocess.run([str(root / "source" / "run_autograder")], env=dict(os.environ, AUTOGRADER_ROOT=str(root)),
                            capture_output=True, text=True, timeout=300)
    assert graded.returncode == 0, graded.stderr
    report = json.loads((root / "results" / "results.json").read_text())
    assert report["score"] == report["max_score"] == 5, (report, (root / "results" / "report.txt").read_text())
