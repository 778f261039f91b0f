"""``report.html``: ``report.md`` as one self-contained, sanitised page (:func:`markdown_page`): figures
inline, tables whole, a table of contents, and a Content-Security-Policy that forbids every script."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nh3
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from ..data.atomic import save_text
from ..data.markdown import anchor, visible_controls

NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"  # the project's notebooks, in run order

CSP = ("default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; font-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
    "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "kbd", "li", "main", "mark", "nav", "ol", "p", "pre", "q", "s", "samp", "section", "small", "span",
    "strong", "style", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u",
    "ul", "var",
})
SAFE_ATTRIBUTES = {
    "*": {"class", "id", "title", "style", "role", "lang", "dir", "aria-label", "aria-hidden",
          "data-mime-type"},
    "a": {"href"}, "img": {"src", "alt", "width", "height"}, "ol": {"start"},
    "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align", "scope"},
    "col": {"span"}, "colgroup": {"span"}, "details": {"open"},
}
SAFE_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*\Z")


MD_CSS = """
body {font-family: system-ui, sans-serif; color: #1a1a1a; background: #fff; line-height: 1.5; margin: 0}
main {max-width: 1180px; margin: 0 auto; padding: 0 16px 48px}
h1, h2, h3 {line-height: 1.25}
h2 {border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 2.2em}
a {color: #0645ad}
a:focus-visible {outline: 3px solid #1a5fb4; outline-offset: 2px}
code {background: #f2f2f2; padding: 0 3px; border-radius: 3px}
.table-wrap {overflow-x: auto; margin: 12px 0}
.table-wrap:focus-visible {outline: 3px solid #1a5fb4}
table {border-collapse: collapse; font-size: 14px}
th, td {border: 1px solid #c8c8c8; padding: 3px 8px; text-align: left; vertical-align: top}
th {background: #eef1f5}
td.num {text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap}
img {max-width: 100%; height: auto; display: block; margin: 8px 0}
blockquote {border-left: 4px solid #c8c8c8; margin: 0; padding: 0 12px}
nav#toc {border: 1px solid #c8c8c8; padding: 8px 16px; margin: 16px 0; background: #f8f8f8}
nav#toc ol {margin: 4px 0; padding-left: 22px}
nav#toc > ol {list-style: none; padding-left: 4px}
a.toc-top {font-size: 12px; margin-left: 8px}
"""
NUMERIC_CELL = re.compile(r"[-+−]?\d[\d,]*(\.\d+)?%?( \[[-+−]?\d[\d.,]*, [-+−]?\d[\d.,]*\])?"
                          r"|p [<=] [\d.]+|n/a")


IMAGE_KINDS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "gif": "gif"}


def _inline_figures(soup, out_dir: Path) -> None:
    """Each image of a run folder's file inlined as a ``data:`` URI, so the page stands alone."""
    for img in soup.find_all("img"):
        src = str(img.get("src", ""))
        path = (out_dir / src).resolve()
        kind = IMAGE_KINDS.get(path.suffix.lower().lstrip("."))
        if kind and not re.match(r"[a-z]+:", src) and path.is_file() and out_dir.resolve() in path.parents:
            img["src"] = f"data:image/{kind};base64," + base64.b64encode(path.read_bytes()).decode()


def markdown_page(markdown: str, out_dir: Path) -> str:
    """``report.md`` as one self-contained, sanitised page (its raw HTML shown as text): figures inlined,
    tables in scrollable frames, a table of contents, and a Content-Security-Policy that forbids scripts."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    lines = markdown.splitlines()
    title = (re.sub(r"[`*]", "", lines[0].lstrip("# ")).strip() if lines and lines[0].startswith("# ")
             else f"Plan or Retrieve First? Tool discovery on ToolBench: report of run {out_dir.name!r}")
    body = md.render("\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines))
    soup = BeautifulSoup(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title></title>"
                         f"</head><body><main>{sanitise_html(body)}</main></body></html>", "lxml")
    soup.head.insert(0, soup.new_tag("meta", attrs={"http-equiv": "Content-Security-Policy", "content": CSP}))
    soup.head.append(soup.new_tag("meta", attrs={"name": "viewport",
                                                 "content": "width=device-width, initial-scale=1"}))
    soup.title.string = title
    soup.head.append(soup.new_tag("style", string=MD_CSS))
    main = soup.find("main")
    _inline_figures(soup, Path(out_dir))
    for n, table in enumerate(main.find_all("table")):
        wrap = soup.new_tag("div", attrs={"class": "table-wrap", "tabindex": "0", "role": "region",
                                          "aria-label": f"table {n + 1}"})
        table.wrap(wrap)
        for th in table.find_all("th"):
            th["scope"] = "col"
        for td in table.find_all("td"):
            if NUMERIC_CELL.fullmatch(td.get_text(strip=True)):
                td["class"] = "num"
    main.insert(0, _table_of_contents(soup, main))
    main.insert(0, soup.new_tag("h1", attrs={"id": "top"}, string=title))
    return "<!DOCTYPE html>\n" + str(soup.html)


def write_html_report(out_dir: Path) -> Path:
    """``<out_dir>/report.html``: ``report.md`` as one self-contained page (:func:`markdown_page`)."""
    out_dir = Path(out_dir)
    source = out_dir / "report.md"
    if not source.is_file():
        raise FileNotFoundError(f"no report.md under {out_dir}: the report notebook writes it")
    page = markdown_page(source.read_text(encoding="utf-8"), out_dir)
    path = out_dir / "report.html"
    save_text(path, page, encoding="utf-8")
    return path


def _safe_attribute(tag: str, name: str, value: str) -> str | None:
    """nh3's attribute filter (after its own check of URL schemes): an image only as an inline PNG, JPEG or
    GIF or a relative file, a link only to a place in the page, a relative file or http(s)."""
    if name not in ("src", "href"):
        return value
    v = "".join(value.split()).lower()
    if v.startswith(("//", "\\\\", "/\\", "\\/")):  # a network path: another host, not a relative file
        return None
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", v)
    if tag == "img" and name == "src":
        return value if scheme is None or SAFE_IMAGE.match(value.strip()) else None
    return value if scheme is None or scheme.group(1) in ("http", "https") else None


def sanitise_html(fragment: str) -> str:
    """``fragment`` through the allow-list of :data:`SAFE_TAGS` and :data:`SAFE_ATTRIBUTES` (nh3), its
    bidirectional and zero-width controls shown as escapes (:func:`..data.markdown.visible_controls`)."""
    fragment = visible_controls(fragment)
    return nh3.clean(fragment, tags=set(SAFE_TAGS), clean_content_tags={"script", "iframe", "object",
                                                                          "embed", "template", "noscript"},
                     attributes={k: set(v) for k, v in SAFE_ATTRIBUTES.items()},
                     attribute_filter=_safe_attribute, url_schemes={"http", "https", "data"},
                     link_rel=None, strip_comments=True)


def _table_of_contents(soup, main):
    """``<nav id="toc">``: every h1 (a notebook) with its h2 sections, each a link to a unique id."""
    used: set[str] = set()
    nav = soup.new_tag("nav", attrs={"id": "toc", "aria-label": "Contents"})
    nav.append(soup.new_tag("strong", string="Contents"))
    top = soup.new_tag("ol")
    nav.append(top)
    current = None
    for h in main.find_all(["h1", "h2"]):
        text = h.get_text(" ", strip=True)
        if not text:
            continue
        base = anchor(text) or "section"
        hid, n = base, 0
        while hid in used:  # GitHub's numbering of a repeated heading
            n += 1
            hid = f"{base}-{n}"
        used.add(hid)
        h["id"] = hid
        item = soup.new_tag("li")
        item.append(soup.new_tag("a", href=f"#{hid}", string=text))
        if h.name == "h1" or current is None:
            top.append(item)
            current = soup.new_tag("ol")
            item.append(current)
            h.append(soup.new_tag("a", href="#top", attrs={"class": "toc-top"}, string="↑ contents"))
        else:
            current.append(item)
    for sub in nav.find_all("ol"):
        if not sub.find("li"):
            sub.decompose()
    return nav
