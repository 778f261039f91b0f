"""Judge validity and the objective pass rate on a hand-built study, and re-judging recorded plans."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis.judge import (
    PASS_RATE_COLUMNS,
    confusion,
    equivalence_keys,
    fidelity_table,
    findings,
    judge_validity,
    kappa,
    ordering,
    pass_rate_table,
    plan_evidence,
)
from toolbench_lib.llm.cassettes import read_cassette
from toolbench_lib.llm.factory import DEFAULT_CASSETTE
from toolbench_lib.llm.prompts import judge_prompt
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.study.rejudge import cassette_plans, record_verdicts
from toolbench_lib.study.stored import StudyResult

from .hand_tables import study_of_hits

G1, G2 = "G1_instruction", "G2_category_original"


def _study(runs: int = 1) -> StudyResult:
    queries = pd.DataFrame([
        {"qkey": "q1", "subset": G1, "query": "a", "relevant": ["T/x/a", "T/x/b"],
         "candidates": ["T/x/a", "T/x/b", "T/x/c"]},
        {"qkey": "q2", "subset": G1, "query": "b", "relevant": ["T/y/a"], "candidates": ["T/y/a"]},
        {"qkey": "q3", "subset": G1, "query": "c", "relevant": ["T/z/a"], "candidates": ["T/z/a", "T/z/b"]},
        {"qkey": "q4", "subset": G2, "query": "d", "relevant": ["T/w/old"], "candidates": ["T/w/old"]},
    ])
    # (qkey, method): named ids, refusal, verdict of run 0
    plans0 = {
        ("q1", "rtp"): (["T/x/a", "T/x/b"], False, "Solved"),   # all
        ("q1", "ptr"): (["T/x/a"], False, "Solved"),            # some
        ("q2", "rtp"): (["T/q/q"], False, "Solved"),            # none, judged Solved
        ("q2", "ptr"): ([], True, "Unsolved"),                  # refusal: none
        ("q3", "rtp"): (["T/z/a", "T/z/b"], False, "Unsolved"), # all, judged Unsolved
        ("q3", "ptr"): (["T/z/b"], False, None),                # none, no verdict
        ("q4", "rtp"): (["T/w/new"], False, "Solved"),          # equivalent only with the registry
        ("q4", "ptr"): (["T/w/old"], False, "Solved"),          # all
    }
    rows = []
    for run in range(runs):
        for (q, m), (named, refusal, verdict) in plans0.items():
            v = verdict if run == 0 or (q, m) != ("q1", "rtp") else "Unsolved"
            rows.append({"qkey": q, "method": m, "run": run, "refusal": refusal, "parse_ok": True,
                         "n_steps": len(named), "named_ids": named, "steps_json": json.dumps(named),
                         "verdict": v, "judge_version": "judge-v1"})
    prov = {"settings": {"runs": runs, "k": 5, "methods": ["rtp", "ptr"]}}
    return study_of_hits(queries, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(rows), pd.DataFrame(), prov)


REGISTRY = pd.DataFrame([
    {"api_id": "T/w/old", "category": "T", "tool_name": "W", "api_name": "title/get-videos (Deprecated)"},
    {"api_id": "T/w/new", "category": "T", "tool_name": "W", "api_name": "title/v2/get-videos"},
    {"api_id": "T/w/other", "category": "T", "tool_name": "W", "api_name": "title/v2/get-awards"},
])


def test_evidence_and_objective_pass():
    ev = plan_evidence(_study()).set_index(["qkey", "method"])
    assert ev.loc[("q1", "rtp"), "evidence"] == "all" and ev.loc[("q1", "rtp"), "objective_pass"]
    assert ev.loc[("q1", "ptr"), ["evidence", "n_covered", "n_gt"]].tolist() == ["some", 1, 2]
    assert ev.loc[("q2", "rtp"), "evidence"] == "none"
    assert ev.loc[("q2", "ptr"), "evidence"] == "none" and not ev.loc[("q2", "ptr"), "objective_pass"]
    assert ev.loc[("q4", "rtp"), "evidence"] == "none"  # without a registry only the API itself counts
    with_reg = plan_evidence(_study(), registry=REGISTRY).set_index(["qkey", "method"])
    assert with_reg.loc[("q4", "rtp"), "evidence"] == "all"
    cand = plan_evidence(_study(), gt="candidates").set_index(["qkey", "method"])
    assert cand.loc[("q1", "rtp"), "evidence"] == "some"  # T/x/c is a candidate it does not name


def test_equivalence_keys_strip_versions_and_deprecation():
    keys = equivalence_keys(REGISTRY)
    assert keys["T/w/old"] == keys["T/w/new"] != keys["T/w/other"]


def test_confusion_and_validity():
    ev = plan_evidence(_study())
    table = confusion(ev).set_index("verdict")
    assert table.loc["Solved", ["all", "some", "none"]].tolist() == [2, 1, 2]
    assert table.loc["Unsolved", ["all", "some", "none"]].tolist() == [1, 0, 1]
    assert table.loc["none", "none"] == 1 and table["total"].sum() == 8
    v = judge_validity(ev).set_index(["subset", "method"])
    g1r = v.loc[("G1", "rtp")]
    assert (g1r["n_plans"], g1r["judged_pass_rate"], g1r["objective_pass_rate"]) == (3, 2 / 3, 2 / 3)
    assert g1r["solved_rate_none"] == 1.0 and g1r["solved_rate_all"] == 0.5
    # rtp on G1: verdicts S, S, U against objective 1, 0, 1 -> observed 1/3, expected 5/9
    assert g1r["kappa"] == pytest.approx((1 / 3 - 5 / 9) / (1 - 5 / 9))
    assert v.loc[("G1", "ptr"), "n_judged"] == 2 and np.isnan(v.loc[("G1", "ptr"), "solved_rate_all"])


def test_kappa_undefined_and_perfect():
    assert np.isnan(kappa(pd.Series(["Solved", "Solved"]), pd.Series([True, True])))
    assert np.isnan(kappa(pd.Series(["Solved"]), pd.Series([True])))
    assert kappa(pd.Series(["Solved", "Unsolved", None]), pd.Series([True, False, True])) == 1.0


def test_kappa_max_is_the_kappa_of_a_judge_that_passes_every_objective_pass_and_more():
    from toolbench_lib.eval.pass_rates import kappa_max

    objective = pd.Series([True] * 12 + [False] * 88)
    lenient = pd.Series(["Solved"] * 74 + ["Unsolved"] * 26)  # every objective pass, and 62 more
    assert kappa(lenient, objective) == pytest.approx(kappa_max(0.74, 0.12))
    assert kappa_max(0.74, 0.12) == pytest.approx(0.0914, abs=1e-4)
    shuffled = pd.Series(["Unsolved"] * 12 + ["Solved"] * 74 + ["Unsolved"] * 14)  # same rate, other plans
    assert kappa(shuffled, objective) < kappa_max(0.74, 0.12)
    assert kappa_max(0.3, 0.3) == 1.0 and np.isnan(kappa_max(1.0, 1.0))


def test_pass_rate_table_columns_and_values():
    table = pass_rate_table(_study(runs=2), registry=REGISTRY)
    assert list(table.columns[: len(PASS_RATE_COLUMNS)]) == PASS_RATE_COLUMNS
    assert len(table) == 2 * 2 * 2  # subsets x methods x runs
    row = table.set_index(["subset", "method", "run"]).loc[(G2, "rtp", 0)]
    assert (row["judged_pass_rate"], row["objective_pass_rate"], row["n_plans"]) == (1.0, 1.0, 1)
    g1 = table[(table["subset"] == G1) & (table["method"] == "rtp")].sort_values("run")
    assert g1["judged_pass_rate"].tolist() == [2 / 3, 1 / 3]  # run 1 judged q1 Unsolved
    assert (table["gt"] == "relevant").all() and (table["judge_version"] == "judge-v1").all()


def test_other_verdicts_replace_the_studys():
    other = pd.DataFrame([{"qkey": "q1", "method": "rtp", "run": 0, "verdict": "Unsolved",
                           "judge_version": "judge-v2"}])
    ev = plan_evidence(_study(), verdicts=other)
    assert ev[["qkey", "verdict", "judge_version"]].values.tolist() == [["q1", "Unsolved", "judge-v2"]]


def test_judge_v2_is_selectable_and_v1_stays_default():
    assert judge_prompt().version == "judge-v1"
    v2 = judge_prompt("judge-v2")
    prompt = v2.render(query="q", api_docs="[1] T / A (C): d", plan="1. T / A")
    assert prompt.startswith("# task: judge-v2\n") and "<apis>\n[1] T / A (C): d\n</apis>" in prompt
    with pytest.raises(ValueError, match="unknown judge prompt"):
        judge_prompt("judge-v9")


def test_recorded_plans_rejudged_with_v1_replay_the_recorded_verdicts():
    queries = pd.DataFrame([{"subset": s, "query": r}
                            for s, r in _first_queries_of_cassette(per_subset=3)])
    plans = cassette_plans(DEFAULT_CASSETTE, queries, per_subset=3)
    assert len(plans) == 2 * len(queries)  # both methods' plans of every query
    table = record_verdicts(plans, ReplayBackend(DEFAULT_CASSETTE), "judge-v1", progress=False)
    assert table["verdict"].notna().all() and table["cached"].all()
    assert table["position"].tolist()[:6] == [0, 0, 0, 0, 0, 0]  # subsets interleaved by position


def _first_queries_of_cassette(per_subset: int) -> list[tuple[str, str]]:
    """(subset, query) of queries with recorded plans, a few per pretend subset (no dataset needed)."""
    from toolbench_lib.llm.prompts import extract_section

    seen: list[str] = []
    for r in read_cassette(DEFAULT_CASSETTE):
        if r["prompt_version"] == "plan-v1":
            q = extract_section(r["prompt"], "query")
            if q not in seen:
                seen.append(q)
    subsets = ["G1_instruction", "G2_category_original", "G3_instruction_original"]
    return [(s, q) for i, s in enumerate(subsets) for q in seen[i * per_subset:(i + 1) * per_subset]]


def test_ordering_retests_the_paper_claims():
    ev = plan_evidence(_study(runs=2))
    table = ordering(ev).set_index(["subset", "pass_rate"])
    g1 = table.loc[("G1", "judged")]
    # judged pairs on G1: q1 (run 0: S/S, run 1: U/S), q2 (S/U) twice; q3 lacks PtR's verdict
    assert (g1["n_pairs"], g1["rtp_only"], g1["ptr_only"]) == (4, 2, 1)
    assert (g1["rtp"], g1["ptr"], g1["leader"], g1["holds"]) == (0.75, 0.5, "rtp", True)
    assert g1["p_value"] == pytest.approx(1.0)  # exact McNemar, 2 vs 1 discordant pairs
    obj = table.loc[("G1", "objective")]
    assert (obj["n_pairs"], obj["rtp"], obj["ptr"], obj["leader"]) == (6, 2 / 3, 0.0, "rtp")
    g2 = table.loc[("G2", "objective")]
    assert (g2["leader"], g2["paper_leader"], g2["holds"]) == ("ptr", "ptr", True)
    assert np.isnan(table.loc[("G2", "judged"), "p_value"])  # no discordant pair


def test_fidelity_table_strict_and_tolerant():
    s = _study()
    s.plans["named_ids_strict"] = [x[:1] for x in s.plans["named_ids"]]
    s.plans["fidelity_strict"] = [0.5 if x else None for x in s.plans["named_ids"]]
    s.plans["fidelity"] = [1.0 if x else None for x in s.plans["named_ids"]]
    s.plans["n_named_unresolved"] = 0
    t = fidelity_table(s).set_index(["subset", "method"])
    assert t.loc[("G1", "rtp"), ["fidelity_strict", "fidelity", "n_steps"]].tolist() == [0.5, 1.0, 5]
    assert t.loc[("G1", "rtp"), "resolved_strict"] == 3 / 5 and t.loc[("G1", "rtp"), "resolved"] == 1.0
    assert fidelity_table(_study()).empty  # a study stored before strict resolution was kept


def test_findings_are_written_from_the_tables():
    ev = plan_evidence(_study(runs=2))
    lines = findings(ev, ordering(ev))
    # 14 of 16 plans judged (q3's PtR plan never is), 9 Solved; objective: 3 of 8 plans per run pass
    assert lines[0].startswith("judge-v1: 14 plans judged, 0.64 rated Solved against an objective pass rate "
                               "of 0.38; kappa")
    assert "Solved for 0.67 of the 6 judged plans that name no ground-truth API" in lines[0]
    assert "G1, judged by judge-v1 pass rate: RtP 0.750 vs PtR 0.500 over 4 pairs" in lines[1]
    assert lines[1].endswith("paper: RtP ahead; the ordering matches at the point estimates only, not "
                             "significantly.")  # 4 pairs: McNemar cannot reach 0.05


def test_recorded_judge_versions_of_the_committed_cassette():
    from toolbench_lib.study.rejudge import recorded_judge_versions

    versions = recorded_judge_versions(DEFAULT_CASSETTE)
    assert versions.get("judge-v1", 0) >= 597
    assert set(versions) <= {"judge-v1", "judge-v2"}


def test_rejudge_command(ds, tmp_path, capsys):
    from toolbench_lib.study.rejudge import main

    out = tmp_path / "v.csv"
    data = ["--data-dir", str(ds.data_dir)]
    assert main(["--backend", "rules", "--per-subset", "1", "--out", str(out), *data]) == 0
    table = pd.read_csv(out)
    assert len(table) == 6 and set(table["judge_version"]) == {"judge-v2"}  # 3 sets x 2 methods
    assert main(["--backend", "rules", "--per-subset", "1", "--export", *data]) == 2
    assert "--export needs a live backend" in capsys.readouterr().err
    # an unknown set is one line, not an empty table; a bad count or output path is refused before judging
    assert main(["--backend", "rules", "--subset", "NOPE", *data]) == 2
    assert "unknown query set 'NOPE'" in capsys.readouterr().err
    for args, said in ((["--per-subset", "0"], "--per-subset: 0"), (["--out", str(tmp_path)], "not a file")):
        with pytest.raises(SystemExit) as exc:
            main(["--backend", "rules", *args, *data])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and said in err[0]


def test_coverage_and_lax_kappa():
    v = judge_validity(plan_evidence(_study())).set_index(["subset", "method"])
    # G1 PtR: q1 covers 1 of 2, q2 (refusal) and q3 none of 1 -> coverage (0.5 + 0 + 0) / 3
    assert v.loc[("G1", "ptr"), "coverage"] == pytest.approx(1 / 6)
    # G1 RtP: verdicts S, S, U; named some GT: yes, no, yes -> observed 1/3, expected 5/9
    assert v.loc[("G1", "rtp"), "kappa_any"] == pytest.approx((1 / 3 - 5 / 9) / (1 - 5 / 9))


def test_the_ceiling_is_the_share_of_plans_whose_prompt_listed_every_ground_truth_api():
    # q1 RtP's top 5 lists both relevant APIs; q2 RtP's lists its one; q3 RtP's lists another API only.
    hits = pd.DataFrame([
        {"qkey": q, "method": "rtp", "run": -1, "text_idx": -1, "rank": r, "row": 0, "api_id": a,
         "score": 1 / r}
        for q, ids in (("q1", ["T/x/b", "T/q/q", "T/x/a"]), ("q2", ["T/y/a"]), ("q3", ["T/z/b"]),
                       ("q4", ["T/w/new"]))
        for r, a in enumerate(ids, start=1)])
    study = _study()
    study = study_of_hits(study.queries, pd.DataFrame(), hits, study.plans, pd.DataFrame(), study.provenance)
    ev = plan_evidence(study).set_index(["qkey", "method"])
    assert ev.loc[("q1", "rtp"), "n_shown"] == 2 and ev.loc[("q3", "rtp"), "n_shown"] == 0
    assert np.isnan(ev.loc[("q1", "ptr"), "n_shown"])  # no PtR ranking: unknown, never 0
    v = judge_validity(plan_evidence(study)).set_index(["subset", "method"])
    assert v.loc[("G1", "rtp"), "ceiling"] == pytest.approx(2 / 3)
    assert v.loc[("G2", "rtp"), "ceiling"] == 0  # T/w/new is T/w/old's equivalent only with the registry
    assert judge_validity(plan_evidence(study, registry=REGISTRY)).set_index(
        ["subset", "method"]).loc[("G2", "rtp"), "ceiling"] == 1
    assert np.isnan(v.loc[("G1", "ptr"), "ceiling"])
