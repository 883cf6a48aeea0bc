"""A number in a lecture's prose comes from its run, or is checked beside it.

A lecture's markdown tells what its code computes. A value the code measures (a loss, a
spread, a ratio, a time) and the prose then repeats drifts as soon as the code, the seed
or the machine changes: "0.1 to 0.2 here" above a run that prints 0.226. The convention
(lectures/README.md, "Numbers in the prose"): the code prints what it measures, from its
variables, and a claim the prose makes about it (a range, a comparison) is an assert in
the cell. What the prose may still type is a formula (in $...$: the arithmetic shows), a
constant the code itself uses, or a bound the code asserts.

This test enforces the checkable part: every decimal number, percentage, or number after
"about", "≈" or "a factor of" in a lecture's prose (headings included; $...$ math and
`code` spans left out) must also occur in the same lecture's code, as the constant it uses
or the bound it asserts, or be listed in NEEDS_NO_RUN with the reason. It cannot tell a
number typed inside math from a formula, and a number that happens to occur in the code
passes: it catches the common drift, a measured value retyped into a sentence.
"""
import re
from pathlib import Path

import pytest

LECTURES = sorted((Path(__file__).resolve().parent.parent / "lectures").glob("[0-9][0-9]_*.py"))
PROSE_NUMBER = re.compile(r"(?<![\w.^/-])(\d+\.\d+|\d+(?=\s?%)|(?<=about )\d+|(?<=≈ )\d+|(?<=factor of )\d+)(?!\w)")

# (lecture, number as written): why it is not a value any run produces.
NEEDS_NO_RUN = {
    ("01", "600"): "the wavelength of orange light (600-620 nm), a physical fact",
    ("03", "0.02"): "GPT-2's initial standard deviation, the library's default init_std",
    ("07", "90"): "the training share of the text, train_val_split's fixed fraction",
}


def _prose_and_code(path):
    """(prose of the markdown cells without math and code spans, source of the code cells)."""
    cells = re.split(r"^# %%", path.read_text(encoding="utf-8"), flags=re.M)[1:]
    markdown = [c.split("\n", 1)[1] for c in cells if c.startswith(" [markdown]")]
    code = "\n".join(c for c in cells if not c.startswith(" [markdown]"))
    prose = "\n".join(re.sub(r"^# ?", "", line) for cell in markdown for line in cell.splitlines())
    prose = re.sub(r"\$\$.*?\$\$", " ", prose, flags=re.S)
    prose = re.sub(r"\$[^$\n]*\$", " ", prose)
    prose = re.sub(r"`[^`\n]*`", " ", prose)
    return prose, code


def _in_code(number: str, percent: bool, code: str) -> bool:
    """Whether the code holds the number as a literal (a percentage also as a fraction: 40% as 0.4)."""
    forms = {number}
    if percent:
        forms.add(repr(int(number) / 100))
    return any(re.search(r"(?<![\w.])" + re.escape(form) + r"(?![\d])", code) for form in forms)


def _unbacked_numbers(path):
    prose, code = _prose_and_code(path)
    found = []
    for match in PROSE_NUMBER.finditer(prose):
        number = match.group(1)
        percent = prose[match.end():match.end() + 2].lstrip().startswith("%")
        if (path.name[:2], number) in NEEDS_NO_RUN or _in_code(number, percent, code):
            continue
        context = " ".join(prose[max(0, match.start() - 60):match.end() + 30].split())
        found.append(f"{number!r} in ...{context}...")
    return found


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_prose_numbers_come_from_the_code(path):
    unbacked = _unbacked_numbers(path)
    assert not unbacked, (
        f"{path.name}: numbers in the prose that its code neither uses nor asserts. Print a measured "
        f"value from its variable (and assert the claim beside it), write arithmetic as $...$ math, "
        f"or add the number to NEEDS_NO_RUN with the reason:\n  " + "\n  ".join(unbacked))


def test_the_exemptions_are_still_needed():
    for (lecture, number), reason in NEEDS_NO_RUN.items():
        path = next(p for p in LECTURES if p.name.startswith(lecture))
        prose, code = _prose_and_code(path)
        assert re.search(r"(?<![\w.])" + re.escape(number) + r"(?!\d)", prose), \
            f"{path.name}: {number} ({reason}) is no longer in the prose: drop it from NEEDS_NO_RUN"


def test_a_retyped_measurement_is_caught(tmp_path):
    lecture = tmp_path / "99_example.py"
    lecture.write_text('# %% [markdown]\n# The loss falls to about 2.68 (when this was written).\n\n'
                       '# %%\nloss = 2.7\nprint(f"{loss:.2f}")\n', encoding="utf-8")
    assert _unbacked_numbers(lecture) and "2.68" in _unbacked_numbers(lecture)[0]
    lecture.write_text('# %% [markdown]\n# The loss falls below 2.68, and the spread is $0.02\\sqrt C$.\n\n'
                       '# %%\nloss = 2.6\nassert loss < 2.68\n', encoding="utf-8")
    assert _unbacked_numbers(lecture) == []
