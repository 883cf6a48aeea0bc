"""benchmarks/gpu_check.py in its dry mode, where NumPy stands in for the device: every part
runs and reports agreement, the comparisons it rests on catch real differences, a
difference beyond tolerance or a part that raises makes the exit status 1, and without
CuPy the script says what is missing and exits 0.

Sizes: a tiny GPT config is added to benchmarks/train_step.CONFIGS for each test
(monkeypatch), so the parts run their real code paths in milliseconds.

In the dry run both sides of every comparison are the same NumPy code on the same
numbers, so they agree bit for bit: the tests assert a difference of exactly 0, which
also proves both sides start from one seed and see the same batches. (On a GPU the
sides differ by round-off, within the script's stated tolerances.)
"""
import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import gpu_check  # noqa: E402
from train_step import VOCAB  # noqa: E402

from minitransformer.gradcheck.suite import layer_checks  # noqa: E402

TINY = (1, 2, 16, 8, 2)      # n_layer, n_head, d_model, block_size, batch


@pytest.fixture
def tiny(monkeypatch):
    """The name of a tiny config, visible to train_step.build and make_task for this test."""
    monkeypatch.setitem(gpu_check.CONFIGS, "tiny", TINY)
    return "tiny"


def _lines(capsys):
    """The JSON lines of a run (the summary table after them is text)."""
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def test_dry_gradcheck_reports_every_layer_of_the_gradcheck_command(capsys):
    assert gpu_check.main(["--device", "numpy", "--parts", "gradcheck"]) == 0
    (line,) = _lines(capsys)
    assert line["part"] == "gradcheck" and line["device"] == "numpy (dry run)" and line["ok"]
    assert list(line["layers"]) == [name for name, _ in layer_checks(0)]
    # the checker's own tolerances: 1e-7 per layer, 1e-6 for the whole GPT
    assert all(r["ok"] and r["max_rel_error"] <= 1e-6 for r in line["layers"].values())


def test_dry_train_match_losses_agree_in_both_dtypes(tiny):
    line = gpu_check.train_match_part("cpu", steps=3, config=tiny)
    assert line["ok"]
    for dtype in ("float64", "float32"):
        run = line[dtype]
        assert len(run["numpy_losses"]) == len(run["device_losses"]) == 3
        assert run["numpy_losses"] == run["device_losses"] and run["max_rel_diff"] == 0.0
        assert run["tolerance"] == {"float64": 1e-10, "float32": 1e-4}[dtype]
        # a real cross-entropy: weights of std 0.02 give near-uniform logits, loss ≈ ln V
        assert abs(run["numpy_losses"][0] - math.log(VOCAB)) < 0.05


def test_dry_checkpoint_round_trips_both_ways(tiny):
    line = gpu_check.checkpoint_part("cpu", config=tiny)
    assert line["ok"]
    for direction in ("device_to_numpy", "numpy_to_device"):
        result = line[direction]
        assert result["mismatched"] == [] and result["wrong_device"] == []
        assert result["next_losses"][0] == result["next_losses"][1]   # the loaded side trains on alike


def test_dry_timing_reports_step_times_without_device_memory(tiny):
    line = gpu_check.timing_part("cpu", configs=(tiny,), steps=2, warmup=1)
    (config,) = line["configs"]
    L, H, C, T, B = TINY
    assert config["steps"] == 2 and 0 < config["ms_min"] <= config["ms_median"]
    # B·T tokens a step; 1% because ms_median is printed rounded to the microsecond
    assert config["tokens_per_s"] == pytest.approx(B * T / config["ms_median"] * 1e3, rel=1e-2)
    assert "pool_peak_mb" not in config and "dry run" in line["note"]


