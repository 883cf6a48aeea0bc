"""benchmarks/train_step.machine(): what every benchmark's JSON says about the CPU and OpenBLAS."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from train_step import machine  # noqa: E402


def test_machine_names_the_cpu_avx512_and_the_openblas_core():
    m = machine()
    json.dumps(m)                                           # goes into JSON lines as it is
    assert isinstance(m["avx512f"], bool) and isinstance(m["avx2"], bool)
    assert isinstance(m["cpu"], str) and m["cpu"]
    assert m["openblas_core"] is None or (isinstance(m["openblas_core"], str) and m["openblas_core"])
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            assert m["avx512f"] == (" avx512f" in f.read())
    assert m["OPENBLAS_CORETYPE"] == os.environ.get("OPENBLAS_CORETYPE")


def test_every_benchmark_prints_the_machine():
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and name not in ("matmul_timer.py", "gpu_parts.py"):   # helpers, not benchmarks
            with open(os.path.join(here, name)) as f:
                assert "machine()" in f.read(), f"benchmarks/{name} does not print machine()"
