"""Homework: export stubbed copies of the package, grade submissions safely, diagnose the bugs.

An assignment is one file of ``homework/assignments/`` (homework/assignment.py says what it
declares): the functions a student writes, its graded cases with their drawers, its
catalogue of common mistakes, its handout text. The grader is an engine over those files
(homework/registry.py finds them): it stages a submission, runs the student's code in a
child process the kernel walls in, evaluates it case by case against the reference in the
trusted parent, scores the rubric and reports, passing typed results (homework/result.py).
The folder has two sides: the trusted one (``export.TRUSTED``: the assignments' files, whose
drawers draw the graded inputs and whose variants re-implement the reference; the
reference's grading code; the class and Gradescope commands) is never in a student's copy
nor where the student's code runs; the rest ships in every copy. The modules, one line
each, are listed in docs/DESIGN.md (the tree); docs/homework.md describes the architecture
and the instructor's commands, docs/grading.md the cases, the diagnoses, the rubric, the
trust boundary and how to write an assignment.
"""
