"""The red team's submissions after the walls, as code anyone can rebuild and run against any grader.

    python tests/redteam_attacks.py [ATTACK ...]     # JSON lines: attack, honest, got

Each builder writes what a student hands in (or runs what an instructor runs) and returns the
points it gets; ``honest`` is what the same student gets without the trick. The fixed ones have
their regression tests in tests/test_homework_redteam.py; the rubric's findings are measured
here only (the rubric and the cases are being restructured: see the red team's report).

    link        minitransformer/ a link to the grader's installed package
    oracle      the zip's fixed seed: inputs leaked through exception messages, a table back
    oracle_fresh  the same, a seed per run (the zip now)
    seed0       `check --json` without --seed-file: a table of the public seed's results
    numerical   every pair's backward by central differences of the student's own forward
    mha         MultiHeadAttention.backward by central differences of the copy's own forward
    trivial     zeros / the input / the upstream gradient everywhere
    zero_loss   cross-entropy: loss 0 and gradient 0
"""
from __future__ import annotations

import ast
import base64
import hashlib
import inspect
import json
import re
import sys
import tempfile
import textwrap
import zlib
from pathlib import Path

import numpy as np

from minitransformer.homework.registry import assignments

ASSIGNMENTS = assignments()
from minitransformer.homework.export import export
from minitransformer.homework.grade import grade
from minitransformer.homework.graded import resolve
from minitransformer.homework.sandbox import Limits

REFERENCE = Path(__file__).resolve().parents[1] / "minitransformer"
LIMITS = Limits(timeout=20.0, budget=300.0)
SEED = 0xA3C1_5E7F_0B92_D4E6_18F3_C7A5_9D2B_640E


def total(folder, ids, seed=SEED) -> float:
    return sum(r.score or 0 for r in grade(folder, ids, limits=LIMITS, seed=seed))


# ------------------------------------------------------------------ link
def link(work: Path) -> tuple:
    (work / "link").mkdir()
    (work / "link" / "minitransformer").symlink_to(REFERENCE, target_is_directory=True)
    return 0.0, total(work / "link", ["linear", "softmax", "attention"])


# ------------------------------------------------------------------ the report as an oracle
def pack(a) -> str:
    a = np.ascontiguousarray(a)
    head = json.dumps([a.dtype.str, a.shape]).encode()
    return base64.b85encode(zlib.compress(head + b"\0" + a.tobytes(), 9)).decode()


def unpack(text: str):
    head, data = zlib.decompress(base64.b85decode(text)).split(b"\0", 1)
    dtype, shape = json.loads(head)
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def key(a) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:20]


TABLE_BODY = '''
import base64, hashlib, json, zlib
import numpy as np
def _key(a):
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:20]
def _pack(a):
    a = np.ascontiguousarray(a)
    return base64.b85encode(zlib.compress(json.dumps([a.dtype.str, a.shape]).encode() + b"\\0" + a.tobytes(), 9)).decode()
def _unpack(text):
    head, data = zlib.decompress(base64.b85decode(text)).split(b"\\0", 1)
    dtype, shape = json.loads(head)
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()
def _leak(text):                                   # 470 characters in the message, the rest in its "file"
    exec(compile("raise ValueError(" + repr("LEAK[" + text[:470] + "]") + ")", "LEAK2[" + text[470:] + "]", "exec"), {})
TABLE = {table}
'''


def table_submission(folder: Path, forward: dict, backward: dict) -> None:
    """softmax's pair as a lookup table: a known input answered from the table, an unknown one leaked."""
    fwd = TABLE_BODY.replace("{table}", json.dumps(forward)) + \
        "k = _key(x)\nif k in TABLE:\n    return _unpack(TABLE[k]), (k,)\n_leak(_pack(x))\n"
    bwd = TABLE_BODY.replace("{table}", json.dumps(backward)) + \
        "k = cache[0] + '/' + _key(dy)\nif k in TABLE:\n    return _unpack(TABLE[k])\n_leak(_pack(dy))\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "softmax.py").write_text("def softmax_forward(x, axis=-1):\n" + textwrap.indent(fwd, "    ")
                                       + "\n\ndef softmax_backward(dy, cache):\n" + textwrap.indent(bwd, "    "))


