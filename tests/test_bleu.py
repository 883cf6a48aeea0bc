"""BLEU on published worked examples: Papineni et al. (2002)'s own candidates (as NLTK's
documentation reproduces them, with its stated outputs) and sacreBLEU's README example
(BLEU = 48.53, 82.4/50.0/45.5/37.5, BP = 0.943, hyp_len 17, ref_len 18). The expected
numbers are the documents', not this code's."""
import math

import pytest

from minitransformer.metrics import brevity_penalty, corpus_bleu, modified_precision, sentence_bleu
from minitransformer.metrics.bleu import closest_reference_length

HYP1 = ("It is a guide to action which ensures that the military always obeys the commands of the party").split()
HYP2 = ("It is to insure the troops forever hearing the activity guidebook that party direct").split()
REF1 = ("It is a guide to action that ensures that the military will forever heed Party commands").split()
REF2 = ("It is the guiding principle which guarantees the military forces always being under the command "
        "of the Party").split()
REF3 = ("It is the practical guide for the army always to heed the directions of the party").split()


def test_papinenis_modified_precisions():
    refs = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
    assert modified_precision(refs, "the the the the the the the".split(), 1) == (2, 7)
    refs = [REF1, REF2, REF3]
    assert modified_precision(refs, HYP1, 1) == (17, 18)
    assert modified_precision(refs, HYP2, 1) == (8, 14)
    assert modified_precision(refs, HYP1, 2) == (10, 17)
    assert modified_precision(refs, HYP2, 2) == (1, 13)


def test_nltks_documented_sentence_and_corpus_scores():
    refs = [REF1, REF2, REF3]
    assert sentence_bleu(refs, HYP1).bleu == pytest.approx(0.5045, abs=1e-4)          # "0.5045..."
    hyp2 = "he read the book because he was interested in world history".split()
    ref2 = "he was interested in world history because he read the book".split()
    corpus = corpus_bleu([refs, [ref2]], [HYP1, hyp2])
    assert corpus.bleu == pytest.approx(0.5920, abs=1e-4)                              # "0.5920..."
    average = (sentence_bleu(refs, HYP1).bleu + sentence_bleu([ref2], hyp2).bleu) / 2
    assert average == pytest.approx(0.6223, abs=1e-4)                                  # not the corpus score


def test_the_brevity_penalty_and_the_closest_reference():
    assert brevity_penalty(28, 12) == pytest.approx(0.2635971381157267, rel=1e-15)     # NLTK's doctest
    assert closest_reference_length([["a"] * 13, ["a"] * 2], 12) == 13
    assert brevity_penalty(13, 12) == pytest.approx(0.9200, abs=1e-4)
    assert closest_reference_length([["a"] * 13, ["a"] * 11], 12) == 11                # a tie: the shorter
    assert brevity_penalty(11, 12) == 1.0 and brevity_penalty(12, 12) == 1.0
    assert brevity_penalty(5, 0) == 0.0


def _split(sentence):
    """The 13a tokeniser's result on these sentences: the final period is a token of its own."""
    return sentence[:-1].split() + ["."]


def test_sacrebleus_readme_example():
    refs = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
            ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
    system = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    score = corpus_bleu([[_split(r[i]) for r in refs] for i in range(3)], [_split(s) for s in system])
    assert (score.hyp_length, score.ref_length) == (17, 18)
    assert [round(100 * p, 1) for p in score.precisions] == [82.4, 50.0, 45.5, 37.5]
    assert round(score.brevity_penalty, 3) == 0.943
    assert round(100 * score.bleu, 2) == 48.53


def test_identical_is_one_and_no_match_is_zero():
    ids = [[5, 6, 7, 8, 9]]
    assert corpus_bleu([[ids[0]]], ids).bleu == 1.0
    assert corpus_bleu([[[1, 2, 3, 4]]], [[5, 6, 7, 8]]).bleu == 0.0
    short = corpus_bleu([[[1, 2, 3, 4, 5, 6, 7, 8]]], [[1, 2, 3, 4]])
    assert short.precisions == (1.0, 1.0, 1.0, 1.0) and short.bleu == pytest.approx(math.exp(1 - 8 / 4))


def test_bleu_entrances_name_the_argument():
    with pytest.raises(ValueError, match="list_of_references, hypotheses: expected one list of references"):
        corpus_bleu([[["a"]]], [["a"], ["b"]])
    with pytest.raises(TypeError, match=r"hypotheses\[0\]: expected a sequence, got str"):
        corpus_bleu([[["a"]]], ["a b"])
    with pytest.raises(ValueError, match=r"list_of_references\[0\]: expected at least one reference"):
        corpus_bleu([[]], [["a"]])
    with pytest.raises(ValueError, match=r"max_n: expected an integer in \[1, 100\]"):
        corpus_bleu([[["a"]]], [["a"]], max_n=0)
