"""report.html in Chromium, as a reading group sees it at 1,280 px: what a test asserts of the page."""

from __future__ import annotations

import re
from pathlib import Path

from .axe import axe_violations, format_violations
from .test_browser import FLAGS

LATEX = re.compile(r"\{\\\w+\}|\\(?:pm|times|frac|mathrm)\b|\{<\}|\{>\}")
SNAKE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")


def page_problems(html_path: Path, chromium: Path) -> tuple[list[str], dict]:
    """``(problems, facts)`` of a report page: LaTeX left in the text, a cut table (a cell of only "…"), a
    snake_case column header, a figure shown twice, "None" in the text, a request outside the page, and
    axe-core's serious or critical violations. ``facts``: page height, tables, figures."""
    from playwright.sync_api import sync_playwright

    problems, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), headless=True, args=FLAGS)
        try:
            ctx = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
            page = ctx.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.goto(Path(html_path).resolve().as_uri())
            text = page.inner_text("body")
            headers = page.eval_on_selector_all("th", "els => els.map(e => e.innerText.trim())")
            cells = page.eval_on_selector_all("td", "els => els.map(e => e.innerText.trim())")
            images = page.eval_on_selector_all("img", "els => els.map(e => e.getAttribute('src'))")
            facts = {"height_px": page.evaluate("() => document.body.scrollHeight"),
                     "tables": page.eval_on_selector_all("table", "els => els.length"),
                     "figures": len(images)}
            violations = axe_violations(page)
        finally:
            browser.close()
    if LATEX.search(text):
        problems.append(f"LaTeX in the page: {sorted(set(LATEX.findall(text)))[:5]}")
    if any(c in ("…", "...") for c in cells):
        problems.append("a table cut with '…'")
    snake = sorted({h for h in headers if SNAKE.match(h)})
    if snake:
        problems.append(f"snake_case headers: {snake[:8]}")
    if len(images) != len(set(images)):
        problems.append("a figure shown twice")
    if re.search(r"\bNone\b", text):
        problems.append("'None' in the text")
    outside = [u for u in requests if not u.startswith(("file:", "data:"))]
    if outside:
        problems.append(f"requests outside the page: {outside[:3]}")
    if violations:
        problems.append("axe-core: " + format_violations(violations))
    return problems, facts
