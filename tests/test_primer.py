"""The opening of teaching.md for a room new to the paper: the answer in plain words and which way each
substitution pushes PtR − RtP, every number from hand-written tables (each written once below)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.report.locate import TableCache
from toolbench_lib.report.primer import plain_words, substitution_lines, verdict


def _endpoint(**changed) -> pd.DataFrame:
    rows = [("G1_instruction", 0.350, 0.280, True, "RtP", 0.372, 0.289, "RtP", "reproduced"),
            ("G2_category_original", 0.130, 0.120, False, "RtP", 0.143, 0.188, "PtR", "not reproduced"),
            ("G3_instruction_original", 0.170, 0.230, True, "PtR", 0.160, 0.172, "PtR", "reproduced")]
    df = pd.DataFrame(rows, columns=["subset", "rtp", "ptr", "significant", "leader", "paper_rtp",
                                     "paper_ptr", "paper_leader", "verdict"]).assign(retriever="dense",
                                                                                      **changed)
    return df.assign(diff=df["ptr"] - df["rtp"])


def _tables(tmp_path: Path, **tables: pd.DataFrame) -> TableCache:
    tmp_path.mkdir(exist_ok=True)
    for name, table in tables.items():
        table.to_csv(tmp_path / f"{name}.csv", index=False)
    return TableCache(tmp_path)


EMBEDDER = pd.DataFrame(
    [(s, e, m, r, 2000, 50) for s, rows in {
        "G1": {("all-MiniLM-L6-v2", "rtp"): 0.60, ("all-MiniLM-L6-v2", "ptr"): 0.50,
               ("all-mpnet-base-v2", "rtp"): 0.62, ("all-mpnet-base-v2", "ptr"): 0.49},
        "G2": {("all-MiniLM-L6-v2", "rtp"): 0.30, ("all-MiniLM-L6-v2", "ptr"): 0.28,
               ("all-mpnet-base-v2", "rtp"): 0.30, ("all-mpnet-base-v2", "ptr"): 0.33}}.items()
     for (e, m), r in rows.items()],
    columns=["subset", "embedder", "method", "recall", "registry_size", "n_queries"])
DECOMPOSITION = pd.DataFrame(
    [(s, d, x, n)
     for s, (llm, rules) in {"G1": (-0.07, -0.06), "G2": (-0.01, 0.02), "G3": (0.06, 0.01)}.items()
     for d, x, n in (("llm", llm, 2.1), ("rules", rules, 4.1))],
    columns=["subset", "decomposer", "ptr_minus_rtp", "stubs_per_query"])


def test_plain_words_say_each_sets_shares_and_whether_they_stand_out(tmp_path):
    text = plain_words(_tables(tmp_path, primary_endpoint=_endpoint(),
                               data_sources=pd.DataFrame({"n_apis": [40000, 651]})))
    assert "among 40,651" in text
    assert "| requests | the paper: words / guesses | this run: words / guesses | this run's difference |" \
        in text
    assert "| G1 (one tool) | 37% / 29% | 35% / 28% | the request's own words do better |" in text
    assert "| G2 (tools of one category) | 14% / 19% | 13% / 12% | too close to call |" in text
    assert "| G3 (tools across categories) | 16% / 17% | 17% / 23% | the guesses do better |\n\nThe " \
        "paper's shares are on its own ground truth; that it counts `candidates` is this run's " \
        "hypothesis" in text
    assert "Of the APIs each request was written from (its `candidates`), the first five" in text
    assert "among" not in plain_words(_tables(tmp_path / "other", primary_endpoint=_endpoint()))
    # a CI this narrow detects the paper's +0.045 with 80% power: the missing lead is said to be informative
    narrow = plain_words(_tables(tmp_path / "narrow", primary_endpoint=_endpoint(ci_low=-0.02, ci_high=0.0)))
    assert ("| 13% / 12% | no lead for a small local model's guesses, though one of the paper's size would "
            "likely have shown; the paper's own guesses untested |") in narrow


def _tested(**changed) -> pd.DataFrame:
    """:func:`_endpoint` with the test's columns: Holm CI and p (G1 -0.070 [-0.100, -0.040], p = 0.0100)."""
    tested = {"ci_low": -0.09, "ci_high": -0.05, "ci_low_holm": -0.1, "ci_high_holm": -0.04, "p": 0.004,
              "p_holm": 0.01}
    return _endpoint(**{**tested, **changed})


