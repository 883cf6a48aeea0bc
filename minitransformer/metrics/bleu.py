"""BLEU (Papineni, Roukos, Ward & Zhu 2002), the score of the loss deck's results table.

A candidate translation c is compared with one or more references. For each n = 1..4,
the modified n-gram precision CLIPS each n-gram's count in the candidate at the most
times it appears in any one reference (so "the the the the the the the" against "the cat
is on the mat" gets 2/7, not 7/7):

    p_n = Σ_c Σ_{g ∈ n-grams(c)} min(count_c(g), max_r count_r(g))  /  Σ_c Σ_g count_c(g)

Corpus level: the sums run over every sentence of the corpus before dividing (a micro
average, not the mean of sentence scores). The brevity penalty punishes a corpus of
candidates shorter than its references, with c the candidates' total length and r the
sum, over sentences, of the reference length closest to the candidate's (a tie: the
shorter one):

    BP = 1 if c > r,   exp(1 − r / c) otherwise (0 when c = 0)
    BLEU = BP · exp( Σ_{n=1..N} w_n log p_n ),      w_n = 1/N, N = 4

Without smoothing, a corpus with no matching n-gram of some order scores 0 (log 0).
Tokens are any hashable items: words (strings) or token ids (ints). Tokenisation is the
caller's: the same texts split differently score differently, which is why published
scores name their tokeniser (sacreBLEU's "13a").
"""
from __future__ import annotations

import math
from collections import Counter
from typing import NamedTuple

from ..validate import check_int


MAX_ORDER = 100          # n-grams longer than every sentence match nothing: a larger max_n only scores 0


class BleuScore(NamedTuple):
    bleu: float                  # in [0, 1] (papers report 100 × this)
    precisions: tuple            # p_1 .. p_N
    brevity_penalty: float       # BP
    hyp_length: int              # c, the candidates' total length
    ref_length: int              # r, the closest reference lengths, summed


def _sequences(name: str, value) -> list:
    """``value``'s items as a list, or TypeError naming ``name``: a sequence, not a string."""
    if isinstance(value, (str, bytes, dict)):
        raise TypeError(f"{name}: expected a sequence, got {type(value).__name__}")
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{name}: expected a sequence, got {type(value).__name__}") from None


def _sequence(name: str, tokens) -> tuple:
    """``tokens`` as a tuple, or TypeError naming ``name``: a sequence of hashable tokens (words, ids)."""
    tokens = tuple(_sequences(name, tokens))
    for token in tokens:
        try:
            hash(token)
        except TypeError:
            raise TypeError(f"{name}: expected hashable tokens (words or ids), got a {type(token).__name__}") from None
    return tokens


def ngram_counts(tokens, n: int) -> Counter:
    """How often each n-gram (a tuple of n tokens) occurs in ``tokens``."""
    n = check_int("n", n, low=1)
    return _ngram_counts(_sequence("tokens", tokens), n)


def _ngram_counts(tokens: tuple, n: int) -> Counter:
    """ngram_counts of tokens already checked (a tuple of hashable tokens)."""
    return Counter(tokens[i:i + n] for i in range(len(tokens) - n + 1))


def modified_precision(references, hypothesis, n: int) -> tuple[int, int]:
    """(clipped matches, n-grams of the hypothesis): p_n of one sentence is their ratio."""
    n = check_int("n", n, low=1)
    hypothesis = _sequence("tokens", hypothesis)
    return _clipped_matches([_sequence(f"references[{r}]", ref) for r, ref in enumerate(references)],
                            hypothesis, n)


def _clipped_matches(references: list, hypothesis: tuple, n: int) -> tuple[int, int]:
    """modified_precision of sequences already checked: corpus_bleu checks each once, not once per n."""
    counts = _ngram_counts(hypothesis, n)
    max_in_a_reference = Counter()
    for reference in references:
        for gram, count in _ngram_counts(reference, n).items():
            max_in_a_reference[gram] = max(max_in_a_reference[gram], count)
    clipped = sum(min(count, max_in_a_reference[gram]) for gram, count in counts.items())
    return clipped, sum(counts.values())


def closest_reference_length(references, hyp_length: int) -> int:
    """The length of the reference closest to ``hyp_length`` (a tie: the shorter)."""
    return min((len(r) for r in references), key=lambda length: (abs(length - hyp_length), length))


def brevity_penalty(ref_length: int, hyp_length: int) -> float:
    """BP = 1 if c > r, else exp(1 − r/c); 0 for an empty candidate (c = 0)."""
    r, c = check_int("ref_length", ref_length, low=0), check_int("hyp_length", hyp_length, low=0)
    if c > r:
        return 1.0
    return math.exp(1.0 - r / c) if c > 0 else 0.0


def corpus_bleu(list_of_references, hypotheses, max_n: int = 4) -> BleuScore:
    """BLEU of a corpus: ``hypotheses[i]`` a token sequence, ``list_of_references[i]`` its one or
    more reference sequences; uniform weights 1/max_n over n = 1..max_n."""
    max_n = check_int("max_n", max_n, low=1, high=MAX_ORDER)
    hypotheses = [_sequence(f"hypotheses[{i}]", h) for i, h in enumerate(_sequences("hypotheses", hypotheses))]
    list_of_references = _sequences("list_of_references", list_of_references)
    if len(list_of_references) != len(hypotheses) or not hypotheses:
        raise ValueError("list_of_references, hypotheses: expected one list of references per hypothesis "
                         f"(at least one), got {len(list_of_references)} and {len(hypotheses)}")
    matches, totals = [0] * max_n, [0] * max_n
    c = r = 0
    for i, (references, hypothesis) in enumerate(zip(list_of_references, hypotheses)):
        references = [_sequence(f"list_of_references[{i}][{j}]", ref)
                      for j, ref in enumerate(_sequences(f"list_of_references[{i}]", references))]
        if not references:
            raise ValueError(f"list_of_references[{i}]: expected at least one reference, got none")
        for n in range(1, max_n + 1):
            clipped, total = _clipped_matches(references, hypothesis, n)
            matches[n - 1] += clipped
            totals[n - 1] += total
        c += len(hypothesis)
        r += closest_reference_length(references, len(hypothesis))
    precisions = tuple(m / t if t else 0.0 for m, t in zip(matches, totals))
    bp = brevity_penalty(r, c)
    if min(precisions) == 0.0:
        return BleuScore(0.0, precisions, bp, c, r)                   # log 0: no smoothing
    bleu = bp * math.exp(sum(math.log(p) for p in precisions) / max_n)
    return BleuScore(bleu, precisions, bp, c, r)


def sentence_bleu(references, hypothesis, max_n: int = 4) -> BleuScore:
    """BLEU of one candidate against its references: a corpus of one sentence."""
    return corpus_bleu([references], [hypothesis], max_n)
