"""How often the homework grader says WHY a wrong body is wrong: mechanical mutants, graded for real.

    python benchmarks/diagnosis_coverage.py                      # every assignment, 25 mutants each
    python benchmarks/diagnosis_coverage.py softmax layernorm --per-assignment 40 --seed 1
    python benchmarks/diagnosis_coverage.py --list softmax       # the mutants only, not graded

For each assignment, the reference bodies of its target functions (named in homework/assignments/<id>.py)
are mutated with ``ast``, one small change per mutant: + <-> -, * <-> /, a term of a sum or a
factor of a product dropped, a reduction's axis changed, ``keepdims`` removed, a ``.T`` or
transpose dropped or added on a matmul operand, a constant changed (c -> 1, n -> n ± 1),
``sqrt`` -> identity, ``mean`` <-> ``sum``, a comparison flipped, a unary minus dropped, an
in-place ``+=``/``-=`` flipped, made ``=`` or dropped, a call's statement dropped, two
arguments or two returned values swapped. Argument checks (``check_*``) are not mutated:
students do not write them. Mutants that do not compile are left out; a fixed seed picks at
most ``--per-assignment`` of the rest.

Each mutant is graded by the real grader (``homework.grade.grade``: staged over the pristine
student copy, the confined child, the graded cases, the diagnoses, the rubric) as a
submission holding the target files with the mutated body. Outcomes:

    equivalent           full marks: the change is not observable on the graded cases
    raised               the code raised (the student sees the exception), or the child died;
                         ``raised-on-own-line`` counts those whose explanation names the student's
                         own file and line
    caught-diagnosed     points lost, and a NOT OK row says why (a catalogue message or a
                         generic diagnosis; "returned None" and an exception do not count)
    caught-undiagnosed   points lost, no wrong row says why

Printed: one JSON object, per assignment and in total the counts and ``diagnosed_share`` =
diagnosed / (diagnosed + undiagnosed), the undiagnosed mutants (function, the change, the
first wrong tensor and its relative error), and the machine. Also graded once per
assignment: the reference bodies as ``ast.unparse`` writes them (``control``: must be full
marks, or the mutants' unparsing is not faithful). The mutants are mechanical, not a sample
of real students' bugs. Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]       # this checkout's package, then train_step
from train_step import machine  # noqa: E402

from minitransformer.homework.registry import get, select  # noqa: E402
from minitransformer.homework.export import PACKAGE_DIR, _find, body_span  # noqa: E402
from minitransformer.homework.grade import grade  # noqa: E402
from minitransformer.homework.sandbox import Limits  # noqa: E402

FLIP_OP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
FLIP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq}
SWAP_REDUCTION = {"mean": "sum", "sum": "mean"}
NOT_DIAGNOSES = ("returned None", "exception:", "not implemented")


# ------------------------------------------------------------------ the mutants of one body
def _module_path(module: str) -> Path:
    return (PACKAGE_DIR / Path(*module.split("."))).with_suffix(".py")


def _is_check(stmt) -> bool:
    """An argument check (``check_upstream(...)``, ``eps = _check_norm_inputs(...)``): not mutated."""
    value = getattr(stmt, "value", None)
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name.startswith(("check_", "_check"))


def _children(node):
    """(field, index or None, child) of every AST child node."""
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, ast.AST):
                    yield field, i, v
        elif isinstance(value, ast.AST):
            yield field, None, value


def _transposed(node):
    return ast.Call(ast.Attribute(node, "swapaxes", ast.Load()), [ast.Constant(-1), ast.Constant(-2)], [])


def _transpose_dropped(node):
    if isinstance(node, ast.Attribute) and node.attr == "T":
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("swapaxes", "transpose"):
        return node.func.value
    return None


def _replacements(node):
    """(description, new node or None = delete) of the mutations of one node."""
    out = []
    if isinstance(node, ast.BinOp):
        if type(node.op) in FLIP_OP:
            out.append(("operator flipped", ast.BinOp(node.left, FLIP_OP[type(node.op)](), node.right)))
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            out.append(("right operand dropped", node.left))
        if isinstance(node.op, (ast.Add, ast.Mult)):
            out.append(("left operand dropped", node.right))
        if isinstance(node.op, ast.MatMult):
            for side in ("left", "right"):
                operand = getattr(node, side)
                dropped = _transpose_dropped(operand)
                new = copy.copy(node)
                setattr(new, side, dropped if dropped is not None else _transposed(operand))
                out.append((f"{side} operand's transpose {'dropped' if dropped is not None else 'added'}", new))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        out.append(("unary minus dropped", node.operand))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIP_CMP:
        out.append(("comparison flipped", ast.Compare(node.left, [FLIP_CMP[type(node.ops[0])]()],
                                                       node.comparators)))
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
        v = node.value
        if isinstance(v, float):
            out.append(("constant changed", ast.Constant(1.0 if v != 1.0 else 2.0)))
        else:
            out += [("constant changed", ast.Constant(v + 1)), ("constant changed", ast.Constant(v - 1))]
    elif isinstance(node, ast.Call):
        out += _call_replacements(node)
    elif isinstance(node, ast.Attribute) and node.attr == "T":
        out.append(("transpose dropped", node.value))
    elif isinstance(node, ast.AugAssign) and type(node.op) in FLIP_OP:
        out.append(("in-place operator flipped", ast.AugAssign(node.target, FLIP_OP[type(node.op)](), node.value)))
        out.append(("in-place update made an assignment", ast.Assign([node.target], node.value)))
        out.append(("in-place update dropped", None))
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        out.append(("call statement dropped", None))
    elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
        elts = node.value.elts
        for i in range(len(elts) - 1):
            swapped = elts[:i] + [elts[i + 1], elts[i]] + elts[i + 2:]
            out.append(("returned values swapped", ast.Return(ast.Tuple(swapped, ast.Load()))))
    return out


def _call_replacements(node):
    out = []
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    if name == "sqrt" and len(node.args) == 1:
        out.append(("sqrt made the identity", node.args[0]))
    if name in SWAP_REDUCTION and isinstance(f, ast.Attribute):
        out.append((f"{name} made {SWAP_REDUCTION[name]}",
                    ast.Call(ast.Attribute(f.value, SWAP_REDUCTION[name], ast.Load()), node.args, node.keywords)))
    for i, kw in enumerate(node.keywords):
        rest = node.keywords[:i] + node.keywords[i + 1:]
        if kw.arg == "keepdims":
            out.append(("keepdims removed", ast.Call(f, node.args, rest)))
        if kw.arg == "axis":
            for axis in _other_axes(kw.value):
                out.append(("reduction axis changed",
                            ast.Call(f, node.args, rest[:i] + [ast.keyword("axis", axis)] + rest[i:])))
            out.append(("axis removed (reduce everything)", ast.Call(f, node.args, rest)))
    if len(node.args) >= 2 and not name.startswith(("check_", "_check")) and name != "get_xp":
        for i in range(len(node.args) - 1):
            args = node.args[:i] + [node.args[i + 1], node.args[i]] + node.args[i + 2:]
            out.append(("two arguments swapped", ast.Call(f, args, node.keywords)))
    return out


def _other_axes(value):
    try:
        axis = ast.literal_eval(value)
    except ValueError:
        return [ast.Constant(0)]               # a name (axis=axis): a fixed axis instead
    if isinstance(axis, int):
        return [ast.Constant(-2 if axis == -1 else -1)]
    return [ast.Constant(-1)]


def _sites(func):
    """(path, node) for every node of the body after the docstring, argument checks left out;
    a path is a list of (field, index) steps from the def."""
    start = 1 if ast.get_docstring(func) is not None else 0
    stack = [([("body", i)], stmt) for i, stmt in enumerate(func.body) if i >= start and not _is_check(stmt)]
    while stack:
        path, node = stack.pop(0)
        yield path, node
        for field, index, child in _children(node):
            stack.append((path + [(field, index)], child))


def _apply(func, path, new):
    """A copy of ``func`` with the node at ``path`` replaced by ``new`` (None: the statement removed)."""
    func = copy.deepcopy(func)
    parent = func
    for field, index in path[:-1]:
        parent = getattr(parent, field)[index] if index is not None else getattr(parent, field)
    field, index = path[-1]
    if index is None:
        setattr(parent, field, copy.deepcopy(new))
    elif new is None:
        del getattr(parent, field)[index]
        if not getattr(parent, field):
            getattr(parent, field).append(ast.Pass())
    else:
        getattr(parent, field)[index] = copy.deepcopy(new)
    return ast.fix_missing_locations(func)


def unparsed_body(func, source: str) -> str:
    """The body after the docstring as ``ast.unparse`` writes it, indented as in ``source``."""
    start = 1 if ast.get_docstring(func) is not None else 0
    text = "\n".join(ast.unparse(stmt) for stmt in func.body[start:]) + "\n"
    indent = " " * func.body[0].col_offset
    return textwrap.indent(text, indent)


def with_body(source: str, qualname: str, body: str) -> str:
    start, end = body_span(_find(ast.parse(source), qualname))
    lines = source.splitlines(keepends=True)
    return "".join(lines[:start]) + body + "".join(lines[end:])


def _short(node) -> str:
    if node is None:
        return "(removed)"
    text = ast.unparse(ast.fix_missing_locations(copy.deepcopy(node))).replace("\n", "; ")
    return text if len(text) <= 70 else text[:67] + "..."


def mutants(target) -> list:
    """[{target, description, source}] of one target's body: compiling, distinct, not the reference."""
    source = _module_path(target.module).read_text(encoding="utf-8")
    func = _find(ast.parse(source), target.qualname)
    original = unparsed_body(func, source)
    seen, out = {original}, []
    for path, node in _sites(func):
        for what, new in _replacements(node):
            body = unparsed_body(_apply(func, path, new), source)
            if body in seen:
                continue
            seen.add(body)
            mutated = with_body(source, target.qualname, body)
            try:
                compile(mutated, str(target), "exec")
            except SyntaxError:
                continue
            line = f"{getattr(node, 'lineno', func.lineno)}:{getattr(node, 'col_offset', 0)}"
            out.append({"target": str(target), "function": target.qualname,
                        "description": f"line {line}: {what}: `{_short(node)}` -> `{_short(new)}`",
                        "source": mutated})
    return out