def test_the_verdict_says_each_set_against_the_paper_in_one_line(tmp_path):
    text = verdict(_tables(tmp_path, primary_endpoint=_tested()), "tiny-llm")
    assert text == (
        "**The answer.** With dense retrieval and stubs written by a small local model (tiny-llm): "
        "retrieving first (RtP) finds more for one-tool requests (G1), as in the paper; planning first (PtR) "
        "shows none of the paper's lead for requests for tools of one category (G2); planning first (PtR) "
        "finds more for requests for tools across categories (G3), as in the paper. The paper's own stub "
        "writer (Gemini 2.5 Flash) and embedder (GTE-base) were not tested.\n\n"
        "**The verdict.** PtR − RtP in recall@5 on `candidates`, its Holm CI, then the paper's (from its "
        "means; its text states G1 -0.072, G2 +0.042):\n\n"
        "- **G1 (one tool):** RtP finds more, as in the paper: -0.070 [-0.100, -0.040] (paper -0.083).\n"
        "- **G2 (tools of one category):** with this run's stubs, the paper's lead for PtR does not appear: "
        "-0.010 [-0.100, -0.040], a CI that excludes the paper's +0.045.\n"
        "- **G3 (tools across categories):** PtR finds more, as in the paper: +0.060 [-0.100, -0.040] (paper "
        "+0.012).\n\n"
        "**What it rests on.**\n\n"
        "- Had this run's stubs produced a lead of the paper's size, it would have shown with 99% "
        "(G2_category_original) likelihood (power at p < 0.05, unadjusted).")
    assert verdict(_tables(tmp_path, primary_endpoint=_tested())).startswith(
        "**The answer.** With dense retrieval and this run's stubs: ")
    # G1 significant on candidates but not on relevant; G3 in the paper's direction, not significant
    rel = _tested(significant=False, p_holm=0.077)
    same = _tested(significant=[True, False, False], verdict=["reproduced", "not reproduced",
                                                              "same direction, not significant"])
    # the judge read from every plan of RtP and PtR, as the main section reads it: a kappa on the plans both
    # judges saw (``same``) does not make this judge's pass rates checkable
    judge = pd.DataFrame({"plans": ["all", "all", "same"], "subset": "G3", "method": ["rtp", "ptr", "rtp"],
                          "kappa": [0.06, 0.01, 0.5], "evidence_none": [100, 300, 25],
                          "solved_rate_none": [0.5, 0.7, 0.1]})
    text = verdict(_tables(tmp_path / "more", primary_endpoint=same, primary_endpoint_relevant=rel,
                           judge_validity=judge))
    assert ("- **G1 (one tool):** RtP finds more, as in the paper: -0.070 [-0.100, -0.040] (paper -0.083), "
            "on `candidates`; not significant on `relevant` (Holm, p = 0.0770).") in text
    assert "**What it rests on.**\n\n- Had" in text  # no check beside it: nothing more on G1
    assert ("- **G3 (tools across categories):** neither leads significantly in recall: +0.060 [-0.100, "
            "-0.040] (paper +0.012, *“does not reach significance”*); a test with 22% power at the paper's "
            "difference could hardly have told them apart, so it neither confirms nor contradicts the "
            "paper.") in text  # a null it could hardly have avoided is not said as agreement
    assert text.endswith("The paper's pass rates, with its PtR lead where recall has none (G3's, 0.820 "
                         "against 0.732), cannot be checked, since this run's judge calls 65% of plans that "
                         "name no needed API “Solved”.")  # (50 + 210) / 400
    assert "pass rates" not in verdict(_tables(tmp_path / "valid", primary_endpoint=same,
                                               judge_validity=judge.assign(kappa=0.5)))
    assert verdict(_tables(tmp_path / "none")) == (
        "**The verdict.** Not in this run: no `primary_endpoint` table (notebook 02 saves it).")
    # the shift from G1 as one test, in the paper's direction but not significant, and the embedder ablation
    shift = pd.DataFrame({"retriever": ["dense"], "second": ["G2_category_original"], "diff": [0.052],
                          "ci_low_holm": [-0.007], "ci_high_holm": [0.11], "p_holm": [0.0967], "p": [0.0483],
                          "paper_diff": [0.128]})
    text = verdict(_tables(tmp_path / "shift", primary_endpoint=_tested(), primary_crossover=shift,
                           ablation_embedder=EMBEDDER))
    assert ("- G2's shift towards PtR from G1, +0.052, Holm CI [-0.007, 0.110], is in the paper's direction "
            "(paper +0.128) but not significant under Holm (p = 0.0967; unadjusted p = 0.0483).\n") in text
    assert "larger embedder" not in text  # one run, no CI of its change: the substitution table's only
    assert "shift" not in verdict(_tables(tmp_path / "sig", primary_endpoint=_tested(),
                                          primary_crossover=shift.assign(p_holm=0.01)))


