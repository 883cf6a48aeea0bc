"""The handout page of an assignment: what to do, with what, how it is graded, what to hand in."""
from __future__ import annotations

import re

import pytest

from minitransformer.homework.handout import cache_fields, page
from minitransformer.homework.registry import assignments, case_table
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
    assert "A falling loss proves nothing" in text and "Tolerance: relative error 1e-07" in text
    assert " ms" not in text and "faster" not in text          # no performance notes


def test_prerequisites_and_cache_fields_of_the_pair_only():
    assert "`linear`, `causal_mask`, `attention`, `rope`" in page("mha")
    assert {c for c, _, _ in cache_fields("layernorm")} == {"LayerNormCache"}
    assert ("LayerNormCache", "rstd", "(..., 1) 1/√(σ² + eps); μ and σ² themselves are not needed again") \
        in cache_fields("layernorm")


def test_the_prerequisites_named_are_the_assignments_the_grader_swaps_in():
    for a in ASSIGNMENTS:
        section = page(a.id).split("### Prerequisites")[1].split("###")[0]
        named = set(re.findall(r"`(\w+)`", section))
        assert named == set(a.needs), a.id
        assert ("stands alone" in section) == (not a.needs), a.id
