"""report.html's tidying on executed notebooks built here: contents, tables, paths, provenance, no scripts."""

from __future__ import annotations

import re

import nbformat
import numpy as np
import pandas as pd
from bs4 import BeautifulSoup
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from toolbench_lib.report.html import report_title, write_html_report, write_notebooks_html
from toolbench_lib.report.html_tables import MAX_TABLE_CHARS, NA, format_cell, tidy_table

PROV = ("embedder all-MiniLM-L6-v2 (requested all-MiniLM-L6-v2), registry 2500 APIs, data abc123, "
        "backend rules (rules-v1), k=5, runs=1, plan_limit=2")


def _html_output(df: pd.DataFrame):
    return new_output("display_data", data={"text/html": df.to_html(), "text/plain": "df"})


def _soup_table(df: pd.DataFrame, index: bool = True):
    soup = BeautifulSoup(f"<div>{df.to_html(index=index)}</div>", "lxml")
    tidy_table(soup, soup.find("table"))
    return soup


def _rows(table) -> list[list[str]]:
    return [[c.get_text() for c in tr.find_all(["td", "th"])] for tr in table.find_all("tr")]


def test_format_cell_rounds_long_floats_and_names_missing_values():
    assert format_cell("NaN") == (NA, False)
    assert format_cell("<NA>") == (NA, False)
    assert format_cell("0.123456") == ("0.1235", True)
    assert format_cell("0.412") == ("0.412", True)
    assert format_cell("12") == ("12", True)
    assert format_cell("0.0000123456") == ("1.23e-05", True)
    assert format_cell("3.1e-07") == ("3.1e-07", True)
    assert format_cell("G1 · rtp") == ("G1 · rtp", False)


def test_plain_index_hidden_numbers_right_text_left():
    df = pd.DataFrame({"method": ["rtp", "ptr"], "recall": [0.4123456, np.nan]})
    table = _soup_table(df).find("table")
    assert _rows(table) == [["method", "recall"], ["rtp", "0.4123"], ["ptr", NA]]
    assert [th.get("class") for th in table.find_all("th")] == [None, ["num"]]
    # A meaningful index (names, not 0, 1, 2) stays.
    named = _soup_table(df.set_index("method")).find("table")
    assert [r[0] for r in _rows(named)[-2:]] == ["rtp", "ptr"]


def test_wide_table_with_few_rows_is_transposed():
    cols = {f"ci_high_of_measure_{i}": [0.1 * i, 0.2 * i] for i in range(12)}
    df = pd.DataFrame({"subset": ["G1", "G2"], **cols})
    soup = _soup_table(df)
    tables = soup.find_all("table")
    assert len(tables) == 1 and "transposed" in tables[0].caption.get_text()
    rows = _rows(tables[0])
    assert rows[0] == ["subset", "G1", "G2"] and len(rows) == 1 + 12
    assert rows[1 + 5] == ["ci_high_of_measure_5", "0.5", "1.0"]


def test_wide_table_with_many_rows_is_split_repeating_its_labels():
    n = 20
    cols = {f"measure_number_{i}": np.arange(n) / 7 + i for i in range(14)}
    df = pd.DataFrame({"subset": [f"G{i % 3 + 1}" for i in range(n)], "method": ["rtp"] * n, **cols})
    soup = _soup_table(df)
    tables = soup.find_all("table")
    assert len(tables) >= 2
    headers = [_rows(t)[0] for t in tables]
    assert all(h[:2] == ["subset", "method"] for h in headers)
    shown = [c for h in headers for c in h[2:]]
    assert shown == list(cols)  # every column once, in order
    for t in tables:
        estimate = sum(min(max(len(c) for c in col), 28) + 3 for col in zip(*_rows(t), strict=True))
        assert estimate <= MAX_TABLE_CHARS + 31  # each part within the page (a header may wrap)
    first = _rows(tables[0])
    # pandas prints six decimals (0.000000, 1.000000): shown with four
    assert first[1][:3] == ["G1", "rtp", "0.0000"] and first[8][2] == "1.0000" and first[2][2] == "0.1429"


