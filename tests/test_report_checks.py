"""The checks over a written report: each one fails on the report defect it names."""

from __future__ import annotations

import math

from toolbench_lib.report.checks import (
    MAX_FRONT_WORDS,
    MIN_CAPTION_WORDS,
    check_captions,
    check_judged_rates,
    check_methods,
    check_paper_quotes,
    check_quantities,
    check_report,
    check_scored_rows,
    front_text,
    raw_floats,
    words,
)

CAPTION_OK = ("Recall against the budget k per set and architecture: where the curves cross the leader "
              "changes.")


def _report(front_extra: str = "", caption: str = CAPTION_OK, glossary: str = "- **`rtp`**: RtP.") -> str:
    return "\n".join([
        "# Report", "", "## The question and the answer", "", "Which first?", "",
        "| retriever | set | p |", "|---|---|---|", "| dense | G1 | p = 0.012 |", "", front_extra,
        "### Limits of this reproduction", "", "- **Dense:** RtP ahead on G1 (p = 0.012).", "",
        "## Main results", "", "`rtp` leads.", "", "![x](figures/k.png)", "", f"*Figure R1.* {caption}", "",
        "## Glossary", "", glossary, ""])


QUANTITIES = {"dense G1 p": "p = 0.012"}


def test_a_clean_report_passes():
    assert check_report(_report(), QUANTITIES, [], ["rtp", "ptr"]) == []
    assert front_text(_report()).rstrip().endswith("(p = 0.012).")


def test_two_values_for_one_quantity_fail():
    assert check_quantities(_report(), {"dense G1 p": ["p = 0.012", "p = 0.047"]})
    assert check_quantities(_report(), {"dense G1 RtP": "0.999"})  # a value the text does not hold
    assert check_report(_report(), {"dense G1 p": ["p = 0.012", "p = 0.047"]}, [], [])


def test_a_long_front_and_a_front_not_ending_in_its_limits_fail():
    long = " ".join(["word"] * (MAX_FRONT_WORDS + 1))
    assert any("words" in p for p in check_report(_report(long), QUANTITIES, [], []))
    moved = _report().replace("### Limits of this reproduction", "### Something else")
    assert any("does not end" in p for p in check_report(moved, QUANTITIES, [], []))


def test_short_captions_and_repeated_figures_fail():
    short = "Recall against k."
    assert words(short) < MIN_CAPTION_WORDS and check_captions(_report(caption=short))
    twice = _report() + f"\n![x](figures/k.png)\n\n*Figure R2.* {CAPTION_OK} Again.\n"
    assert check_captions(twice) == ["figure figures/k.png appears twice"]


def test_shared_captions_and_internal_ids_in_captions_fail():
    shared = _report() + f"\n![y](figures/other.png)\n\n*Figure R2.* {CAPTION_OK}\n"
    assert check_captions(shared) == ["figures 1 and 2 share one caption"]
    for caption, token in ((f"{CAPTION_OK} See `figure4`.", "`figure4`"),
                           (f"{CAPTION_OK} From figure4.", "figure4"),
                           (f"{CAPTION_OK} See scale_divergence.", "scale_divergence")):
        assert check_captions(_report(caption=caption)) == [
            f"figure 1: an internal id in its caption: {token}"], caption


def test_a_quote_of_the_paper_must_be_in_its_text():
    paper = "RtP leads all G1 metrics: recall 0.372 vs. 0.289."
    ok = _report("The paper's words: *“RtP leads all   G1 metrics”*.")
    assert check_paper_quotes(ok, paper) == [] and check_paper_quotes(ok, None) == []
    bad = _report("The paper's words: *“stubs echo the registry's naming”*. A query: \\*“not a quote”\\*.")
    assert check_paper_quotes(bad, paper) == ["a quote not in the paper: “stubs echo the registry's naming”"]
    assert "a quote not in the paper" in " ".join(check_report(bad, QUANTITIES, [], [], paper))


