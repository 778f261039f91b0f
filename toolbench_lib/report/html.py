"""``report.html``: the executed notebooks of a run as one navigable, self-contained page.

The notebooks are merged in order with their code, prompts, log streams and bare widgets left out
(:func:`merged_notebook`) and exported by nbconvert; the page is then tidied (:func:`tidy_report_html`):

- a title naming the run, and a table of contents linking every notebook and section heading;
- tables that fit the page: a plain row index (0, 1, 2, ...) hidden, text left-aligned and numbers
  right-aligned, floats of more than four decimals rounded, ``n/a`` for missing values, and a table wider
  than the page shown transposed (few rows) or split into column groups that repeat its label columns;
- figures with alternative text from their section and the file they were saved to;
- paths relative to the run folder instead of absolute paths of the machine;
- each distinct provenance line once (its first occurrence);
- no script and no request to a CDN: every asset is inline, MathJax and require.js are left out (no
  notebook writes TeX);
- untrusted text cannot come alive: the page's content is sanitised by an allow-list (``nh3``: known tags
  and attributes only, no event handler, no ``javascript:`` or ``data:`` link, images only as inline PNG,
  JPEG or GIF or relative files), and a Content-Security-Policy ``<meta>`` forbids every script, frame,
  form and request to another origin. Query text, registry docs and LLM replies are escaped where they
  are written (:mod:`toolbench_lib.data.markdown`); this is the second line. The same module's cleaning of
  bidirectional and zero-width controls (shown as escapes such as ``\\u202e``) is applied to the whole
  content again by :func:`sanitise_html`, so a notebook's own HTML output cannot show one text and hold
  another either.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

import nh3
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from ..data.atomic import atomic_path
from ..data.markdown import visible_controls
from .html_tables import tidy_table

NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"  # the project's notebooks, in run order

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_TYPES = ("text/html", "image/png", "image/svg+xml", "text/markdown", "application/pdf")
PROVENANCE = re.compile(r"embedder \S+ \(requested [^)]*\), registry \S+ APIs, data \S+, backend .*?"
                        r"k=\S+, runs=\S+, plan_limit=\S+")
# An absolute path: a slash not inside a word, URL or relative path, then at least one folder.
ABS_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.+@-]+/)+[\w.+@-]*")

CSS = """
body.jp-Notebook {max-width: 1240px; margin: 0 auto; padding: 0 12px}
nav#toc {font-family: sans-serif; font-size: 14px; border: 1px solid #ddd; padding: 8px 16px;
  margin: 16px 0; background: #fafafa}
nav#toc ol {margin: 4px 0; padding-left: 22px}
nav#toc > ol {columns: 2; column-gap: 32px; list-style: none; padding-left: 4px}
nav#toc li {break-inside: avoid}
.report-title {font-family: sans-serif}
.jp-RenderedHTMLCommon table {table-layout: auto; max-width: 100%; margin-left: 0; margin-right: auto}
.jp-RenderedHTMLCommon td, .jp-RenderedHTMLCommon th {text-align: left; white-space: normal;
  overflow-wrap: anywhere; max-width: 32em}
