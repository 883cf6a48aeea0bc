"""The docstrings' plain-text equations as MathML, which every current browser renders natively.

    mathml("y = gamma ⊙ (x - μ)/√(σ² + eps) + beta")   # -> '<math display="block">...</math>'

The docstrings write math in Unicode text, in the code's own symbols; this reads
that text, token by token:
    identifiers       x, W_qkv (the part after the first _ is a subscript: Σ_rows, x_{2j}),
                      xhat -> x̂ and dxhat -> dx̂ (the code's name for a normalised x)
    numbers, operators   + - = / · ⊙ @ (a matrix product: written as juxtaposition) -> ≤ ≥ ...
    superscripts      ᵀ ² ³ ⁻¹ after an atom, and ^atom or ^(group)
    √atom, √(group)   a square root
    ( ) [ ] { }       groups (the brackets are kept, √( ) and ^( ) drop theirs)
    words             where, is, over ... (a short list) become text, so prose reads as prose
Anything else passes through as an operator. It is a reader for this package's
docstrings, not a TeX: an equation it cannot parse still shows, as plain tokens.
"""
from __future__ import annotations

import html
import re

WORDS = {"where", "is", "if", "iff", "and", "or", "over", "per", "the", "of", "with", "for", "else",
         "otherwise", "along", "on", "in", "by", "through", "form", "elsewhere", "to", "at", "as",
         "summed", "kept", "all", "a", "an", "row", "rows", "entries", "that", "are", "not", "each", "every",
         "broadcast", "axes", "axis", "its", "hidden", "masked", "from", "either", "both", "holds", "derivative"}
OPERATORS = {"-": "−", "@": "\u2062", "*": "·", "->": "→", "<=": "≤", ">=": "≥", "!=": "≠", "'": "′",
             "...": "…"}
SUPERSCRIPTS = {"ᵀ": "T", "²": "2", "³": "3", "⁻": "−", "¹": "1", "⁰": "0", "ⁱ": "i", "ⁿ": "n"}
TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<code>``[^`]*``|"[^"]*"|'s\b)
  | (?P<ident>[A-Za-z\u0370-\u03FF][A-Za-z0-9\u0370-\u03FF\u0300-\u036F]*
               (?:_(?:\{[^}]*\}|[A-Za-z0-9\u0370-\u03FF]+))?)
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<sup>[ᵀ²³⁻¹⁰ⁱⁿ]+)
  | (?P<op>->|<=|>=|!=|\.\.\.|[^\s\w])
""", re.X)


def mathml(text: str) -> str:
    """``text`` as one MathML block (never raises: unknown pieces pass through as operators)."""
    tokens = [(kind, value) for kind, value in _tokens(text) if kind != "space"]
    body, _ = _sequence(tokens, 0, None)
    return f'<math display="block"><mrow>{body}</mrow></math>'


def _tokens(text: str):
    for match in TOKEN.finditer(text):
        yield match.lastgroup, match.group()


def _sequence(tokens: list, i: int, closer: str | None) -> tuple:
    """MathML of tokens[i:] up to ``closer`` (consumed); returns (markup, next index)."""
    out = []
    while i < len(tokens):
        kind, value = tokens[i]
        if closer is not None and kind == "op" and value == closer:
            return "".join(out), i + 1
        atom, i = _atom(tokens, i)
        atom, i = _postfix(tokens, i, atom)
        out.append(atom)
    return "".join(out), i


def _atom(tokens: list, i: int) -> tuple:
    kind, value = tokens[i]
    if kind == "op" and value in "([{":
        inner, j = _sequence(tokens, i + 1, {"(": ")", "[": "]", "{": "}"}[value])
        close = {"(": ")", "[": "]", "{": "}"}[value]
        return f"<mrow><mo>{value}</mo>{inner}<mo>{close}</mo></mrow>", j
    if kind == "op" and value == "√" and i + 1 < len(tokens):
        inner, j = _bare(tokens, i + 1)
        return f"<msqrt>{inner}</msqrt>", j
    if kind == "ident":
        return _identifier(value), i + 1
    if kind == "number":
        return f"<mn>{value}</mn>", i + 1
    if kind == "code":
        text = "’s" if value == "'s" else value.strip("`")
        return f"<mtext>{html.escape(text)}</mtext>", i + 1
    if kind == "sup":
        return _superscript("<mrow></mrow>", value), i + 1
    return f"<mo>{html.escape(OPERATORS.get(value, value))}</mo>", i + 1


def _bare(tokens: list, i: int) -> tuple:
    """An atom whose own parentheses are dropped (the argument of √ and of ^)."""
    kind, value = tokens[i]
    if kind == "op" and value == "(":
        return _sequence(tokens, i + 1, ")")
    return _atom(tokens, i)


def _postfix(tokens: list, i: int, atom: str) -> tuple:
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "sup":
            atom, i = _superscript(atom, value), i + 1
        elif kind == "op" and value == "^" and i + 1 < len(tokens):
            power, i = _bare(tokens, i + 1)
            atom = f"<msup>{atom}<mrow>{power}</mrow></msup>"
        else:
            break
    return atom, i


def _superscript(atom: str, marks: str) -> str:
    power = "".join(SUPERSCRIPTS[m] for m in marks)
    tag = "mi" if power.isalpha() else "mn"
    if power.startswith("−"):
        return f"<msup>{atom}<mrow><mo>−</mo><mn>{power[1:]}</mn></mrow></msup>"
    return f"<msup>{atom}<{tag}>{power}</{tag}></msup>"


def _identifier(name: str) -> str:
    if name in WORDS:
        return f"<mtext>&#8201;{name}&#8201;</mtext>"
    base, _, sub = name.partition("_")
    if base == "Σ":
        core = "<mo>Σ</mo>"
    else:
        core = _hat(base)
    if not sub:
        return core
    sub = sub.strip("{}")
    return f"<msub>{core}<mi>{html.escape(sub)}</mi></msub>" if base != "Σ" else \
        f"<munder>{core}<mi>{html.escape(sub)}</mi></munder>"


def _hat(name: str) -> str:
    """xhat -> x̂, dxhat -> dx̂; any other name as it is."""
    if name.endswith("hat") and len(name) > 3:
        stem = name[:-3]
        prefix, stem = ("d", stem[1:]) if stem.startswith("d") and len(stem) > 1 else ("", stem)
        hat = f'<mover accent="true"><mi>{html.escape(stem)}</mi><mo>^</mo></mover>'
        return f"<mrow><mi>{prefix}</mi>{hat}</mrow>" if prefix else hat
    return f"<mi>{html.escape(name)}</mi>"