def leaked(result: dict) -> list:
    """(case, array) of every LEAK in a result's rows (the numerical check's rows are not scored)."""
    found = []
    for row in result["rows"]:
        text = row.get("diagnosis") or ""
        head, tail = re.search(r"LEAK\[(.*?)\]", text), re.search(r"LEAK2\[(.*?)\]", text)
        if head and "numerical" not in row["name"]:
            found.append((row["name"], unpack(head.group(1) + (tail.group(1) if tail else ""))))
    return found


def oracle(work: Path, seeds=None, rounds: int = 10) -> tuple:
    """Resubmit until nothing leaks; ``seeds`` yields the seed of each run (the zip's one seed before the
    fix; a fresh one per run after). The offline results come from the reference here: any autograd would do."""
    from minitransformer.functional.softmax import softmax_backward, softmax_forward
    seeds = seeds or (SEED for _ in range(rounds))
    forward, backward, inputs, got = {}, {}, {}, 0.0
    for n, seed in zip(range(1, rounds + 1), seeds):
        folder = work / f"oracle{n}"
        table_submission(folder, forward, backward)
        result = grade(folder, ["softmax"], limits=LIMITS, seed=seed)[0].to_dict()
        got = result["score"]
        found = leaked(result)
        if not found:
            break
        for case, a in found:
            x = inputs.pop(case, None)
            if x is not None and x.shape == a.shape:          # the case's upstream gradient, x known
                backward[key(x) + "/" + key(a)] = pack(softmax_backward(a, softmax_forward(x)[1]))
            else:
                forward[key(a)] = pack(softmax_forward(a)[0])
                inputs[case] = a
    return 0.0, got


def seed0(work: Path) -> tuple:
    """The public seed's graded inputs drawn with the repository's own drawers, their results tabled."""
    from minitransformer.homework.registry import case_table
    CASES = case_table()
    from minitransformer.homework.reference import Computed
    forward, backward = {}, {}
    for index, graded in enumerate(CASES["softmax"]):
        for example in range(3):
            drawn = Computed().case(graded, index, example, 0)
            case, ref, g = drawn.case, drawn.expected, drawn.upstream
            forward[key(case.inputs["x"])] = pack(ref["out"])
            backward[key(case.inputs["x"]) + "/" + key(g)] = pack(ref["dx"])
    table_submission(work / "seed0", forward, backward)
    return 0.0, total(work / "seed0", ["softmax"], seed=0)


# ------------------------------------------------------------------ numerical backwards
NUMERICAL = '''
import numpy as np
_args, _kwargs = cache[1], cache[2]
_up = np.asarray({dy}, dtype=np.float64)
def _loss(args, kwargs):
    return float(np.sum(np.asarray({forward}(*args, **kwargs)[0], dtype=np.float64) * _up))
def _f64(v):
    return v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
_grads = []
for where, name in [("a", i) for i in range(len(_args))] + [("k", k) for k in _kwargs]:
    value = _args[name] if where == "a" else _kwargs[name]
    if not (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
        continue
    base, g = value.astype(np.float64), np.zeros(value.shape)
    for idx in np.ndindex(base.shape):
        h, out = 1e-3 * max(1.0, abs(base[idx])), []
        for step in (2, 1, -1, -2):                   # a 4th-order stencil
            moved = base.copy()
            moved[idx] += step * h
            args, kwargs = [_f64(a) for a in _args], {{k: _f64(v) for k, v in _kwargs.items()}}
            if where == "a":
                args[name] = moved
            else:
                kwargs[name] = moved
            out.append(_loss(args, kwargs))
        g[idx] = (-out[0] + 8 * out[1] - 8 * out[2] + out[3]) / (12 * h)
    _grads.append(g.astype(value.dtype))
return tuple(_grads) if len(_grads) > 1 else _grads[0]
'''


