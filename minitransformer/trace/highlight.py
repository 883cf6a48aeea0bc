"""Python source as HTML lines, coloured by the tokenizer of the standard library.

    lines = highlight(source)     # one HTML string per source line: <span class="kw">def</span> ...

Classes: ``kw`` keywords, ``fn`` the name after def/class, ``str`` strings, ``com``
comments, ``num`` numbers. A file the tokenizer cannot read comes back escaped and
uncoloured, line for line.
"""
from __future__ import annotations

import html
import io
import keyword
import tokenize


def highlight(source: str) -> list:
    """One HTML line per line of ``source``."""
    lines = source.splitlines()
    marks: list = [[] for _ in lines]             # per line: (start col, end col, class)
    try:
        _mark(source, lines, marks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        marks = [[] for _ in lines]
    return [_render(line, spans) for line, spans in zip(lines, marks)]


def _mark(source: str, lines: list, marks: list) -> None:
    previous = ""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = _kind(tok, previous)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT) \
                or tok.type == tokenize.COMMENT:
            previous = tok.string if tok.type == tokenize.NAME else previous if tok.type == tokenize.COMMENT else ""
        if kind is None:
            continue
        (row0, col0), (row1, col1) = tok.start, tok.end
        for row in range(row0, row1 + 1):                         # a string may span lines
            if row - 1 < len(lines):
                start = col0 if row == row0 else 0
                end = col1 if row == row1 else len(lines[row - 1])
                marks[row - 1].append((start, end, kind))


def _kind(tok, previous: str):
    if tok.type == tokenize.COMMENT:
        return "com"
    if tok.type == tokenize.STRING:
        return "str"
    if tok.type == tokenize.NUMBER:
        return "num"
    if tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
        return "kw"
    if tok.type == tokenize.NAME and previous in ("def", "class"):
        return "fn"
    return None


def _render(line: str, spans: list) -> str:
    out, at = [], 0
    for start, end, kind in sorted(spans):
        if start < at:
            continue
        out.append(html.escape(line[at:start]))
        out.append(f'<span class="{kind}">{html.escape(line[start:end])}</span>')
        at = end
    out.append(html.escape(line[at:]))
    return "".join(out)
