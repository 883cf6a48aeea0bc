"""Homework: export stubbed copies of the package, grade submissions safely, diagnose the bugs.

The copy's side (ships in every student's copy; no reference, no drawer):
    assignments.py  the table of assignments (data, not code per assignment)
    graded.py       what a graded case is, without how its inputs are drawn
    export.py       the student's copy (no solution, no trusted code in it), the handout, the starters
    submission.py   a submission's target bodies laid over the grader's pristine copy
    grade.py        the parent's order of work: one confined child per submission
    sandbox.py      starting, calling and ending the child (the parent's side of the channel)
    wire.py         the channel's frames, values by handle and by value
    child.py        the child: its walls, a small server
    walls.py        the seccomp filter, and which walls this machine can raise
    needs.py        the functions an assignment builds on, answered for the child
    evaluate.py     one assignment's graded cases: compare, diagnose, promises, rubric
    expected.py     the public seed's numbers a copy checks itself with; the copy's mark
    mistakes.py, mistakes_match.py, diagnose.py, rubric.py, report.py, handout.py, ownpair.py

The trusted side (export.TRUSTED: never in a copy, never where the student's code runs):
    cases.py, checks.py                          the graded cases' drawers
    mistakes_functional.py, mistakes_modules.py  the catalogue's variants (the reference, one thing changed)
    reference.py                                 expected results computed; the numbers a copy stores
    classroom.py, autograder.py                  `check-class`, Gradescope's zip

docs/homework.md describes the architecture and the instructor's commands; docs/grading.md
the cases, the diagnoses, the rubric and the trust boundary.
"""