def _notebooks(folder, run_dir):
    fig = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    first = new_code_cell("x", outputs=[
        new_output("stream", name="stdout", text=f"{PROV}\nsaved {run_dir}/figures/headline.png\n"),
        new_output("display_data", data={"image/png": fig, "text/plain": "<Figure>"}),
        _html_output(pd.DataFrame({"a": [1.0, np.nan]}))])
    nbformat.write(new_notebook(cells=[new_markdown_cell("# 01 · First\n\n## Results"), first]),
                   folder / "01_a.ipynb")
    second = new_code_cell("y", outputs=[new_output("stream", name="stdout", text=f"{PROV}\n")])
    nbformat.write(new_notebook(cells=[new_markdown_cell("# 02 · Second\n\n## Results"), second,
                                       new_markdown_cell(f"data folder: `{run_dir.parent}/data`")]),
                   folder / "02_b.ipynb")


def test_report_page_contents_paths_provenance_and_no_scripts(tmp_path):
    run_dir = tmp_path / "my_run"
    (run_dir / "notebooks").mkdir(parents=True)
    _notebooks(run_dir / "notebooks", run_dir)
    html = write_notebooks_html(run_dir).read_text()
    soup = BeautifulSoup(html, "lxml")
    assert soup.title.get_text() == report_title(run_dir) and "my_run" in soup.title.get_text()
    links = [a["href"] for a in soup.select("nav#toc a")]
    assert len(links) == 4  # two notebooks, a "Results" section in each
    ids = [soup.find(id=h[1:]) for h in links]
    assert all(ids) and len({t["id"] for t in ids}) == 4  # the same heading twice gets two ids
    shown = [t.get_text(" ", strip=True).split(" ↑")[0] for t in ids]
    assert shown == ["01 · First", "Results", "02 · Second", "Results"]
    assert not soup.find_all("script")
    remote = [t for t in soup.find_all(src=True) + soup.find_all(href=True)
              if re.match(r"(https?:)?//", t.get("src", t.get("href", "")))]
    assert not remote and not re.search(r"url\(\s*['\"]?(https?:)?//|@import", html)
    assert str(tmp_path) not in html
    assert "saved figures/headline.png" in html and "data folder: <code>../data</code>" in html
    assert html.count("registry 2500 APIs") == 1
    assert soup.find("img")["alt"] == "Results: figure headline"
    assert not re.search(r">\s*NaN\s*<", html) and f">{NA}<" in html


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
REPORT_MD = """# Plan or Retrieve First? Reproduction report for run `r`

## The question and the answer

| retriever | set | PtR − RtP (95% CI) |
|---|---|---|
| dense | G1 | −0.063 [−0.110, −0.018] |

A query's text: <iframe src="https://example.org"></iframe> and [x](javascript:alert(1)).

![Recall per set: the bars show each architecture's recall with its 95% CI.](figures/fig.png)

*Figure 1.* Recall per set.

## Glossary

- **`rtp`**: RtP.
"""


def test_report_page_is_report_md_on_one_page(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "figures").mkdir(parents=True)
    (run_dir / "figures" / "fig.png").write_bytes(PNG)
    (run_dir / "report.md").write_text(REPORT_MD, encoding="utf-8")
    html = write_html_report(run_dir).read_text()
    soup = BeautifulSoup(html, "lxml")
    assert soup.title.get_text() == "Plan or Retrieve First? Reproduction report for run r"
    assert [a.get_text() for a in soup.select("nav#toc a")] == ["The question and the answer", "Glossary"]
    assert soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    img = soup.find("img")
    assert img["src"].startswith("data:image/png;base64,") and img["alt"].startswith("Recall per set")
    table = soup.find("table")
    assert table.find_parent(class_="table-wrap") is not None and table.find("th")["scope"] == "col"
    assert "num" in table.find_all("td")[2].get("class", [])  # a difference with its CI is a number
    assert not soup.find("iframe") and not soup.find("a", href=re.compile("javascript"))
    assert "&lt;iframe" in html  # the raw HTML of the text is shown as text
    assert not soup.find_all("script")
