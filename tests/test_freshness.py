"""A warm run keeps a notebook's outputs only while its key and every recorded output file are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from toolbench_lib.bench.first_run import cold_cache, cpu_flags, notebook_seconds, simd_flags
from toolbench_lib.report import freshness
from toolbench_lib.retrieval.embed_store import text_keys, write_pack


def _run_folder(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    for rel, text in {"notebooks/02_main.ipynb": "{}", "tables/main.csv": "a,b\n1,2\n",
                      "figures/f.png": "png"}.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


def test_keys_and_checksums_decide_what_is_current(tmp_path):
    out = _run_folder(tmp_path)
    keys = {"02_main.ipynb": "k2", "03_k.ipynb": "k3"}
    assert freshness.current_notebooks(out, keys) == set()  # nothing recorded yet
    freshness.write_manifest(out, keys)
    assert freshness.current_notebooks(out, keys) == {"02_main.ipynb", "03_k.ipynb"}
    assert freshness.current_notebooks(out, {**keys, "03_k.ipynb": "other"}) == {"02_main.ipynb"}
    (out / "tables" / "main.csv").write_text("a,b\n1,3\n")  # a table changed after the run
    assert freshness.current_notebooks(out, keys) == set()
    freshness.write_manifest(out, keys)
    (out / "figures" / "f.png").unlink()  # a recorded output went missing
    assert freshness.current_notebooks(out, keys) == set()
    freshness.write_manifest(out, keys)
    (out / "notebooks" / freshness.MANIFEST).write_text("{not json")  # a corrupted record
    assert freshness.current_notebooks(out, keys) == set()


def test_manifest_merges_notebooks_run_apart(tmp_path):
    out = _run_folder(tmp_path)
    freshness.write_manifest(out, {"02_main.ipynb": "k2"})
    freshness.write_manifest(out, {"11_ablations.ipynb": "k11"})
    recorded = json.loads((out / "notebooks" / freshness.MANIFEST).read_text())["notebooks"]
    assert recorded == {"02_main.ipynb": "k2", "11_ablations.ipynb": "k11"}


def test_notebook_key_follows_file_parameters_study_and_code(tmp_path):
    nb = tmp_path / "02_x.ipynb"
    nb.write_text("{}")
    key = freshness.notebook_key(nb, {"runs": 1}, "study", "code")
    assert key == freshness.notebook_key(nb, {"runs": 1}, "study", "code")
    assert len({key, freshness.notebook_key(nb, {"runs": 2}, "study", "code"),
                freshness.notebook_key(nb, {"runs": 1}, "other", "code"),
                freshness.notebook_key(nb, {"runs": 1}, "study", "changed")}) == 4
    nb.write_text('{"cells": []}')
    assert freshness.notebook_key(nb, {"runs": 1}, "study", "code") != key


def test_code_fingerprint_changes_with_a_source_file(tmp_path):
    (tmp_path / "toolbench_lib").mkdir()
    src = tmp_path / "toolbench_lib" / "a.py"
    src.write_text("x = 1\n")
    before = freshness.code_fingerprint(tmp_path)
    src.write_text("x = 2\n")
    assert freshness.code_fingerprint(tmp_path) != before


def test_cold_cache_keeps_only_the_registry_vectors(tmp_path):
    store = tmp_path / "cache" / "embeddings" / "by-text" / "m" / "fp32-s256"
    store.mkdir(parents=True)
    vecs = np.eye(2, 4, dtype=np.float32)
    reg = write_pack(store, text_keys(["api a", "api b"]), vecs, {"kind": "registry"})
    write_pack(store, text_keys(["query a", "query b"]), vecs, {"kind": "queries"})
    (tmp_path / "cache" / "models").mkdir()
    (tmp_path / "cache" / "bm25").mkdir()
    cold = cold_cache(tmp_path / "cold", "m", tmp_path / "cache")
    kept = list((cold / "embeddings" / "by-text" / "m" / "fp32-s256").iterdir())
    assert [p.name for p in kept] == [reg.name] and kept[0].resolve() == reg.resolve()
    assert (cold / "models").is_symlink() and not (cold / "bm25").exists()


def test_cpu_flags_and_notebook_seconds():
    info = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert cpu_flags(info) == ["fpu", "sse4_2", "avx", "avx2", "fma", "avx512f"]
    assert simd_flags(cpu_flags(info)) == ["sse4_2", "avx", "avx2", "fma", "avx512f"]
    assert cpu_flags("no flags here") == []
    console = ("run r: 2 notebook(s)\n  01_data_prep.ipynb                      12.2 s\n"
               "  02_main_results.ipynb                    0.0 s\noutputs: /x\n")
    assert notebook_seconds(console) == {"01_data_prep.ipynb": 12.2, "02_main_results.ipynb": 0.0}


def _package_copy(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the package that ``code_hash`` reads instead of the installed one."""
    import shutil

    from toolbench_lib.data import tables

    copy = tmp_path / "toolbench_lib"
    shutil.copytree(tables.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(tables, "PACKAGE", copy)
    tables.code_hash.cache_clear()
    tables.code_closure.cache_clear()
    return copy


def test_a_code_change_reaches_exactly_what_depends_on_it(tmp_path, monkeypatch):
    """Each kind of stored result is keyed by the code that computes it: a changed retrieval module (a
    retriever, a fused method, the learned ranker) is a new study key part and a new analysis cache, but
    leaves the evaluation's key (eval's code) alone; a changed eval module is a new evaluation key; an
    analysis change leaves the study's and the evaluation's; the explorer's views follow the modules
    ``explorer/views.py`` imports (no analysis module, no comparison), so an analysis, report or page change
    leaves them fresh."""
    from toolbench_lib.data import tables
    from toolbench_lib.eval.evaluation import EVAL_CODE
    from toolbench_lib.explorer.views import views_code
    from toolbench_lib.study.experiment import STUDY_CODE

    copy = _package_copy(tmp_path, monkeypatch)
    keys = (lambda: tables.code_hash(*STUDY_CODE), lambda: tables.code_hash(*EVAL_CODE), tables.code_hash,
            views_code)
    before = tuple(k() for k in keys)
    for rel, changes in (("retrieval/rankings.py", (True, False, True, True)),
                         ("retrieval/fused.py", (True, False, True, True)),  # a study may hold fused methods
                         ("retrieval/ltr.py", (True, False, True, True)),  # ... and learned ones
                         ("eval/compare.py", (False, True, True, False)),  # the views read no comparison
                         ("analysis/fusion_board.py", (False, False, True, False)),
                         ("explorer/views.py", (False, False, True, True)),
                         ("explorer/widget.py", (False, False, True, False)),
                         ("report/front.py", (False, False, True, False))):
        path = copy / rel
        path.write_text(path.read_text() + "\n# changed\n")
        tables.code_hash.cache_clear()
        after = tuple(k() for k in keys)
        assert tuple(a != b for a, b in zip(before, after, strict=True)) == changes, rel
        before = after
    path = copy / "explorer" / "views.py"  # a new import joins the views' code
    path.write_text(path.read_text() + "\nfrom ..report import front  # noqa\n")
    tables.code_hash.cache_clear()
    tables.code_closure.cache_clear()
    assert "report/front.py" in tables.code_closure("explorer/views.py")
    tables.code_hash.cache_clear()
    tables.code_closure.cache_clear()


def test_cached_tables_are_made_again_after_a_code_change(tmp_path, monkeypatch):
    import pandas as pd

    from toolbench_lib.data import tables

    copy = _package_copy(tmp_path, monkeypatch)
    made = []

    def make():
        made.append(1)
        return {"t": pd.DataFrame({"a": [len(made)]})}

    first = tables.cached_tables(tmp_path / "cache", "k5", make)
    assert tables.cached_tables(tmp_path / "cache", "k5", make)["t"].equals(first["t"]) and len(made) == 1
    (copy / "analysis" / "retrievers.py").write_text("# another analysis\n")
    tables.code_hash.cache_clear()
    assert tables.cached_tables(tmp_path / "cache", "k5", make)["t"]["a"].iloc[0] == 2  # computed again
    # keyed by one module's code: a change outside what it imports keeps the tables, one inside remakes them
    assert tables.cached_tables(tmp_path / "cache", "k5", make, code="analysis/ltr.py")["t"]["a"].iloc[0] == 3
    for rel, made_again in (("report/front.py", False), ("retrieval/ltr_features.py", True)):
        (copy / rel).write_text((copy / rel).read_text() + "\n# changed\n")
        tables.code_hash.cache_clear()
        again = tables.cached_tables(tmp_path / "cache", "k5", make, code="analysis/ltr.py")["t"]["a"].iloc[0]
        assert (again == len(made) == 4) if made_again else again == 3, rel
    tables.code_hash.cache_clear()


def test_every_file_the_run_wrote_is_recorded(tmp_path):
    """teaching.md and report_quantities.json edited by hand make the run stale, like a table would; the
    stored studies (their own checksums) and lock files are not part of it."""
    out = _run_folder(tmp_path)
    for rel in ("teaching.md", "report_quantities.json", "runs/abc/rankings.parquet", "runs/abc/.lock"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text("x")
    keys = {"02_main.ipynb": "k2"}
    freshness.write_manifest(out, keys)
    files = json.loads((out / "notebooks" / freshness.MANIFEST).read_text())["files"]
    assert {"teaching.md", "report_quantities.json"} <= set(files)
    assert not any(f.startswith("runs") for f in files)
    for rel in ("teaching.md", "report_quantities.json"):
        freshness.write_manifest(out, keys)
        (out / rel).write_text("edited by hand")
        assert freshness.current_notebooks(out, keys) == set(), rel


def test_bench_first_run_writes_nothing_into_the_run_folder_it_times(tmp_path, monkeypatch):
    """A file the bench changed inside the timed run folder would make the warm pass rerun every notebook."""
    from toolbench_lib.bench import first_run

    seen = []

    def fake_pass(run_name, cache, workers, log):
        out = tmp_path / "outputs" / run_name
        seen.append(sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) if out.exists() else [])
        log.write("a pass's console\n")
        (out / "notebooks").mkdir(parents=True, exist_ok=True)
        return first_run.Pass(steps={"reproduce": 1.0}, notebooks={"02_main.ipynb": 1.0}, wall=1.0)

    monkeypatch.setattr(first_run, "OUTPUTS_DIR", tmp_path / "outputs")
    monkeypatch.setattr(first_run, "cold_cache", lambda folder: folder)
    monkeypatch.setattr(first_run, "timed_pass", fake_pass)
    table, path = first_run.bench_first_run("fresh")
    assert seen == [[], ["notebooks"]]  # no bench/ folder, no log, while either pass runs
    bench = tmp_path / "outputs" / "fresh" / "bench"
    assert path == bench / "first_run.md" and "02_main.ipynb" in table
    assert (bench / "first_run.log").read_text().count("a pass's console") == 2