def test_a_judged_rate_outside_the_appendix_fails():
    row = {"id": "g1_rtp_pass_rate", "status": "not scored", "this_run": 0.05, "judged": 0.7123}
    shown = _report("| g1_rtp_pass_rate | G1 | 0.884 | 0.050 (objective) |")
    assert check_judged_rates(shown, [row]) == []
    judged = _report("| g1_rtp_pass_rate | G1 | 0.884 | 0.712 |")
    assert check_judged_rates(judged, [row]) == [
        "row g1_rtp_pass_rate: the judged rate 0.712 outside the appendix"]
    assert check_judged_rates(judged + "\n## Appendix B\n\n| g1_rtp_pass_rate | 0.712 |\n", [row]) != []
    assert check_judged_rates(shown + "\n## Appendix B\n\n| g1_rtp_pass_rate | 0.712 |\n", [row]) == []
    assert check_judged_rates(judged, [{**row, "status": "consistent"}]) == []  # a judge kappa high enough


def test_raw_numbers_fail_and_rounded_ones_pass():
    assert raw_floats("0.372, p = 0.00211, p < 0.001, 163 queries, torch 2.13.0, `0.123456`") == []
    assert raw_floats("p = 0.00210603, 1.99043e-05 and 12.3456") == ["0.00210603", "1.99043e-05", "12.3456"]
    problems = check_report(_report("Recall 0.37234."), QUANTITIES, [], [])
    assert any("a raw number" in p and "0.37234" in p for p in problems), problems


def test_scored_rows_need_a_ci_or_a_reason():
    ok = [{"id": "a", "status": "consistent", "ci_low": 0.1, "basis": ""},
          {"id": "b", "status": "differs", "ci_low": math.nan, "basis": "a count: no sampling"},
          {"id": "c", "status": "not scored", "ci_low": math.nan, "basis": ""}]
    assert check_scored_rows(ok) == []
    bad = [{"id": "d", "status": "differs", "ci_low": math.nan, "basis": ""}]
    assert check_scored_rows(bad) == ["row d has neither a CI nor a stated reason"]


def test_method_names_must_be_in_the_glossary():
    assert check_methods(_report(glossary="- **`ptr`**: PtR."), ["rtp", "ptr"]) == [
        "method 'rtp' is used but not in the glossary"]


def test_latex_and_bare_missing_values_fail():
    for text in ("0.31 {\\pm} 0.02", "p{<}0.001", "seed None"):
        assert check_report(_report(text), QUANTITIES, [], []), text


def test_escaped_values_count_as_written():
    report = _report().replace("| dense | G1 | p = 0.012 |", "| dense | G1 | p &lt; 0.001 \\[0.1, 0.2\\] |")
    assert check_quantities(report, {"dense G1 p": "p < 0.001", "dense G1 CI": "[0.1, 0.2]"}) == []


def test_the_scorecard_shows_the_objective_rate_where_the_judge_is_not_valid():
    import pandas as pd

    from toolbench_lib.data.markdown import md_table
    from toolbench_lib.report.rows import shown as _shown

    report = pd.DataFrame([
        {"id": "g1_rtp_pass_rate", "subset": "G1", "paper": "0.884", "this_run": 0.05, "judged": 0.7123,
         "metric": "pass_rate", "ci_low": float("nan"), "ci_high": float("nan"), "status": "not scored",
         "direction": "", "basis": "judge kappa 0.062 < 0.4", "cause_status": "", "cause": ""},
        {"id": "g1_rtp_recall", "subset": "G1", "paper": "0.372", "this_run": 0.401,
         "judged": float("nan"), "metric": "recall", "ci_low": 0.35, "ci_high": 0.45,
         "status": "consistent", "direction": "", "basis": "", "cause_status": "", "cause": ""}])
    table = md_table(_shown(report))
    assert "| n/a (the judge fails) |" in table and "objective rate, stricter: 0.050" in table
    assert "0.712" not in table and "judge kappa 0.062 &lt; 0.4" in table
    assert "0.401" in table and "0.350, 0.450" in table
    rows = report.to_dict("records")
    assert check_judged_rates(table, rows) == []


