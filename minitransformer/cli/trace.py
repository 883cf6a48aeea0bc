"""`python -m minitransformer trace`: one training step, op by op, as a page to step through in a browser.

    trace --out trace.html                          a tiny GPT on a sentence (float64)
    trace --model seq2seq --text "hello world"      encoder, seq2seq (the text reversed) or vit (a drawn shape)
    trace --checkpoint runs/gpt --out trace.html    a trained model: its folder or its checkpoint.npz

The page is one HTML file with everything inline (no network): open it, then step
with the arrow keys. In a student's homework copy the default trace is compared
with the reference's trace stored at export (minitransformer/trace/reference_trace.*:
numbers only), side by side, and the first step where they part is named. A bad
argument prints one line ``error: ...`` on stderr and exits with 2.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..homework.expected import in_student_copy
from ..trace.compare import compare, load
from ..trace.page import CROPS, crop_for, write_page
from ..trace.run import FAMILIES, traced_step
from ..trace.values import Limits
from ..validate import check_path, cli_real

TRACE_DIR = Path(__file__).resolve().parents[1] / "trace"     # where an export stores the reference trace
BYTES_PER_VALUE = 3.4            # a preview entry on the page: float16 in base64 (2.67) and the JSON around it


def add_trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", choices=FAMILIES, default=None,
                   help="the family of the tiny built-in model (default: gpt; with --checkpoint, its family)")
    p.add_argument("--text", default=None, help="the input text (default: a short sentence; not for vit)")
    p.add_argument("--checkpoint", default=None, help="a run folder written by `train` (runs/gpt) or its .npz")
    p.add_argument("--out", default="trace.html", help="the page to write (default: trace.html)")
    p.add_argument("--max-mb", type=cli_real(0.0), default=8.0,
                   help="the most preview data the page embeds, in MB; larger models get cropped previews (default: 8)")


def run_trace(args) -> int:
    """Write the page; returns the exit code (0, or 2 after a bad argument)."""
    started = time.perf_counter()
    try:
        out = Path(check_path("--out", args.out))
        if out.is_dir():
            raise ValueError(f"--out: expected a file to write, got the folder {out}")
        homework = in_student_copy() and args.checkpoint is None and args.text is None and args.model in (None, "gpt")
        reference = load(TRACE_DIR) if homework else None
        t = traced_step(args.model, args.text, args.checkpoint, Limits(keep=reference is not None))
        comparison = compare(t, reference) if reference is not None else None
        max_values = int(args.max_mb * 1e6 / BYTES_PER_VALUE)
        size = write_page(t, out, compare=comparison, max_values=max_values)
        crop = crop_for(t, max_values)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --out: cannot write {args.out} ({e.strerror or e})", file=sys.stderr)
        return 2
    _report(t, out, size, time.perf_counter() - started, comparison, homework, None if crop == CROPS[0] else crop)
    return 0


def _report(t, out: Path, size: int, seconds: float, comparison, homework: bool, crop) -> None:
    forward = sum(s.phase == "forward" for s in t.steps)
    print(f"wrote {out}: {len(t.steps)} steps ({forward} forward, {len(t.steps) - forward} backward), "
          f"{size / 1e6:.2f} MB in {seconds:.1f} s; open it in a browser and step with the arrow keys")
    if t.error:
        print(f"note: the step stopped: {t.error}", file=sys.stderr)
    if crop is not None:
        print(f"note: previews cropped to {crop[0]} x {crop[1]} to stay within --max-mb", file=sys.stderr)
    if comparison is not None:
        print(comparison["message"])
    elif homework:
        print("note: this copy holds no reference trace (export it again to get one): no comparison",
              file=sys.stderr)
