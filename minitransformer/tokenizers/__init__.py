"""Tokenizers, one per file, all with one interface: ``encode``, ``decode``,
``vocab_size``, ``to_dict`` / ``from_dict`` (JSON-able, stored inside checkpoints).

    char.py        CharTokenizer: one id per character of a text
    bpe.py         ByteBPETokenizer: byte-level byte-pair encoding, trainable
    wordpiece.py   WordPieceTokenizer: BERT's uncased pipeline from a vocab.txt
    word.py        WordTokenizer: one id per word (punctuation and whitespace runs too), <unk> for the rest
"""
from .char import CharTokenizer

__all__ = ["CharTokenizer", "ByteBPETokenizer", "WordPieceTokenizer", "WordTokenizer", "tokenizer_from_dict"]


def __getattr__(name):
    # bpe and wordpiece load on first use: the char tokenizer needs neither.
    if name == "ByteBPETokenizer":
        from .bpe import ByteBPETokenizer
        return ByteBPETokenizer
    if name == "WordPieceTokenizer":
        from .wordpiece import WordPieceTokenizer
        return WordPieceTokenizer
    if name == "WordTokenizer":
        from .word import WordTokenizer
        return WordTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tokenizer_from_dict(d: dict):
    """Rebuild a tokenizer from its ``to_dict()``, whatever its kind (the "type" field)."""
    kinds = {"char": lambda: CharTokenizer, "bpe": lambda: __getattr__("ByteBPETokenizer"),
             "wordpiece": lambda: __getattr__("WordPieceTokenizer"), "word": lambda: __getattr__("WordTokenizer")}
    if not isinstance(d, dict):
        raise TypeError(f"d: expected a dict (a tokenizer's to_dict()), got {type(d).__name__}")
    kind = d.get("type")
    if kind not in kinds:
        raise ValueError(f"tokenizer: expected a 'type' in {tuple(kinds)}, got {kind!r}")
    return kinds[kind]().from_dict(d)
