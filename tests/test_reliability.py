"""Reliability round four: every probe of the round as one table, each asserting the correct result or the
clear error, plus the concurrency stress test of a study folder (two savers and a loader).

Each case records its verdict in :data:`VERDICTS`; the table covers the round's probes by name
(:data:`ROUND_FOUR`), so a probe cannot be dropped silently. The injection test in Chromium is
``tests/test_injection.py``; the CLI's clear errors of this round are rows of ``tests/test_bad_inputs.py``.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mistune
import numpy as np
import pandas as pd
import pytest
from bs4 import BeautifulSoup

from toolbench_lib.data.dataset import sources_fingerprint
from toolbench_lib.data.markdown import md_code, md_table, md_text
from toolbench_lib.eval.evaluation import per_query_runs
from toolbench_lib.eval.export import MANIFEST, ExportFolderError, export_trec
from toolbench_lib.llm.parsing import MAX_STUBS, Stub, parse_stubs, parse_stubs_counted
from toolbench_lib.report.html import CSP, markdown_page, sanitise_html
from toolbench_lib.retrieval.bm25 import TermCounts
from toolbench_lib.study.result import empty_rankings, stub_cap_counts
from toolbench_lib.study.stored import StoredStudyError, StudyResult

from .forkcli import run_cli
from .hand_tables import study_of_hits, with_tables
from .test_analysis_tables import _calls, _hits, _plans, _queries, _stubs

VERDICTS: dict[str, str] = {}
PAYLOAD_QUERY = ('<iframe src="javascript:alert(1)"></iframe> [x](javascript:alert(2)) find *hotels* | now '
                 "at https://evil.example/login, www.evil.example or a.b@evil.example")
PAYLOAD_STUB = "Get` <b onmouseover=alert(3)>x</b> `"
PAYLOAD_REASON = "<img src=x onerror=alert(4)> ![i](javascript:alert(5))"
PAYLOAD_LABEL = "Tool <svg onload=alert(6)> / [api](javascript:alert(7))"


def hand_study(methods=("rtp", "ptr")) -> StudyResult:
    prov = {"settings": {"k": 2, "depth": 5, "runs": 2, "plan_limit": 1, "methods": list(methods)}}
    return study_of_hits(_queries(), _stubs(), _hits(), _plans(), _calls(), prov)


def live_elements(html: str) -> list[str]:
    """What could run in ``html``: script/iframe/object/embed elements, event-handler attributes and
    ``javascript:``/``data:`` links (the same check the browser test makes on the live DOM)."""
    soup = BeautifulSoup(html, "lxml")
    found = [t.name for t in soup.find_all(["script", "iframe", "object", "embed", "form", "svg"])]
    for tag in soup.find_all(True):
        found += [f"{tag.name}[{a}]" for a in tag.attrs if a.lower().startswith("on")]
        for attr in ("href", "src", "action", "formaction"):
            value = "".join(str(tag.get(attr, "")).split()).lower()
            if value.startswith(("javascript:", "vbscript:")) or (value.startswith("data:")
                                                                 and tag.name != "img"):
                found.append(f"{tag.name}[{attr}={value[:20]}]")
    return found


def render(markdown: str) -> str:
    """Markdown as HTML by a renderer that lets raw HTML through (as nbconvert's does)."""
    return mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])(markdown)


# --------------------------------------------------------------------------- injection


def case_markdown_text_is_inert(tmp: Path) -> str:
    html = render(f"> {md_text(PAYLOAD_QUERY)}\n\n- {md_text(PAYLOAD_REASON)}\n")
    assert live_elements(html) == [] and "<a" not in html and "<em>" not in html
    assert BeautifulSoup(html, "lxml").get_text(" ").split() == (PAYLOAD_QUERY + " " + PAYLOAD_REASON).split()
    return "correct"


def case_code_span_cannot_be_broken(tmp: Path) -> str:
    html = render(f"1. {md_code(PAYLOAD_STUB)}: {md_text(PAYLOAD_REASON, line_start=False)}\n")
    assert live_elements(html) == [] and "<b" not in html
    assert BeautifulSoup(html, "lxml").find("code").get_text() == " ".join(PAYLOAD_STUB.split())
    return "correct"


def case_table_cell_keeps_its_column(tmp: Path) -> str:
    table = md_table(pd.DataFrame({"query": [PAYLOAD_QUERY], "recall": [0.5]}))
    soup = BeautifulSoup(render(table), "lxml")
    assert [len(r.find_all(["td", "th"])) for r in soup.find_all("tr")] == [2, 2]
    assert live_elements(str(soup)) == [] and soup.find("td").get_text() == PAYLOAD_QUERY
    return "correct"


def case_worked_query_block_is_inert(tmp: Path) -> str:
    from toolbench_lib.report.teaching import worked_query, worked_query_markdown

    study = payload_study()
    lines = worked_query_markdown(worked_query(study, study.queries["qkey"].iloc[0], k=2),
                                  labels={"a": PAYLOAD_LABEL, "x": PAYLOAD_LABEL})
    html = render("\n".join(lines))
    assert live_elements(html) == []
    text = BeautifulSoup(html, "lxml").get_text(" ")
    assert "javascript:alert(1)" in text and "onmouseover=alert(3)" in text  # shown as text, not dropped
    return "correct"


def case_saved_table_is_escaped(tmp: Path) -> str:
    from toolbench_lib.study.experiment import ExperimentConfig, save_table

    cfg = ExperimentConfig.build(run_name="pytest_reliability_table", outputs_dir=str(tmp / "out"))
    save_table(pd.DataFrame({"stub": [PAYLOAD_STUB], "n": [1]}), "stubs_payload", cfg)
    html = render((cfg.tables_dir / "stubs_payload.md").read_text())
    assert live_elements(html) == [] and "onmouseover" in BeautifulSoup(html, "lxml").get_text()
    return "correct"


