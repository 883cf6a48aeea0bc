"""The trace of one training step (minitransformer/trace/): order, names, links, and that it changes nothing.

The forward order is read off models/gpt_reference.py itself (its functional calls,
line by line, the loop unrolled), so the test holds the recorder to the file a student
reads; the Modules' trace must then be that same sequence of routines on the same
parameters, with the same numbers, and each backward the reverse of the forwards.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minitransformer.functional as functional_package
from minitransformer.cli import main
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.layers import Causal, MultiHeadAttention
from minitransformer.models import GPT, GPTConfig
from minitransformer.models import gpt_reference
from minitransformer.models.gpt_reference import gpt_loss_and_gradients
from minitransformer.trace import trace
from minitransformer.trace.mathml import mathml
from minitransformer.trace.page import page_data
from minitransformer.trace.run import FAMILIES, traced_step

REFERENCE = Path(gpt_reference.__file__)


def _gpt(n_layer=2, n_head=2, D=4, seed=0):
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=n_layer, n_head=n_head, d_model=n_head * D, init_std=0.3)
    rng = np.random.default_rng(seed)
    return GPT(config, rng=seed, dtype=np.float64), rng.integers(0, 11, (2, 7)), rng.integers(0, 11, (2, 7))


def _module_step(model, ids, targets):
    loss, cache = cross_entropy_forward(model.forward(ids), targets)
    model.backward(cross_entropy_backward(1.0, cache))
    return float(loss)


# ------------------------------------------------------------------ the reference file, read with ast
def _reference_calls(n_layer: int) -> tuple:
    """(forward, backward): the (line, routine) of each functional call in gpt_reference.py, in the order
    Python evaluates them (inner calls first), the per-layer loops unrolled."""
    tree = ast.parse(REFERENCE.read_text(encoding="utf-8"))
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gpt_loss_and_gradients")
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and "functional" in n.module
                for a in n.names}
    split = next(s.lineno for s in func.body if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "g")
    calls = []
    for statement in func.body:
        repeat = n_layer if isinstance(statement, ast.For) else 1
        for _ in range(repeat):
            calls += [(c.lineno, c.func.id) for c in _evaluation_order(statement)
                      if isinstance(c.func, ast.Name) and c.func.id in imported]
    return [c for c in calls if c[0] < split], [c for c in calls if c[0] > split]


def _evaluation_order(node) -> list:
    """The Call nodes under ``node``, each after the calls in its own arguments (post-order)."""
    found = []
    for child in ast.iter_child_nodes(node):
        found += _evaluation_order(child)
    return found + ([node] if isinstance(node, ast.Call) else [])


def _pairs(t, phase):
    """(routine, parameter names) of the top-level pairs of a phase, identity dropouts left out."""
    return [(s.op, tuple(v.param for v in s.args if v.param)) for s in t.top()
            if s.phase == phase and s.routine.pair and not s.op.startswith("dropout")]


def test_forward_order_is_the_reference_file_and_backward_its_reverse():
    model, ids, targets = _gpt()
    params = model.state_dict()
    with trace(params) as ref:
        gpt_loss_and_gradients(params, ids, targets, model.config)
    forward, backward = _reference_calls(model.config.n_layer)
    recorded = [(s.call[1], s.op) for s in ref.top() if s.call[0].endswith("gpt_reference.py")]
    assert recorded == forward + backward
    assert all(s.call[0] == "models/gpt_reference.py" for s in ref.top())

    with trace(model) as mod:
        _module_step(model, ids, targets)
    assert _pairs(mod, "forward") == _pairs(ref, "forward")            # the same routines on the same parameters
    assert _pairs(mod, "backward") == _pairs(ref, "backward")
    for t in (ref, mod):                                              # each backward reverses a forward, in reverse
        forwards = [s.index for s in t.top() if s.routine.direction == "forward"]
        backwards = [s for s in t.top() if s.routine.direction == "backward"]
        assert [s.reverses for s in backwards] == forwards[::-1]
        assert all(t.steps[s.reverses].op == s.op.replace("_backward", "_forward") for s in backwards)


def test_the_modules_trace_holds_the_references_numbers():
    model, ids, targets = _gpt(seed=3)
    params = model.state_dict()
    with trace(params) as ref:
        gpt_loss_and_gradients(params, ids, targets, model.config)
    with trace(model) as mod:
        _module_step(model, ids, targets)
    pick = lambda t: [s for s in t.top() if s.routine.pair and not s.op.startswith("dropout")]   # noqa: E731
    for a, b in zip(pick(mod), pick(ref), strict=True):
        for va, vb in zip(a.results, b.results):
            if va.kind == "array" and vb.kind == "array":
                assert va.shape == vb.shape and va.stats["absmax"] == pytest.approx(vb.stats["absmax"], rel=1e-12)
                np.testing.assert_allclose(va.slices[0][1], vb.slices[0][1], rtol=1e-12, atol=1e-14)


@settings(max_examples=4, deadline=None)
@given(n_layer=st.integers(1, 2), n_head=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_tracing_changes_no_result_bit_and_restores_the_process(n_layer, n_head, seed):
    plain, ids, targets = _gpt(n_layer, n_head, seed=seed)
    traced, _, _ = _gpt(n_layer, n_head, seed=seed)
    namespaces = {name: dict(vars(m)) for name, m in sys.modules.items()
                  if name.startswith("minitransformer.functional") or name.startswith("minitransformer.layers")}
    before = sys.gettrace()
    loss = _module_step(plain, ids, targets)
    with trace(traced) as t:
        traced_loss = _module_step(traced, ids, targets)
    assert sys.gettrace() is before and t.steps
    assert traced_loss == loss                                                # bit for bit
    for (name, _, g), (_, _, h) in zip(plain.parameters(), traced.parameters(), strict=True):
        assert np.array_equal(g, h), name
    p = traced.state_dict()
    assert np.array_equal(gpt_loss_and_gradients(p, ids, targets, traced.config)[0],
                          _traced_reference(p, ids, targets, traced.config))
    for name, space in namespaces.items():                                    # nothing replaced anywhere
        assert all(vars(sys.modules[name]).get(k) is v for k, v in space.items()), name


def _traced_reference(p, ids, targets, config):
    with trace(p):
        loss, _ = gpt_loss_and_gradients(p, ids, targets, config)
    return loss


def test_a_previous_trace_function_keeps_running_and_is_put_back():
    seen = []

    def tracer(frame, event, arg):
        seen.append(frame.f_code.co_name)
        return None
    model, ids, targets = _gpt(1, 1)
    sys.settrace(tracer)
    try:
        with trace(model) as t:
            _module_step(model, ids, targets)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert "layernorm_forward" in seen and "linear_backward" in seen and len(t.steps) > 10


def test_names_links_and_gradients_of_a_step():
    model, ids, targets = _gpt(1, 2)
    with trace(model) as t:
        _module_step(model, ids, targets)
    qkv = next(s for s in t.steps if s.op == "linear_forward" and s.value("W").param.endswith("W_qkv"))
    assert qkv.scope == "blocks.0.attn.sublayer" and qkv.value("W").param == "blocks.0.attn.sublayer.W_qkv"
    assert qkv.value("x").source == (qkv.index - 1, "y", True, "")           # the LayerNorm's output itself
    ln2 = next(s for s in t.steps if s.scope == "blocks.0.ffn.norm")
    assert ln2.value("x").source[3] == "changed"                             # the residual sum, added in place
    assert qkv.call[0] == "layers/attention.py"
    back = t.steps[qkv.reversed_by]
    assert back.op == "linear_backward" and back.reverses == qkv.index
    assert back.value("dW").grad_of == (qkv.index, "W") and back.value("dW").label.endswith("W_qkv")
    assert back.args[0].grad_of == (qkv.index, "y")                          # the upstream dy beside y
    head = next(s for s in t.steps if s.scope == "head")
    assert head.value("W").param == "embed.tok.Wᵀ"                           # the tied head, a transposed view
    softmax = next(s for s in t.steps if s.op == "softmax_forward")
    assert t.steps[softmax.parent].op == "attention_forward"                 # a pair inside a pair: its child
    assert t.steps[softmax.reversed_by].parent == t.steps[softmax.parent].reversed_by


def test_every_parameter_a_forward_reads_gets_its_gradient_linked():
    for family in FAMILIES:
        t = traced_step(family)
        assert not t.error and np.isfinite(t.meta["loss"]), family
        read = {(s.index, v.name) for s in t.steps if s.phase == "forward" for v in s.args if v.param}
        linked = {v.grad_of for s in t.steps if s.phase == "backward" for v in s.results if v.grad_of}
        assert read and read <= linked, (family, sorted(read - linked)[:5])


def test_a_single_layer_traces_with_its_own_names():
    layer = MultiHeadAttention(8, 2, pattern=Causal(), rng=0).astype(np.float64)
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    with trace(layer) as t:
        y = layer.forward(x)
        layer.backward(np.random.default_rng(1).standard_normal(y.shape))
    ops = [s.op for s in t.top()]
    assert ops[0] == "linear_forward" and ops[-1] == "linear_backward" and "attention_backward" in ops
    assert {v.param for s in t.steps for v in s.args if v.param} == {"W_qkv", "b_qkv", "W_o", "b_o"}
    assert {s.scope for s in t.steps} == {"model"}


def test_an_error_inside_a_routine_is_recorded_and_raised():
    from minitransformer.functional.linear import linear_forward
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="x: "):
        with trace() as t:
            linear_forward(x, np.ones((3, 4)))
            linear_forward(x, np.ones((5, 4)))                                   # d_in does not match
    assert [s.error for s in t.steps] == ["", t.error] and t.error.startswith("ValueError: x: ")
    assert t.steps[0].results[0].shape == (2, 4) and t.steps[1].results == []


def test_equations_come_from_the_docstrings_as_mathml():
    t = traced_step("gpt")
    data = page_data(t)
    linear = data["routines"]["linear_forward"]
    assert linear["equation_text"] == [["y = x @ W + b"]]
    assert linear["equation"][0][0].startswith('<math display="block">') and "<mi>W</mi>" in linear["equation"][0][0]
    assert "<msqrt>" in data["routines"]["layernorm_forward"]["equation"][0][0]
    assert len(data["routines"]["layernorm_backward"]["equation"]) == 3          # dbeta/dgamma, dxhat, dx
    assert len(data["routines"]["attention_backward"]["equation"]) >= 5         # the module's backward table
    assert mathml("Kᵀ") == '<math display="block"><mrow><msup><mi>K</mi><mi>T</mi></msup></mrow></math>'
    for r in data["routines"].values():
        assert r["equation"] and all(m.count("<math") == 1 for row in r["equation"] for m in row), r["op"]


def test_the_command_writes_a_small_self_contained_page(tmp_path, capsys):
    out = tmp_path / "trace.html"
    assert main(["trace", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: ") and "forward" in said
    text = out.read_text(encoding="utf-8")
    assert len(text.encode()) < 2_000_000
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text) and "<link" not in text
    data = json.loads(re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', text, re.S)
                      .group(1).replace("<\\/", "</"))
    assert data["meta"]["family"] == "gpt" and len(data["steps"]) > 40
    assert {s["phase"] for s in data["steps"]} == {"forward", "backward"}


def test_a_larger_model_gets_cropped_previews_within_the_bound(tmp_path, capsys):
    out = tmp_path / "small.html"
    assert main(["trace", "--model", "seq2seq", "--out", str(out), "--max-mb", "0.1"]) == 0
    assert "note: previews cropped to " in capsys.readouterr().err
    assert out.stat().st_size < 400_000
    data = json.loads(re.search(r'application/json">(.*?)</script>', out.read_text(), re.S).group(1))
    assert data["meta"]["crop"] is not None


@pytest.mark.parametrize("argv, flag", [
    (["--model", "bert"], "--model"), (["--text", "x"], "--text"), (["--model", "vit", "--text", "hi"], "--text"),
    (["--text", "a" * 65], "--text"), (["--checkpoint", "no/such/run"], "--checkpoint"), (["--max-mb", "0"], "--max-mb"),
    (["--out", "/proc/no/page.html"], "--out")])
def test_bad_input_is_one_line_and_exit_2(argv, flag, capsys, tmp_path):
    code = None
    try:
        code = main(["trace", "--out", str(tmp_path / "t.html"), *argv] if "--out" not in argv else ["trace", *argv])
    except SystemExit as e:                                                  # argparse's own refusals
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and flag in err, err


def test_a_speed_wing_twin_is_recorded_as_the_plain_routine_it_stands_for():
    from minitransformer import fast
    model, ids, targets = _gpt(1, 2)
    with fast.enabled():
        with trace(model) as t:
            _module_step(model, ids, targets)
    twins = [s for s in t.steps if s.twin]
    assert twins and {s.op for s in twins} >= {"layernorm_forward", "attention_forward"}
    assert all(s.routine.path.startswith("functional/") for s in t.steps)     # the plain form's file and equation
    backwards = [s for s in t.top() if s.routine.direction == "backward"]
    assert all(t.steps[s.reverses].op == s.op.replace("_backward", "_forward") for s in backwards)


def test_the_python_entrances_name_a_bad_argument():
    model, ids, targets = _gpt(1, 1)
    with pytest.raises(TypeError, match="model: expected a Module"):
        with trace("gpt"):
            pass
    with pytest.raises(ValueError, match="family"):
        from minitransformer.trace import trace_step
        trace_step(model, "bert", {"x": ids, "targets": targets})