def test_a_loss_difference_beyond_tolerance_fails_the_part_and_the_exit_status(tiny, monkeypatch, capsys):
    # Tolerances below zero: even the dry run's exact agreement exceeds them.
    monkeypatch.setattr(gpu_check, "TOLERANCES", {"float64": -1.0, "float32": -1.0})
    monkeypatch.setattr(gpu_check, "MATCH_CONFIG", tiny)
    assert gpu_check.main(["--device", "numpy", "--parts", "train_match", "--steps", "1"]) == 1
    (line,) = _lines(capsys)
    assert not line["ok"] and not line["float64"]["ok"] and not line["float32"]["ok"]


def test_a_part_that_raises_is_reported_and_the_others_still_run(monkeypatch, capsys):
    def broken(device):
        raise RuntimeError("no such kernel")
    monkeypatch.setattr(gpu_check, "gradcheck_part", lambda device, budget_s: broken(device))
    monkeypatch.setattr(gpu_check, "timing_part", lambda *args: {"part": "timing", "ok": True})
    assert gpu_check.main(["--device", "numpy", "--parts", "gradcheck", "timing"]) == 1
    broken_line, timing_line = _lines(capsys)
    broken_line.pop("part_seconds")
    assert broken_line == {"part": "gradcheck", "device": "numpy (dry run)", "ok": False,
                           "error": "RuntimeError: no such kernel"}
    assert timing_line["part"] == "timing" and timing_line["ok"]