def test_the_verdict_says_where_another_search_gives_the_guesses_the_lead(tmp_path):
    """The answer says where the same guesses lead significantly on G2 with BM25, beyond the paper; on G2
    both files are named where the G2_instruction table is saved; a lead that is not significant, or on a set
    the paper's lead holds on, says nothing."""
    sets = ["G2_category_original", "G3_instruction_original", "G2_category_original"]
    families = pd.DataFrame({"retriever": ["bm25", "bm25", "hybrid"], "subset": sets,
                             "significant": [True, True, False], "leader": ["PtR", "PtR", "PtR"]})
    text = verdict(_tables(tmp_path, primary_endpoint=_tested(), primary_endpoint_families=families))
    assert ("(G2); planning first (PtR) finds more for requests for tools across categories (G3), as in "
            "the paper. With the same stubs, word-matching (BM25) search, beyond the paper and exploratory, "
            "gives PtR a significant lead on G2. The paper's own stub writer") in text
    g2i = pd.DataFrame({"retriever": ["bm25"], "subset": ["G2_instruction"], "significant": [True],
                        "leader": ["PtR"]})
    both = verdict(_tables(tmp_path / "c", primary_endpoint=_tested(),
                           primary_endpoint_families=families, primary_endpoint_g2_instruction=g2i))
    assert "With the same stubs, word-matching (BM25) search in both G2 files, beyond the paper and " \
           "exploratory, gives PtR" in both
    one = verdict(_tables(tmp_path / "d", primary_endpoint=_tested(), primary_endpoint_families=families,
                          primary_endpoint_g2_instruction=g2i.assign(significant=False)))
    assert "With the same stubs, word-matching (BM25) search in one of them, beyond" in one
    # the coarser-cluster check backs the lead only with enough clusters for a t with G − 1 df to mean much
    for groups, said in ((12, True), (6, False)):
        coarse = families.assign(p_holm_tool_clusters_robustness=0.03,
                                 n_groups_tool_clusters_robustness=groups)
        text = verdict(_tables(tmp_path / f"g{groups}", primary_endpoint=_tested(),
                               primary_endpoint_families=coarse))
        assert ("also with queries sharing any tool in one cluster (BM25 p = 0.0300)" in text) is said
    quiet = verdict(_tables(tmp_path / "b", primary_endpoint=_tested(),
                            primary_endpoint_families=families.assign(significant=False)))
    assert quiet.endswith("likelihood (power at p < 0.05, unadjusted).")
    assert "same stubs" not in quiet


def test_a_missing_table_or_column_is_said_never_a_number(tmp_path):
    assert plain_words(_tables(tmp_path)) == (
        "Not in this run: no `primary_endpoint` table (notebook 02 saves it).")
    text = plain_words(_tables(tmp_path, primary_endpoint=_endpoint().drop(columns="paper_leader")))
    assert text.endswith("Not in this run: `primary_endpoint` has no paper_leader.")
    lines = substitution_lines(_tables(tmp_path, primary_endpoint=_endpoint()))
    assert "| embedder: MiniLM, not GTE-base | not in this run: no `ablation_embedder` table (notebook 11 " \
           "saves it) | | |" in lines


