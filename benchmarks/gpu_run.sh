#!/usr/bin/env bash
# The one command for a lent NVIDIA GPU machine (no network needed), run from the repository root:
#
#     OUT=/some/dir bash benchmarks/gpu_run.sh
#
# 1. installs the project in place (pip -e, no dependencies fetched; PYTHONPATH as a fallback) and
#    checks that the CuPy wheel the [gpu] extra names is installed;
# 2. prints nvidia-smi, the CuPy / CUDA runtime / driver versions, NumPy's and PyTorch's;
# 3. runs benchmarks/gpu_check.py, every part (the log in $OUT/gpu_check.log, the JSON lines in
#    $OUT/gpu_check.jsonl, the figures as PNG files in $OUT, cupy.show_config() in $OUT/cupy_config.txt);
# 4. runs the two CPU test files of the device path if time is left (log in $OUT/pytest.log);
# 5. prints the summary table LAST.
# MiniLM: with gpu_carry/minilm (python benchmarks/gpu_check.py --pack-minilm gpu_carry/minilm: a float16
# copy, 45 MB) the minilm part runs; without it, it says skipped.
# Budget: gpu_check is cut at GPU_CHECK_LIMIT_S (default 330 s); the whole script aims at 5 minutes.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_run_out}
PY=${PYTHON:-python3}
LIMIT=${GPU_CHECK_LIMIT_S:-330}
mkdir -p "$OUT"
export OUT
LOG="$OUT/gpu_check.log"
JSONL="$OUT/gpu_check.jsonl"
: > "$JSONL"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"       # this tree's package, installed or not
[ -d gpu_carry/minilm ] && export MINITRANSFORMER_MINILM_DIR="$PWD/gpu_carry/minilm"

{
  echo "== install (no network: --no-deps)"
  $PY -m pip install --no-deps --no-build-isolation -q -e . 2>&1 | tail -n 3
  $PY - <<'EOF'
import importlib.metadata as md, re, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for extra in ("gpu", "gpu-cuda12"):
    for req in extras.get(extra, []):
        name = re.split(r"[<>=~!; \[]", req, maxsplit=1)[0]
        try:
            found = f"installed {name} {md.version(name)}"
        except md.PackageNotFoundError:
            found = "not installed"
        print(f"[{extra}] extra: {req} -> {found}")
EOF
  echo "== nvidia-smi"
  nvidia-smi 2>&1 | head -n 20
  echo "== versions"
  $PY - <<'EOF'
import sys, numpy
print("python", sys.version.split()[0], "| numpy", numpy.__version__)
try:
    import cupy
    rt = cupy.cuda.runtime
    print("cupy", cupy.__version__, "| CUDA runtime", rt.runtimeGetVersion(), "| driver", rt.driverGetVersion(),
          "| devices", rt.getDeviceCount())
    import contextlib, io, os
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        cupy.show_config()
    open(os.path.join(os.environ["OUT"], "cupy_config.txt"), "w").write(text.getvalue())
except Exception:
    import traceback
    print("cupy: not usable:")
    traceback.print_exc()
try:
    import torch
    print("torch", torch.__version__, "| CUDA", torch.version.cuda, "| available", torch.cuda.is_available())
except Exception as e:
    print("torch: not usable:", type(e).__name__, e)
import minitransformer
print("minitransformer from", minitransformer.__file__)
EOF
  echo "== gpu_check (limit ${LIMIT} s)"
} 2>&1 | tee "$LOG"

timeout "$LIMIT" $PY benchmarks/gpu_check.py --device cuda --jsonl "$JSONL" --out "$OUT" \
  --gradcheck-budget-s 90 --train-timeout-s 150 2>&1 | tee -a "$LOG"
echo "gpu_check exit status: ${PIPESTATUS[0]} (124: cut at ${LIMIT} s) after ${SECONDS} s" | tee -a "$LOG"

if [ "$SECONDS" -lt 240 ]; then
  echo "== pytest (CPU: the strict stand-in and the dry run)" | tee -a "$LOG"
  timeout 60 $PY -m pytest -x -q -p no:cacheprovider tests/test_backend_agnostic.py tests/test_gpu_check.py \
    > "$OUT/pytest.log" 2>&1
  echo "pytest exit status: $? ($(tail -n 1 "$OUT/pytest.log"))" | tee -a "$LOG"
else
  echo "== pytest skipped: ${SECONDS} s used" | tee -a "$LOG"
fi

echo "== summary (${SECONDS} s in all)" | tee -a "$LOG"
$PY benchmarks/gpu_check.py --summary "$JSONL" 2>&1 | tee -a "$LOG"
