"""minitransformer: the Transformer in NumPy, every backward pass written by hand.

    import minitransformer
    model, tokenizer = minitransformer.load("runs/gpt/checkpoint.npz")

The folders are the layers, each importing only from those above it in this list:
backend/validate/init -> functional -> layers -> models -> training, generation,
plots, pretrained, homework -> cli. docs/DESIGN.md draws the whole tree.
"""
__version__ = "0.1.0"


def load(path):
    """(model, tokenizer) from a checkpoint written by ``python -m minitransformer train``.

    The model is in eval mode; the tokenizer is None for checkpoints trained on
    token ids (seq2seq copy/reverse/sort). See training/load.py.
    """
    from .training.load import load_model      # imported here: `import minitransformer` stays light
    return load_model(path)
