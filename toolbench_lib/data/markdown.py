"""Untrusted text as Markdown that renders as text, never as markup, a link or HTML.

Query files, registry docs (a query file's ``api_list`` brings its own) and LLM replies are untrusted: a
query may carry ``<iframe src="javascript:...">``, a stub name a backtick and ``<b onmouseover=...>``.
Every writer of ``report.md`` and of a notebook's Markdown output passes such text through one of these:

- :func:`md_text`: inline text. Whitespace (newlines too) is collapsed to one line, ``&``, ``<`` and
  ``>`` become entities (so no raw HTML and no autolink), and Markdown's punctuation is backslash-escaped
  (so no emphasis, link, image, code span, table cell break or TeX).
- :func:`md_code`: a code span that cannot be broken out of: its fence is one backtick longer than the
  longest backtick run inside, so the text shows as typed (HTML inside a code span is never HTML).
- :func:`md_table`: a DataFrame as a pipe table with every text cell passed through :func:`md_text`; a text
  column is never read as numbers (``'007'``, ``'1e5'`` and ``'0.10'`` stay as written).

Text also stays the text it shows: bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F,
U+061C) and zero-width characters (U+200B-U+200D, U+2060, U+FEFF) could make a query show one text and
hold another, so every function here makes each one visible as its escape, the six characters ``\\u202e``
(:func:`visible_controls`); nothing is removed, so a reader sees that something was there. The HTML
writers (the explorer, ``report.html``) use the same cleaning (:func:`html_text`).
"""

from __future__ import annotations

import html
import re

import pandas as pd

# What starts inline syntax: a backslash escape, a code span, emphasis (``_`` only at a word's edge, as
# CommonMark reads it), a link or image (``[``; ``(`` and ``!`` mean nothing without it), a table cell
# break, strikethrough and TeX (``$``, Jupyter's renderer). ``&<>`` are made entities first.
_INLINE = re.compile(r"([\\`*\[\]|~$]|(?<!\w)_|_(?!\w))")
# Block syntax at the start of a line: a list item, a quote, a heading, a setext rule, a numbered list.
_LEADING = re.compile(r"^([-+=>#])")
_NUMBERED = re.compile(r"^(\d+)([.)])")
# Bidirectional controls and zero-width characters: invisible, they change what a text shows.
CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff]")


def visible_controls(text: object) -> str:
    """``text`` with every bidirectional control and zero-width character (:data:`CONTROLS`) written as its
    visible escape (U+202E becomes the six characters ``\\u202e``); other characters unchanged."""
    return CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", str(text))


def html_text(text: object, quote: bool = True) -> str:
    """``text`` as inert HTML text: controls made visible (:func:`visible_controls`), then escaped."""
    return html.escape(visible_controls(text), quote=quote)


def md_text(text: object, line_start: bool = True) -> str:
    """``text`` as one line of Markdown that renders exactly as the text (see the module).

    ``line_start``: the text may begin a line, so block syntax at its start (``-``, ``>``, ``1.``) is
    escaped too; a table cell or the middle of a sentence needs no such escape. Bidirectional and
    zero-width controls are shown as their escapes (:func:`visible_controls`).
    """
    line = " ".join(visible_controls(text).split())
    line = html.escape(line, quote=False)
    line = _INLINE.sub(r"\\\1", line)
    if line_start:
        line = _NUMBERED.sub(r"\1\\\2", _LEADING.sub(r"\\\1", line))
    return line


def md_code(text: object, in_table: bool = False) -> str:
    """``text`` as an inline code span that shows it as typed and cannot be broken out of.

    In a table cell (``in_table``) a ``|`` is written ``\\|``, which GitHub-flavoured Markdown turns back
    into ``|`` inside the span; elsewhere the span holds the text unchanged, apart from bidirectional and
    zero-width controls, shown as their escapes (:func:`visible_controls`).
    """
    line = " ".join(visible_controls(text).split())
    if in_table:
        line = line.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    return f"{fence}{pad}{line}{pad}{fence}"


P_COLUMN = re.compile(r"^p(_|$)|_p$|^p[a-z]*_value")  # a column of p-values: p, p_holm, ..._p, p_value


def md_number(value: float, p_value: bool = False) -> str:
    """A number as a report prints it: an integer as itself, any other number at 3 decimals; a p-value as
    ``< 0.001`` or to 3 significant digits."""
    if isinstance(value, int) or float(value).is_integer() and not p_value:
        return f"{int(value)}" if isinstance(value, int) or abs(value) < 1e15 else f"{value:.3g}"
    if p_value:
        return "< 0.001" if 0 <= value < 0.001 else f"{value:#.3g}"  # 0.120, not 0.12
    return f"{value:.3f}"


def md_table(df: pd.DataFrame, na: str = "n/a", numparse: bool = True) -> str:
    """``df`` as a Markdown pipe table: headers and text cells through :func:`md_text`, numbers through
    :func:`md_number` (3 decimals; p-value columns, named as :data:`P_COLUMN` matches, as ``< 0.001`` or 3
    significant digits), missing values as ``na``. A text column is never parsed as numbers (``'007'``,
    ``'1e5'`` and ``'0.10'`` stay as written); ``numparse=False`` also keeps the numeric columns' values as
    written (``0.580`` stays ``0.580``)."""
    numeric = [_numeric_column(col) for _, col in df.items()]
    shown = df.astype(object).where(df.notna(), na)
    for j, (name, col) in enumerate(shown.items()):
        p_value = bool(P_COLUMN.search(str(name)))
        shown[name] = col.map(lambda v: v if isinstance(v, str) and v == na
                              else md_number(v, p_value) if numeric[j] and numparse
                              and isinstance(v, (int, float)) and not isinstance(v, bool)
                              else md_text(v, line_start=False))
    shown.columns = [md_text(c, line_start=False) for c in shown.columns]
    align = ["right" if n else "left" for n in numeric]
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align)


def _numeric_column(col: pd.Series) -> bool:
    """Whether a column holds numbers: a numeric dtype (not bool), or objects that are all numbers."""
    if pd.api.types.is_bool_dtype(col):
        return False
    if pd.api.types.is_numeric_dtype(col):
        return True
    values = col.dropna()
    return len(values) > 0 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_RULE_CELL = re.compile(r":?-+:?")


def md_compact(markdown: str) -> str:
    """Every pipe table of ``markdown`` without the padding that aligns its columns in plain text (the same
    table once rendered, a fraction of the bytes); other lines unchanged."""
    out = []
    for line in markdown.split("\n"):
        if not (line.startswith("|") and line.rstrip().endswith("|")):
            out.append(line)
            continue
        cells = [c.strip() for c in _CELL_SPLIT.split(line.strip())[1:-1]]
        if cells and all(_RULE_CELL.fullmatch(c) for c in cells):
            cells = [(":" if c.startswith(":") else "") + "---" + (":" if c.endswith(":") and len(c) > 1
                                                                     else "") for c in cells]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
