"""Untrusted text (queries, registry docs, LLM replies) as Markdown or HTML that renders as text, never as
markup, a link or HTML, with invisible format characters (bidirectional, zero-width, tags) shown as their
escapes."""

from __future__ import annotations

import html
import re
import unicodedata

import pandas as pd

# What starts inline syntax: a backslash escape, a code span, emphasis (``_`` only at a word's edge, as
# CommonMark reads it), a link or image (``[``; ``(`` and ``!`` mean nothing without it), a table cell
# break, strikethrough and TeX (``$``, Jupyter's renderer). ``&<>`` are made entities first.
_INLINE = re.compile(r"([\\`*\[\]|~$]|(?<!\w)_|_(?!\w))")
# Block syntax at the start of a line: a list item, a quote, a heading, a setext rule, a numbered list.
_LEADING = re.compile(r"^([-+=>#])")
_NUMBERED = re.compile(r"^(\d+)([.)])")
# Format characters (Unicode category Cf: bidirectional controls, zero-width characters, tag characters):
# invisible, they change what a text shows or hide text in it.
CONTROLS = re.compile("[" + "".join(re.escape(chr(c)) for c in (*range(0x30000), *range(0xE0000, 0xE1000))
                                    if unicodedata.category(chr(c)) == "Cf") + "]")
# What GitHub-flavoured renderers (JupyterLab, nbconvert, GitHub) make a link of without any markup: a URL's
# scheme, ``www.`` and an e-mail address's ``@``; a backslash before ``:``, ``.`` or ``@`` breaks it.
_AUTOLINK = re.compile(r"(?i)(?:\b[a-z][a-z0-9+.-]*(?=://)|(?<![\w.-])www(?=\.)|(?=@[\w-]+\.\w))(.)")


def visible_controls(text: object) -> str:
    """``text`` with every character of :data:`CONTROLS` written as its escape (U+202E: ``\\u202e``)."""
    return CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}" if ord(m.group(0)) <= 0xFFFF
                        else f"\\U{ord(m.group(0)):08x}", str(text))


def html_text(text: object, quote: bool = True) -> str:
    """``text`` as inert HTML text: controls made visible (:func:`visible_controls`), then escaped."""
    return html.escape(visible_controls(text), quote=quote)


def md_text(text: object, line_start: bool = True) -> str:
    """``text`` as one line of Markdown rendering as the text (``line_start``: ``-``, ``>``, ``1.`` too)."""
    line = _INLINE.sub(r"\\\1", html.escape(" ".join(visible_controls(text).split()), quote=False))
    line = _AUTOLINK.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(1), line)
    if line_start:
        line = _NUMBERED.sub(r"\1\\\2", _LEADING.sub(r"\\\1", line))
    return line


def md_code(text: object, in_table: bool = False) -> str:
    """``text`` as an inline code span that shows it as typed and cannot be broken out of (``in_table``:
    ``|`` written ``\\|``, which GitHub-flavoured Markdown turns back into ``|``)."""
    line = " ".join(visible_controls(text).split())
    if in_table:
        line = line.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    return f"{fence}{pad}{line}{pad}{fence}"


P_COLUMN = re.compile(r"^p(_|$)|_p$|^p[a-z]*_value")  # a column of p-values: p, p_holm, ..._p, p_value


def md_number(value: float, p_value: bool = False) -> str:
    """A number as a report prints it: integer as is, else 3 decimals; a p-value ``< 0.001`` or 3 digits."""
    if isinstance(value, int) or float(value).is_integer() and not p_value:
        return f"{int(value)}" if isinstance(value, int) or abs(value) < 1e15 else f"{value:.3g}"
    if p_value:
        return "< 0.001" if 0 <= value < 0.001 else f"{value:#.3g}"  # 0.120, not 0.12
    return f"{value:.3f}"


def md_table(df: pd.DataFrame, na: str = "n/a", numparse: bool = True) -> str:
    """``df`` as a Markdown pipe table: text through :func:`md_text`, numbers through :func:`md_number`
    (``numparse=False``: as written), missing values as ``na``."""
    numeric = [_numeric_column(col) for _, col in df.items()]
    shown = df.astype(object).where(df.notna(), na)
    for j, (name, col) in enumerate(shown.items()):
        p_value = bool(P_COLUMN.search(str(name)))
        shown[name] = col.map(lambda v, j=j, p_value=p_value: v if isinstance(v, str) and v == na
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
    """Every pipe table of ``markdown`` without the padding that aligns its columns in plain text."""
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


def anchor(heading: str) -> str:
    """GitHub's (and the HTML report's) anchor of a heading: lower case, no punctuation, ``-`` for spaces."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
