"""The homework assignments, as one table of records (data, not code per assignment).

Each ``Assignment`` names the functions a student writes (``Target``: a module
path inside the package and a qualified name, ``Class.method`` for a Module's
backward), the lecture it belongs to, its points, and its ``Check`` specs: which
way the grader calls it (homework/evaluate.py: "pair" for a functional
forward/backward pair, "function" for a forward-only function, "module" for a
Module's forward/backward) and which input drawer feeds it.

``needs`` names the assignments an assignment's functions call (attention calls
softmax and dropout): while it is graded, those run the reference's bodies, so a
bug costs the points of its own assignment only. ``EQUIVALENTS`` names the code
outside the targets that computes an assignment's function all the same (a
Jacobian form, a twin, a special case); the student's copy stubs it too.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    module: str      # dotted path inside the package, e.g. "functional.norm"
    qualname: str    # "layernorm_forward" or "MultiHeadAttention.backward"

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass(frozen=True)
class Check:
    checker: str                 # "pair" | "function" | "module"  (how homework/evaluate.py calls it)
    draw: str                    # an input drawer in homework/checks.py DRAWERS (the cases' own: cases.py)
    forward: str                 # "module:function" (pair, function) or "module:Class" (module)
    backward: str | None = None  # "module:function" for a pair
    options: dict = field(default_factory=dict)   # passed to the drawer


@dataclass(frozen=True)
class Assignment:
    id: str
    title: str
    lecture: str
    points: int
    targets: tuple
    checks: tuple
    needs: tuple = ()    # the assignments whose functions these call: graded with the reference's


def _t(spec: str) -> Target:
    module, qualname = spec.split(":")
    return Target(module, qualname)


def _pair(module: str, stem: str, draw: str, **options) -> Check:
    return Check("pair", draw, f"{module}:{stem}_forward", f"{module}:{stem}_backward", options)


def _targets(*specs: str) -> tuple:
    return tuple(_t(s) for s in specs)


L1, L2, L3, L4, L5, L6, L7 = ("lectures/01_attention.py", "lectures/02_multihead_and_masks.py",
                              "lectures/03_layernorm_residual_ffn.py", "lectures/04_positions.py",
                              "lectures/05_training_seq2seq.py", "lectures/06_architecture_tweaks.py",
                              "lectures/07_gpt_end_to_end.py")
F = "functional"

ASSIGNMENTS = (
    Assignment("linear", "Linear layer y = x W + b", L2, 5,
               _targets(f"{F}.linear:linear_forward", f"{F}.linear:linear_backward"),
               (_pair(f"{F}.linear", "linear", "linear"),)),
    Assignment("relu", "ReLU", L3, 2,
               _targets(f"{F}.activations:relu_forward", f"{F}.activations:relu_backward"),
               (_pair(f"{F}.activations", "relu", "bct"),)),
    Assignment("gelu", "GELU, exact (erf) and tanh approximation", L6, 5,
               _targets(f"{F}.activations:gelu_forward", f"{F}.activations:gelu_backward",
                        f"{F}.activations:_gelu_tanh_forward"),
               (_pair(f"{F}.activations", "gelu", "bct", approximate="none"),
                _pair(f"{F}.activations", "gelu", "bct", approximate="tanh"))),
    Assignment("softmax", "Softmax over the last axis", L1, 5,
               _targets(f"{F}.softmax:softmax_forward", f"{F}.softmax:softmax_backward"),
               (_pair(f"{F}.softmax", "softmax", "softmax"),)),
    Assignment("cross_entropy", "Log-softmax and cross-entropy (label smoothing, ignore_index)", L5, 10,
               _targets(f"{F}.softmax:log_softmax_forward", f"{F}.softmax:log_softmax_backward",
                        f"{F}.cross_entropy:cross_entropy_forward",
                        f"{F}.cross_entropy:cross_entropy_backward"),
               (_pair(f"{F}.softmax", "log_softmax", "bct"),
                _pair(f"{F}.cross_entropy", "cross_entropy", "cross_entropy"))),
    Assignment("layernorm", "LayerNorm", L3, 10,
               _targets(f"{F}.norm:layernorm_forward", f"{F}.norm:layernorm_backward"),
               (_pair(f"{F}.norm", "layernorm", "layernorm"),)),
    Assignment("rmsnorm", "RMSNorm", L6, 5,
               _targets(f"{F}.norm:rmsnorm_forward", f"{F}.norm:rmsnorm_backward"),
               (_pair(f"{F}.norm", "rmsnorm", "rmsnorm"),)),
    Assignment("embedding", "Token embedding (a table lookup and its scatter-add)", L4, 5,
               _targets(f"{F}.embedding:embedding_forward", f"{F}.embedding:embedding_backward",
                        f"{F}.embedding:_one_hot_scatter", f"{F}.embedding:_sorted_scatter"),
               (_pair(f"{F}.embedding", "embedding", "embedding"),)),
    Assignment("dropout", "Inverted dropout", L3, 3,
               _targets(f"{F}.dropout:dropout_forward", f"{F}.dropout:dropout_backward"),
               (_pair(f"{F}.dropout", "dropout", "dropout"),)),
    Assignment("attention", "Scaled dot-product attention with masks", L1, 15,
               _targets(f"{F}.attention:attention_forward", f"{F}.attention:attention_backward"),
               (_pair(f"{F}.attention", "attention", "attention"),), needs=("softmax", "dropout")),
    Assignment("rope", "Rotary position embedding (RoPE)", L4, 5,
               _targets(f"{F}.rope:rope_forward", f"{F}.rope:rope_backward", f"{F}.rope:_tables",
                        f"{F}.rope:_pairs"),
               (_pair(f"{F}.rope", "rope", "bhtd"),)),
    Assignment("mha", "Multi-head attention: the Module's backward, and grouped kv heads (repeat_kv)", L2, 10,
               _targets("layers.attention:MultiHeadAttention.backward", f"{F}.repeat_kv:repeat_kv_forward",
                        f"{F}.repeat_kv:repeat_kv_backward"),
               (Check("module", "mha", "layers.attention:MultiHeadAttention"),
                _pair(f"{F}.repeat_kv", "repeat_kv", "repeat_kv")),
               needs=("linear", "attention", "rope", "causal_mask")),
    Assignment("block", "A whole pre-norm block: Residual and DecoderBlock backward", L3, 10,
               _targets("layers.residual:Residual.backward", "layers.blocks:DecoderBlock.backward"),
               (Check("module", "block", "layers.blocks:DecoderBlock"),),
               needs=("mha", "layernorm", "rmsnorm", "linear", "gelu", "relu", "dropout")),
    Assignment("sinusoidal", "Sinusoidal position table (forward only)", L4, 3,
               _targets(f"{F}.sinusoidal:sinusoidal_table"),
               (Check("function", "sinusoidal", f"{F}.sinusoidal:sinusoidal_table"),)),
    Assignment("causal_mask", "Causal mask (forward only)", L2, 2,
               _targets(f"{F}.masks:causal_mask"),
               (Check("function", "causal_mask", f"{F}.masks:causal_mask"),)),
)

BY_ID = {a.id: a for a in ASSIGNMENTS}

# assignment -> the code that computes its function otherwise; stubbed with it in a student's copy
EQUIVALENTS = {
    "softmax": _targets(f"{F}.softmax:softmax_backward_jacobian", f"{F}.softmax:log_softmax_forward",
                        f"{F}.softmax:log_softmax_backward"),             # exp(log_softmax) = softmax
    "cross_entropy": _targets(f"{F}.softmax:softmax_forward", f"{F}.softmax:softmax_backward",
                              f"{F}.softmax:softmax_backward_jacobian"),  # log(softmax) = log_softmax
    "attention": _targets(f"{F}.shaw:shaw_attention_forward",             # zero relative tables
                          f"{F}.shaw:shaw_attention_backward"),
    "causal_mask": _targets(f"{F}.masks:sliding_window_mask", f"{F}.masks:dilated_window_mask",
                            f"{F}.masks:global_window_mask"),             # a window >= S is causal
    "block": _targets("layers.blocks:EncoderBlock.backward"),             # the block without cross-attention
}


def select(ids) -> list:
    """The assignments named in ``ids`` ("all" = every one), in table order; KeyError names unknown ids."""
    ids = list(ids)
    if not ids or "all" in ids:
        return list(ASSIGNMENTS)
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        raise KeyError(f"unknown assignment(s) {', '.join(unknown)}; known: {', '.join(BY_ID)}")
    return [a for a in ASSIGNMENTS if a.id in ids]


def needed(assignment) -> list:
    """Every assignment ``assignment`` builds on, directly or through another, in table order."""
    found: set = set()
    stack = list(assignment.needs)
    while stack:
        a = stack.pop()
        if a not in found:
            found.add(a)
            stack.extend(BY_ID[a].needs)
    return [a for a in ASSIGNMENTS if a.id in found]


def grading_order(assignments) -> list:
    """``assignments`` with each one after those it needs: the reference of a needed assignment
    enters the student's process only once that assignment is graded."""
    order: list = []

    def visit(a):
        if a in order:
            return
        for b in needed(a):
            if b in assignments:
                visit(b)
        order.append(a)
    for a in assignments:
        visit(a)
    return order