def case_html_report_sanitised(tmp: Path) -> str:
    dirty = ('<a href="java\nscript:alert(1)">a</a><img src="x" onerror="alert(2)">'
             '<iframe src="data:text/html,x"></iframe><a href="data:text/html;base64,PHNjcmlwdD4=">d</a>'
             '<p onclick="x()">p</p><img src="data:image/png;base64,iVBORw0KGgo=" alt="fig">'
             '<a href="#top">top</a><table><tr><td>1</td></tr></table><script>alert(3)</script>'
             '<img src="//evil.example/x.png" alt="far"><a href="//evil.example/">far</a>'
             '<a href="\\\\h\\s">u</a>')
    clean = sanitise_html(dirty)
    assert live_elements(clean) == []
    soup = BeautifulSoup(clean, "lxml")
    assert soup.find("img", alt="fig") is not None and soup.find("a", href="#top") is not None
    far = [soup.find("img", alt="far"), *soup.find_all("a", string=("far", "u"))]  # kept, their paths not:
    assert len(far) == 3 and not any(t.get("src") or t.get("href") for t in far)  # network paths, other hosts
    page = BeautifulSoup(markdown_page("# Report\n\n[a](javascript:alert(1))\n", tmp), "lxml")
    assert page.find("meta", attrs={"http-equiv": "Content-Security-Policy"})["content"] == CSP
    assert "script-src" not in CSP and "default-src 'none'" in CSP  # no script of any origin
    assert sanitise_html('<b onmouseover="x">b</b>') == "<b>b</b>"
    return "correct"


def payload_study() -> StudyResult:
    """The hand study with payloads in a query, a stub name and a stub's reasoning."""
    study = hand_study()
    q = study.queries.copy()
    q.loc[0, "query"] = PAYLOAD_QUERY
    s = study.stubs.copy()
    first = s.index[(s["qkey"] == q.loc[0, "qkey"]) & (s["run"] == 0)][0]
    s.loc[first, ["name", "reasoning"]] = [PAYLOAD_STUB, PAYLOAD_REASON]
    return with_tables(study, queries=q, stubs=s)


# --------------------------------------------------------------------------- BM25 over any text


def _bm25_case(text: str) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        index = TermCounts(["weather forecast api for a city", "currency exchange rates"]).index()
        hits = index.search_texts([text, "weather"], k=2)
        assert len(hits[0].rows) == 0 and list(hits[1].rows) == [0]
        return "correct"
    return case


def case_bm25_stub_the(tmp: Path) -> str:
    stubs, _ = parse_stubs('[{"name": "The", "reasoning": ""}]', "q")
    index = TermCounts(["weather forecast api", "currency rates"]).index()
    assert index.search_texts([stubs[0].name], k=5)[0].rows.size == 0
    return "correct"


def case_method_without_hits_stays(tmp: Path) -> str:
    study = hand_study(methods=("rtp", "ptr", "rtp@bm25"))
    assert study.methods == ["rtp", "ptr", "rtp@bm25"]
    assert study.ranking("rtp@bm25", 1) == {}
    pq = per_query_runs(study, k=2)
    empty = pq[pq["method"] == "rtp@bm25"]
    assert len(empty) == 2 * len(study.queries) and (empty["recall"] == 0).all()
    manifest = export_trec(study, tmp / "trec")
    runs = [f for f in manifest["files"] if f["kind"] == "run" and f["method"] == "rtp@bm25"]
    assert runs and all(f["n_queries"] == 0 and f["queries_without_hits"] > 0 for f in runs)
    assert all((tmp / "trec" / f["path"]).exists() for f in runs)
    return "correct"


def case_empty_rankings_counted(tmp: Path) -> str:
    r = hand_study().rankings
    r = r[~((r["method"] == "ptr") & (r["run"] == 1) & (r["qkey"] == r["qkey"].iloc[0]))]
    counts = empty_rankings(r, _queries()["qkey"], ["rtp", "ptr", "ptr@bm25"], 2)
    assert counts == {"rtp": [0, 0], "ptr": [0, 1], "ptr@bm25": [4, 4]}  # every method in every run
    return "correct"


# --------------------------------------------------------------------------- fingerprints and caches


def _source_folder(tmp: Path) -> Path:
    root = tmp / "toolbench"
    (root / "test_instruction").mkdir(parents=True)
    (root / "toolenv" / "tools" / "Data").mkdir(parents=True)
    queries = json.dumps([{"query": "weather in Paris"}])
    (root / "test_instruction" / "G1_instruction.json").write_text(queries)
    (root / "toolenv" / "tools" / "Data" / "w.json").write_text("{}")
    return root


