"""The trace as one self-contained HTML page: data, style and script inline, nothing fetched.

    size = write_page(t, "trace.html")               # bytes written
    write_page(t, path, compare=comparison)          # a homework copy: the reference side by side

The page (page.css, page.js beside this file) reads one JSON document embedded in
a <script type="application/json"> element. It holds, per step, the routine, the
call site, the scope, the links (reverses, gradient of) and each value's shape,
dtype, statistics and preview slices; once per routine its equation as MathML
(mathml.py) and its code (highlight.py); once per call site a few lines around it.

Previews travel as float16 after division by their largest |value| (the scale is
stored beside them): 3 significant digits, enough to see a pattern and read a
value. An argument that IS an earlier step's result carries no slices of its own
(the page shows that result). The bound: when the slices of all steps hold more
than ``max_values`` entries, every slice is cropped (48 × 64, then 32 × 32, 16 ×
16, 8 × 8) and only the first slices of an array are kept until they fit; the page
says how its previews were cropped.
"""
from __future__ import annotations

import ast
import base64
import html
import json
import linecache
import re
from pathlib import Path

import numpy as np

from .highlight import highlight
from .mathml import mathml
from .routines import PACKAGE, source_lines

HERE = Path(__file__).resolve().parent
MAX_VALUES = 600_000               # preview entries over the whole page (float16: about 1.6 MB of text)
CROPS = ((48, 64, 4096), (32, 32, 2048), (16, 16, 512), (8, 8, 64), (4, 4, 16))   # rows, cols, per array
SITE_CONTEXT = 3                   # lines shown around a call site, each side
MAX_IDS = 256                      # an integer array this small (token ids, targets) is listed, id by id


def write_page(t, path, *, compare: dict | None = None, max_values: int = MAX_VALUES) -> int:
    """Write the page of Trace ``t`` to ``path``; returns its size in bytes."""
    data = page_data(t, compare=compare, max_values=max_values)
    text = render(data)
    Path(path).write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))


def render(data: dict) -> str:
    style = (HERE / "page.css").read_text(encoding="utf-8")
    script = (HERE / "page.js").read_text(encoding="utf-8")
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    title = html.escape(f"One training step, op by op: {data['meta'].get('model', 'trace')}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
            f'<style>\n{style}</style></head>\n<body>\n<div id="app"><noscript>This page needs JavaScript '
            f'(inline, nothing is fetched).</noscript></div>\n'
            f'<script id="trace-data" type="application/json">{payload}</script>\n<script>\n{script}</script>\n'
            f'</body></html>\n')


# ------------------------------------------------------------------ the document
def page_data(t, *, compare: dict | None = None, max_values: int = MAX_VALUES) -> dict:
    crop = crop_for(t, max_values)
    routines, sites, coloured = {}, {}, {}         # coloured: a file's text -> its lines as HTML, once
    steps = []
    for step in t.steps:
        if step.op not in routines:
            routines[step.op] = _routine(step.routine, coloured)
        site = f"{step.call[0]}:{step.call[1]}"
        if site not in sites:
            sites[site] = _site(step.call, coloured)
        steps.append(_step(step, site, crop))
    meta = {k: v for k, v in t.meta.items() if _json_safe(v)}
    meta.update(error=t.error, crop=list(crop[:2]) if crop != CROPS[0] else None)
    data = {"meta": meta, "routines": routines, "sites": sites, "steps": steps}
    if compare is not None:
        data["compare"] = compare
    return data


