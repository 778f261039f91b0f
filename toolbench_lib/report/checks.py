"""Checks over a written ``report.md``: :func:`check_report` returns the failed ones, one line each;
``reproduce`` fails the run with them."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping

MIN_CAPTION_WORDS = 12
MAX_FRONT_WORDS = 1250  # the plain-words table, the answer, the verdict, what it rests on, terms, table
# with the learned ranker's ablations and costs, equivalence margins, the names key, the shift towards PtR,
# the coupling tested on the query, §4.3's orderings scored, coarser clusters, routing against always RtP,
# both readings of the scale spread, the glossary's terms for a reading group, and the precision orderings,
# the relevant k-growth readings, the paper's p-values that follow, its latency claim, the plain-words table
MAX_REPORT_BYTES = 88_000
FRONT_HEADING = "## The question and the answer"
LIMITS_HEADING = "### Limits of this reproduction"
GLOSSARY_HEADING = "## Glossary"
CAPTION = re.compile(r"^\*Figure R(\d+)\.\* (.+)$")  # R: the report's own numbers, never the paper's
IMAGE = re.compile(r"^!\[[^\]]*\]\(([^)]+)\)")
# An internal id in a caption: a code span, a snake_case name or a figure's file stem (``figure4``).
INTERNAL_ID = re.compile(r"`[^`]+`|\b[a-z0-9]+_[a-z0-9_]+\b|\bfigure\d+\b")
# A number written raw: more than 3 decimals and more than 3 significant digits (``0.00210603``; ``0.372``
# and a p-value's ``0.00211`` are fine), or exponent notation (``1.99043e-05``).
RAW_FLOAT = re.compile(r"(?<![\w.])(?:\d*[1-9]\d*\.\d{4,}|0\.(?!0*\d{1,3}(?!\d))\d{4,}"
                       r"|\d+(?:\.\d+)?[eE][-+]?\d+)(?!\w|\.\d)")
# The paper's own words as the report quotes them: *“...”* (an escaped ``\*`` is untrusted text, not a quote).
PAPER_QUOTE = re.compile(r"(?<!\\)\*“([^”]+)”\*")
CODE_OR_LINK = re.compile(r"`[^`\n]*`|\]\([^)]*\)|https?://\S+")
LATEX = re.compile(r"\{\\\w+\}|\\(?:pm|times|leq|geq|frac|mathrm)\b|\$[^$\n]+\$|\{<\}|\{>\}")
BARE_MISSING = re.compile(r"(?<![\w`])(None|nan|NaN)(?![\w`])")
# ``None`` read as the English word: a lowercase word follows it, and no value's mark (``=``, ``:``, a table
# cell's ``|``, an opening bracket, a comma, a comparison) comes just before it.
NONE_AS_WORD = re.compile(r"(?<![=:|(\[,<>])(?<![=:|(\[,<>] )None(?=[*_]*\s+[a-z])")


def missing_values(markdown: str) -> list[str]:
    """The missing values written in ``markdown`` (``None``, ``nan``, ``NaN``): ``None`` only as a value,
    never as the word that begins "None of ..." (:data:`NONE_AS_WORD`)."""
    words = {m.start() for m in NONE_AS_WORD.finditer(markdown)}
    return [m.group(0) for m in BARE_MISSING.finditer(markdown) if m.start() not in words]


def sections(markdown: str) -> dict[str, str]:
    """``{"## heading": text}`` of every second-level section (the title part under ``""``)."""
    parts = re.split(r"(?m)^(## .*)$", markdown)
    return {"": parts[0], **{head.strip(): text for head, text in zip(parts[1::2], parts[2::2], strict=True)}}


def front_text(markdown: str) -> str:
    """The front: from the title to the first section after :data:`FRONT_HEADING`, without the line of
    contents (links, not prose)."""
    start = markdown.find(FRONT_HEADING)
    if start < 0:
        return ""
    end = markdown.find("\n## ", start + len(FRONT_HEADING))
    return re.sub(r"(?m)^\*\*Contents\.\*\* .*\n?", "", markdown[:end if end >= 0 else len(markdown)])


def words(text: str) -> int:
    """Words as a reader counts them: Markdown table rules and markup left out."""
    text = re.sub(r"(?m)^\|[\s|:-]+\|$", " ", text)
    text = re.sub(r"[|*`#>]", " ", text)
    return len(re.findall(r"[^\s]+", text))


def plain(markdown: str) -> str:
    """The text as a reader sees it: Markdown's backslash escapes and HTML entities resolved."""
    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


def check_quantities(markdown: str, quantities: Mapping[str, object]) -> list[str]:
    """One value per named quantity, and that value written in the report."""
    markdown = plain(markdown)
    return [f"quantity {name!r} has {len(value)} values: {value}" if isinstance(value, list)
            else f"quantity {name!r} = {value!r} is not in the report" for name, value in quantities.items()
            if isinstance(value, list) or str(value) not in markdown]


def check_p_values(markdown: str, quantities: Mapping[str, object]) -> list[str]:
    """The primary comparison's p-values: one per retriever and set, no second ``p`` entry for the same
    comparison; the dense ones stand in the front, the other families' in the report."""
    names = [n for n in quantities if n.endswith(" p")]
    front, text = plain(front_text(markdown)), plain(markdown)
    return ([f"{n}: {quantities[n]}" for n in names if isinstance(quantities[n], list)]
            + [f"p-value {n!r} ({v}) is not in the {where}" for n in names
               for where in ("front" if n.startswith("dense ") else "report",)
               if isinstance(v := quantities[n], str) and v not in (front if where == "front" else text)])