def test_each_substitution_moves_ptr_minus_rtp_towards_the_paper_past_it_or_away(tmp_path):
    """G1 with mpnet: PtR − RtP -0.13 against MiniLM's -0.10, a change of -0.03, from -0.07 here to -0.10:
    the paper's way (-0.083) but 0.017 from it against 0.013 before, past it. G2: +0.03 - (-0.02) = +0.05,
    from -0.01 to +0.04, towards the paper's +0.045. Breadth on G1: +0.01, to -0.06, away from it."""
    cache = _tables(tmp_path, primary_endpoint=_endpoint(), ablation_embedder=EMBEDDER,
                    ablation_decomposition=DECOMPOSITION)
    text = "\n".join(substitution_lines(cache))
    assert "is here G1 -0.070, G2 -0.010, G3 +0.060; in the paper G1 -0.083, G2 +0.045, G3 +0.012" in text
    embedder = next(line for line in text.splitlines() if line.startswith("| embedder"))
    assert "50 queries per set, a 2,000-API sub-registry" in embedder
    assert "| G1 -0.030, G2 +0.050" in embedder and "| G1 past it, G2 towards" in embedder
    assert "not in this run" in embedder  # G3 has no ablation row: said, never a number
    breadth = next(line for line in text.splitlines() if line.startswith("| stub breadth"))
    assert "(4.100 per G1 query) for the LLM's (2.100 in run 0;" in breadth
    assert "| G1 +0.010, G2 +0.030, G3 -0.050 | G1 away, G2 towards, G3 past it |" in breadth
    assert "| not tested: no second LLM ran | unknown | unknown |" in text
    tiny = DECOMPOSITION.assign(ptr_minus_rtp=DECOMPOSITION["ptr_minus_rtp"].where(
        ~((DECOMPOSITION["subset"] == "G1") & (DECOMPOSITION["decomposer"] == "rules")), -0.068))
    text = "\n".join(substitution_lines(_tables(tmp_path / "b", primary_endpoint=_endpoint(),
                                                ablation_decomposition=tiny)))
    assert "| G1 +0.002, G2 +0.030, G3 -0.050 | G1 none, G2 towards" in text  # under 0.005: no move at all


@pytest.mark.parametrize("subset, value, said", [("G2", 0.40, "G2 +0.120"), ("G2", 0.20, "G2 -0.080")])
def test_a_changed_ablation_value_changes_its_row(tmp_path, subset, value, said):
    table = EMBEDDER.copy()
    table.loc[(table["subset"] == subset) & (table["embedder"] == "all-mpnet-base-v2")
              & (table["method"] == "ptr"), "recall"] = value
    cache = _tables(tmp_path, primary_endpoint=_endpoint().iloc[:2], ablation_embedder=table)
    embedder = next(line for line in substitution_lines(cache) if line.startswith("| embedder"))
    assert said in embedder


def test_the_verdict_reads_both_g2_files_with_their_power(tmp_path):
    """The file whose ground truth fits the paper's G2 gets a row of its own in the table and a clause in the
    G2 sentence: PtR − RtP -0.001 [-0.036, 0.034] against the paper's +0.045 is seen with about 71%
    likelihood (the unadjusted CI's SE 0.0179: Φ(0.045 / 0.0179 − 1.96) = 0.71)."""
    g2i = pd.DataFrame([{"retriever": "dense", "subset": "G2_instruction", "rtp": 0.174, "ptr": 0.173,
                         "diff": -0.001, "ci_low": -0.036, "ci_high": 0.034, "p": 0.952, "significant": False,
                         "leader": "RtP", "paper_rtp": 0.143, "paper_ptr": 0.188, "paper_leader": "PtR",
                         "verdict": "not reproduced"}])
    cache = _tables(tmp_path, primary_endpoint=_tested(ci_low=-0.02, ci_high=0.0),
                    primary_endpoint_g2_instruction=g2i)
    assert ("| G2 (tools of one category) | 14% / 19% | 13% / 12% | no lead for a small local model's "
            "guesses, though one of the paper's size would likely have shown; the paper's own guesses "
            "untested |\n"
            "| G2, the file whose ground truth fits the paper's | 14% / 19% | 17% / 17% | too close to call "
            "|\n"
            "| G3") in plain_words(cache)
    said = verdict(cache)
    assert ("- **G2 (tools of one category):** with this run's stubs, the paper's lead for PtR does not "
            "appear in either G2 file: -0.010 [-0.100, -0.040], a CI that excludes the paper's +0.045, and "
            "-0.001 [-0.036, 0.034] (unadjusted) on G2_instruction, whose ground-truth size fits the "
            "paper's.") in said
    assert ("it would have shown with 100% (G2_category_original) and 71% (G2_instruction) likelihood (power "
            "at p < 0.05, unadjusted)") in said


