"""Untrusted text in a real browser: a study whose query, registry labels, stub name and reasoning carry
script payloads is rendered as the report renders it, and headless Debian Chromium (driven by Playwright)
finds nothing live: no dialog (after hovering and clicking every element), no ``javascript:`` link, no
event-handler attribute, no frame.

Three pages: ``report.html`` written by :func:`write_html_report` from a ``report.md`` holding the
worked-query block (escaped where written) and, as the second line, the same payloads unescaped (shown as
text or sanitised by the report's allow-list); the worked-query block of ``report.md`` rendered to HTML by
a renderer that lets raw HTML through; and the explorer's views of the payload study."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from toolbench_lib.report.html import write_html_report
from toolbench_lib.report.teaching import worked_query, worked_query_markdown

from .test_browser import SHOTS, TIMEOUT_MS, _launch, chromium  # noqa: F401 (chromium: the fixture)
from .test_reliability import (
    PAYLOAD_LABEL,
    PAYLOAD_QUERY,
    PAYLOAD_REASON,
    PAYLOAD_STUB,
    live_elements,
    payload_study,
    render,
)

pytestmark = pytest.mark.slow

RAW = [  # every payload of the round, unescaped: what a writer that forgot to escape would emit
    f"> {PAYLOAD_QUERY}", f"1. `{PAYLOAD_STUB}`: {PAYLOAD_REASON}", f"| {PAYLOAD_LABEL} |\n|---|\n| x |",
    "<a href='javascript:alert(8)'>click</a> <a href=' JaVaScRiPt:alert(9)'>spaced</a>",
    "<img src=x onerror=alert(10)><svg><script>alert(11)</script></svg>",
    "<form action='javascript:alert(12)'><button>go</button></form>",
    "<a href='data:text/html;base64,PHNjcmlwdD5hbGVydCgxMyk8L3NjcmlwdD4='>data</a>",
    "<details open ontoggle=alert(14)><summary>s</summary></details>",
]

LIVE = """() => {
  const found = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.toLowerCase().startsWith('on')) found.push(el.tagName + '[' + a.name + ']');
    }
    for (const attr of ['href', 'src', 'action', 'formaction']) {
      const v = (el.getAttribute(attr) || '').replace(/\\s/g, '').toLowerCase();
      const live = v.startsWith('javascript:') || (v.startsWith('data:') && el.tagName !== 'IMG');
      if (live) found.push(el.tagName + '[' + attr + ']');
    }
  }
  for (const t of ['script', 'iframe', 'object', 'embed', 'form', 'svg']) {
    for (const el of document.querySelectorAll(t)) found.push(t);
  }
  return found;
}"""


def _worked_markdown() -> str:
    study = payload_study()
    qkey = study.queries["qkey"].iloc[0]
    return "\n".join(worked_query_markdown(worked_query(study, qkey, k=2),
                                           labels={"a": PAYLOAD_LABEL, "x": PAYLOAD_LABEL}))


def _explorer_html() -> str:
    """The explorer's table, result line and query view of the payload study (its query shown, the API
    names the payload label), as the page shows them."""
    from toolbench_lib.explorer.render import STYLE
    from toolbench_lib.explorer.widget import QueryExplorer

    study = payload_study()
    ex = QueryExplorer(None, study)
    ex.labels = {str(a): PAYLOAD_LABEL for a in study.rankings["api_id"]}
    ex.subset.value = "all"
    ex.select(str(study.queries["qkey"].iloc[0]))
    ex.search.value = "alert"  # the payload query is found: the result line quotes the search term
    return f"{STYLE}{ex.count.value}{ex.message.value}{ex.grid.value}{ex.render()}"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    run = tmp_path_factory.mktemp("injection") / "run"
    run.mkdir()
    text = "\n\n".join(["# Report with untrusted text", _worked_markdown(), *RAW])
    (run / "report.md").write_text(text + "\n", encoding="utf-8")
    report = write_html_report(run)
    md_page = run / "report_md.html"
    md_page.write_text(f"<!doctype html><html><body>{render(_worked_markdown())}</body></html>",
                       encoding="utf-8")
    explorer = run / "explorer.html"
    explorer.write_text(f"<!doctype html><html><body><main>{_explorer_html()}</main></body></html>",
                        encoding="utf-8")
    return {"report.html": report, "report.md": md_page, "explorer": explorer}


def test_payloads_are_shown_as_text(pages):
    html = pages["report.html"].read_text(encoding="utf-8")
    assert live_elements(html) == []
    # escaped where written: the payloads are on the page as text, not dropped
    assert "javascript:alert(1)" in html and "onmouseover=alert(3)" in html and "onerror=alert(4)" in html
    assert live_elements(pages["report.md"].read_text(encoding="utf-8")) == []
    explorer = pages["explorer"].read_text(encoding="utf-8")
    assert live_elements(explorer) == [] and "javascript:alert(1)" in explorer


@pytest.mark.parametrize("name", ["report.html", "report.md", "explorer"])
def test_nothing_runs_in_chromium(pages, name, chromium):  # noqa: F811 (the fixture)
    from playwright.sync_api import sync_playwright

    dialogs: list[str] = []
    with sync_playwright() as p:
        profile = SHOTS / f".profile-{uuid.uuid4().hex[:8]}"
        ctx = _launch(p, chromium, profile, height=900)
        try:
            page = ctx.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(pages[name].as_uri(), wait_until="load", timeout=TIMEOUT_MS)
            assert page.evaluate(LIVE) == []
            assert page.evaluate("() => document.body.innerText").count("alert(") >= 5  # shown as text
            for el in page.query_selector_all("main *, body > *")[:400]:
                if el.is_visible():
                    el.hover(timeout=2000)
            for link in page.query_selector_all("a:not([href])"):  # a payload link, its href removed
                if link.is_visible():
                    link.click(timeout=2000, no_wait_after=True)
            page.wait_for_timeout(300)
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)
    assert dialogs == []
