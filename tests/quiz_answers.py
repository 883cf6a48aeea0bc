"""The lectures' quiz answers, computed here from the library and the formulas, not copied.

The lectures store only digests of their answers (lectures/_quiz.py). ``answers(lecture)``
returns the answers of one lecture ("01" ... "10") as a dict {question: answer}: the
tests check each against the digest in the lecture file, and run every lecture with
them (MINITRANSFORMER_QUIZ_ANSWERS), so every check cell runs in CI.
"""
import math

import numpy as np

from minitransformer.functional.alibi import alibi_bias, alibi_slopes
from minitransformer.functional.attention import attention_forward
from minitransformer.functional.cls_token import prepend_cls_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.dropout import dropout_forward
from minitransformer.functional.feature_tokenizer import feature_tokenizer_forward
from minitransformer.functional.masks import causal_mask, sliding_window_mask
from minitransformer.functional.patches import patchify
from minitransformer.functional.sinusoidal import sinusoidal_table
from minitransformer.functional.softmax import softmax_forward
from minitransformer.layers import FeedForward, LayerNorm, MultiHeadAttention
from minitransformer.models import GPT, GPTConfig
from minitransformer.models.presets import count_parameters, preset
from minitransformer.optim import noam_schedule
from minitransformer.tokenizers import ByteBPETokenizer, WordPieceTokenizer
from minitransformer.tokenizers.bpe import N_BYTES
from minitransformer.training.data import PAD, make_sequence_task


def _count(module) -> int:
    return sum(int(p.size) for _, p, _ in module.parameters())


def _wordpiece(words, vocab_tokens):
    """WordPiece pieces of ``words`` over the special tokens and ``vocab_tokens``."""
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *vocab_tokens])
    return [tokenizer.vocab[i] for i in tokenizer.encode(words, add_special_tokens=False)]


def lecture_01():
    S, d_h = 6, 16
    z, attention_cache = attention_forward(*(np.zeros((1, 1, S, d_h)) for _ in range(3)))   # q, k, v
    return {"1": 64,                                                    # Var(q·k) = D, section 4
            "2": math.sqrt(64),
            "3": float(softmax_forward(np.array([2.0, 2.0, 0.0]))[0][0]),
            "4": "b", "5": True,
            "6": list(attention_cache.probs.shape[-2:]), "7": list(z.shape[-2:])}


def lecture_02():
    cross = MultiHeadAttention(8, 2, cross=True, rng=0)
    cross.forward(np.zeros((1, 5, 8), np.float32), np.zeros((1, 7, 8), np.float32))
    return {"1": 512 // 8,
            "2": int(causal_mask(4).sum()),
            "3": list(cross.attention_probs().shape[-2:]),
            "4": _count(MultiHeadAttention(512, 8, rng=0)),
            "5": True, "6": "b", "7": MultiHeadAttention(64, 4, rng=0).head_dim, "8": "a"}


def lecture_03():
    kept = dropout_forward(np.ones(1000), 0.2, rng=np.random.default_rng(0))[0]
    return {"1": 2, "2": _count(LayerNorm(512)), "3": _count(FeedForward(512, 2048, "relu", rng=0)),
            "4": float(kept.max()), "5": 1, "6": True, "7": "a"}


def lecture_04():
    row1 = sinusoidal_table(2, 4, dtype=np.float64)[1]                 # pair 1's angle at position 1
    return {"1": float(np.arctan2(row1[2], row1[3])), "2": "b", "3": alibi_slopes(8)[0],
            "4": float(alibi_bias([0.25], 6, 6, dtype=np.float64)[0, 5, 2]), "5": False}


