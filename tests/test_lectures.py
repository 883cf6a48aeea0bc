"""The lectures: each runs top to bottom as a script in fast mode and exits 0.

Every lecture ends with asserts that check what it claimed, so "exit 0" means the
claims hold, not only that the code runs. Fast mode (MINITRANSFORMER_FAST=1) keeps
each one to a few seconds; figures go to a temporary folder, not into the tree.
A lecture is a jupytext percent-format script: markdown cells above code cells,
no ``__main__`` guard, no ``plt.show()``.

Every lecture ends with a quiz (lectures/_quiz.py) whose answers are stored as
digests. tests/quiz_answers.py computes the answers from the library; the tests
check them against the digests in each lecture file, and run every lecture with
them (MINITRANSFORMER_QUIZ_ANSWERS), so every check cell runs.
"""
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from quiz_answers import answers

LECTURES_DIR = Path(__file__).resolve().parent.parent / "lectures"
LECTURES = sorted(LECTURES_DIR.glob("[0-9][0-9]_*.py"))
TIMEOUT_S = 120      # fast mode takes a few seconds; this only stops a hang


def test_the_lectures_are_numbered_without_gaps():
    assert [p.name[:2] for p in LECTURES] == [f"{n:02d}" for n in range(1, len(LECTURES) + 1)], LECTURES
    assert LECTURES[0].name == "01_attention.py" and len(LECTURES) >= 11


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_runs_in_fast_mode(path, tmp_path):
    answers_file = tmp_path / "quiz_answers.json"
    answers_file.write_text(json.dumps(answers(path.name[:2])), encoding="utf-8")
    env = {**os.environ, "MINITRANSFORMER_FAST": "1", "MINITRANSFORMER_LECTURE_OUT": str(tmp_path),
           "MPLBACKEND": "Agg", "MINITRANSFORMER_QUIZ_ANSWERS": str(answers_file),
           # Tiny matrices: one BLAS thread is faster than two fighting over a shared CPU.
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, f"{path.name} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert "all claims check out" in run.stdout           # it reached its final checks
    quiz = re.search(r"quiz: (\d+) correct, (\d+) not answered yet", run.stdout)
    assert quiz and int(quiz.group(1)) >= 3 and quiz.group(2) == "0", f"{path.name}: no complete quiz run"
    assert list(tmp_path.glob("*.png")), f"{path.name} wrote no figure"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_is_a_percent_format_script(path):
    source = path.read_text(encoding="utf-8")
    cells = re.split(r"^# %%", source, flags=re.M)[1:]
    markdown = [c for c in cells if c.startswith(" [markdown]")]
    code = [c for c in cells if not c.startswith(" [markdown]")]
    assert markdown and code, "expected markdown cells (# %% [markdown]) and code cells (# %%)"
    assert cells[0].startswith(" [markdown]"), "a lecture opens with its markdown introduction"
    assert "__main__" not in source, "a lecture is a script top to bottom: no __main__ guard"
    assert ".show(" not in source, "figures are saved (Agg), never shown"
    assert 'matplotlib.use("Agg")' in source


def test_readme_lists_every_lecture():
    readme = (LECTURES_DIR / "README.md").read_text(encoding="utf-8")
    for path in LECTURES:
        assert path.name in readme, f"lectures/README.md does not mention {path.name}"


def test_no_readme_counts_the_lectures_in_words():
    """How many lectures there are is the table's to say: a number in a sentence goes stale."""
    count = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
                       r"fourteen|fifteen)\s+(?:step-through\s+)?lectures\b", flags=re.I)
    for readme in (LECTURES_DIR / "README.md", LECTURES_DIR.parent / "README.md"):
        found = count.search(readme.read_text(encoding="utf-8"))
        assert not found, f"{readme.name} counts the lectures in words ({found.group(0)!r}); the table lists them"


def _quiz_module():
    sys.path.insert(0, str(LECTURES_DIR))
    try:
        import _quiz
    finally:
        sys.path.remove(str(LECTURES_DIR))
    return _quiz


def test_quiz_check_rejects_a_wrong_answer_with_the_hint(monkeypatch):
    quiz = _quiz_module()
    monkeypatch.delenv("MINITRANSFORMER_QUIZ_ANSWERS", raising=False)
    with pytest.raises(AssertionError, match=r"question 7: 195 is not right\. Hint: \(224/16\)"):
        quiz.check("7", 195, quiz.digest((224 // 16) ** 2), hint="(224/16)² patches")
    with pytest.raises(AssertionError, match="question 8"):
        quiz.check("8", ["una", "##ffable"], quiz.digest(["una", "##ffa", "##ble"]))
    with pytest.raises(AssertionError):
        quiz.check("9", 1, quiz.digest(True))              # 1 is not the answer True
    with pytest.raises(AssertionError):
        quiz.check("10", "b", quiz.digest("c"))
    with pytest.raises(AssertionError):
        quiz.check("11", 0.47, quiz.digest(0.46831, 3), digits=3)   # two units off at 3 digits


def test_quiz_check_accepts_right_answers_and_reports_missing_ones(monkeypatch, capsys, tmp_path):
    quiz = _quiz_module()
    monkeypatch.delenv("MINITRANSFORMER_QUIZ_ANSWERS", raising=False)
    assert quiz.check("1", 196.0, quiz.digest(196)) is True
    assert quiz.check("2", " B ", quiz.digest("b")) is True             # letters: case and spaces do not matter
    for near in (0.468, 0.4683, 0.467, 0.469):                          # 3 digits, one unit either way
        assert quiz.check("3", near, quiz.digest(0.46831, 3), digits=3) is True
    assert quiz.check("4", ("a", 2), quiz.digest(["a", 2])) is True
    assert quiz.check("5", None, quiz.digest(196)) is None              # not answered: nothing checked
    assert "question 5: not answered yet" in capsys.readouterr().out
    answers_file = tmp_path / "answers.json"
    answers_file.write_text('{"6": 196}', encoding="utf-8")
    monkeypatch.setenv("MINITRANSFORMER_QUIZ_ANSWERS", str(answers_file))
    assert quiz.check("6", None, quiz.digest(196)) is True             # the given answers fill in unanswered ones


def _checks(path):
    """(question, digest, digits) of every check(...) call in a lecture, read with ast."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
            digits = next((kw.value.value for kw in node.keywords if kw.arg == "digits"), None)
            found.append((node.args[0].value, node.args[2].value, digits))
    return found


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_quiz_digests_match_the_answers_computed_from_the_library(path):
    quiz = _quiz_module()
    expected = answers(path.name[:2])
    checks = _checks(path)
    assert sorted(q for q, _, _ in checks) == sorted(expected), f"{path.name}: questions and answers differ"
    for question, stored, digits in checks:
        assert isinstance(stored, str) and re.fullmatch(r"[0-9a-f]{16}", stored), \
            f"{path.name} question {question}: the check stores {stored!r}, not a digest"
        assert quiz.matches(expected[question], stored, digits), \
            f"{path.name} question {question}: the digest is not that of {expected[question]!r}"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_every_quiz_answer_ships_unanswered(path):
    source = path.read_text(encoding="utf-8")
    answers = re.findall(r"^answer_(\w+) = (.*)$", source, flags=re.M)
    assert len(answers) >= 3, f"{path.name}: expected a quiz of at least 3 questions"
    for name, value in answers:
        assert value.startswith("None  # your answer"), f"{path.name}: answer_{name} ships answered"
        assert re.search(rf'^\s*check\("{name}", answer_{name},', source, flags=re.M), \
            f"{path.name}: answer_{name} is never checked"
