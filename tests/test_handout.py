"""The handout page of an assignment: what to do, with what, how it is graded, what to hand in."""
from __future__ import annotations

import re

import pytest

from minitransformer.homework.handout import cache_fields, page
from minitransformer.homework.registry import assignments, case_table, needed
from minitransformer.homework.rubric import items

ASSIGNMENTS, CASES = assignments(), case_table()


@pytest.mark.parametrize("a", [a for a in ASSIGNMENTS], ids=lambda a: a.id)
def test_every_page_states_targets_cases_rubric_files_and_why_a_falling_loss_proves_nothing(a):
    text = page(a.id)
    for t in a.targets:
        assert f"`{t.module}.{t.qualname}`" in text
        assert f"`minitransformer/{t.module.replace('.', '/')}.py`" in text
    for case in CASES[a.id]:
        assert f"- {case.name}" in text
    for item in items(a.id):
        assert item.name in text
    for heading in ("### Prerequisites", "### Graded cases", "### Rubric", "### Check it locally",
                    "### What to hand in", "### Train with your own code"):
        assert heading in text
    assert "a falling loss proves nothing" in text and "Tolerance: relative error 1e-07" in text
    assert " ms" not in text and "faster" not in text          # no performance notes


def test_prerequisites_and_cache_fields_of_the_pair_only():
    assert "`linear`, `causal_mask`, `attention`, `rope` compute" in page("mha")
    assert {c for c, _, _ in cache_fields("layernorm")} == {"LayerNormCache"}
    assert ("LayerNormCache", "rstd", "(..., 1) 1/√(σ² + eps); μ and σ² themselves are not needed again") \
        in cache_fields("layernorm")


def test_the_prerequisites_named_are_the_assignments_the_grader_swaps_in():
    for a in ASSIGNMENTS:
        section = page(a.id).split("### Prerequisites")[1].split("###")[0]
        named = set(re.findall(r"^- `(\w+)`", section, re.M))
        assert set(a.needs) <= named <= {b.id for b in needed(a)}, a.id
        assert ("stands alone" in section) == (not a.needs), a.id


def test_a_cache_comment_is_never_cut_mid_sentence():
    """A field's comment that goes on over the next lines is read whole (what dropout's field holds
    without dropout is on the second line)."""
    rows = {(c, f): m for c, f, m in cache_fields("attention")}
    assert rows[("AttentionCache", "dropout")].endswith("None: no dropout")
    for a in ASSIGNMENTS:                                   # and every field says what it holds
        assert all(m for _, _, m in cache_fields(a.id)), [(c, f) for c, f, m in cache_fields(a.id) if not m]
    ce = {(c, f): m for c, f, m in cache_fields("cross_entropy")}
    assert ce[("CrossEntropyCache", "logp")].endswith("rather than stored as a second (N, V) array")


def test_what_the_graded_cases_draw_is_read_off_their_drawers():
    """Each case's line names exactly the inputs and options its drawer gives on the public seed, with
    their dtypes and shapes: nothing the grader does not draw."""
    from minitransformer.homework.reference import draw
    for a in ASSIGNMENTS:
        text = page(a.id)
        for i, case in enumerate(a.cases):
            line = next(ln for ln in text.splitlines() if ln.startswith(f"- {case.name}"))
            drawn = draw(case, 0, i, 0)
            for name, value in drawn.inputs.items():
                assert f"`{name}` {value.dtype.name} {tuple(value.shape)}" in line, (a.id, case.name, name)
            named = set(re.findall(r"`(\w+)` ", line))
            assert named <= set(drawn.inputs) | set(drawn.kwargs), (a.id, case.name, named)


def test_a_needed_function_ships_working_unless_it_computes_an_assigned_one():
    """An export of layernorm, cross_entropy, attention and mha: softmax, which attention needs, computes
    log_softmax (cross_entropy) all the same, so it stays stubbed and is listed under cross_entropy;
    mha's unassigned prerequisites ship working and say so; nothing is listed as work elsewhere."""
    from minitransformer.homework.export import _stubbed
    from minitransformer.homework.handout import Copy
    from minitransformer.homework.registry import select
    chosen = select(["layernorm", "cross_entropy", "attention", "mha"])
    copy = Copy.of(chosen)
    stubbed = {f"{t.qualname}" for t in _stubbed(chosen)}
    assert {"softmax_forward", "softmax_backward"} <= stubbed
    assert not {"linear_forward", "rope_forward", "causal_mask", "dropout_forward"} & stubbed
    ce = page("cross_entropy", copy).split("### Prerequisites")[0]
    assert "`functional.softmax.softmax_forward`, `functional.softmax.softmax_backward`: `softmax`'s functions" in ce
    assert "write them too" in ce
    mha = page("mha", copy).split("### Prerequisites")[1].split("###")[0]
    for shipped in ("linear", "rope", "causal_mask"):
        assert f"- `{shipped}` (" in mha and "ships working" in mha.split(f"- `{shipped}` (")[1].splitlines()[0]
    assert "assigned in this copy" in mha.split("- `attention` (")[1].splitlines()[0]
    assert "stubbed with `cross_entropy`" in mha.split("- `softmax` (")[1].splitlines()[0]
    # every stubbed function is listed on the page of the assignment it is stubbed with
    for t, owner in copy.stubbed_with.items():
        assert f"`{t.module}.{t.qualname}`" in page(owner.id, copy).split("### Prerequisites")[0]
