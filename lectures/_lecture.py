"""What every lecture shares: the fast-mode switch and the folder its figures go to.

    FAST   MINITRANSFORMER_FAST=1: smaller models, fewer steps (the tests run this way)
    OUT    MINITRANSFORMER_LECTURE_OUT, else lectures/_out/ (git-ignored), created here
"""
import os
from pathlib import Path

FAST = os.environ.get("MINITRANSFORMER_FAST") == "1"
OUT = Path(os.environ.get("MINITRANSFORMER_LECTURE_OUT", Path(__file__).parent / "_out"))
OUT.mkdir(parents=True, exist_ok=True)
