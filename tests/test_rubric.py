"""The rubric: named all-or-nothing checks whose points add up, each lost only by its own failure."""
from __future__ import annotations

import pytest

from minitransformer.homework.registry import assignments, by_id, case_table
from minitransformer.homework.rubric import UNCHANGED, items, render, score

ASSIGNMENTS, BY_ID, CASES = assignments(), by_id(), case_table()


def _all_right(assignment_id):
    """The outcomes of a correct submission: every tensor of every case, and the integrity check."""
    outcomes = {}
    for case in CASES[assignment_id]:
        for tensor in case.tensors:
            outcomes[(case.name, tensor.replace("*", "W"))] = True
        outcomes[(case.name, UNCHANGED)] = True
    return outcomes


@pytest.mark.parametrize("a", [a.id for a in ASSIGNMENTS])
def test_points_add_up_and_a_correct_submission_earns_them_all(a):
    assert sum(item.points for item in items(a)) == pytest.approx(BY_ID[a].points)
    assert score(a, _all_right(a))[0] == pytest.approx(BY_ID[a].points)
    assert score(a, {})[0] == 0            # no outcome (the code raised) earns nothing


def test_a_wrong_gradient_loses_its_check_only():
    outcomes = _all_right("layernorm")
    outcomes[("layernorm: x (B, T, C)", "dx")] = False
    dx = next(i for i in items("layernorm") if i.name.endswith("· dx"))
    assert score("layernorm", outcomes)[0] == pytest.approx(10 - dx.points)
    assert dx.points == pytest.approx(10 * 1 / 7.5, abs=0.01)   # forward, dx, dgamma, dbeta, 3 cases, ½ integrity


def test_a_wrong_tensor_in_a_further_case_loses_that_case_and_a_mutation_the_integrity_check():
    outcomes = _all_right("attention")
    outcomes[("attention: four heads (H=4)", "dk")] = False
    case = next(i for i in items("attention") if i.name.startswith("attention: four heads"))
    assert score("attention", outcomes)[0] == pytest.approx(15 - case.points)
    outcomes = _all_right("attention")
    outcomes[("attention: masked keys", UNCHANGED)] = False
    integrity = next(i for i in items("attention") if i.name.startswith("inputs and upstream"))
    assert score("attention", outcomes)[0] == pytest.approx(15 - integrity.points)


def test_a_module_parameter_gradient_is_one_check_and_dx_another():
    outcomes = _all_right("mha")
    outcomes[("mha: causal self-attention", "dW_o")] = False
    params = next(i for i in items("mha") if i.name.endswith("d(parameters)"))
    earned, marks = score("mha", outcomes)
    assert earned == pytest.approx(10 - params.points)
    assert [m.name for m in marks if not m.passed] == [params.name]


def test_the_rendered_rubric_names_every_check_and_says_the_numerical_check_is_not_scored():
    text = render("attention")
    for item in items("attention"):
        assert f"{item.points:g} points: {item.name}" in text
    assert "not scored" in text


@pytest.mark.parametrize("a", [a.id for a in ASSIGNMENTS if any(i.name.startswith("inputs and") for i in items(a.id))])
def test_inputs_left_unchanged_earn_nothing_when_no_value_is_right(a):
    """A stub that returns zeros leaves its inputs alone: that promise is worth nothing alone."""
    outcomes = {key: (key[1] == UNCHANGED) for key in _all_right(a)}
    earned, marks = score(a, outcomes)
    assert earned == 0
    assert not any(m.passed for m in marks)
    one_right = dict(outcomes)
    main = CASES[a][0]
    one_right.update({(main.name, t.replace("*", "W")): True for t in main.tensors})
    integrity = next(i for i in items(a) if i.name.startswith("inputs and"))
    main_points = sum(i.points for i in items(a) if i.name.startswith(main.name + " ·"))
    assert score(a, one_right)[0] == pytest.approx(main_points + integrity.points)
    assert "computes nothing changes nothing" in render(a)