def case_same_size_edit_with_mtime_restored(tmp: Path) -> str:
    root = _source_folder(tmp)
    before = sources_fingerprint(root, processed_dir=tmp / "processed")
    path = root / "test_instruction" / "G1_instruction.json"
    st = path.stat()
    path.write_text(path.read_text().replace("Paris", "Tokyo"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # its modification time set back
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert sources_fingerprint(root, processed_dir=tmp / "processed") != before
    return "correct"


def case_touched_file_keeps_its_fingerprint(tmp: Path) -> str:
    root = _source_folder(tmp)
    before = sources_fingerprint(root, processed_dir=tmp / "processed")
    os.utime(root / "toolenv" / "tools" / "Data" / "w.json", (1, 1))
    assert sources_fingerprint(root, processed_dir=tmp / "processed") == before  # content, not time
    return "correct"


def case_damaged_hash_cache_is_ignored(tmp: Path) -> str:
    root = _source_folder(tmp)
    before = sources_fingerprint(root, processed_dir=tmp / "processed")
    for cache in (tmp / "processed").glob("source-hashes-*.json"):
        cache.write_text('{"hashed_at_ns": 9e99, "files": {"test_instruction/G1_instruction.json": [1]}')
    assert sources_fingerprint(root, processed_dir=tmp / "processed") == before
    return "repaired"


def case_damaged_study_table(tmp: Path) -> str:
    hand_study().save(tmp / "s")
    path = tmp / "s" / "plans.parquet"
    path.write_bytes(path.read_bytes()[:-8] + b"\x00" * 8)
    with pytest.raises(StoredStudyError, match="plans.parquet does not match its checksum"):
        StudyResult.load(tmp / "s")
    return "clear error"


def case_edited_study_provenance(tmp: Path) -> str:
    hand_study().save(tmp / "s")
    path = tmp / "s" / "provenance.json"
    prov = json.loads(path.read_text())
    prov["settings"]["methods"] = ["rtp"]  # valid JSON, another study's settings
    path.write_text(json.dumps(prov, indent=2))
    with pytest.raises(StoredStudyError, match="provenance.json does not match its checksum"):
        StudyResult.load(tmp / "s")
    return "clear error"


# --------------------------------------------------------------------------- exports


def case_export_replaces_its_own_export_whole(tmp: Path) -> str:
    out = tmp / "trec"
    export_trec(hand_study(methods=("rtp", "ptr", "rtp@bm25")), out)
    (out / "runs" / "stray.other-study.run0.trec").write_text("x Q0 y 1 1 t\n")
    manifest = export_trec(hand_study(), out)
    listed = {f["path"] for f in manifest["files"]}
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {MANIFEST}
    assert on_disk == listed and not any("bm25" in p or "stray" in p for p in on_disk)
    return "correct"


def case_export_refuses_a_foreign_folder(tmp: Path) -> str:
    out = tmp / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ExportFolderError, match="not an earlier TREC export"):
        export_trec(hand_study(), out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    return "clear error"


def case_failed_export_keeps_the_old_one(tmp: Path) -> str:
    out = tmp / "trec"
    export_trec(hand_study(), out)
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = hand_study()
    bad.queries.loc[3, "qkey"] = "G2 with space:4"  # an id TREC cannot hold: fails midway
    with pytest.raises(ValueError, match="whitespace"):
        export_trec(bad, out)
    after = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before and not list(tmp.glob(".trec.*"))
    return "clear error"


# --------------------------------------------------------------------------- stubs


def case_numeric_stub_name_falls_back(tmp: Path) -> str:
    assert parse_stubs('{"name": 12}', "the query") == ([Stub("the query", "fallback: raw query")], True)
    return "correct"


def case_stub_cap_stated_and_counted(tmp: Path) -> str:
    reply = json.dumps([{"name": f"Tool {i}"} for i in range(50)])
    stubs, fell_back, dropped = parse_stubs_counted(reply, "q")
    assert (len(stubs), fell_back, dropped) == (MAX_STUBS, False, 50 - MAX_STUBS)
    frame = pd.DataFrame([{"qkey": "a", "run": 0, "stub_idx": i, "dropped": dropped} for i in range(8)]
                         + [{"qkey": "b", "run": 0, "stub_idx": 0, "dropped": 0}])
    assert stub_cap_counts([frame]) == {"max_stubs": 8, "replies_over_cap": 1, "stubs_dropped": 42}
    return "correct"


# --------------------------------------------------------------------------- the explorer and reproduce


def _explore_app(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolbench_lib.explorer.app", *args],
                          capture_output=True, text=True, timeout=120)


def _port_case(port: str) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        out = _explore_app("--port", port)
        assert out.returncode == 2 and "1 to 65535" in out.stderr and "serving" not in out.stdout
        assert "Traceback" not in out.stderr
        return "clear error"
    return case


def _explore_run_case(name: str) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:  # a run name leaving outputs/ is never opened (nor its views written)
        out = _explore_app("--run-name", name)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--run-name" in out.stderr
        assert "folder name" in out.stderr and "serving" not in out.stdout
        return "clear error"
    return case


def case_bench_json_into_a_folder(tmp: Path) -> str:
    """``bench --json`` naming a folder is one line before anything is measured."""
    out = subprocess.run([sys.executable, "-m", "toolbench_lib", "bench", "--quick", "--only", "search",
                          "--json", str(tmp)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--json" in out.stderr
    assert "measure" not in out.stdout and "not a file" in out.stderr
    return "clear error"


def case_voila_shows_no_tracebacks(tmp: Path) -> str:
    from toolbench_lib.explorer.app import voila_argv

    argv = voila_argv()
    assert "--show_tracebacks=False" in argv and not any("show_tracebacks=True" in a for a in argv)
    return "correct"


def case_explorer_page_for_an_unknown_run(tmp: Path) -> str:
    from toolbench_lib.explorer.widget import QueryExplorer

    page = QueryExplorer.for_page("pytest-no-such-run")
    assert page.value.startswith("<p class='qx-error' role='alert'>explorer: ")
    assert "Traceback" not in page.value
    assert page.value.count("\n") == 0 and "pytest-no-such-run" in page.value
    return "clear error"


def case_kernel_importing_another_checkout(tmp: Path) -> str:
    from toolbench_lib.report.reproduce import CheckoutMismatch, check_notebook_imports

    other = tmp / "other" / "toolbench_lib"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    env = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(other.parent)
    try:
        with pytest.raises(CheckoutMismatch, match="from .*other/toolbench_lib, not from this checkout"):
            check_notebook_imports(tmp)
    finally:
        if env is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = env
    assert check_notebook_imports(tmp) == Path(__file__).resolve().parent.parent / "toolbench_lib"
    return "clear error"


def case_relative_paths_made_absolute(tmp: Path) -> str:
    from toolbench_lib.report.reproduce import absolute_paths

    here = Path.cwd()
    os.chdir(tmp)
    try:
        data, cassette = absolute_paths("../injdata", None)
    finally:
        os.chdir(here)
    assert data == str(tmp.parent / "injdata") and cassette is None
    return "correct"


def case_notebooks_wait_for_the_study(tmp: Path) -> str:
    from toolbench_lib.report.reproduce import notebook_stages

    picked = [Path(n) for n in ("01_data_prep.ipynb", "02_main_results.ipynb", "08_query_explorer.ipynb",
                                "09_report.ipynb")]
    stages = [[p.stem[:2] for p in s] for s in notebook_stages(picked)]
    assert stages == [["01", "02"], ["08"], ["09"]]
    return "correct"


def _faiss_threads_case(value: str) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        from toolbench_lib.retrieval.index import search_threads

        os.environ["TOOLBENCH_FAISS_THREADS"] = value
        try:
            with pytest.raises(ValueError, match="TOOLBENCH_FAISS_THREADS"):
                search_threads()
        finally:
            os.environ.pop("TOOLBENCH_FAISS_THREADS")
        return "clear error"
    return case


def case_no_ground_truth_named(tmp: Path) -> str:
    from toolbench_lib.cli import unresolved_report

    q = _queries().assign(unresolved_candidates=0, unresolved_relevant=0, n_candidate_pairs=1,
                          n_relevant_pairs=1)
    q["candidates"] = [[] for _ in range(len(q))]
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    logger = logging.getLogger("toolbench_lib")  # the CLI's logger
    logger.addHandler(handler)
    try:
        unresolved_report(q, ["G1_instruction"])
    finally:
        logger.removeHandler(handler)
    assert any("no ground truth: 2 of 2 under candidates" in r for r in records), records
    return "correct"


ROUND_FOUR: list[tuple[str, Callable[[Path], str]]] = [
    ("inject-query-iframe-and-link", case_markdown_text_is_inert),
    ("inject-stub-backtick-breakout", case_code_span_cannot_be_broken),
    ("inject-table-cell-pipe", case_table_cell_keeps_its_column),
    ("inject-worked-query-block", case_worked_query_block_is_inert),
    ("inject-saved-table", case_saved_table_is_escaped),
    ("inject-report-html-second-line", case_html_report_sanitised),
    ("bm25-stopword-only-query", _bm25_case("the of and")),
    ("bm25-emoji-only-query", _bm25_case("😀 🎉")),
    ("bm25-punctuation-only-query", _bm25_case("?! ... ---")),
    ("bm25-stub-named-the", case_bm25_stub_the),
    ("method-without-any-hit-stays", case_method_without_hits_stays),
    ("empty-rankings-counted", case_empty_rankings_counted),
    ("fingerprint-same-size-edit-mtime-restored", case_same_size_edit_with_mtime_restored),
    ("fingerprint-touched-file", case_touched_file_keeps_its_fingerprint),
    ("fingerprint-damaged-hash-cache", case_damaged_hash_cache_is_ignored),
    ("study-table-damaged", case_damaged_study_table),
    ("study-provenance-edited", case_edited_study_provenance),
    ("export-into-earlier-export", case_export_replaces_its_own_export_whole),
    ("export-into-foreign-folder", case_export_refuses_a_foreign_folder),
    ("export-fails-midway", case_failed_export_keeps_the_old_one),
    ("stub-name-a-number", case_numeric_stub_name_falls_back),
    ("stub-reply-of-50", case_stub_cap_stated_and_counted),
    ("explore-port-99999", _port_case("99999")),
    ("explore-port-0", _port_case("0")),
    ("explore-port-negative", _port_case("-1")),
    ("explore-run-outside-outputs", _explore_run_case("../../elsewhere")),
    ("explore-run-empty", _explore_run_case("")),
    ("bench-json-a-folder", case_bench_json_into_a_folder),
    ("explore-no-tracebacks", case_voila_shows_no_tracebacks),
    ("explore-unknown-run-page", case_explorer_page_for_an_unknown_run),
    ("reproduce-other-checkout", case_kernel_importing_another_checkout),
    ("reproduce-relative-data-dir", case_relative_paths_made_absolute),
    ("reproduce-notebooks-order", case_notebooks_wait_for_the_study),
    ("faiss-threads-text", _faiss_threads_case("two")),
    ("faiss-threads-zero", _faiss_threads_case("0")),
    ("faiss-threads-negative", _faiss_threads_case("-2")),
    ("faiss-threads-float", _faiss_threads_case("1.5")),
    ("no-ground-truth-warning", case_no_ground_truth_named),
]


@pytest.mark.parametrize("case", ROUND_FOUR, ids=[name for name, _ in ROUND_FOUR])
def test_round_four(case, tmp_path):
    name, run = case
    VERDICTS[name] = run(tmp_path)
    assert VERDICTS[name] in ("correct", "clear error", "repaired")


def test_round_four_table_is_whole():
    names = [name for name, _ in ROUND_FOUR]
    assert len(set(names)) == len(names)
    from .test_bad_inputs import CONFIG_CASES, ERROR_CASES, REPAIRED_CASES, SINGLE_PROBES

    total = len(ERROR_CASES) + len(REPAIRED_CASES) + len(CONFIG_CASES) + len(SINGLE_PROBES) + len(names)
    assert total >= 150 + len(names)  # at least 150 with the earlier rounds, this round added on top


# --------------------------------------------------------------------------- concurrency


ROUNDS = 200


def _tagged_study(tag: str, rows: int = 3000) -> StudyResult:
    """A study whose every table names ``tag`` (a load mixing two saves shows two tags)."""
    keys = [f"{tag}:{i}" for i in range(rows)]
    queries = pd.DataFrame({"qkey": keys, "subset": tag, "query": tag, "candidates": [[tag]] * rows,
                            "relevant": [[tag]] * rows})
    stubs = pd.DataFrame({"qkey": keys, "run": 0, "stub_idx": 0, "name": tag, "reasoning": tag,
                          "fell_back": False})
    rankings = pd.DataFrame({"qkey": keys, "method": "rtp", "run": 0, "rank": 1, "row": 0, "api_id": tag,
                             "score": np.linspace(0, 1, rows)})
    text_rankings = rankings.assign(text_idx=0, api_id=f"{tag}-text")
    plans = pd.DataFrame({"qkey": keys, "method": tag})
    calls = pd.DataFrame({"qkey": keys, "stage": tag})
    return StudyResult(queries, stubs, rankings, text_rankings, plans, calls, {"tag": tag})


def _tags(study: StudyResult) -> set[str]:
    return ({study.provenance["tag"]} | set(study.queries["subset"]) | set(study.stubs["name"])
            | set(study.rankings["api_id"]) | {a.removesuffix("-text") for a in study.text_rankings["api_id"]}
            | set(study.plans["method"]) | set(study.calls["stage"]))


def _saver(folder: str, tag: str, rounds: int) -> None:
    study = _tagged_study(tag)
    for _ in range(rounds):
        study.save(Path(folder))


def _loader(folder: str, rounds: int, queue) -> None:
    mixed = damaged = loaded = 0
    for _ in range(rounds):
        try:
            tags = _tags(StudyResult.load(Path(folder)))
        except StoredStudyError:
            damaged += 1
            continue
        loaded += 1
        mixed += len(tags) != 1
    queue.put((loaded, mixed, damaged))


def test_two_savers_and_a_loader_never_mix_or_lose_a_study(tmp_path):
    folder = tmp_path / "runs" / "study"
    _tagged_study("A").save(folder)  # the loader starts on a complete folder
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_saver, args=(str(folder), tag, ROUNDS)) for tag in ("A", "B")]
    procs.append(ctx.Process(target=_loader, args=(str(folder), ROUNDS, queue)))
    for p in procs:
        p.start()
    loaded, mixed, damaged = queue.get(timeout=600)
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0
    final = StudyResult.load(folder)  # the folder survives: it passes its checksums
    print(f"\nconcurrency: {ROUNDS} rounds x 2 savers, {loaded} loads: {mixed} mixed, {damaged} damaged")
    assert (mixed, damaged) == (0, 0) and loaded == ROUNDS
    assert len(_tags(final)) == 1
    assert not [p for p in folder.parent.iterdir() if p.name.endswith((".tmp.d", ".tmp"))]


# --------------------------------------------------------------------------- round five: text stays text

# Invisible format characters (bidirectional, zero-width, tags), listed here, not read from the code.
CONTROL_CHARS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C,
                                  *range(0x200B, 0x200E), *range(0x2060, 0x2065), 0xFEFF, 0x00AD, 0x180E,
                                  *range(0xFFF9, 0xFFFC), 0xE0001, *range(0xE0020, 0xE0080))]  # tags too
