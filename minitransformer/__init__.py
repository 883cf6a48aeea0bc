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

    The model is in eval mode. The tokenizer is the run's for the text families (gpt,
    encoder) and None for the families that train on no text: seq2seq (generated token
    ids), vit (images) and tabular (table rows). See training/load.py.
    """
    from .training.load import load_model      # imported here: `import minitransformer` stays light
    return load_model(path)
