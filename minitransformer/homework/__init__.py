"""Homework: export stubbed copies of the package, grade submissions safely, diagnose the bugs.

An assignment names the functions a student writes, its graded cases and its catalogue
of common mistakes; the grader runs the student's code in a child process the kernel
walls in and compares it with the reference in the trusted parent. The folder has two
sides: the trusted one (``export.TRUSTED``: the drawers of the graded inputs, the
catalogue's variants, the reference's grading code, the class and Gradescope commands)
is never in a student's copy nor where the student's code runs; the rest ships in every
copy. The modules, one line each, are listed in docs/DESIGN.md (the tree);
docs/homework.md describes the architecture and the instructor's commands,
docs/grading.md the cases, the diagnoses, the rubric and the trust boundary.
"""