BIDI_QUERY = "find hotels \u202egnp.exe\u202c in \u2067Paris\u2069 now\u200b\u200d\ufeff"
BIDI_STUB = "Get\u2066Hotel\u2069\u200e"
BIDI_REASON = "because\u2060 \u061creason\u200f\u202a\u202b\u202d\u2068\u200c"


def no_controls(text: str) -> bool:
    """Whether ``text`` holds none of :data:`CONTROL_CHARS`."""
    return not any(c in text for c in CONTROL_CHARS)


def bidi_study() -> StudyResult:
    """The hand study with bidirectional and zero-width controls in a query, a stub name and its reasoning."""
    study = hand_study()
    q = study.queries.copy()
    q.loc[0, "query"] = BIDI_QUERY
    s = study.stubs.copy()
    first = s.index[(s["qkey"] == q.loc[0, "qkey"]) & (s["run"] == 0)][0]
    s.loc[first, ["name", "reasoning"]] = [BIDI_STUB, BIDI_REASON]
    return with_tables(study, queries=q, stubs=s)


def case_bidi_markdown_shown_as_escapes(tmp: Path) -> str:
    every = "".join(CONTROL_CHARS)
    for written in (md_text(every), md_code(every), md_table(pd.DataFrame({"q": [every], "n": [1]}))):
        assert no_controls(written), ascii(written)
    shown = BeautifulSoup(render(f"> {md_text(BIDI_QUERY)}\n\n1. {md_code(BIDI_STUB)}\n"), "lxml").get_text()
    assert "\\u202e" in shown and "\\u2067" in shown and "\\u200b" in shown and "\\u2066" in shown
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "hi")  # text in tag characters, invisible
    assert md_text(f"ok{hidden}") == "ok\\\\U000e0068\\\\U000e0069"
    return "correct"


