"""axe-core in a Playwright page: the accessibility checks of the browser tests.

axe-core is the pinned npm dev dependency of ``package.json`` (``make test`` runs ``npm ci``). A page with a
Content-Security-Policy (report.html sets ``default-src 'none'``) refuses the injected script unless its
context bypasses the policy, so open such pages in ``browser.new_context(bypass_csp=True)`` (or
``launch_persistent_context(..., bypass_csp=True)``)::

    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    page.goto(url)
    assert not axe_violations(page), format_violations(axe_violations(page))
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

AXE_JS = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")

RUN = """async (impacts) => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.filter(v => impacts.includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200),
                              summary: n.failureSummary || ''})),
  }));
}"""


def required(path: Path, message: str) -> Path:
    """``path`` when it exists; otherwise the test is skipped with ``message`` (failed on CI)."""
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def axe_js() -> Path:
    """The installed axe.min.js; skips (fails on CI) when ``npm ci`` has not installed it."""
    return required(AXE_JS, f"{AXE_JS} is missing: npm ci (make test runs it; .ci/run installs npm)")


def axe_violations(page, impacts: tuple[str, ...] = SERIOUS) -> list[dict]:
    """axe-core's violations of the page's current document whose impact is one of ``impacts``.

    Each violation: ``id``, ``impact``, ``help``, ``helpUrl`` and ``nodes`` (``target``, ``html``,
    ``summary``). The script is injected once per document (again after a navigation)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_js()))
    return page.evaluate(RUN, list(impacts))


def format_violations(violations: list[dict]) -> str:
    """One line per violation and failing element, for an assertion message."""
    lines = []
    for v in violations:
        lines.append(f"{v['impact']}: {v['id']} ({v['help']}) {v['helpUrl']}")
        lines += [f"    {n['target']}: {n['html']}" for n in v["nodes"][:5]]
    return "\n".join(lines)
