"""A user's own query sets: a file dropped into ``test_instruction/`` and ``--queries FILE`` from anywhere."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.data.dataset import load_dataset, sources_fingerprint, summary
from toolbench_lib.data.queries import (
    QueryFileError,
    UnknownSubsetError,
    available_sets,
    external_sets,
    query_file_sets,
    resolve_subset,
    shared_tool_groups,
    user_set_files,
)

CASSETTE = Path(__file__).resolve().parents[1] / "data" / "cassettes" / "local-qwen2.5-coder-1.5b.jsonl.gz"


def _g1(root: Path) -> list[dict]:
    return json.loads((root / "test_instruction" / "G1_instruction.json").read_text())


def _same_queries(a, b) -> None:
    cols = ["query_id", "query", "candidates", "relevant", "unresolved_candidates", "unresolved_relevant"]
    rows = [x[cols].reset_index(drop=True).to_dict("records") for x in (a, b)]
    assert rows[0] == rows[1]


def test_a_dropped_file_is_a_set_resolved_like_the_builtin_one(mini_toolbench, tmp_path):
    plain = load_dataset(mini_toolbench, processed_dir=tmp_path / "p")
    (mini_toolbench / "test_instruction" / "my_set.json").write_text(json.dumps(_g1(mini_toolbench)))
    assert "my_set" in available_sets(mini_toolbench) and list(user_set_files(mini_toolbench)) == ["my_set"]
    ds = load_dataset(mini_toolbench, processed_dir=tmp_path / "p")
    assert ds.fingerprint != plain.fingerprint  # a new source file: a new processed cache
    _same_queries(ds.subset_queries("my_set"), plain.subset_queries("G1"))
    # Its docs repeat the built-in set's, which are merged first: the registry is row for row the same.
    assert ds.registry["api_id"].tolist() == plain.registry["api_id"].tolist()
    s = summary(ds)
    assert s["subsets"]["my_set"] == s["subsets"]["G1_instruction"] == 2
    unresolved = s["unresolved_gt_pairs_by_subset"]
    assert unresolved["my_set"] == unresolved["G1_instruction"]


def test_a_file_from_anywhere_equals_the_same_file_dropped_in(mini_toolbench, tmp_path):
    outside = tmp_path / "elsewhere" / "my_set.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(_g1(mini_toolbench)))
    given = load_dataset(mini_toolbench, processed_dir=tmp_path / "p", query_files=[outside])
    assert given.stats["query_files"] == {"my_set": str(outside.resolve())}
    assert given.fingerprint == sources_fingerprint(mini_toolbench, {"my_set": outside.resolve()})
    (mini_toolbench / "test_instruction" / "my_set.json").write_text(outside.read_text())
    dropped = load_dataset(mini_toolbench, processed_dir=tmp_path / "p")
    _same_queries(given.subset_queries("my_set"), dropped.subset_queries("my_set"))
    assert given.registry["api_id"].tolist() == dropped.registry["api_id"].tolist()


def test_a_user_files_own_docs_join_the_registry(mini_toolbench, tmp_path):
    new_api = {"category_name": "Weather", "tool_name": "Storm Watch", "api_name": "Alerts",
               "api_description": "severe weather alerts", "required_parameters": [],
               "optional_parameters": [], "method": "GET"}
    f = tmp_path / "storms.json"
    f.write_text(json.dumps([{"query": "Any storm alerts for Lyon?", "query_id": 7, "api_list": [new_api],
                              "relevant APIs": [["Storm Watch", "Alerts"], ["Storm Watch", "Radar"]]}]))
    plain = load_dataset(mini_toolbench, processed_dir=tmp_path / "p")
    ds = load_dataset(mini_toolbench, processed_dir=tmp_path / "p", query_files=[f])
    assert len(ds.registry) == len(plain.registry) + 1
    row = ds.registry[ds.registry["tool_name"] == "Storm Watch"].iloc[0]
    assert row["source"] == "query_api_list" and "severe weather alerts" in row["doc_text"]
    q = ds.subset_queries("storms").iloc[0]
    assert list(q["candidates"]) == [row["api_id"]] and list(q["relevant"]) == [row["api_id"]]
    # The pair that names no API anywhere is reported, as for a built-in set.
    assert (q["unresolved_candidates"], q["unresolved_relevant"]) == (0, 1)
    assert summary(ds)["unresolved_gt_pairs_by_subset"]["storms"] == 1


def test_set_names_are_checked(mini_toolbench, tmp_path, caplog):
    folder = mini_toolbench / "test_instruction"
    (folder / "G1.json").write_text(json.dumps(_g1(mini_toolbench)))  # an alias: not a set
    (folder / "mine.json").write_text(json.dumps(_g1(mini_toolbench)))
    with caplog.at_level(logging.WARNING):
        assert list(user_set_files(mini_toolbench)) == ["mine"]
    assert "G1.json is not read as a query set" in caplog.text
    assert resolve_subset("mine", ["mine"]) == "mine" and resolve_subset("G1", []) == "G1_instruction"
    with pytest.raises(UnknownSubsetError, match="unknown query set 'nope'; known: .*mine"):
        resolve_subset("nope", ["mine"])
    with pytest.raises(UnknownSubsetError):
        resolve_subset("../G1")  # no plain name, even before the data is known
    for name, message in (("G1_instruction.json", "built-in query set"), ("mine.json", "data folder"),
                          ("a b.json", "not a plain set name")):
        (tmp_path / name).write_text("[]")
        with pytest.raises(ValueError, match=message):
            external_sets(mini_toolbench, [tmp_path / name])
    # The folder's own file given by path is that set, not a second one; one file given twice is one set,
    # two files of one name are refused.
    assert external_sets(mini_toolbench, [folder / "mine.json"]) == {}
    (tmp_path / "extra.json").write_text("[]")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "extra.json").write_text("[]")
    twice = [tmp_path / "extra.json", str(tmp_path / "sub" / ".." / "extra.json")]
    assert external_sets(mini_toolbench, twice) == {"extra": tmp_path / "extra.json"}
    with pytest.raises(ValueError, match="another --queries file"):
        external_sets(mini_toolbench, [tmp_path / "extra.json", tmp_path / "sub" / "extra.json"])
    assert query_file_sets(mini_toolbench, [folder / "mine.json", folder / "G1_instruction.json"]) == \
        ["mine", "G1_instruction"]
    ds = load_dataset(mini_toolbench, processed_dir=tmp_path / "p")
    with pytest.raises(UnknownSubsetError, match="unknown query set 'nope'"):
        ds.subset_queries("nope")


def _main(capsys, *args: str) -> tuple[int, str, str]:
    from toolbench_lib.cli import main

    code = main([*map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_data_summary_and_bad_files_are_one_line(mini_toolbench, tmp_path, capsys, monkeypatch):
    from toolbench_lib.data import dataset

    monkeypatch.setattr(dataset, "PROCESSED_DIR", tmp_path / "p")
    good = tmp_path / "mine.json"
    good.write_text(json.dumps(_g1(mini_toolbench)))
    code, out, err = _main(capsys, "data", "summary", "--json", "--data-dir", mini_toolbench,
                           "--queries", good)
    assert code == 0, err
    s = json.loads(out)
    assert s["subsets"]["mine"] == 2 and s["query_files"] == {"mine": str(good.resolve())}
    assert s["unresolved_gt_pairs_by_subset"]["mine"] == s["unresolved_gt_pairs_by_subset"]["G1_instruction"]
    bad = tmp_path / "bad.json"
    for content, words in (('{"query": "x"}', "holds a JSON object"), ("[1, 2]", "item 0"),
                           ("[{", "not valid JSON")):
        bad.write_text(content)
        code, _, err = _main(capsys, "data", "summary", "--data-dir", mini_toolbench, "--queries", bad)
        lines = [line for line in err.splitlines() if not line.startswith(("INFO", "WARNING"))]
        assert code == 2 and len(lines) == 1 and words in lines[0] and str(bad) in lines[0], err
    with pytest.raises(QueryFileError):
        load_dataset(mini_toolbench, processed_dir=tmp_path / "p", query_files=[bad])
    code, _, err = _main(capsys, "evaluate", "--data-dir", mini_toolbench, "--subset", "nope")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: --subset: unknown query set 'nope'")


# --------------------------------------------------------------------------- the numbers, on real data


@pytest.fixture()
def small_copy(real_data_dir, tmp_path):
    """Two real toolenv categories (linked) and the first 6 queries of G1, G2 and G3; its processed caches
    are removed afterwards."""
    from toolbench_lib.data.paths import PROCESSED_DIR

    root = tmp_path / "toolbench"
    (root / "toolenv" / "tools").mkdir(parents=True)
    for cat in ("Reward", "Storage"):
        (root / "toolenv" / "tools" / cat).symlink_to(real_data_dir / "toolenv" / "tools" / cat)
    for folder, stem in (("test_instruction", "G1_instruction"), ("test_instruction_original", "G2_category"),
                         ("test_instruction_original", "G3_instruction")):
        queries = json.loads((real_data_dir / folder / f"{stem}.json").read_text())[:6]
        (root / folder).mkdir(exist_ok=True)
        (root / folder / f"{stem}.json").write_text(json.dumps(queries))
    before = set(PROCESSED_DIR.glob("*"))
    yield root
    import shutil

    for made in set(PROCESSED_DIR.glob("*")) - before:  # this folder's caches only, never others' meanwhile
        stats = made / "stats.json"
        if stats.is_file() and json.loads(stats.read_text()).get("data_dir", "").startswith(str(root)):
            shutil.rmtree(made, ignore_errors=True)


def _numbers(result: dict) -> list[tuple]:
    return [(r["n_queries"], r["recall"], r["precision"], r["unresolved_gt_pairs"])
            for r in result["subsets"].values()]


@pytest.mark.model
@pytest.mark.parametrize("gt", ["candidates", "relevant"])
def test_evaluate_a_users_set_gives_the_builtin_sets_numbers(small_copy, tmp_path, capsys, gt):
    """The first 5 queries of G1 as a file from anywhere, and dropped into test_instruction/: the numbers of
    ``--subset G1 --limit 5`` (same sub-registry, same ground truth)."""
    common = ["evaluate", "--method", "rtp", "--data-dir", small_copy, "--model", "all-MiniLM-L6-v2",
              "--max-apis", "100", "--gt", gt, "--json"]
    mine = tmp_path / "my_first_five.json"
    mine.write_text(json.dumps(json.loads((small_copy / "test_instruction" / "G1_instruction.json")
                                          .read_text())[:5]))
    results = {}
    for label, extra in (("builtin", ["--subset", "G1", "--limit", "5"]), ("queries", ["--queries", mine])):
        code, out, err = _main(capsys, *common, *extra)
        assert code == 0, err
        results[label] = json.loads(out)
    (small_copy / "test_instruction" / mine.name).write_text(mine.read_text())
    code, out, err = _main(capsys, *common, "--subset", "my_first_five")
    assert code == 0, err
    results["dropped"] = json.loads(out)
    assert list(results["queries"]["subsets"]) == ["my_first_five"]
    assert results["builtin"]["subsets"]["G1"]["n_queries"] == 5
    assert _numbers(results["queries"]) == _numbers(results["dropped"]) == _numbers(results["builtin"])
    assert results["builtin"]["subsets"]["G1"]["recall"] > 0


def test_ltr_on_a_file_without_recorded_stubs_says_what_to_do_in_one_line(mini_toolbench, tmp_path, capsys,
                                                                          monkeypatch):
    """``evaluate --queries FILE --method ltr`` with the replay backend and no recording of the file's stubs:
    exit 2 and one line naming the miss and the choices (a live backend, or methods calling no LLM)."""
    from toolbench_lib.data import dataset

    monkeypatch.setattr(dataset, "PROCESSED_DIR", tmp_path / "p")
    mine = tmp_path / "mine.json"
    queries = [{**q, "query": f"{q['query']} (never recorded)"} for q in _g1(mini_toolbench)]
    mine.write_text(json.dumps(queries))
    code, _, err = _main(capsys, "evaluate", "--data-dir", mini_toolbench, "--queries", mine, "--subset",
                         "mine", "--method", "ltr", "--backend", "replay", "--runs", "1", "--plan-limit", "0",
                         "--depth", "5", "--model", "all-MiniLM-L6-v2", "--cassette", CASSETTE)
    lines = [line for line in err.splitlines() if line.startswith("error:")]  # (a progress bar is not one)
    assert code == 2 and len(lines) == 1, err
    assert "replay miss" in lines[0] and "--backend gemini or local" in lines[0] and "ltr-nollm" in lines[0]


def test_queries_linked_by_a_shared_tool_form_one_coarser_group():
    """a and b share tool t2, b and c share t3: one group; d has a tool of its own; e shares t1 with a but
    lies in another set."""
    q = pd.DataFrame({"qkey": ["a", "b", "c", "d", "e"], "subset": ["S", "S", "S", "S", "T"],
                      "candidates": [["C/t1/x", "C/t2/y"], ["C/t2/z", "D/t3/w"], ["D/t3/v"], ["C/t4/x"],
                                     ["C/t1/x"]]})
    groups = shared_tool_groups(q)
    assert groups["a"] == groups["b"] == groups["c"] == "a"  # named by its first query, whatever merged it
    assert len({groups["a"], groups["d"], groups["e"]}) == 3
    assert shared_tool_groups(q.iloc[[3]]) == {"d": "d"}
