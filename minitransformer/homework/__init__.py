"""Homework: export stubbed copies of the package, grade them, diagnose the bugs.

    assignments.py  the table of assignments (data)
    export.py       the student's copy, the handout, the starter notebooks
    grade.py        one subprocess per assignment, with a time limit
    checks.py       what runs in that subprocess: drawers, checkers, isolation
    diagnose.py     reference vs student: error, verdict, and what the bug looks like
    ownpair.py      `gradcheck FILE.py:FORWARD:BACKWARD`: a student's own pair
    report.py       the printed table and Gradescope's results.json
"""