def case_bidi_teaching_and_saved_table(tmp: Path) -> str:
    from toolbench_lib.report.teaching import worked_query, worked_query_markdown
    from toolbench_lib.study.experiment import ExperimentConfig, save_table

    study = bidi_study()
    lines = worked_query_markdown(worked_query(study, study.queries["qkey"].iloc[0], k=2),
                                  labels={"a": BIDI_STUB, "x": BIDI_REASON})
    cfg = ExperimentConfig.build(run_name="pytest_reliability_bidi", outputs_dir=str(tmp / "out"))
    examples = pd.DataFrame({"stub": [BIDI_STUB], "reasoning": [BIDI_REASON], "n": [1]})
    save_table(examples, "stub_examples", cfg)
    saved = (cfg.tables_dir / "stub_examples.md").read_text()
    assert no_controls("\n".join(lines)) and no_controls(saved), ascii(saved)
    assert "\\u202e" in BeautifulSoup(render("\n".join(lines)), "lxml").get_text()  # shown, not dropped
    return "correct"


def case_bidi_explorer_html(tmp: Path) -> str:
    from toolbench_lib.explorer.widget import QueryExplorer

    study = bidi_study()
    ex = QueryExplorer(None, study)
    ex.labels = {str(a): BIDI_STUB for a in study.rankings["api_id"]}
    ex.subset.value = "all"
    ex.select(str(study.queries["qkey"].iloc[0]))
    page = f"{ex.count.value}{ex.message.value}{ex.grid.value}{ex.render()}"
    options = " ".join(label for label, _ in ex.query.options)
    assert no_controls(page) and no_controls(options), ascii(page)
    assert "\\u202e" in BeautifulSoup(page, "lxml").get_text() and "\\u202e" in options
    ex.family_queries = {"other": pd.DataFrame({"qkey": [f"G1:{BIDI_STUB}"], "subset": ["G1"],
                                                "query_id": ["1"], "query": ["zebra crossings"]})}
    ex.search.value = "zebra"  # found in the other study alone: said where, its key's controls shown
    assert "qx-elsewhere" in ex.message.value and no_controls(ex.message.value), ascii(ex.message.value)
    return "correct"


def case_bidi_report_html(tmp: Path) -> str:
    pages = [markdown_page(f"# Report\n\n> {md_text(BIDI_QUERY)}\n\nraw: {BIDI_REASON}\n", tmp),
             sanitise_html(f"<p>{BIDI_QUERY}</p>"),
             sanitise_html(f"<td title='{BIDI_STUB}'>{BIDI_QUERY}</td>")]
    assert all(no_controls(p) for p in pages), [ascii(p) for p in pages]
    assert all("\\u202e" in p or "\\u2066" in p for p in pages)
    return "correct"


def _text_column_case(text: str) -> Callable[[Path], str]:
    def case(tmp: Path) -> str:
        df = pd.DataFrame({"id": [text, "0.5"], "recall": [0.5, 0.125]})  # every cell of "id" looks numeric
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in md_table(df).splitlines()]
        assert [r[0] for r in rows[2:]] == [text, "0.5"]  # as written
        assert [float(r[1]) for r in rows[2:]] == df["recall"].tolist()  # the numeric column still numbers
        return "correct"
    return case


def case_saved_table_keeps_text_columns(tmp: Path) -> str:
    from toolbench_lib.study.experiment import ExperimentConfig, save_table

    cfg = ExperimentConfig.build(run_name="pytest_reliability_text", outputs_dir=str(tmp / "out"))
    save_table(pd.DataFrame({"code": ["007", "1e5", "0.10"], "n": [1, 2, 3]}), "codes", cfg)
    rows = (cfg.tables_dir / "codes.md").read_text().splitlines()[2:]
    assert [r.strip("|").split("|")[0].strip() for r in rows] == ["007", "1e5", "0.10"]
    return "correct"


# --------------------------------------------------------------------------- round five: the explorer's views