def _defs(tree) -> dict:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def numerical_submission(solutions: Path, folder: Path, ids, backward_body: str | None = None) -> None:
    """Each pair: the honest forward (the solution's body, its cache replaced by its own arguments) and a
    backward by central differences of that forward: no backward derived (``backward_body``: another)."""
    files: dict = {}
    for a in ASSIGNMENTS:
        for check in dict.fromkeys(c.check for c in a.cases) if a.id in ids else ():
            if check.checker != "pair":
                continue
            module, forward = check.forward.split(":")
            backward = check.backward.split(":")[1]
            source = (solutions / "minitransformer" / Path(*module.split("."))).with_suffix(".py").read_text()
            defs = _defs(ast.parse(source))
            node = defs[forward]
            text = ast.get_source_segment(source, node)
            head = text[:text.index(":\n", text.index(")")) + 2]
            positional = [p.arg for p in node.args.posonlyargs + node.args.args]
            keywords = [p.arg for p in node.args.kwonlyargs]
            call = ", ".join(positional + [f"{k}={k}" for k in keywords])
            body = (textwrap.indent(text.replace(f"def {forward}(", "def _impl(", 1), "    ")
                    + f"\n    _out, _ = _impl({call})\n    return _out, ('numerical', [{', '.join(positional)}], "
                    + "{" + ", ".join(f"{k!r}: {k}" for k in keywords) + "})\n")
            bnode = defs[backward]
            btext = ast.get_source_segment(source, bnode)
            bhead = btext[:btext.index(":\n", btext.index(")")) + 2]
            files.setdefault(module, []).extend([head + body, bhead + textwrap.indent(
                backward_body or NUMERICAL.format(dy=bnode.args.args[0].arg, forward=forward), "    ")])
            files[module] += [ast.get_source_segment(source, defs[t.qualname]) for t in a.targets
                              if t.module == module and t.qualname in defs and t.qualname not in (forward, backward)]
    for module, texts in files.items():
        path = (folder / "minitransformer" / Path(*module.split("."))).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(dict.fromkeys(texts)) + "\n")


PAIRS = ["linear", "relu", "gelu", "softmax", "cross_entropy", "layernorm", "rmsnorm", "embedding", "dropout",
         "attention", "rope"]


def numerical(work: Path, solutions: Path) -> tuple:
    """honest: the same forwards, a backward that raises (what a student who derived none earns; a stub
    raising NotImplementedError would earn 0: the forward points are dropped, see the report)."""
    numerical_submission(solutions, work / "forwards", PAIRS, backward_body="raise ValueError('no backward')\n")
    numerical_submission(solutions, work / "numerical", PAIRS)
    return total(work / "forwards", PAIRS), total(work / "numerical", PAIRS)


MHA_BACKWARD = '''
import numpy as np
cache = self._cache
x = cache.proj.x.copy()
memory = cache.proj_kv.x.copy() if self.cross else None
visible = cache.attn.probs != 0                        # the forward's mask: where P > 0
def loss():
    y = self.forward(x, memory, key_padding_mask=visible) if self.cross else self.forward(x, key_padding_mask=visible)
    return float(np.sum(y * dy))
def grad(a):
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        old, h = a[idx], 1e-5 * max(1.0, abs(a[idx]))
        a[idx] = old + h
        up = loss()
        a[idx] = old - h
        down = loss()
        a[idx] = old
        g[idx] = (up - down) / (2 * h)
    return g
for name in list(self.params):
    self.grads[name] += grad(self.params[name])
dx = grad(x)
dmemory = None if memory is None else grad(memory)
self._cache, self._out_spec = None, None
return (dx, dmemory) if self.cross else dx
'''


def mha(work: Path, solutions: Path) -> tuple:
    """MultiHeadAttention.backward by differences of the copy's own forward (its calls of linear, attention
    and rope answered by the grader), repeat_kv the solution's: honest repeat_kv alone is 3 of 8 checks."""
    layers = work / "mha" / "minitransformer" / "layers"
    layers.mkdir(parents=True)
    (layers / "attention.py").write_text("class MultiHeadAttention:\n    def backward(self, dy):\n"
                                         + textwrap.indent(MHA_BACKWARD.strip(), " " * 8) + "\n")
    functional = layers.parent / "functional"
    functional.mkdir()
    (functional / "repeat_kv.py").write_bytes((solutions / "minitransformer/functional/repeat_kv.py").read_bytes())
    only_repeat = work / "repeat_only" / "minitransformer" / "functional"
    only_repeat.mkdir(parents=True)
    (only_repeat / "repeat_kv.py").write_bytes((functional / "repeat_kv.py").read_bytes())
    return total(work / "repeat_only", ["mha"]), total(work / "mha", ["mha"])