def lecture_05():
    logits = np.zeros((1, 13))
    _, cache = cross_entropy_forward(logits, np.array([0]), smoothing=0.1)
    target = 1 / 13 - cross_entropy_backward(1.0, cache)[0, 0]          # dlogits = p - q, p uniform
    task = make_sequence_task("reverse", 8, (3, 6), 13, np.random.default_rng(0))
    fed = task.tgt_in[:, 1:] != PAD                                     # decoder inputs after [START]
    truth = (task.tgt_in[:, 1:] == task.tgt_out[:, :-1])[fed]            # each one the previous target
    return {"1": ["a", "b", "c", "[END]"], "2": float(target), "3": noam_schedule(512, 4000)(4000),
            "4": "y2" if -2.4 / 4 < -3.2 / 8 else "y1", "5": False, "6": float(truth.mean())}


def lecture_06():
    return {"1": 8 / 32, "2": "b", "3": int(sliding_window_mask(6, 3)[-1].sum()), "4": 50257 * 768, "5": "post"}


def lecture_07():
    gpt = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=4, d_model=128), rng=0)
    block = sum(int(p.size) for name, p, _ in gpt.parameters() if name.startswith("blocks.0."))
    return {"1": math.log(65), "2": block, "3": 2 * 4 * 64 * 128, "4": "b", "5": True}


def lecture_08():
    bytes_only = ByteBPETokenizer.train("x", vocab_size=N_BYTES)
    vocabulary = ["un", "una", "##aff", "##ffa", "##able", "##ble"]
    return {"1": N_BYTES + 1000 + 1, "2": 3, "3": len(bytes_only.encode("naïve ☃")),
            "4": _wordpiece("unaffable", vocabulary),
            "5": _wordpiece("hello☃", ["hello"]) == ["hello", "[UNK]"]}


def lecture_09():
    base = preset("bert-base")
    one_layer = count_parameters(base) - count_parameters(preset("bert-base", n_layer=11))
    return {"1": 0.15 * 0.8, "2": "b", "3": one_layer, "4": math.log(30522), "5": "[CLS]"}


def lecture_10():
    patches = patchify(np.zeros((1, 224, 224, 3)), 16)                # (1, N, p·p·3)
    tokens, _ = feature_tokenizer_forward(np.zeros((1, 3)), np.zeros((1, 2), dtype=np.int64), np.zeros((3, 4)),
                                          np.zeros((3, 4)), np.zeros((5, 4)), (2, 3))
    with_cls, _ = prepend_cls_forward(tokens, np.zeros(4))
    return {"1": patches.shape[1],
            "2": 224 * 224, "3": 16 * 16 * 3, "4": with_cls.shape[1], "5": int(2048 / 0.25),
            "6": (4096 / 1024) ** 2, "7": "first"}


def lecture_11():
    from minitransformer.functional.activations import swish_forward
    from minitransformer.functional.masks import bidirectional_window_mask
    from minitransformer.models import ViTConfig
    from minitransformer.models.costs import kv_cache_bytes
    from minitransformer.models.presets import preset
    gpt2 = preset("gpt2-small")
    return {"1": gpt2.vocab_size * gpt2.d_model, "2": kv_cache_bytes(preset("llama-2-7b")),
            "3": float(swish_forward(np.array([4.0]), np.array([0.0]))[0][0]),
            "4": int(bidirectional_window_mask(20, 3)[10].sum()),
            "5": ViTConfig(image_size=24, patch_size=4, n_registers=4).n_tokens}


def lecture_12():
    from minitransformer.functional.router import expert_capacity, load_balancing_forward
    from minitransformer.metrics import modified_precision
    collapsed = np.zeros((16, 8))
    collapsed[:, 3] = 1.0
    clipped, total = modified_precision(["the cat on the mat".split()], "the the the the".split(), 1)
    return {"1": float(load_balancing_forward(collapsed, np.full((16, 1), 3))[0]),
            "2": expert_capacity(1024, 8, 2, 1.25),
            "3": clipped / total,
            "4": 3.5 * 24 * 3600 * 8 * 9.5e12,
            "5": 4 ** 2}


def answers(lecture: str) -> dict:
    """The answers of lecture "01" ... "12", {question: answer}."""
    return globals()[f"lecture_{lecture}"]()