def case_views_folder_replaced_by_a_file(tmp: Path) -> str:
    from toolbench_lib.data.paths import OUTPUTS_DIR
    from toolbench_lib.explorer.widget import QueryExplorer

    name = f"pytest-views-file-{os.getpid()}"
    run = OUTPUTS_DIR / name
    folder = run / "runs" / "study"
    try:
        hand_study().save(folder)
        (folder / "views").write_text("not a folder")
        with pytest.raises(Exception) as info:
            QueryExplorer.from_run(name, outputs_dir=run)
        said = str(info.value)
        assert not isinstance(info.value, FileExistsError) and "\n" not in said, said
        assert str(folder / "views") in said and "remove it" in said and "cache" in said
        page = QueryExplorer.for_page(name)
        assert page.value.startswith("<p class='qx-error' role='alert'>explorer: ")
        assert "remove it" in page.value and "\n" not in page.value
        out = _explore_app("--run-name", name, "--port", "1")
        lines = out.stderr.strip().splitlines()
        assert out.returncode != 0 and "Traceback" not in out.stderr and "serving" not in out.stdout
        assert len(lines) == 1 and str(folder / "views") in lines[0] and "remove it" in lines[0], out.stderr
        assert (folder / "views").read_text() == "not a folder"  # not the explorer's to remove
    finally:
        shutil.rmtree(run, ignore_errors=True)
    return "clear error"


# --------------------------------------------------------------------------- round five: failed checks


def _reproduce(*args: str) -> subprocess.CompletedProcess:
    return run_cli(["reproduce", *args], env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)


def case_failed_report_check_fails_reproduce(tmp: Path) -> str:
    """A notebook saves an appendix table too large for the report: ``reproduce`` exits 1 and names the
    failed check on the console, one line, instead of exiting 0."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from toolbench_lib.data.paths import OUTPUTS_DIR
    from toolbench_lib.report.checks import MAX_REPORT_BYTES

    rows = MAX_REPORT_BYTES // 30  # about 40 bytes a row: the report is well over the limit
    cells = [new_code_cell('run_name = "default"\nsmoke = False', metadata={"tags": ["parameters"]}),
             new_code_cell("import pandas as pd\n"
                           "from toolbench_lib.study.experiment import ExperimentConfig, save_table\n"
                           "cfg = ExperimentConfig.build(run_name=run_name, smoke=smoke)\n"
                           f"names = [f'method {{i}} of a long list of methods' for i in range({rows})]\n"
                           "save_table(pd.DataFrame({'method': names, 'n': range(len(names))}), "
                           "'retriever_costs', cfg)")]
    nbformat.write(new_notebook(cells=cells), tmp / "01_costs.ipynb")
    name = f"pytest-report-check-{os.getpid()}"
    try:
        out = _reproduce("--run-name", name, "--notebooks-dir", str(tmp))
        report = OUTPUTS_DIR / name / "report.md"
        assert report.stat().st_size > MAX_REPORT_BYTES  # the run wrote the report, then checked it
    finally:
        shutil.rmtree(OUTPUTS_DIR / name, ignore_errors=True)
    failed = [ln for ln in out.stderr.splitlines() if ln.startswith("error: report check failed: ")]
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert len(failed) == 1 and f"bytes (at most {MAX_REPORT_BYTES:,})" in failed[0], out.stderr[-2000:]
    return "clear error"


def case_none_read_only_as_a_value(tmp: Path) -> str:
    from toolbench_lib.report.checks import check_report

    front = ["# Report", "", "## The question and the answer", "", "None of the paper's 8 numbers is here.",
             "", "### Limits of this reproduction", "", "- **Dense:** no test.", ""]
    assert check_report("\n".join(front), {}, [], []) == []
    for value in ("| recall | None |", "p = None", "CI [None, 0.5]"):
        problems = check_report("\n".join([*front, "## Results", "", value, ""]), {}, [], [])
        assert problems == ["a missing value in the text: ['None']"], (value, problems)
    return "correct"


# --------------------------------------------------------------------------- round five: unclear errors


def case_ltr_on_one_query_per_set(tmp: Path) -> str:
    """``evaluate --method ltr --limit 1``: the learned ranker's cross-fitting on one query per design set."""
    from toolbench_lib.retrieval import ltr
    from toolbench_lib.retrieval.ltr_features import study_runs

    from .test_ltr import synthetic_study

    study = synthetic_study(n_per_set=1)
    spec = ltr.NAMED["ltr"]
    with pytest.raises(ValueError) as info:
        ltr.ltr_rankings(study_runs(study, spec), study.queries, spec)
    said = str(info.value)
    assert "\n" not in said and "--limit" in said and "n_splits" not in said, said
    assert all(f"{s} 1" in said for s in study.queries["subset"].unique()), said
    two = synthetic_study(n_per_set=2)  # the smallest input that cross-fits
    assert len(ltr.ltr_rankings(study_runs(two, spec), two.queries, spec)[0]) == len(two.queries)
    return "clear error"


def case_stored_ranker_without_its_json(tmp: Path) -> str:
    from toolbench_lib.retrieval import ltr
    from toolbench_lib.retrieval.ltr_features import feature_table, study_runs

    from .test_ltr import synthetic_study

    study = synthetic_study(n_per_set=4)
    spec = ltr.NAMED["ltr-nollm"]
    table = feature_table(study_runs(study, spec), spec, ltr.qrels_of(study.queries, ltr.LABEL_GT))
    sets = study.queries.set_index("qkey")["subset"].to_dict()
    ltr.save_model(ltr.fit(table, spec, table.queries, sets), tmp / "ltr", "ltr-nollm")
    assert ltr.load_model(tmp / "ltr", "ltr-nollm")[1]["name"] == "ltr-nollm"
    (tmp / "ltr" / "ltr-nollm.json").unlink()
    with pytest.raises(ltr.StoredModelError) as info:
        ltr.load_model(tmp / "ltr", "ltr-nollm")
    said = str(info.value)
    assert "\n" not in said and str(tmp / "ltr" / "ltr-nollm.json") in said and "missing" in said, said
    return "clear error"