# ------------------------------------------------------------------ trivial answers
def _trivial_body(target, how: str):
    fn = resolve("minitransformer", str(target))
    params = list(inspect.signature(fn).parameters)
    name = target.qualname.split(".")[-1]
    if name.startswith("_"):
        return None, params
    if "." in target.qualname:                                        # a Module's backward
        return ("return np.zeros_like(dy)" if how == "zeros" else "return np.array(dy, copy=True)"), params
    if name in ("sinusoidal_table", "causal_mask"):
        shape = "(max_len, d)" if name == "sinusoidal_table" else "(T, T if S is None else S)"
        kind = "dtype" if name == "sinusoidal_table" else "bool"
        return f"return xp.{'zeros' if how == 'zeros' else 'ones'}({shape}, dtype={kind})", params
    if name.endswith("_backward"):
        grad = "np.zeros_like(a)" if how == "zeros" else \
            f"(np.array({params[0]}, copy=True) if np.shape({params[0]}) == np.shape(a) else np.zeros_like(a))"
        return f"return tuple({grad} for a in cache)", params
    arrays = f"[v for v in ({', '.join(params)},) if isinstance(v, np.ndarray)]"
    out = "np.zeros_like(x)" if how == "zeros" else "np.array(x, copy=True)"
    return (f"arrays = {arrays}\nx = next(a for a in arrays if a.dtype.kind == 'f')\n"
            f"return {out}, tuple(a for a in arrays if a.dtype.kind == 'f')"), params


def trivial_submission(folder: Path, how: str) -> None:
    files: dict = {}
    for a in ASSIGNMENTS:
        for t in a.targets:
            body, params = _trivial_body(t, how)
            if body is None:
                continue
            fn = resolve("minitransformer", str(t))
            parts, star = [], False
            for p in inspect.signature(fn).parameters.values():
                if p.kind == p.KEYWORD_ONLY and not star:
                    parts, star = parts + ["*"], True
                parts.append(p.name + ("=None" if p.default is not p.empty else ""))
            text = f"def {t.qualname.split('.')[-1]}({', '.join(parts)}):\n" + textwrap.indent(
                "import numpy as np\n" + body, "    ") + "\n"
            if "." in t.qualname:
                text = f"class {t.qualname.split('.')[0]}:\n" + textwrap.indent(text, "    ")
            files.setdefault(t.module, []).append(text)
    for module, texts in files.items():
        path = (folder / "minitransformer" / Path(*module.split("."))).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n\n".join(texts))


def trivial(work: Path) -> tuple:
    every = [a.id for a in ASSIGNMENTS]
    got = {}
    for how in ("zeros", "identity"):
        trivial_submission(work / how, how)
        got[how] = total(work / how, every)
    return 0.0, got


def zero_loss(work: Path) -> tuple:
    (work / "zero_loss").mkdir()
    (work / "zero_loss" / "cross_entropy.py").write_text(
        "def cross_entropy_forward(logits, targets, ignore_index=-100, smoothing=0.0):\n"
        "    import numpy as np\n    return np.zeros((), dtype=logits.dtype), (logits,)\n\n\n"
        "def cross_entropy_backward(dloss, cache):\n    import numpy as np\n    return np.zeros_like(cache[0])\n")
    return 0.0, total(work / "zero_loss", ["cross_entropy"])


def oracle_fresh(work: Path) -> tuple:
    """The same resubmissions when every run draws its own seed (the zip after the fix)."""
    import secrets
    return oracle(work / "fresh", seeds=(secrets.randbits(128) for _ in range(10)), rounds=6) if \
        (work / "fresh").mkdir() is None else None


ATTACKS = {"link": link, "oracle": oracle, "oracle_fresh": oracle_fresh, "seed0": seed0, "numerical": numerical, "mha": mha,
           "trivial": trivial, "zero_loss": zero_loss}


def main(names) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        solutions = work / "solutions"
        export(["all"], solutions, with_solutions=True)
        for name in names or ATTACKS:
            fn = ATTACKS[name]
            args = (work, solutions) if "solutions" in inspect.signature(fn).parameters else (work,)
            honest, got = fn(*args)
            print(json.dumps({"attack": name, "honest": honest, "got": got}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