def test_the_verdict_says_where_a_lead_holds_and_where_a_set_leans_on_one_api_sample(tmp_path):
    """G1's lead, lost on `relevant`, holds at temperature 0 alone and in further G1 files (an insignificant
    or non-G1 file is not named); G3, dominated by one cluster of 23 of its 100 queries, is read without it;
    G1 and G2, where none dominates (no such reading), are not."""
    robust = _tested(significant=[True, False, False], p_holm_run0_robustness=[0.0217, 0.9, 0.9],
                     diff_run0_robustness=[-0.072, 0.0, 0.01], n_queries=[163, 199, 100],
                     largest_cluster_n=[3, 2, 23], diff_no_largest_cluster_robustness=[-0.06, 0.0, 0.04],
                     ci_low_holm_no_largest_cluster_robustness=[-0.1, -0.03, -0.033],
                     ci_high_holm_no_largest_cluster_robustness=[-0.02, 0.03, 0.112],
                     p_holm_no_largest_cluster_robustness=[np.nan, np.nan, 0.398])
    beyond = pd.DataFrame({"subset": ["G1_category", "G1_tool", "G2_instruction", "G1_tool"],
                           "method": ["ptr", "ptr", "ptr", "ltr"], "recall_reference": ["rtp"] * 4,
                           "recall_diff": [-0.099, -0.064, -0.2, -0.1],
                           "recall_p_value": [0.0003, 0.0038, 0.01, 0.01]})
    text = verdict(_tables(tmp_path, primary_endpoint=robust, beyond_validation=beyond,
                           primary_endpoint_relevant=_tested(significant=False, p_holm=0.077)))
    assert ("- G1's lead holds at temperature 0 alone (run 0: -0.072, Holm p = 0.0217) and in two further "
            "G1 files (G1_category -0.099, p < 0.001; G1_tool -0.064, p = 0.00380; "
            "unadjusted).\n"
            "- One API sample holds 23 of G3's 100 queries: without it, PtR − RtP is +0.040, Holm CI "
            "[-0.033, 0.112], still not significant.\n") in text
    assert "of G2's" not in text and "of G1's" not in text
    flipped = verdict(_tables(tmp_path / "b", primary_endpoint=robust.assign(
        p_holm_no_largest_cluster_robustness=[np.nan, np.nan, 0.01]), primary_endpoint_relevant=_tested(
            significant=False, p_holm=0.077)))
    assert "without it, PtR − RtP is +0.040, Holm CI [-0.033, 0.112], then significant." in flipped
    assert "further G1 files" not in flipped  # no validation table: nothing said


def test_the_session_takes_the_verdict_from_the_report_only_between_its_markers():
    from toolbench_lib.report.primer import verdict_block

    md = "# R\n\n**The verdict.** A.\n\n- b\n\n**Words used below.** C."
    assert verdict_block(md) == "**The verdict.** A.\n\n- b"
    answered = md.replace("# R\n\n", "# R\n\n**The answer.** Z.\n\n")
    assert verdict_block(answered).startswith("**The answer.** Z.\n\n**The verdict.**")
    assert verdict_block(md.replace("**Words used below.**", "")) == ""  # no end: nothing, not the rest
    assert verdict_block("**Words used below.** C. **The verdict.** A.") == ""  # out of order


