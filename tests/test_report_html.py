"""report.html: report.md on one self-contained page (contents, figures inline, tables, no scripts)."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup

from toolbench_lib.report.html import write_html_report

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
REPORT_MD = """# Plan or Retrieve First? Reproduction report for run `r`

## The question and the answer

| retriever | set | PtR − RtP (95% CI) |
|---|---|---|
| dense | G1 | −0.063 [−0.110, −0.018] |

A query's text: <iframe src="https://example.org"></iframe> and [x](javascript:alert(1)).

![Recall per set: the bars show each architecture's recall with its 95% CI.](figures/fig.png)

*Figure R1.* Recall per set.

## Glossary

- **`rtp`**: RtP.

## Which architecture finds more tools (§4.1, Figure 2)

## Glossary
"""


def test_report_page_is_report_md_on_one_page(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "figures").mkdir(parents=True)
    (run_dir / "figures" / "fig.png").write_bytes(PNG)
    (run_dir / "report.md").write_text(REPORT_MD, encoding="utf-8")
    html = write_html_report(run_dir).read_text()
    soup = BeautifulSoup(html, "lxml")
    assert soup.title.get_text() == "Plan or Retrieve First? Reproduction report for run r"
    assert [a.get_text() for a in soup.select("nav#toc a")] == [
        "The question and the answer", "Glossary", "Which architecture finds more tools (§4.1, Figure 2)",
        "Glossary"]
    # each id is the anchor GitHub gives the heading in report.md, as teaching.md links it
    assert [h["id"] for h in soup.find_all("h2")] == [
        "the-question-and-the-answer", "glossary", "which-architecture-finds-more-tools-41-figure-2",
        "glossary-1"]
    assert soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    img = soup.find("img")
    assert img["src"].startswith("data:image/png;base64,") and img["alt"].startswith("Recall per set")
    table = soup.find("table")
    assert table.find_parent(class_="table-wrap") is not None and table.find("th")["scope"] == "col"
    assert "num" in table.find_all("td")[2].get("class", [])  # a difference with its CI is a number
    assert not soup.find("iframe") and not soup.find("a", href=re.compile("javascript"))
    assert "&lt;iframe" in html  # the raw HTML of the text is shown as text
    assert not soup.find_all("script")