def test_a_wide_saved_table_is_narrowed_for_the_report():
    import pandas as pd

    from toolbench_lib.report.appendix import narrow

    nan = float("nan")
    wide = pd.DataFrame({"method": ["fuse4", "rtp"], "recall": [0.5981, 0.61], "recall_lo": [0.418, 0.5],
                         "recall_hi": [0.77, 0.7], "diff": [-0.018, nan], "diff_ci_low": [-0.072, 0.0],
                         "diff_ci_high": [0.044, 0.0], "note": [nan, nan], "p_value": [0.56, 0.1]})
    out = narrow(wide)
    assert list(out.columns) == ["method", "recall", "diff", "p_value"]
    assert out["recall"].tolist() == ["0.598 [0.418, 0.770]", "0.610 [0.500, 0.700]"]
    assert out["diff"].iloc[0] == "-0.018 [-0.072, 0.044]" and pd.isna(out["diff"].iloc[1])


def test_a_figure_s_alt_text_is_its_caption_s_title_with_no_parenthesis_left_open():
    from toolbench_lib.report.figures import FIGURES, alt_text

    assert alt_text("Recall per set (candidates), with 95% CIs: a bar.") == "Recall per set (candidates)"
    assert alt_text("Two embedders on one registry, the same stubs (hatched; the CI).") == (
        "Two embedders on one registry, the same stubs")
    assert alt_text("Plain title.") == "Plain title."
    for _, caption in FIGURES.values():
        alt = alt_text(caption)
        assert alt and alt.count("(") == alt.count(")") and len(alt) <= len(caption)


def test_a_figure_drawn_on_a_sample_of_its_own_says_which_in_its_caption(tmp_path):
    from types import SimpleNamespace

    import matplotlib.pyplot as plt
    import pandas as pd

    from toolbench_lib.report.figures import figures_markdown, scope_text

    cfg = SimpleNamespace(tables_dir=tmp_path / "tables", figures_dir=tmp_path / "figures", out_dir=tmp_path)
    cfg.tables_dir.mkdir()
    cfg.figures_dir.mkdir()
    plt.figure().savefig(cfg.figures_dir / "ablation_embedder.png")
    plt.close("all")
    assert scope_text(cfg, "ablation_embedder") == ""  # no table: nothing said
    pd.DataFrame({"subset": ["G1", "G2"], "n_queries": [50, 40], "registry_size": [2000, 2000]}).to_csv(
        cfg.tables_dir / "ablation_embedder.csv", index=False)
    caption = next(p for p in figures_markdown(cfg, "ablations") if p.startswith("*Figure"))
    assert caption.endswith("Its sample: 40–50 queries per set, a sub-registry of 2,000 APIs.")
    assert scope_text(cfg, "figure2") == ""


def test_the_report_lists_its_sections_in_one_line_outside_the_fronts_words():
    from toolbench_lib.report.checks import front_text, words
    from toolbench_lib.report.write import contents_line

    md = "# T\n\n## The question and the answer\n\nword word\n\n## Setup and data (§3)\n\nx\n"
    line = contents_line(md)
    assert line == ("**Contents.** [The question and the answer](#the-question-and-the-answer) · "
                    "[Setup and data](#setup-and-data-3)")
    assert words(front_text(md.replace("# T\n", f"# T\n\n{line}\n"))) == words(front_text(md)) == 8


def test_a_primary_p_value_stands_in_the_front_and_an_other_familys_in_the_report():
    from toolbench_lib.report.checks import check_p_values

    md = ("# R\n\n## The question and the answer\n\nDense: p = 0.0265.\n\n### Limits of this reproduction\n\n"
          "- x\n\n## Retriever families\n\nBM25: p = 0.271.\n")
    assert check_p_values(md, {"dense G1 p": "p = 0.0265", "bm25 G1 p": "p = 0.271"}) == []
    assert check_p_values(md, {"dense G1 p": "p = 0.271"}) == [
        "p-value 'dense G1 p' (p = 0.271) is not in the front"]
    assert check_p_values(md, {"bm25 G1 p": "p = 0.0440"}) == [
        "p-value 'bm25 G1 p' (p = 0.0440) is not in the report"]
    assert check_p_values(md, {"dense G1 p": ["p = 0.0265", "p = 0.0300"]}) == [
        "dense G1 p: ['p = 0.0265', 'p = 0.0300']"]  # two p-values for one comparison