.jp-RenderedHTMLCommon td.num, .jp-RenderedHTMLCommon th.num {text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap}
.jp-RenderedHTMLCommon caption {caption-side: top; text-align: left; font-size: 12px; color: #666}
.jp-OutputArea-output pre {white-space: pre-wrap; overflow-wrap: anywhere}
.jp-OutputArea-output img {max-width: 100%; height: auto}
a.toc-top {font-size: 11px; margin-left: 8px}
"""

# No script of any origin, no frame, no form, no request beyond the page's own folder (its figures).
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

log = logging.getLogger(__name__)


def _static_output(output) -> bool:
    """Whether an output belongs in a static page: no stderr, no widget without a static rendering."""
    if output.get("output_type") == "stream":
        return output.get("name") != "stderr"
    data = output.get("data", {})
    return WIDGET_VIEW not in data or any(t in data for t in STATIC_TYPES)


def merged_notebook(notebooks: Iterable[Path]):
    """The notebooks as one: parameter cells, stderr and widgets without a static fallback left out."""
    import nbformat

    merged = nbformat.v4.new_notebook()
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        merged.metadata = merged.metadata or nb.metadata
        for cell in nb.cells:
            tags = cell.get("metadata", {}).get("tags", [])
            if "parameters" in tags or "injected-parameters" in tags:
                continue
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if _static_output(o)]
            merged.cells.append(cell)
    merged.metadata.pop("widgets", None)  # no live kernel: every widget shows its static HTML fallback
    return merged


def report_title(out_dir: Path) -> str:
    """The page's title: what the report is, and which run."""
    return f"Plan or Retrieve First? Tool discovery on ToolBench: report of run {out_dir.name!r}"


def write_notebooks_html(out_dir: Path, notebooks: list[Path] | None = None,
                         name: str = "notebooks.html") -> Path:
    """``<out_dir>/notebooks.html``: the executed notebooks in order as one tidied page (see the module)."""
    from nbconvert import HTMLExporter

    out_dir = Path(out_dir)
    notebooks = notebooks or sorted((out_dir / "notebooks").glob(NOTEBOOK_PATTERN))
    if not notebooks:
        raise FileNotFoundError(f"no executed notebooks under {out_dir / 'notebooks'}")
    merged = merged_notebook(notebooks)
    title = report_title(out_dir)
    merged.metadata["title"] = title
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    level = exporter.log.level
    exporter.log.setLevel(logging.ERROR)  # not a warning per figure without alternative text
    try:
        body, _ = exporter.from_notebook_node(merged, resources={"metadata": {"name": out_dir.name}})
    finally:
        exporter.log.setLevel(level)
    body = tidy_report_html(body, out_dir, title)
    path = out_dir / name
    with atomic_path(path) as tmp:
        tmp.write_text(body, encoding="utf-8")
    return path


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
        if re.match(r"[a-z]+:", src) or not path.is_file() or out_dir.resolve() not in path.parents:
            continue
        kind = IMAGE_KINDS.get(path.suffix.lower().lstrip("."))
        if kind:
            img["src"] = f"data:image/{kind};base64," + base64.b64encode(path.read_bytes()).decode()


def markdown_page(markdown: str, out_dir: Path) -> str:
    """``report.md`` as one self-contained, sanitised page: the Markdown rendered (its raw HTML shown as
    text, never as markup), figures inlined, every table whole in a scrollable frame with its numbers
    right-aligned, a table of contents of the sections, and a Content-Security-Policy that forbids scripts."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    lines = markdown.splitlines()
    title = (re.sub(r"[`*]", "", lines[0].lstrip("# ")).strip() if lines and lines[0].startswith("# ")
             else report_title(out_dir))
    body = md.render("\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines))
    soup = BeautifulSoup(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title></title>"
                         f"</head><body><main>{sanitise_html(body)}</main></body></html>", "lxml")
    soup.head.insert(0, soup.new_tag("meta", attrs={"http-equiv": "Content-Security-Policy", "content": CSP}))
    soup.head.append(soup.new_tag("meta", attrs={"name": "viewport",
                                                 "content": "width=device-width, initial-scale=1"}))
    soup.title.string = title
    style = soup.new_tag("style")
    style.string = MD_CSS
    soup.head.append(style)
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
    toc = _table_of_contents(soup, main)
    heading = soup.new_tag("h1", attrs={"id": "top"})
    heading.string = title
    main.insert(0, toc)
    main.insert(0, heading)
    return "<!DOCTYPE html>\n" + str(soup.html)


def write_html_report(out_dir: Path, notebooks: list[Path] | None = None) -> Path:
    """``<out_dir>/report.html``: ``report.md`` as one self-contained page (:func:`markdown_page`).
    ``notebooks`` is accepted for callers of the former page of merged notebooks
    (:func:`write_notebooks_html` writes that one)."""
    out_dir = Path(out_dir)
    source = out_dir / "report.md"
    if not source.is_file():
        raise FileNotFoundError(f"no report.md under {out_dir}: the report notebook writes it")
    page = markdown_page(source.read_text(encoding="utf-8"), out_dir)
    path = out_dir / "report.html"
    with atomic_path(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path


# -- tidying --------------------------------------------------------------------------------------


def tidy_report_html(page: str, out_dir: Path, title: str) -> str:
    """The exported page made navigable and self-contained (see the module's list)."""
    soup = BeautifulSoup(page, "lxml")
    for script in soup.find_all("script"):
        script.decompose()
    _sanitise_body(soup)
    for anchor in soup.find_all("a", class_="anchor-link"):  # the pilcrows of every heading
        anchor.decompose()
    for link in soup.find_all("link"):
        if re.match(r"(https?:)?//", str(link.get("href", ""))):
            link.decompose()
    soup.head.insert(0, soup.new_tag("meta", attrs={"http-equiv": "Content-Security-Policy", "content": CSP}))
    if soup.title is None:
        soup.head.append(soup.new_tag("title"))
    soup.title.string = title
    style = soup.new_tag("style")
    style.string = CSS
    soup.head.append(style)
    main = soup.find("main") or soup.body
    _relative_paths(soup, out_dir)
    _provenance_once(soup)
    for table in list(main.find_all("table")):
        if table.find_parent(class_="qx") is None and table.find("table") is None:
            tidy_table(soup, table)
    _alt_texts(main)
    toc = _table_of_contents(soup, main)
    heading = soup.new_tag("h1", attrs={"class": "report-title", "id": "top"})
    heading.string = title
    main.insert(0, toc)
    main.insert(0, heading)
    return str(soup)


def _safe_attribute(tag: str, name: str, value: str) -> str | None:
    """nh3's attribute filter (after its own check of URL schemes): an image only as an inline PNG, JPEG or
    GIF or a relative file, a link only to a place in the page, a relative file or http(s)."""
    if name not in ("src", "href"):
        return value
    v = "".join(value.split()).lower()
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


def _sanitise_body(soup) -> None:
    """Replace the page's body by its sanitised copy (the head is the exporter's own styles)."""
    body = soup.body
    clean = BeautifulSoup(sanitise_html(body.decode_contents()), "lxml")
    body.clear()
    for child in list((clean.body or clean).contents):
        body.append(child)


def relative_path(path: str, out_dir: Path) -> str:
    """``path`` relative to the run folder (``figures/x.png``, ``../../data``); other text unchanged."""
    first = path.strip("/").split("/")[0]
    if not first or not Path("/" + first).exists():
        return path  # not a path of this machine (a URL part, an API id)
    rel = os.path.relpath(path.rstrip("/") or "/", out_dir)
    return rel + ("/" if path.endswith("/") and not rel.endswith("/") else "")


def _relative_paths(soup, out_dir: Path) -> None:
    out_dir = Path(out_dir).resolve()
    for text in list(soup.find_all(string=ABS_PATH)):
        if text.parent.name in ("style", "script"):
            continue
        text.replace_with(ABS_PATH.sub(lambda m: relative_path(m.group(0), out_dir), str(text)))
    for tag in soup.find_all(href=True):
        if str(tag["href"]).startswith("/"):
            tag["href"] = relative_path(str(tag["href"]), out_dir)


def _provenance_once(soup) -> None:
    """Keep the first occurrence of each provenance line; drop a block that held only a repeat."""
    seen: set[str] = set()
    for text in list(soup.find_all(string=PROVENANCE)):
        s = str(text)
        lines = s.split("\n")
        kept = []
        for line in lines:
            m = PROVENANCE.search(line)
            if m and m.group(0) in seen:
                continue
            if m:
                seen.add(m.group(0))
            kept.append(line)
        if len(kept) == len(lines):
            continue
        new = "\n".join(kept)
        parent = text.parent
        if new.strip():
            text.replace_with(new)
            continue
        text.extract()
        block = parent.find_parent(class_="jp-OutputArea-child") or parent.find_parent("p") or parent
        if not block.get_text(strip=True):
            block.decompose()
        elif parent.name == "p" and not parent.get_text(strip=True):
            parent.decompose()


def _slug(text: str) -> str:
    slug = re.sub(r"[^\w]+", "-", text.strip().lower()).strip("-")
    return slug or "section"


def _table_of_contents(soup, main):
    """``<nav id="toc">``: every h1 (a notebook) with its h2 sections, each a link to a unique id."""
    used: set[str] = set()
    nav = soup.new_tag("nav", attrs={"id": "toc", "aria-label": "Contents"})
    head = soup.new_tag("strong")
    head.string = "Contents"
    nav.append(head)
    top = soup.new_tag("ol")
    nav.append(top)
    current = None
    for h in main.find_all(["h1", "h2"]):
        text = h.get_text(" ", strip=True)
        if not text:
            continue
        base = _slug(text)
        hid, n = base, 1
        while hid in used:
            n += 1
            hid = f"{base}-{n}"
        used.add(hid)
        h["id"] = hid
        item = soup.new_tag("li")
        link = soup.new_tag("a", href=f"#{hid}")
        link.string = text
        item.append(link)
        if h.name == "h1" or current is None:
            top.append(item)
            current = soup.new_tag("ol")
            item.append(current)
            back = soup.new_tag("a", href="#top", attrs={"class": "toc-top"})
            back.string = "↑ contents"
            h.append(back)
        else:
            current.append(item)
    for sub in nav.find_all("ol"):
        if not sub.find("li"):
            sub.decompose()
    return nav


def _alt_texts(main) -> None:
    """Each image's alternative text: its section heading and the figure file its cell saved."""
    for img in main.find_all("img"):
        alt = str(img.get("alt", ""))
        if alt and not alt.startswith("No description"):
            continue
        heading = img.find_previous(["h1", "h2", "h3"])
        section = heading.get_text(" ", strip=True) if heading else ""
        cell = img.find_parent(class_="jp-Cell")
        saved = re.search(r"saved (\S+\.png)", cell.get_text(" ") if cell else "")
        name = Path(saved.group(1)).stem.replace("_", " ") if saved else ""
        parts = [p for p in (section, f"figure {name}" if name else "") if p]
        img["alt"] = ": ".join(parts) if parts else "figure"
