"""Byte-level byte-pair encoding (BPE), trainable: the idea of GPT-2's tokenizer.

    tok = ByteBPETokenizer.train(text, vocab_size=1000, special_tokens=("<|endoftext|>",))
    ids = tok.encode("Hello, world!<|endoftext|>")    # list[int]
    tok.decode(ids) == "Hello, world!<|endoftext|>"
    tok.vocab_size                                      # 256 + len(tok.merges) + 1
    ByteBPETokenizer.from_dict(tok.to_dict())          # a JSON-able dict; save(path) / load(path)

Ids. 0..255 are the byte values, so any text can be encoded and nothing is ever
unknown. Merge r (r = 0, 1, ...) joins the pair of tokens ``merges[r]`` into the
new token 256 + r. The special tokens come last, after the merges, in the order given.

Text to bytes. The text is UTF-8 encoded with ``errors="surrogatepass"``, and
decoded the same way, so ``decode(encode(s)) == s`` for every Python str, lone
surrogates (which plain UTF-8 refuses) included.

Pre-tokenisation. Before any merging the text is cut into pieces ("words") by
``pattern``, a regular expression of the standard library ``re``; merges act
inside a piece and never across two. The default, PRETOKEN_PATTERN, takes in turn
an English contraction ('s 't 're 've 'm 'll 'd), a run of letters, a run of
digits, or a run of other symbols (punctuation, "_", anything that is neither a
letter, a digit nor whitespace), each with at most one space in front; and
whitespace runs, where a run before a word leaves its last space to that word
(so " the" is one piece, and indentation is one piece). The pieces cover every
character of the text: they concatenate back to it. ``pattern=None`` merges
across the whole text as one piece; its cost grows as the length of the text
times the number of merges, so it is meant for short texts like the worked
example in the tests.

Training (``train``) counts each distinct piece once, weighted by how often it
occurs, then repeats: take the most frequent pair of adjacent tokens (counted
at every position, overlaps included: "aaa" holds the pair (a, a) twice), ties
broken by the smallest pair (a, b) in id order; merge it left to right in every
piece that holds it; update the pair counts of those pieces only. It stops when
the vocabulary has ``vocab_size`` ids, or earlier when no pair occurs at least
twice (a small text runs out): then ``vocab_size`` is smaller than asked.
Special tokens found in the training text are cut out first and never merged.

Encoding applies the merges to each piece in rank order (lowest rank present
first), which reproduces exactly how training segmented its own text. Special
tokens written in the text are matched as whole strings (the longest first where
two overlap) when ``allowed_special`` allows them; otherwise they are plain text.

Decoding joins the bytes of the ids. A model can emit ids whose bytes are not
valid UTF-8 (half a character); by default such bytes become U+FFFD, while the
bytes of an encoded surrogate still come back as that surrogate.
"""
from __future__ import annotations

import codecs
import heapq
import json
import numbers
import os
import re
from collections import Counter, defaultdict

from ..validate import check_choice, check_int, check_items, check_path, check_token_ids

N_BYTES = 256                    # ids 0..255 are the bytes themselves
PRETOKEN_PATTERN = r"""'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\w\s]|_)+|\s+(?!\S)|\s+"""

# decode(errors="replace"): surrogates come back (surrogatepass), other invalid bytes become U+FFFD.
# A named error handler is the one way to give bytes.decode that rule; the name is ours alone.
_REPLACE_KEEPING_SURROGATES = "minitransformer.bpe.replace"


def _replace_keeping_surrogates(err: UnicodeDecodeError):
    try:
        return codecs.lookup_error("surrogatepass")(err)
    except UnicodeDecodeError:
        return "\ufffd", err.end          # what errors="replace" does with the same bytes