def case_export_onto_a_full_disk(tmp: Path) -> str:
    """``export trec`` when the disk fills up midway (every write into the export's temporary folder fails
    with ENOSPC, as the OS reports it): one line naming the file and ``--out``, which is left as it was."""
    import contextlib
    import errno
    import io

    from toolbench_lib.cli import main
    from toolbench_lib.data.paths import OUTPUTS_DIR

    name = f"pytest-export-full-{os.getpid()}"
    out = tmp / "trec"
    hand_study().save(OUTPUTS_DIR / name / "runs" / "study")
    export_trec(hand_study(), out)  # an earlier export, which must stay
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    write_text = Path.write_text

    def full_disk(self: Path, *args, **kwargs):
        if f".{out.name}." in str(self) and "runs" in self.parts:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(self, *args, **kwargs)

    err = io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
            mp.setattr(Path, "write_text", full_disk)
            code = main(["export", "trec", "--run-name", name, "--out", str(out)])
    finally:
        shutil.rmtree(OUTPUTS_DIR / name, ignore_errors=True)
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
    assert code != 0 and len(lines) == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    assert os.strerror(errno.ENOSPC) in lines[0] and str(out / "runs") in lines[0], lines[0]
    after = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before and not list(tmp.glob(f".{out.name}.*"))
    return "clear error"


# --------------------------------------------------------------------------- round five: signals


def _signal_case(sig: int, parallel: bool) -> Callable[[Path], str]:
    """``reproduce`` stopped by ``sig`` while notebooks run (``parallel``: two at once, after 01 and 02),
    as Ctrl-C does (SIGINT to the process group) or ``kill`` does (SIGTERM to the process): one line on the
    console and no kernel-side traceback, every kernel stopped at once (no cell runs after the signal), and
    no ``tbk-*``, ``toolbench-kernel-*`` or connection file left in its temporary folder."""

    def case(tmp: Path) -> str:
        import nbformat
        from nbformat.v4 import new_code_cell, new_notebook

        from toolbench_lib.data.paths import OUTPUTS_DIR

        nbs, temp, marks = tmp / "notebooks", tmp / "tmp", tmp / "marks"
        for folder in (nbs, temp, marks):
            folder.mkdir()
        sleeping = ["03_a", "04_b"] if parallel else ["01_a"]
        for name in ["01_a", "02_b", "03_a", "04_b"] if parallel else sleeping:
            body = "x = 1"
            if name in sleeping:  # prints as it goes (the kernel is sending output when it is stopped)
                body = (f"import os, sys, time\nopen({str(marks / name)!r}, 'w').write(str(os.getpid()))\n"
                        "for i in range(3000):\n    print(i, file=sys.stderr if i % 2 else sys.stdout)\n"
                        "    time.sleep(0.05)\n"
                        f"open({str(marks / (name + '.finished'))!r}, 'w').write('x')")
            cells = [new_code_cell('run_name = "default"\nsmoke = False', metadata={"tags": ["parameters"]}),
                     new_code_cell(body)]
            nbformat.write(new_notebook(cells=cells), nbs / f"{name}.ipynb")
        name = f"pytest-signal-{sig}-{os.getpid()}"
        command = ["reproduce", "--notebooks-dir", str(nbs), "--run-name", name, "--workers", "2"]
        proc = subprocess.Popen([sys.executable, "-m", "toolbench_lib", *command], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(temp), "HF_HUB_OFFLINE": "1"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            end = time.monotonic() + 300
            while not all((marks / n).exists() for n in sleeping) and proc.poll() is None \
                    and time.monotonic() < end:
                time.sleep(0.2)
            time.sleep(1)
            assert proc.poll() is None, proc.communicate()
            left_before = sorted(p.name for p in temp.iterdir())
            (os.killpg if sig == signal.SIGINT else os.kill)(proc.pid, sig)
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            shutil.rmtree(OUTPUTS_DIR / name, ignore_errors=True)
        assert any(n.startswith("tbk-") for n in left_before)  # the run had made its temporaries
        assert proc.returncode == 128 + sig, (proc.returncode, err)
        assert err.strip().splitlines() == [err.strip()] and err.startswith("error: "), err
        assert "Traceback" not in err and "ZMQError" not in err
        assert sorted(p.name for p in temp.iterdir()) == []  # tbk-*, toolbench-kernel-*, tmp*.json
        assert not [n for n in sleeping if (marks / f"{n}.finished").exists()]  # stopped, not waited for
        pids = [int((marks / n).read_text()) for n in sleeping]
        end = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < end:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in pids)  # no kernel left running
        return "correct"
    return case


# ---------------------------------------------------------------- round five: statistics and freshness


def case_constant_difference_is_not_testable(tmp: Path) -> str:
    from toolbench_lib.eval.stats import paired

    r = paired([0.2, 0.4], [0.5, 0.7])  # a constant +0.3 over 2 queries: t = 0, p = 0 before
    assert not r["testable"] and np.isnan(r["p"]) and "no variance" in r["note"]
    return "correct"


def case_nan_score_is_not_testable(tmp: Path) -> str:
    from toolbench_lib.eval.stats import paired

    r = paired([0.2, float("nan"), 0.4], [0.3, 0.5, 0.1])
    assert not r["testable"] and np.isnan(r["p"]) and "NaN" in r["note"]
    return "correct"


def case_one_query_has_no_ci(tmp: Path) -> str:
    from toolbench_lib.eval.stats import paired

    r = paired([0.2], [0.6])  # a zero-width CI [d, d] with no note before
    assert np.isnan(r["ci_low"]) and np.isnan(r["ci_high"]) and "1 query" in r["note"]
    return "correct"


def case_goal_on_one_query_per_set(tmp: Path) -> str:
    from toolbench_lib.analysis import fusion_board

    rows = [{"qkey": f"{s}:0", "subset": s, "method": m, "metric": "recall", "k": 5, "value": v}
            for s in ("G1", "G2") for m, v in (("rtp", 0.0), ("ptr", 0.0), ("rrf", 1.0))]
    goal = fusion_board.goal_table(pd.DataFrame(rows), 5).set_index("method")
    assert not goal.loc["rrf", "meets_goal"] and "the goal needs 10" in goal.loc["rrf", "goal_note"]
    return "correct"


def case_compare_a_method_with_itself(tmp: Path) -> str:
    from toolbench_lib.eval.compare import compare

    with pytest.raises(ValueError, match="two different methods"):
        compare(hand_study(), "rtp", "rtp")
    return "clear error"


