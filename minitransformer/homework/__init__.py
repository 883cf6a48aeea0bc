"""Homework: export stubbed copies of the package, grade submissions safely, diagnose the bugs.

    assignments.py  the table of assignments (data), what each needs, the equivalents
    export.py       the student's copy (no solution in it), the handout, the starters
    submission.py   a submission's target bodies laid over a pristine copy
    grade.py        the trusted parent: one confined child per submission
    sandbox.py      starting, calling and ending the child (the parent's side of the channel)
    child.py        the child: limits, unprivileged user, audit hook, a small server
    checks.py       drawers and checkers, run in the parent
    diagnose.py     reference vs student: error, verdict, and what the bug looks like
    report.py       the printed table and Gradescope's results.json
    classroom.py    `check-class`: a folder of submissions, a CSV gradebook
    autograder.py   Gradescope's zip: setup.sh, run_autograder, a wheel, the seed
    ownpair.py      `gradcheck FILE.py:FORWARD:BACKWARD`: a student's own pair

docs/homework.md describes the architecture and the instructor's commands.
"""