def check_captions(markdown: str) -> list[str]:
    """Every figure once, each caption of at least :data:`MIN_CAPTION_WORDS` words, its own (no two figures
    share one) and free of internal ids (a code span, a snake_case name, a file stem such as ``figure4``)."""
    problems, figures, captions, image = [], set(), {}, ""
    for line in markdown.splitlines():
        if m := IMAGE.match(line):
            image = m.group(1)
            if image in figures:
                problems.append(f"figure {image} appears twice")
            figures.add(image)
        if not (m := CAPTION.match(line)):
            continue
        number, caption = m.groups()
        if words(caption) < MIN_CAPTION_WORDS:
            problems.append(f"figure {number}: caption of {words(caption)} words")
        if ids := INTERNAL_ID.findall(caption):
            problems.append(f"figure {number}: an internal id in its caption: {ids[0]}")
        if caption in captions:
            problems.append(f"figures {captions[caption]} and {number} share one caption")
        captions.setdefault(caption, number)
    return problems


def check_paper_quotes(markdown: str, paper: str | None) -> list[str]:
    """Every quote of the paper (*“...”*) is verbatim in its text (whitespace collapsed); nothing to check
    without the text."""
    return [f"a quote not in the paper: “{q[:60]}”" for q in PAPER_QUOTE.findall(markdown)
            if " ".join(q.split()) not in paper] if paper is not None else []


def check_judged_rates(markdown: str, rows: Iterable[Mapping]) -> list[str]:
    """A judged rate the judge cannot support (a row not scored, whose ``this_run`` is the objective rate)
    appears only in the appendix: before it, the row's lines show the objective rate."""
    body = markdown.split("\n## Appendix", 1)[0].splitlines()
    problems = []
    for r in rows:
        objective, judged = r.get("this_run"), r.get("judged")
        if r.get("status") != "not scored" or not _number(objective) or not _number(judged):
            continue
        shown = f"{float(judged):.3f}"
        if shown != f"{float(objective):.3f}" and any(str(r.get("id")) in line and shown in line
                                                       for line in body):
            problems.append(f"row {r.get('id')}: the judged rate {shown} outside the appendix")
    return problems


def _number(value) -> bool:
    return isinstance(value, int | float) and value == value


def raw_floats(markdown: str) -> list[str]:
    """Numbers written raw (:data:`RAW_FLOAT`) outside code spans and link targets."""
    return RAW_FLOAT.findall(CODE_OR_LINK.sub(" ", markdown))


def check_scored_rows(rows: Iterable[Mapping]) -> list[str]:
    """Every scored row (consistent, differs or inconclusive) has a 95% CI or a stated reason for a point
    comparison."""
    return [f"row {r.get('id')} has neither a CI nor a stated reason" for r in rows
            if r.get("status") in ("consistent", "differs", "inconclusive") and not _number(r.get("ci_low"))
            and not str(r.get("basis") or "").strip()]


def check_methods(markdown: str, method_names: Iterable[str]) -> list[str]:
    """Every registered method name that the report shows (as ``code`` or a table cell) is in its glossary."""
    secs = sections(markdown)
    glossary = next((text for head, text in secs.items() if head.startswith(GLOSSARY_HEADING)), "")
    body = "\n".join(text for head, text in secs.items() if not head.startswith(GLOSSARY_HEADING))
    shown = set(re.findall(r"`([^`\s]+)`", body)) | {c.strip() for c in re.findall(r"\|([^|\n]+)", body)}
    return [f"method {m!r} is used but not in the glossary" for m in sorted(set(method_names) & shown)
            if f"**`{m}`**" not in glossary]


def check_report(markdown: str, quantities: Mapping[str, object], rows: Iterable[Mapping],
                 method_names: Iterable[str], paper: str | None = None) -> list[str]:
    """Every check of this module; an empty list when the report passes them all."""
    problems = []
    front = front_text(markdown)
    if not front:
        problems.append(f"no front section ({FRONT_HEADING})")
    else:
        if words(front) > MAX_FRONT_WORDS:
            problems.append(f"the front has {words(front)} words (at most {MAX_FRONT_WORDS})")
        if re.findall(r"(?m)^#{2,3} .*$", front)[-1:] != [LIMITS_HEADING]:
            problems.append(f"the front does not end with {LIMITS_HEADING!r}")
    size = len(markdown.encode("utf-8"))
    if size > MAX_REPORT_BYTES:
        problems.append(f"the report is {size:,} bytes (at most {MAX_REPORT_BYTES:,})")
    for what, found in (("LaTeX", [m.group(0) for m in LATEX.finditer(markdown)]),
                        ("a missing value", missing_values(markdown)),
                        ("a raw number (at most 3 decimals, p-values to 3 significant digits)",
                         raw_floats(markdown))):
        if found:
            problems.append(f"{what} in the text: {sorted(set(found))[:5]}")
    return (problems + check_quantities(markdown, quantities) + check_p_values(markdown, quantities)
            + check_captions(markdown) + check_scored_rows(rows) + check_methods(markdown, method_names)
            + check_paper_quotes(markdown, paper) + check_judged_rates(markdown, rows))