def case_stored_study_follows_the_retrieval_code(tmp: Path) -> str:
    """A changed retrieval module changes the study key (the stored study is not reused); a changed analysis
    module does not."""
    from toolbench_lib.data import tables
    from toolbench_lib.study.experiment import STUDY_CODE

    from .test_freshness import _package_copy

    with pytest.MonkeyPatch.context() as mp:
        copy = _package_copy(tmp, mp)
        before = tables.code_hash(*STUDY_CODE)
        (copy / "analysis" / "report.py").write_text("# changed\n", encoding="utf-8")
        tables.code_hash.cache_clear()
        assert tables.code_hash(*STUDY_CODE) == before
        path = copy / "retrieval" / "rankings.py"
        path.write_text(path.read_text(encoding="utf-8").replace("-best[r]", "best[r]"), encoding="utf-8")
        tables.code_hash.cache_clear()
        assert tables.code_hash(*STUDY_CODE) != before
    tables.code_hash.cache_clear()
    return "correct"


def case_cassette_content_is_in_the_study_key(tmp: Path) -> str:
    from toolbench_lib.study.experiment import ExperimentConfig

    mine = tmp / "cassette.jsonl.gz"
    mine.write_bytes(b'{"stubs": "recorded"}\n')  # only its bytes enter the key
    cfg = ExperimentConfig.build(run_name="r", outputs_dir=str(tmp / "o"), cassette=str(mine))
    cfg._fingerprint = "fixed"  # the data folder's fingerprint is not what this row is about
    first = cfg.study_fields()["cassette_sha256"]
    edited = tmp / "edited.jsonl.gz"
    edited.write_bytes(mine.read_bytes()[:-1] + b"\0")
    other = ExperimentConfig.build(run_name="r", outputs_dir=str(tmp / "o"), cassette=str(edited))
    other._fingerprint = "fixed"
    assert other.study_fields()["cassette_sha256"] != first
    return "correct"


def case_teaching_edited_by_hand_is_stale(tmp: Path) -> str:
    from toolbench_lib.report import freshness

    out = tmp / "run"
    for rel in ("notebooks/02.ipynb", "teaching.md", "report_quantities.json"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("{}")
    freshness.write_manifest(out, {"02.ipynb": "k"})
    (out / "teaching.md").write_text("edited by hand")
    assert freshness.current_notebooks(out, {"02.ipynb": "k"}) == set()
    return "correct"


def case_learned_ranker_on_repeated_design_texts(tmp: Path) -> str:
    from toolbench_lib.retrieval import ltr

    from .test_ltr import DESIGN, _crossfit, synthetic_study

    study = synthetic_study((*DESIGN, "heldout"), n_per_set=10)
    q = study.queries
    q.loc[q["qkey"] == "heldout:2", "query"] = "query G1_instruction 2"
    _, cf = _crossfit(study, ltr.NAMED["ltr-nollm"])
    assert cf.leaked == ["heldout:2"]
    return "correct"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


ROUND_FIVE: list[tuple[str, Callable[[Path], str]]] = [
    ("bidi-controls-in-markdown", case_bidi_markdown_shown_as_escapes),
    ("bidi-controls-in-teaching-and-stub-examples", case_bidi_teaching_and_saved_table),
    ("bidi-controls-in-explorer", case_bidi_explorer_html),
    ("bidi-controls-in-report-html", case_bidi_report_html),
    ("md-table-text-007", _text_column_case("007")),
    ("md-table-text-1e5", _text_column_case("1e5")),
    ("md-table-text-0.10", _text_column_case("0.10")),
    ("saved-table-text-column", case_saved_table_keeps_text_columns),
    ("explorer-views-a-file", case_views_folder_replaced_by_a_file),
    ("report-check-fails-reproduce", case_failed_report_check_fails_reproduce),
    ("report-check-none-as-a-word", case_none_read_only_as_a_value),
    ("evaluate-ltr-limit-1", case_ltr_on_one_query_per_set),
    ("ltr-stored-model-json-removed", case_stored_ranker_without_its_json),
    ("export-trec-disk-full", case_export_onto_a_full_disk),
    ("reproduce-sigterm-temporaries", _signal_case(signal.SIGTERM, parallel=False)),
    ("reproduce-sigterm-two-notebooks-at-once", _signal_case(signal.SIGTERM, parallel=True)),
    ("reproduce-sigint-notebook-printing", _signal_case(signal.SIGINT, parallel=False)),
    ("reproduce-sigint-two-notebooks-at-once", _signal_case(signal.SIGINT, parallel=True)),
    ("stats-constant-difference", case_constant_difference_is_not_testable),
    ("stats-nan-score", case_nan_score_is_not_testable),
    ("stats-one-query-ci", case_one_query_has_no_ci),
    ("goal-one-query-per-set", case_goal_on_one_query_per_set),
    ("compare-a-equals-b", case_compare_a_method_with_itself),
    ("stored-study-after-a-retrieval-change", case_stored_study_follows_the_retrieval_code),
    ("cassette-edited-same-study-key", case_cassette_content_is_in_the_study_key),
    ("teaching-md-edited-by-hand", case_teaching_edited_by_hand_is_stale),
    ("ltr-design-texts-under-new-ids", case_learned_ranker_on_repeated_design_texts),
]


# The rows that run notebooks (a kernel each: "slow") and the one whose report reads the data folder.
ROUND_FIVE_TIERS: dict[str, tuple[str, ...]] = {
    "report-check-fails-reproduce": ("data", "slow"),
    **{name: ("slow",) for name, _ in ROUND_FIVE if name.startswith(("reproduce-sigterm",
                                                                     "reproduce-sigint"))},
}


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0], marks=[getattr(pytest.mark, m)
                                                                   for m in ROUND_FIVE_TIERS.get(c[0], ())])
                                  for c in ROUND_FIVE])
def test_round_five(case, tmp_path):
    name, run = case
    VERDICTS[name] = run(tmp_path)
    assert VERDICTS[name] in ("correct", "clear error", "repaired")


def test_round_five_table_is_whole():
    names = [name for name, _ in ROUND_FIVE]
    assert len(set(names)) == len(names) and not set(names) & {name for name, _ in ROUND_FOUR}
    assert set(ROUND_FIVE_TIERS) <= set(names)


def test_the_explorer_server_gets_no_llm_api_key(monkeypatch):
    """The explorer calls no LLM: its server and kernels start without the API key variables."""
    from toolbench_lib.explorer.app import voila_env
    from toolbench_lib.llm.gemini import API_KEY_ENV_VARS

    for name in API_KEY_ENV_VARS:
        monkeypatch.setenv(name, "secret-key-value")
    env = voila_env("default")
    assert not set(API_KEY_ENV_VARS) & set(env) and "secret-key-value" not in env.values()
    assert env["TOOLBENCH_EXPLORE_RUN"] == "default" and env["PATH"] == os.environ["PATH"]