def _json_safe(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


def crop_for(t, max_values: int) -> tuple:
    """The largest crop under which the previews of all steps hold at most ``max_values`` entries."""
    for crop in CROPS:
        total = sum(_count(v, crop) for s in t.steps for v in _embedded(s))
        if total <= max_values:
            return crop
    return CROPS[-1]


def _embedded(step) -> list:
    """The values whose slices the page carries: results, and arguments that are not an earlier result."""
    found = []
    for v in step.args + step.results:
        if v.kind == "parts":
            found += [f for f in v.fields if not (f.source and f.source[2])]
        elif v.kind == "cache":
            found += [f for f in v.fields if f.kind == "array"]
        elif v.kind == "array" and not (v in step.args and v.source and v.source[2]):
            found.append(v)
    return found


def _count(value, crop) -> int:
    rows, cols, per_array = crop
    total = 0
    for _, grid in value.slices:
        n = min(grid.shape[0], rows) * min(grid.shape[1], cols)
        if total and total + n > per_array:
            break
        total += n
    return total


# ------------------------------------------------------------------ routines and call sites
def _highlighted(lines: list, coloured: dict) -> list:
    text = "\n".join(lines)
    if text not in coloured:
        coloured[text] = highlight(text)
    return coloured[text]


def _routine(routine, coloured: dict) -> dict:
    lines = source_lines(routine.path)
    body = _without_docstring(lines, routine, _highlighted(lines, coloured))
    return {"op": routine.op, "path": routine.path, "line": routine.line, "direction": routine.direction,
            "equation": [[mathml(segment) for segment in row] for row in routine.equation],
            "equation_text": [list(row) for row in routine.equation], "doc": routine.doc,
            "code": [[n, text] for n, text in body]}


def _without_docstring(lines: list, routine, coloured: list) -> list:
    """(line number, HTML) of the routine: its docstring folded into one line, and the argument
    checks that open its body (the design puts them first, never between math lines) into another.
    ``coloured``: the file's lines as HTML."""
    doc_start, body = _body_start(lines, routine)
    checks = _checks_end(lines, body, routine.end_line)
    first_doc = routine.doc.splitlines()[0] if routine.doc else ""
    indent = " " * (len(lines[body - 1]) - len(lines[body - 1].lstrip())) if body <= len(lines) else ""
    out = [[n, coloured[n - 1]] for n in range(routine.line, doc_start)]
    if routine.doc:
        out.append([doc_start, f'{indent}<span class="str">"""{html.escape(first_doc)} …"""</span>'])
    if checks - body >= 2:
        out.append([body, f'{indent}<span class="com">… {checks - body} lines of argument checks '
                          f'({body}-{checks - 1}) …</span>'])
    else:
        checks = body
    return out + [[n, coloured[n - 1]] for n in range(checks, routine.end_line + 1)]


def _body_start(lines: list, routine) -> tuple:
    """(the docstring's first line, the first line after it), 1-based; both the body's first line
    when there is no docstring."""
    node = ast.parse("\n".join(lines)).body
    func = next(n for n in node if getattr(n, "lineno", None) == routine.line)
    first = func.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
        and isinstance(first.value.value, str)
    return (first.lineno, first.end_lineno + 1) if has_doc else (first.lineno, first.lineno)


_CHECK = re.compile(r"\s*(check_\w*\(|_check\w*\(|raise\b|if\b|for\b|elif\b|else\b|continue\b|"
                    r"[\w, ]+=\s*(check_\w*|_check\w*|get_xp)\()")


def _checks_end(lines: list, start: int, end: int) -> int:
    """The line after the run of argument-check statements that opens the body at ``start``."""
    n = start
    while n <= end:
        group_end = n + 1                                  # the statement and its deeper-indented lines
        depth = len(lines[n - 1]) - len(lines[n - 1].lstrip())
        while group_end <= end and (not lines[group_end - 1].strip() or
                                    len(lines[group_end - 1]) - len(lines[group_end - 1].lstrip()) > depth):
            group_end += 1
        group = [lines[k - 1] for k in range(n, group_end) if lines[k - 1].strip()]
        if not group or not all(_CHECK.match(g) or _continues(g, group) for g in group) \
                or not any(re.match(r"\s*(\w[\w, ]*=\s*)?(check_|_check|raise)", g) or "get_xp(" in g for g in group):
            return n
        n = group_end
    return n


def _continues(line: str, group: list) -> bool:
    """A continuation line of a call (an argument on its own line): not a statement of its own."""
    return not re.match(r"\s*(\w[\w.\[\], ]*\s*[-+*/@]?=[^=]|return\b)", line) and line is not group[0]


def _site(call: tuple, coloured: dict) -> dict:
    where, line, function = call[:3]
    filename = call[3] if len(call) > 3 else str(PACKAGE / where)
    lines = [l.rstrip("\n") for l in linecache.getlines(filename)]
    if not lines or line < 1:
        return {"path": where, "line": line, "function": function, "lines": []}
    start = max(1, line - SITE_CONTEXT)
    html_lines = _highlighted(lines, coloured)
    return {"path": where, "line": line, "function": function,
            "lines": [[n, html_lines[n - 1]] for n in range(start, min(len(lines), line + SITE_CONTEXT) + 1)]}


# ------------------------------------------------------------------ steps and values
def _step(step, site: str, crop) -> dict:
    return {"op": step.op, "phase": step.phase, "dir": step.routine.direction, "scope": step.scope,
            "site": site, "parent": step.parent, "twin": step.twin, "reverses": step.reverses,
            "reversed_by": step.reversed_by, "error": step.error,
            "args": [value_data(v, crop, embed=not (v.source and v.source[2])) for v in step.args],
            "results": [value_data(v, crop) for v in step.results]}


def value_data(v, crop=CROPS[0], embed: bool = True) -> dict:
    out = {"name": v.name, "kind": v.kind}
    for key in ("shape", "dtype", "stats", "text", "label", "param"):
        value = getattr(v, key)
        if value not in ((), "", {}, None):
            out[key] = list(value) if key == "shape" else value
    if v.number is not None:
        out["number"] = v.number if np.isfinite(v.number) else str(v.number)
    if v.source is not None:
        out["source"] = list(v.source)
    if v.grad_of is not None:
        out["grad_of"] = list(v.grad_of)
    if v.fields:
        out["fields"] = [value_data(f, crop, embed=not (f.source and f.source[2])) for f in v.fields]
    if v.slices and embed:
        out["slices"] = _slices(v.slices, crop)
    if v.dtype[:3] in ("int", "uin") and v.slices and embed and v.slices[0][1].size <= MAX_IDS:
        out["ints"] = [int(i) for i in v.slices[0][1].ravel()]            # ids, exactly (float16 is not)
    return out


def _slices(slices: list, crop) -> list:
    rows, cols, per_array = crop
    out, total = [], 0
    for index, grid in slices:
        part = grid[:rows, :cols]
        if total and total + part.size > per_array:
            break
        total += part.size
        out.append(encode_slice(index, part))
    return out


def encode_slice(index, grid: np.ndarray) -> list:
    """[index, rows, cols, scale, base64 of float16(grid / scale)]; NaN/inf kept as they are."""
    finite = np.abs(grid[np.isfinite(grid)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        half = (grid / scale).astype("<f2")
    return [list(index), int(grid.shape[0]), int(grid.shape[1]), scale, base64.b64encode(half.tobytes()).decode()]