codecs.register_error(_REPLACE_KEEPING_SURROGATES, _replace_keeping_surrogates)


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def merge_pair(tokens: list, pair: tuple, new_id: int) -> list:
    """``tokens`` with each occurrence of ``pair`` replaced by ``new_id``, left to right.

    Left to right decides overlaps: (a, a) in [a, a, a] gives [new_id, a].
    """
    a, b = pair
    out, i, n = [], 0, len(tokens)
    while i < n:
        if tokens[i] == a and i + 1 < n and tokens[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


# --------------------------------------------------------------------------- training
def _count_pairs(words: list, freqs: list):
    """Weighted counts of adjacent pairs, and for each pair the words that hold it."""
    counts, where = defaultdict(int), defaultdict(set)
    for w, (tokens, f) in enumerate(zip(words, freqs)):
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += f
            where[pair].add(w)
    return counts, where


def _pop_most_frequent(heap: list, counts: dict):
    """The most frequent pair (smallest pair among equals) and its count, or None below 2.

    The heap holds (-count, pair) and is never edited in place: a changed count is
    pushed anew, and an entry whose count is no longer the current one is dropped here.
    """
    while heap:
        negative_count, pair = heap[0]
        if counts.get(pair, 0) != -negative_count:
            heapq.heappop(heap)                       # stale entry
            continue
        if -negative_count < 2:
            return None
        heapq.heappop(heap)
        return pair, -negative_count
    return None


def _apply_merge(pair, new_id, words, freqs, counts, where, heap) -> None:
    """Merge ``pair`` in the words that hold it; update counts, where and heap for them only."""
    delta = defaultdict(int)
    for w in where.pop(pair):
        old = words[w]
        new = merge_pair(old, pair, new_id)
        if len(new) == len(old):
            continue                  # where[] is not pruned: an earlier merge took the pair away
        f = freqs[w]
        for p in zip(old, old[1:]):
            delta[p] -= f
        for p in zip(new, new[1:]):
            delta[p] += f
            where[p].add(w)
        words[w] = new
    for p, d in delta.items():
        if d == 0:
            continue
        counts[p] += d
        if counts[p] > 0:
            heapq.heappush(heap, (-counts[p], p))
        else:
            del counts[p]             # the merged pair ends here, at 0


def learn_merges(word_counts: dict, n_merges: int, verbose: bool = False) -> list:
    """Up to ``n_merges`` merges from ``word_counts`` (bytes of a piece -> how often it occurs).

    Returns the list of merged pairs in rank order; shorter when no pair occurs twice.
    """
    words = [list(word) for word in word_counts]      # token ids of each distinct piece
    freqs = list(word_counts.values())
    counts, where = _count_pairs(words, freqs)
    heap = [(-n, pair) for pair, n in counts.items()]
    heapq.heapify(heap)
    vocab = [bytes([i]) for i in range(N_BYTES)]      # only for the verbose lines
    merges = []
    while len(merges) < n_merges:
        best = _pop_most_frequent(heap, counts)
        if best is None:
            break
        pair, count = best
        new_id = N_BYTES + len(merges)
        _apply_merge(pair, new_id, words, freqs, counts, where, heap)
        merges.append(pair)
        vocab.append(vocab[pair[0]] + vocab[pair[1]])
        if verbose:
            print(f"merge {len(merges)}/{n_merges}: {pair} -> {new_id} {vocab[new_id]!r} ({count} times)")
    return merges


# --------------------------------------------------------------------------- the tokenizer
class ByteBPETokenizer:
    """Byte-level BPE: 256 byte ids, then one id per merge, then the special tokens."""

    kind = "bpe"   # the "type" entry of to_dict, so a loader can tell tokenizers apart

    def __init__(self, merges=(), special_tokens=(), pattern: str | None = PRETOKEN_PATTERN):
        self.merges = _checked_merges(merges)                         # rank r -> pair (a, b)
        self.special_tokens = _checked_special_tokens(special_tokens)
        self.pattern = pattern
        self._regex = _compiled_pattern(pattern)
        self.merge_ids = {pair: N_BYTES + r for r, pair in enumerate(self.merges)}  # pair -> new id
        first_special = N_BYTES + len(self.merges)
        self.special_ids = {s: first_special + k for k, s in enumerate(self.special_tokens)}
        self.vocab = [bytes([i]) for i in range(N_BYTES)]             # id -> its bytes
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.vocab.extend(_to_bytes(s) for s in self.special_tokens)
        self._all_special = _special_regex(self.special_tokens)

    @classmethod
    def train(cls, text: str, vocab_size: int, special_tokens=(), verbose: bool = False,
              pattern: str | None = PRETOKEN_PATTERN) -> "ByteBPETokenizer":
        """Learn merges on ``text`` until ``vocab_size`` = 256 + merges + special tokens.

        Fewer merges (a smaller ``vocab_size``) when no pair of tokens occurs twice any more.
        ``verbose`` prints one line per merge.
        """
        _check_text(text)
        special_tokens = _checked_special_tokens(special_tokens)
        check_int("vocab_size", vocab_size)
        smallest = N_BYTES + len(special_tokens)
        if vocab_size < smallest:
            raise ValueError(f"vocab_size: expected at least {smallest} (256 bytes + "
                             f"{len(special_tokens)} special tokens), got {vocab_size}")
        regex, specials = _compiled_pattern(pattern), _special_regex(special_tokens)
        word_counts = Counter()
        for k, chunk in enumerate(_split_special(text, specials)):
            if k % 2 == 0:                                # odd chunks are special tokens
                word_counts.update(_pretokenize(chunk, regex))
        word_counts = {_to_bytes(w): n for w, n in word_counts.items()}
        merges = learn_merges(word_counts, vocab_size - smallest, verbose)
        return cls(merges, special_tokens, pattern)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str, allowed_special="all") -> list[int]:
        """The token ids of ``text``.

        ``allowed_special``: "all" (every special token written in the text becomes its
        id), "none" (special tokens are encoded as plain text), or a set of special tokens.
        """
        _check_text(text)
        specials = self._allowed_special_regex(allowed_special)
        ids, cache = [], {}                   # cache: piece -> its ids, for repeated words
        for k, chunk in enumerate(_split_special(text, specials)):
            if k % 2:
                ids.append(self.special_ids[chunk])
                continue
            for piece in _pretokenize(chunk, self._regex):
                piece_ids = cache.get(piece)
                if piece_ids is None:
                    piece_ids = cache[piece] = self._encode_piece(_to_bytes(piece))
                ids.extend(piece_ids)
        return ids

    def _encode_piece(self, piece: bytes) -> list[int]:
        """Apply the merges to one piece, the lowest rank present first."""
        tokens = list(piece)
        never = len(self.vocab)                        # larger than every merge id
        while len(tokens) > 1:
            pair = min(zip(tokens, tokens[1:]), key=lambda p: self.merge_ids.get(p, never))
            new_id = self.merge_ids.get(pair)
            if new_id is None:
                break                                  # no pair of this piece was ever merged
            tokens = merge_pair(tokens, pair, new_id)
        return tokens

    def _allowed_special_regex(self, allowed_special):
        if isinstance(allowed_special, str):
            if allowed_special not in ("all", "none"):
                raise ValueError(f"allowed_special: expected 'all', 'none' or a set of special tokens, "
                                 f"got {allowed_special!r}")
            return self._all_special if allowed_special == "all" else None
        try:
            allowed = set(allowed_special)
        except TypeError:
            raise TypeError(f"allowed_special: expected 'all', 'none' or a set of special tokens, "
                            f"got {type(allowed_special).__name__}") from None
        unknown = sorted(s for s in allowed if s not in self.special_ids)
        if unknown:
            raise ValueError(f"allowed_special: expected special tokens of this tokenizer "
                             f"{self.special_tokens}, got unknown {unknown}")
        return _special_regex(tuple(allowed))

    def decode(self, ids, errors: str = "replace") -> str:
        """The text of ``ids`` (a list of ints or a 1-D integer array).

        ``errors``: "replace" turns bytes that are not UTF-8 into U+FFFD (encoded
        surrogates still come back); "strict" raises ValueError on them instead.
        """
        check_choice("errors", errors, ("replace", "strict"))
        ids = check_token_ids("ids", ids, len(self.vocab))
        data = b"".join([self.vocab[i] for i in ids])
        if errors == "replace":
            return data.decode("utf-8", _REPLACE_KEEPING_SURROGATES)
        if errors != "strict":
            raise ValueError(f"errors: expected 'replace' or 'strict', got {errors!r}")
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as err:
            raise ValueError(f"ids: the bytes of these ids are not UTF-8 text "
                             f"(byte {err.start} of {len(data)}: {err.reason})") from None

    # ----------------------------------------------------------------------- state
    def to_dict(self) -> dict:
        """A JSON-able description: the merges as [a, b] lists, special tokens, pattern."""
        return {"type": self.kind, "merges": [list(pair) for pair in self.merges],
                "special_tokens": list(self.special_tokens), "pattern": self.pattern}

    @classmethod
    def from_dict(cls, d: dict) -> "ByteBPETokenizer":
        if not isinstance(d, dict) or d.get("type") != cls.kind:
            got = d.get("type") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"d['type']: expected {cls.kind!r}, got {got!r}")
        for key in ("merges", "special_tokens", "pattern"):
            if key not in d:
                raise ValueError(f"d[{key!r}]: expected an entry, got none")
        return cls(d["merges"], d["special_tokens"], d["pattern"])

    def save(self, path) -> None:
        """Write ``to_dict()`` as JSON, atomically (a temporary file, then a rename).

        If writing fails (an exception, a full disk), the temporary file is removed and
        an existing file at ``path`` is left as it was.
        """
        path = check_path("path", path)
        tmp = f"{path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f)      # ASCII escapes: lone surrogates survive
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    @classmethod
    def load(cls, path) -> "ByteBPETokenizer":
        """Read a file written by ``save``; ValueError naming the file when it is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                return cls.from_dict(json.load(f))
        except (ValueError, TypeError) as err:            # JSONDecodeError, UnicodeDecodeError too
            raise ValueError(f"path: {os.fspath(path)!r} is not a saved ByteBPETokenizer: {err}") from None
        except RecursionError:                            # JSON nested thousands deep
            raise ValueError(f"path: {os.fspath(path)!r} is not a saved ByteBPETokenizer: "
                             f"JSON nested too deeply to parse") from None

    def __eq__(self, other) -> bool:
        return (isinstance(other, ByteBPETokenizer) and self.merges == other.merges
                and self.special_tokens == other.special_tokens and self.pattern == other.pattern)

    def __repr__(self) -> str:
        return (f"ByteBPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")


# --------------------------------------------------------------------------- helpers
def _check_text(text) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")


def _pretokenize(text: str, regex) -> list[str]:
    """The pieces of ``text``; they must cover it, or decode(encode(s)) would lose characters."""
    if regex is None:
        return [text] if text else []
    pieces = regex.findall(text)
    if sum(map(len, pieces)) != len(text):      # matches never overlap: equal length = covered
        raise ValueError(f"pattern: expected a regular expression whose matches cover the whole text, "
                         f"got {regex.pattern!r}, which skips {len(text) - sum(map(len, pieces))} "
                         f"of {len(text)} characters")
    return pieces


def _split_special(text: str, regex) -> list[str]:
    """[text, special, text, special, ..., text]: the special tokens at the odd positions."""
    return [text] if regex is None else regex.split(text)


def _special_regex(special_tokens):
    """A regex matching any of ``special_tokens`` (longest first), captured; None for none."""
    if not special_tokens:
        return None
    alternatives = sorted(special_tokens, key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(s) for s in alternatives) + ")")


def _compiled_pattern(pattern):
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise TypeError(f"pattern: expected a regular expression str or None, got {type(pattern).__name__}")
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise ValueError(f"pattern: expected a regular expression, got {pattern!r} ({err})") from None
    if regex.groups:
        raise ValueError(f"pattern: expected no capturing groups (write (?:...)), got {pattern!r}")
    return regex


def _checked_special_tokens(special_tokens) -> tuple:
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens: expected a sequence of str, got the str {special_tokens!r}")
    tokens = tuple(check_items("special_tokens", special_tokens))
    for k, s in enumerate(tokens):
        if not (isinstance(s, str) and s):
            raise ValueError(f"special_tokens[{k}]: expected a non-empty str, got {s!r}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"special_tokens: expected distinct tokens, got {tokens}")
    return tokens


def _checked_merges(merges) -> list:
    """Pairs (a, b) of ids that exist before merge r: a, b < 256 + r; no pair twice."""
    checked, seen = [], set()
    for r, pair in enumerate(check_items("merges", merges)):
        ok = (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) and 0 <= i < N_BYTES + r
            for i in pair))
        if not ok:
            raise ValueError(f"merges[{r}]: expected a pair of ids in [0, {N_BYTES + r}), got {pair!r}")
        pair = (int(pair[0]), int(pair[1]))
        if pair in seen:
            raise ValueError(f"merges[{r}]: expected each pair once, got {pair} again")
        seen.add(pair)
        checked.append(pair)
    return checked