def test_the_answer_says_where_another_search_gives_the_missing_lead_and_the_stubs_what_they_are(tmp_path):
    """G2's missing lead, given by BM25 alone, is said in the answer; the stubs' line reads the echo, the
    brand words, the stub count and the rule splitter's shift (G2: +0.02 - (-0.01) = +0.03, towards)."""
    families = pd.DataFrame({"retriever": ["bm25"], "subset": ["G2_category_original"], "significant": [True],
                             "leader": ["PtR"]})
    echo = pd.DataFrame({"subset": ["G2_category_original"], "max_cos": [0.711]})
    text_ = pd.DataFrame({"subset": ["G2_category_original"] * 2, "variant": ["name+reasoning",
                                                                           "name+reasoning-brand"],
                          "recall": [0.124, 0.074]})
    stats = pd.DataFrame({"subset": ["G2_category_original"] * 2, "gt": ["candidates", "relevant"],
                          "stubs_per_query": [2.273, 9.0]})
    text = verdict(_tables(tmp_path, primary_endpoint=_tested(), primary_endpoint_families=families,
                           ablation_stub_echo=echo, ablation_stub_text=text_, stub_stats=stats,
                           ablation_decomposition=DECOMPOSITION))
    assert "planning first (PtR) shows none of the paper's lead for requests for tools of one category " \
           "(G2); " in text
    assert ". With the same stubs, word-matching (BM25) search, beyond the paper and exploratory, gives " \
           "PtR a significant lead on G2. The paper's own stub writer" in text
    assert ("- This run's stubs differ from the paper's: fewer (G2 2.273 per query against the paper's "
            "2.4–2.5), close to the request (the best one's cosine to it: G2 0.711), keeping its names "
            "(without its capitalised words, places included, PtR's run-0 recall falls from 0.124 to "
            "0.074 on G2), so this tests another PtR than the paper's; the one stub change tried, a rule "
            "splitter's more stubs, moved G2's difference by +0.030, towards the paper's (one run, "
            "unscaled, no CI).\n") in text
    assert "another PtR" not in verdict(_tables(tmp_path / "b", primary_endpoint=_tested(),
                                               ablation_stub_echo=echo))  # no brand-word ablation: nothing


def test_a_lead_lost_on_relevant_or_under_holm_over_every_family_is_said_where_it_is_claimed(tmp_path):
    """The G1 line says its lead holds on `candidates` only (the answer above it keeps to the primary
    endpoint), and adds Holm over every family's comparisons (the retriever study's column) where that loses
    it."""
    families = _tested().assign(p_holm_all_families_robustness=[0.0619, 0.6, 0.9])
    text = verdict(_tables(tmp_path, primary_endpoint=_tested(), primary_endpoint_families=families,
                           primary_endpoint_relevant=_tested(significant=False, p_holm=0.077)))
    assert "retrieving first (RtP) finds more for one-tool requests (G1), as in the paper;" in text
    assert ("(paper -0.083), on `candidates`; not significant on `relevant` (Holm, p = 0.0770) or under Holm "
            "over every family's comparisons (p = 0.0619).") in text
    kept = families.assign(p_holm_all_families_robustness=[0.03, 0.6, 0.9])
    g1 = next(line for line in verdict(_tables(tmp_path / "b", primary_endpoint=_tested(),
                                               primary_endpoint_families=kept)).splitlines()
              if line.startswith("- **G1"))
    assert "every family's" not in g1  # G1 keeps its lead under Holm over every family: nothing said


def test_a_lead_missed_on_candidates_that_shows_on_relevant_at_large_k_is_said(tmp_path):
    """G2's missed lead, positive on `relevant` at k = 20 with a CI above 0, is said with its growth from
    k = 1 and its Holm p; a CI holding 0, or `candidates` rows alone, say nothing."""
    k = pd.DataFrame({"subset": ["G2_category_original"] * 2, "gt": ["relevant", "candidates"], "k": 20,
                      "method": "ptr", "recall_gain": [0.062, 0.021], "recall_gain_ci_low": [0.020, -0.007],
                      "recall_gain_ci_high": [0.104, 0.049], "recall_gain_vs_k1": [0.064, 0.027],
                      "recall_gain_vs_k1_p_holm": [0.0114, 0.0852]})
    text = verdict(_tables(tmp_path, primary_endpoint=_tested(), k_ablation=k))
    assert ("- On `relevant`, the ground truth the paper's words name (a reading chosen after seeing the "
            "data), PtR's lead appears at large k: G2's k = 20 difference is +0.062 [0.020, 0.104] (paper "
            "+0.066; on `candidates` +0.021 [-0.007, 0.049]), grown from k = 1 by +0.064 (Holm over the sets "
            "only, p = 0.0114).\n") in text
    for name, table in (("b", k.assign(recall_gain_ci_low=-0.01)), ("c", k.assign(gt="candidates"))):
        quiet = verdict(_tables(tmp_path / name, primary_endpoint=_tested(), k_ablation=table))
        assert "words name" not in quiet
