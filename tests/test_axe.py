"""tests/axe.py against known pages in headless Chromium: a page with a missing form label, an image
without text and unreadable contrast has those serious violations; the same page fixed has none; a page
whose CSP forbids scripts is still checked in a context that bypasses it."""

from __future__ import annotations

import pytest

from .axe import axe_js, axe_violations, format_violations
from .test_browser import FLAGS, chromium  # noqa: F401 (chromium: the fixture)

pytestmark = pytest.mark.slow

BAD = """<!doctype html><html lang="en"><head><title>t</title>{csp}</head><body><main>
<h1>Page</h1><input type="text"><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<p style="color:#ddd;background:#fff">faint text</p></main></body></html>"""
GOOD = """<!doctype html><html lang="en"><head><title>t</title>{csp}</head><body><main>
<h1>Page</h1><label>Name <input type="text"></label>
<img alt="dot" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
<p style="color:#222;background:#fff">plain text</p></main></body></html>"""
CSP = """<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:">"""


@pytest.mark.parametrize("csp", ["", CSP])
def test_axe_finds_serious_violations_and_none_on_a_fixed_page(chromium, tmp_path, csp):  # noqa: F811
    from playwright.sync_api import sync_playwright

    axe_js()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), headless=True, args=FLAGS)
        try:
            ctx = browser.new_context(bypass_csp=True)
            page = ctx.new_page()
            bad, good = tmp_path / "bad.html", tmp_path / "good.html"
            bad.write_text(BAD.format(csp=csp))
            good.write_text(GOOD.format(csp=csp))
            page.goto(bad.as_uri())
            found = {v["id"] for v in axe_violations(page)}
            assert {"label", "image-alt", "color-contrast"} <= found, found
            assert all(v["impact"] in ("serious", "critical") for v in axe_violations(page))
            page.goto(good.as_uri())
            clean = axe_violations(page)
            assert not clean, format_violations(clean)
        finally:
            browser.close()
