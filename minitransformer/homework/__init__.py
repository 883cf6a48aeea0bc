"""Homework: export stubbed copies of the package, grade submissions safely, diagnose the bugs.

An assignment names the functions a student writes, its graded cases and its catalogue
of common mistakes; the grader runs the student's code in a confined child process and
compares it with the reference in the trusted parent. The modules of this folder, one
line each, are listed in docs/DESIGN.md (the tree); docs/homework.md describes the
architecture and the instructor's commands, docs/grading.md the cases, the diagnoses
and the rubric.
"""