def test_without_cuda_one_line_says_what_is_missing_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "cupy_available", lambda: False)
    assert gpu_check.main([]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("gpu_check: CuPy ") and "--device numpy" in line


def test_relative_difference_measures_what_the_tolerances_bound():
    assert gpu_check.max_relative_difference([4.0, 2.0], [4.0, 2.0]) == 0.0
    # 2e-9 on 2.0 is a relative 1e-9: inside the float32 bound, outside the float64 one
    rel = gpu_check.max_relative_difference([4.0, 2.0], [4.0, 2.0 + 2e-9])
    assert rel == pytest.approx(1e-9, rel=1e-6)
    assert gpu_check.TOLERANCES["float64"] < rel < gpu_check.TOLERANCES["float32"]
    assert gpu_check.max_relative_difference([0.0], [0.0]) == 0.0        # no 0/0


def test_state_comparison_names_every_kind_of_mismatch():
    saved = {"w": np.ones(3, np.float32), "b": np.zeros(2, np.float32), "gone": np.ones(1, np.float32)}
    loaded = {"w": saved["w"].copy(), "b": saved["b"].astype(np.float64), "extra": np.ones(1, np.float32)}
    loaded["w"][1] = np.nextafter(np.float32(1), np.float32(2))         # one bit of one value
    assert sorted(gpu_check.state_mismatches(saved, loaded)) == ["b", "extra", "gone", "w"]
    assert gpu_check.state_mismatches(saved, {k: v.copy() for k, v in saved.items()}) == []


# ------------------------------------------------------- the parts in benchmarks/gpu_parts.py
import gpu_parts  # noqa: E402

TINY_CLI = ["--n-layer", "1", "--d-model", "16", "--block-size", "16", "--batch-size", "2"]


def test_dry_generation_tokens_agree_in_both_dtypes_and_rates_are_positive():
    line = gpu_parts.generation_part("cpu", steps=2, extra_args=TINY_CLI)
    assert line["ok"] and line["new_tokens"] == 16 - 8 + 1          # all the cache holds after 8 prompt tokens
    for dtype in ("float64", "float32"):
        assert line[dtype] == {"equal": True, "first_difference": None}
    rates = line["tokens_per_s"]
    assert set(rates) == {"batch_1", "batch_8"}
    assert all(rate["device"] > 0 and rate["numpy"] > 0 for rate in rates.values())


def test_the_first_generated_difference_is_found():
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = a.copy()
    assert gpu_parts._first_difference(a, b) is None
    b[1, 2] = 0
    assert gpu_parts._first_difference(a, b) == 2


def test_dry_figures_are_png_files_of_a_model_trained_there(tmp_path):
    line = gpu_parts.figures_part("cpu", str(tmp_path), steps=2, extra_args=TINY_CLI)
    assert line["ok"] and all(line["png_ok"].values())
    for path in line["files"].values():
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert len(line["block_gradient_norms"]) == 1 and line["block_gradient_norms"][0] > 0   # one block


def test_minilm_without_weights_is_skipped_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.delenv(gpu_parts.MINILM_ENV, raising=False)
    line = gpu_parts.minilm_part("cpu", given_dir=str(tmp_path))          # a folder without the weights
    assert line["ok"] and "no all-MiniLM-L6-v2 weights" in line["skipped"] and str(tmp_path) in line["skipped"]
    assert "SKIP" in gpu_parts.summary_table([line])


def _canned_run(stdout, returncode=0):
    class Run:
        pass
    run = Run()
    run.stdout, run.stderr, run.returncode = stdout, "", returncode
    return lambda *args, **kwargs: run


def test_train_command_reports_the_seconds_the_command_prints(monkeypatch):
    stdout = ("gpt: 1 parameters | 100 steps | checkpoint x\n"
              "step   100/100 | loss 2.0 | lr 1e-4 | 30,100 tok/s | ETA 0m00s\n"
              "trained in 2.5 s | final loss: train 2.0 | val 2.1 (20 batches each, evaluated in 0.1 s)\n")
    monkeypatch.setattr(gpu_parts.subprocess, "run", _canned_run(stdout))
    line = gpu_parts.train_command_part("cpu", steps=100)
    assert line["ok"] and line["train_seconds"] == 2.5
    assert line["tokens_per_s"] == 100 * 12 * 64 / 2.5                  # the default batch: 12 x 64 tokens
    assert line["last_progress"].endswith("30,100 tok/s | ETA 0m00s")


def test_train_command_that_times_out_fails_with_what_it_printed(monkeypatch):
    def slow(*args, **kwargs):
        raise gpu_parts.subprocess.TimeoutExpired(args[0], 5, output=b"step 100/2000 | 9 tok/s\n", stderr=b"")
    monkeypatch.setattr(gpu_parts.subprocess, "run", slow)
    line = gpu_parts.train_command_part("cpu", steps=2000, timeout_s=5)
    assert not line["ok"] and line["returncode"] == "timeout after 5 s"
    assert line["last_progress"] == "step 100/2000 | 9 tok/s" and "train_seconds" not in line


def test_ratios_against_pytorch_and_the_goal():
    cupy_rows = [{"config": "b", "ms_median": 30.0}, {"config": "c", "ms_median": 90.0}]
    gpu_check.add_ratios(cupy_rows, [{"config": "b", "ms_median": 25.0}, {"config": "c", "ms_median": 30.0}])
    assert cupy_rows[0]["ratio_vs_torch"] == 1.2 and cupy_rows[0]["goal_met"]
    assert cupy_rows[1]["ratio_vs_torch"] == 3.0 and not cupy_rows[1]["goal_met"]
    gpu_check.add_ratios(rows := [{"config": "c", "ms_median": 1.0}], "skipped: PyTorch is not installed")
    assert "ratio_vs_torch" not in rows[0]


def test_the_summary_table_has_a_row_per_part_from_the_jsonl(tmp_path, capsys):
    path = tmp_path / "run.jsonl"
    lines = [{"part": "gradcheck", "ok": False, "error": "RuntimeError: no such kernel"},
             {"part": "minilm", "ok": True, "skipped": "no weights"},
             {"part": "train_command", "ok": True, "train_seconds": 9.5, "tokens_per_s": 161684, "wall_s": 20.0}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "a line of text\n")
    assert gpu_check.main(["--summary", str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [row.split()[:2] for row in rows] == [["gradcheck", "FAIL"], ["minilm", "SKIP"], ["train_command", "PASS"]]
    assert rows[0].endswith("RuntimeError: no such kernel") and "9.5 s, 161684 tok/s" in rows[2]
