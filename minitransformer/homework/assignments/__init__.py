"""The assignments, one file each: the trusted side of homework/, never in a student's copy.

A file here declares ``ASSIGNMENT`` (homework/assignment.py): the functions the student
writes, the lecture, the points, what it builds on, its graded cases with the drawers of
their inputs, its catalogue of mistakes with the variants that recognise them, and the
handout's own text. The drawers draw the graded inputs from the seed and the variants
compute what a wrong line gives (with default options, the reference itself), so the
whole folder is left out of every student's copy and of the grader's child
(homework/export.py, TRUSTED); a copy holds each assignment's public part as a record
(homework/registry.py). Files whose names start with "_" hold what several share:
``_draw.py`` (drawers), ``_variants.py`` (the catalogue's helpers).

``ORDER`` is the order of the course (``homework list``, the reports, the gradebook's
columns); a file not named there comes after, by id. docs/grading.md, "Writing an
assignment", shows a whole file.
"""

ORDER = ("linear", "relu", "gelu", "softmax", "cross_entropy", "layernorm", "rmsnorm", "embedding", "dropout",
         "attention", "rope", "mha", "block", "sinusoidal", "causal_mask")

# the lectures the assignments point to
L1, L2, L3, L4, L5, L6, L7 = ("lectures/01_attention.py", "lectures/02_multihead_and_masks.py",
                              "lectures/03_layernorm_residual_ffn.py", "lectures/04_positions.py",
                              "lectures/05_training_seq2seq.py", "lectures/06_architecture_tweaks.py",
                              "lectures/07_gpt_end_to_end.py")