# ------------------------------------------------------------------ grading one mutant
def _submission(folder: Path, assignment, replaced: dict) -> Path:
    """A submission holding every target file of ``assignment``; ``replaced``: module -> source."""
    shutil.rmtree(folder, ignore_errors=True)
    for t in assignment.targets:
        path = folder / "minitransformer" / Path(*t.module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(replaced.get(t.module) or _module_path(t.module).read_text(encoding="utf-8"),
                        encoding="utf-8")
    os.chmod(folder, 0o755)
    return folder


def classify(result: dict) -> tuple:
    """(outcome, the first wrong row or None) of one graded result record."""
    if result["score"] >= result["max_score"] - 1e-9:
        return "equivalent", None
    if result["status"] in ("exception", "timeout", "crashed", "not implemented"):
        return "raised", {"message": result.get("message", "")[:200]}
    wrong = [r for r in result["rows"] if not r["ok"] and "· numerical" not in r["name"]]
    if any(r["diagnosis"] and not r["diagnosis"].startswith(NOT_DIAGNOSES) for r in wrong):
        return "caught-diagnosed", wrong[0]
    return "caught-undiagnosed", wrong[0] if wrong else None


def on_own_line(result: dict) -> bool:
    """The explanation of a raise names the student's own file and line (never a staging folder)."""
    said = result.get("explanation", "")
    return "mt-staged-" not in said and re.search(r"/minitransformer/[\w/]+\.py:\d+", said) is not None


def grade_one(folder: Path, assignment, replaced: dict, limits: Limits) -> dict:
    try:
        return grade(_submission(folder, assignment, replaced), [assignment.id], limits=limits)[0].to_dict()
    except Exception as e:                   # noqa: BLE001 - the grader refused the submission: count it
        return {"score": 0.0, "max_score": assignment.points, "status": "exception",
                "message": f"grader: {type(e).__name__}: {e}", "rows": []}


def run_assignment(a, per: int, seed: int, folder: Path, limits: Limits) -> dict:
    pool = [m for t in a.targets for m in mutants(t)]
    chosen = random.Random(f"{seed}:{a.id}").sample(pool, min(per, len(pool)))
    control = {t.module: None for t in a.targets}
    for t in a.targets:                      # the reference as ast.unparse writes it: full marks
        src = control[t.module] or _module_path(t.module).read_text(encoding="utf-8")
        control[t.module] = with_body(src, t.qualname, unparsed_body(_find(ast.parse(src), t.qualname), src))
    control_result = grade_one(folder, a, control, limits)
    counts = {k: 0 for k in ("equivalent", "raised", "caught-diagnosed", "caught-undiagnosed", "raised-on-own-line")}
    undiagnosed, diagnosed, raised = [], [], []      # the mutants of each outcome
    for i, m in enumerate(chosen):
        module = m["target"].split(":")[0]
        result = grade_one(folder, a, {module: m["source"]}, limits)
        outcome, row = classify(result)
        counts[outcome] += 1
        counts["raised-on-own-line"] += outcome == "raised" and on_own_line(result)
        print(f"  {a.id} {i + 1}/{len(chosen)} {outcome:19s} {m['description']}", file=sys.stderr, flush=True)
        entry = {"function": m["function"], "mutation": m["description"]}
        if outcome == "caught-undiagnosed":
            undiagnosed.append({**entry, "first_wrong": row["name"] if row else None,
                                "rel_error": row["rel_error"] if row else None})
        elif outcome == "caught-diagnosed":
            diagnosed.append({**entry, "first_wrong": row["name"], "diagnosis": _diagnosis(result)[:160]})
        elif outcome == "raised":
            raised.append({**entry, "message": row["message"]})
    caught = counts["caught-diagnosed"] + counts["caught-undiagnosed"]
    return {"assignment": a.id, "mutants_in_pool": len(pool), "graded": len(chosen),
            "control_full_marks": classify(control_result)[0] == "equivalent", **counts,
            "diagnosed_share": round(counts["caught-diagnosed"] / caught, 3) if caught else None,
            "undiagnosed_mutants": undiagnosed, "diagnosed_mutants": diagnosed,
            "raised_mutants": raised}


def _diagnosis(result) -> str:
    return next(r["diagnosis"] for r in result["rows"] if not r["ok"] and r["diagnosis"]
                and not r["diagnosis"].startswith(NOT_DIAGNOSES))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    parser.add_argument("--per-assignment", type=int, default=25, help="mutants graded per assignment")
    parser.add_argument("--seed", type=int, default=0, help="picks the mutants")
    parser.add_argument("--list", action="store_true", help="print the mutants, grade nothing")
    args = parser.parse_args(argv)
    assignments = select(args.assignments or ["all"])
    if args.list:
        for a in assignments:
            for t in a.targets:
                for m in mutants(t):
                    print(f"{a.id}\t{m['function']}\t{m['description']}")
        return 0
    limits = Limits(timeout=60.0, budget=120.0)
    start, rows = time.monotonic(), []
    with tempfile.TemporaryDirectory(prefix="mt-mutants-") as tmp:
        os.chmod(tmp, 0o755)
        for a in assignments:
            print(f"{a.id}: grading mutants ...", file=sys.stderr, flush=True)
            rows.append(run_assignment(get(a.id), args.per_assignment, args.seed, Path(tmp) / "sub", limits))
    keys = ("equivalent", "raised", "caught-diagnosed", "caught-undiagnosed", "raised-on-own-line")
    total = {k: sum(r[k] for r in rows) for k in keys}
    caught = total["caught-diagnosed"] + total["caught-undiagnosed"]
    total["diagnosed_share"] = round(total["caught-diagnosed"] / caught, 3) if caught else None
    print(json.dumps({"benchmark": "diagnosis_coverage", "per_assignment": args.per_assignment,
                      "seed": args.seed, "total": total, "assignments": rows,
                      "seconds": round(time.monotonic() - start, 1), "machine": machine()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
