"""references/paper.yaml against the paper's text: every quote is verbatim, every number is in its quote."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import pytest
import yaml

from toolbench_lib.analysis.references import (
    NUMBER,
    REFERENCES_FILE,
    is_claim,
    load_references,
    paper_bounds,
    printed_rounding,
    quoted_numbers,
)
from toolbench_lib.report.rows import right_and_wrong

PAPER_TEXT = Path(__file__).resolve().parents[1] / ".." / "shared" / "paper" / "plan-or-retrieve-first.txt"

pytestmark = pytest.mark.skipif(not PAPER_TEXT.exists(), reason=f"the paper's text is not at {PAPER_TEXT}")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def number_in_quote(value: float, quote: str) -> bool:
    """``value`` is written in ``quote``, as itself or (for a quote in percent) as ``100 * value``."""
    return printed_rounding(value, quote) is not None



def paper_numbers(entry: Mapping) -> list[float]:
    """Every number an entry (or worked example) takes from the paper: its value or bounds, its std, and
    a worked example's two recalls."""
    if is_claim(entry):
        return []  # a claim of sign (PtR ahead) or of no change: its 0 is not a number the paper writes
    out = list(paper_bounds(entry["paper"]).values()) if "paper" in entry else []
    out += [float(entry[key]) for key in ("std", "ptr_recall", "rtp_recall") if key in entry]
    return out


def test_quoted_numbers_are_read_as_written():
    found = quoted_numbers("recall 0.372 vs. 0.289{\\pm}0.010 (p{=}0.002)")
    assert found == {0.372: 3, 0.289: 3, 0.010: 3, 0.002: 3}
    assert quoted_numbers("up to 4,455 APIs (Sports)") == {4455: 0}
    assert quoted_numbers("G1 (single-tool, n{=}200)") == {200: 0}  # the 1 of G1 is not a number
    assert number_in_quote(0.88, "from 88\\% at 1k") and not number_in_quote(0.88, "from 88 at 1k")
    assert printed_rounding(0.4, "a recall of 0.40") == 0.005 and printed_rounding(6.5, "6.5 steps") == 0.05
    assert printed_rounding(0.88, "from 88\\% at 1k") == 0.005 and printed_rounding(0.5, "0.49") is None
    assert number_in_quote(-0.072, "hurts (-0.072 recall)") and not number_in_quote(0.07, "(-0.072 recall)")


def test_every_quote_is_verbatim_in_the_paper_and_holds_its_numbers():
    paper = _collapse(PAPER_TEXT.read_text(encoding="utf-8"))
    refs = load_references()
    items = refs["entries"] + refs["worked_examples"]
    assert len(refs["entries"]) >= 60 and len(refs["worked_examples"]) == 10
    missing_quote = [e["id"] for e in items if _collapse(e["quote"]) not in paper]
    assert missing_quote == []
    unquoted = []
    for e in items:
        numbers = paper_numbers(e)
        assert numbers or e.get("ordering") or e.get("stable"), e["id"]
        unquoted += [(e["id"], v) for v in numbers if not number_in_quote(v, e["quote"])]
    assert unquoted == []


def test_the_misread_pairs_are_stored_in_the_papers_order():
    """The issue's misreadings: G3 steps / APIs named and the used share are PtR's first; refusals on
    complete misses are a G2 claim; cosines are G1's; stub hits are G1 and G3 separately."""
    by_id = {e["id"]: e for e in load_references()["entries"]}
    assert by_id["g3_ptr_steps"]["paper"] == 4.1 and by_id["g3_rtp_steps"]["paper"] == 3.6
    assert by_id["g3_ptr_apis_named"]["paper"] == 1.4 and by_id["g3_rtp_apis_named"]["paper"] == 1.1
    assert paper_bounds(by_id["g2_ptr_used_share"]["paper"]) == {"min": 0.27, "max": 0.29}
    assert paper_bounds(by_id["g2_rtp_used_share"]["paper"]) == {"min": 0.21, "max": 0.27}
    refusal = by_id["g2_rtp_refusal_on_miss"]
    assert refusal["subset"] == "G2" and refusal["paper"] == 0.47
    assert by_id["g2_ptr_refusal_on_miss"]["locator"]["where"]["subset"] == "G2"
    assert by_id["g1_stub_cos_correct"]["locator"]["where"]["subset"] == "G1"
    assert by_id["g1_stub_hit_share"]["paper"] == 0.406 and by_id["g3_stub_hit_share"]["paper"] == 0.248
    assert by_id["g1_ptr_precision"]["paper"] == 0.209 and by_id["g2_ptr_precision"]["paper"] == 0.204
    assert by_id["g3_ptr_recall"]["paper"] == 0.172 and by_id["g3_ptr_recall"]["std"] == 0.008
    assert by_id["g1_ptr_minus_rtp_recall"]["paper"] == -0.072
    assert by_id["g2_ptr_minus_rtp_recall"]["paper"] == 0.042
    # The routing savings are the by-subset policy's, not the top-1-cosine router's.
    assert "by_subset" in yaml.safe_dump(by_id["router_tokens_saved"]["locator"])
    assert "router_top1_cosine" not in REFERENCES_FILE.read_text()


def _position(value: float, quote: str) -> int:
    """Where ``value`` is first written in ``quote`` (as itself or in percent)."""
    for m in NUMBER.finditer(quote):
        f = abs(float(m.group().replace(",", "")))
        if abs(f - abs(value)) < 1e-9 or ("%" in quote and abs(f - 100 * abs(value)) < 1e-9):
            return m.start()
    raise AssertionError(f"{value} not in {quote!r}")


def test_pairs_follow_the_method_order_their_quote_states():
    """In a quote stating "PtR vs RtP", PtR's number is written before RtP's (and the other way round)."""
    by_quote: dict[str, list[dict]] = {}
    for e in load_references()["entries"]:
        if e.get("order") in ("PtR vs RtP", "RtP vs PtR") and e.get("method") in ("rtp", "ptr"):
            by_quote.setdefault(e["quote"], []).append(e)
    checked = 0
    for quote, group in by_quote.items():
        pos = {e["method"]: _position(min(paper_bounds(e["paper"]).values()), quote) for e in group}
        if set(pos) == {"rtp", "ptr"}:
            first, second = ("ptr", "rtp") if group[0]["order"] == "PtR vs RtP" else ("rtp", "ptr")
            assert pos[first] < pos[second], quote
            checked += 1
    assert checked >= 10


def test_worked_examples_name_a_query_or_say_why_not():
    examples = load_references()["worked_examples"]
    present = [x for x in examples if x.get("qkey")]
    assert len(present) >= 7
    for x in examples:
        assert x.get("qkey") or x.get("absent"), x["id"]
        assert x["winner"] in ("ptr", "rtp")
        assert (x["ptr_recall"] > x["rtp_recall"]) == (x["winner"] == "ptr")


def test_every_claim_summary_rests_on_words_of_the_paper():
    """Each section's claim in short carries the paper's own words, and each is verbatim in its text: the
    §4.4 claim says stubs are invented (not the registry's naming), the glossary's Intent-Registry Coupling
    is the query naming its API, and §5 quotes the top-1-cosine routing as the paper's proposal."""
    from toolbench_lib.report.checks import PAPER_QUOTE, check_paper_quotes
    from toolbench_lib.report.glossary import glossary_markdown
    from toolbench_lib.report.write import SECTIONS, paper_quotes

    paper = _collapse(PAPER_TEXT.read_text(encoding="utf-8"))
    shown = "\n".join([paper_quotes(quotes) for *_, quotes in SECTIONS] + [glossary_markdown(5)])
    assert all(quotes for *_, quotes in SECTIONS)
    assert len(PAPER_QUOTE.findall(shown)) >= 2 * len(SECTIONS) + 2 and check_paper_quotes(shown, paper) == []
    stubs = dict((key, (claim, quotes)) for key, _, _, claim, quotes in SECTIONS)["stubs"]
    assert "hallucinating tool names from scratch" in " ".join(stubs[1]) and "echo" not in stubs[0]
    assert "API’s name or brand directly" in glossary_markdown(5)
    assert check_paper_quotes("*“stubs echo the registry's naming”*", paper) == [
        "a quote not in the paper: “stubs echo the registry's naming”"]


def test_the_reference_file_is_checked_once_per_version_and_each_caller_gets_a_copy(tmp_path):
    path = tmp_path / "paper.yaml"
    shutil.copy(REFERENCES_FILE, path)
    first = load_references(path)
    first["entries"][0]["paper"] = "changed by a caller"
    again = load_references(path)
    assert again == load_references(REFERENCES_FILE) and again["entries"][0]["paper"] != "changed by a caller"
    refs = yaml.safe_load(path.read_text(encoding="utf-8"))
    refs["entries"].append(dict(refs["entries"][0]))  # a new version of the file: read and checked again
    path.write_text(yaml.safe_dump(refs), encoding="utf-8")
    with pytest.raises(ValueError, match=f"duplicate id {refs['entries'][0]['id']!r}"):
        load_references(path)


def test_a_second_reading_names_the_entry_it_reads_again_and_counts_once(tmp_path):
    refs = yaml.safe_load(REFERENCES_FILE.read_text(encoding="utf-8"))
    again = [e for e in refs["entries"] if "reading_of" in e]
    ids = {e["id"]: e for e in refs["entries"]}
    assert again and all(ids[e["reading_of"]]["quote"] == e["quote"] for e in again)
    again[0]["reading_of"] = again[0]["id"]
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(refs), encoding="utf-8")
    with pytest.raises(ValueError, match=f"{again[0]['id']}: reading_of names no other entry"):
        load_references(tmp_path / "paper.yaml")
    report = pd.DataFrame({"status": ["consistent", "differs", "consistent"], "reading_of": ["", "", "a"],
                           "cause_status": ["", "unexplained", ""]})
    lines = right_and_wrong(report)  # a number read again is counted apart from the numbers
    assert lines[2].startswith("- The paper's 2 reference numbers here: 1 consistent, 1 differs")
    assert lines[3] == AGAIN
    # A claim in words is counted apart from the numbers the paper prints.
    report["claim"] = [False, True, False]
    lines = right_and_wrong(report)
    assert lines[2].startswith("- The paper's 1 reference numbers here: 1 consistent")
    assert "1 differs" not in lines[2]
    assert lines[4].startswith("- Its 1 claims in words")
    assert lines[4].endswith(": 1 differs (1 unexplained).")
    assert "by chance" not in lines[2]  # too few rows for one to differ by chance at 95%
    report["claim"] = [False, True, True]  # a claim read a second way counts once, with the readings
    lines = right_and_wrong(report)
    assert lines[3] == AGAIN
    assert lines[4].startswith("- Its 1 claims in words")
    # The rows that differ are broken down by their cause, each counted once (an untested setup difference
    # leaves its cause untested); then what consistent means, with the consistent rows' median CI width.
    many = pd.DataFrame({"status": ["differs"] * 3 + ["consistent"] * 37, "reading_of": "",
                         "cause_status": ["setup difference", "explained", ""] + [""] * 37})
    chance = (" Each row is judged alone at 95%: were every paper number right, about 2 of these 40 would "
              "still differ by chance.")
    assert right_and_wrong(many)[2].endswith(
        f": 37 consistent, 3 differ (1 cause untested; 1 explained; 1 unexplained).{chance}")
    # The rows measured without an LLM (RtP's retrieval, the data's counts) are counted first and apart.
    split = many.assign(metric=["count", "recall", "recall"] + ["recall"] * 37,
                        method=["", "ptr", "rtp"] + ["rtp"] * 2 + ["ptr"] * 35)
    assert right_and_wrong(split)[2] == (
        "- Of the paper's 40 reference numbers, the 4 measured without an LLM (RtP's retrieval, the data's "
        "counts): 2 consistent, 2 differ (1 cause untested; 1 unexplained). The 36 resting on this run's "
        f"substitute LLM: 35 consistent, 1 differs (1 explained).{chance}")
    # A partly explained count gives the range of the shares of their gaps its causes recover.
    partly = many.assign(cause_status=["partly explained (0.003 of 0.067, 5%)",
                                       "partly explained (0.060 of 0.170, 35%)", ""] + [""] * 37)
    assert "2 partly explained (5–35% of the gap)" in right_and_wrong(partly)[2]
    assert "1 partly explained (5% of the gap)" in right_and_wrong(partly.iloc[[0, 2]])[2]
    many["ci_low"], many["ci_high"] = 0.1, [0.2] * 3 + [0.15] * 20 + [0.2] * 17
    assert right_and_wrong(many)[2].endswith(
        "1 unexplained). Consistent means indistinguishable here (median CI width of the shares among them "
        f"0.050), not confirmed.{chance}")
    # a median over mixed units means nothing: the widths of counts (a CI above 1) are left out
    many.loc[many.index[-30:], "ci_high"] = 6.0
    assert "(median CI width of the shares among them 0.050)" in right_and_wrong(many)[2]


AGAIN = ("- Read again another way (1 row: a number or claim of the paper scored a second time, on another "
         "set, ground truth or definition): 1 consistent.")


def test_claims_in_words_are_marked_in_the_scorecard():
    claims = [e for e in load_references()["entries"] if is_claim(e)]
    assert {e["id"] for e in claims} >= {"g1_rtp_gap_stable_over_k", "g1_top1_cosine_routing_auroc"}
    assert not any(is_claim(e) for e in load_references()["entries"] if e["id"] == "g1_rtp_recall")


def test_each_equivalence_margin_is_said_with_its_reason_once():
    from toolbench_lib.report.rows import _status_text, margin_lines

    rows = pd.DataFrame({"id": ["a", "b", "c", "d"],
                         "paper": ["claim: 0 ± 0.020", "claim: 0 ± 0.030", "claim: 0 ± 0.1", "0.5"],
                         "basis": ["x (estimate outside) (margin: 0.2 SD, a small effect)",
                                   "x (margin: 0.2 SD, a small effect)", "x (margin: a tenth, our choice)",
                                   "(margin: not an equivalence row)"]})
    assert margin_lines(rows) == ["Margins (this project's, chosen after reading the paper): `a` ± 0.020, "
                                  "`b` ± 0.030: 0.2 SD, a small effect; `c` ± 0.1: a tenth, our choice.", ""]
    assert margin_lines(rows.iloc[[3]]) == []
    row = rows.iloc[0].to_dict() | {"status": "inconclusive", "direction": "", "ci_low": -0.116,
                                    "ci_high": -0.023, "cause_status": ""}
    assert _status_text(pd.Series(row)) == (  # counted inconclusive, never shown so
        "against the claim, its size undecided (the CI excludes 0, crosses the margin)")


def test_an_ordering_at_every_k_is_judged_cell_by_cell():
    """Intersection-union: the claim holds only when every k's CI lies on its side, and differs as soon as
    one k's CI lies wholly on the other side, though the extreme cell alone would say otherwise."""
    from toolbench_lib.report.locate import CONSISTENT, DIFFERS, INCONCLUSIVE, TableCache
    from toolbench_lib.report.scorecard import every_cell, intersection_union

    entry = {"ordering": True, "paper": {"min": 0},
             "locator": {"table": "k", "where": {"subset": "G2", "gain": "$min"}, "column": "gain"},
             "ci": {"low": {"table": "k", "where": {"subset": "G2", "gain": "$min"}, "column": "lo"},
                    "high": {"table": "k", "where": {"subset": "G2", "gain": "$min"}, "column": "hi"}}}
    bounds = {"min": 0}
    # k = 1: wide CI around the minimum; k = 2: a smaller loss whose CI lies wholly below 0.
    cells = [(-0.02, -0.09, 0.05), (-0.01, -0.015, -0.005), (0.03, 0.01, 0.05)]
    assert intersection_union(cells, bounds, -0.02)[1:3] == (DIFFERS, "below")
    assert intersection_union([cells[0], cells[2]], bounds, -0.02)[1] == INCONCLUSIVE
    assert intersection_union([cells[2]], bounds, 0.03)[1] == CONSISTENT
    with_k = intersection_union([(-0.02, -0.09, 0.05, 4), (0.03, 0.01, 0.05, 5)], bounds, -0.02)[3]
    assert with_k.endswith("1 with the 95% CI on the paper's side, 0 wholly on the other; shown: the least "
                           "favourable, k = 4")
    from toolbench_lib.report.rows import _status_text

    row = pd.Series({"status": INCONCLUSIVE, "direction": "", "basis": with_k, "paper": "claim: ≥ 0",
                     "ci_low": -0.09, "ci_high": 0.05, "cause_status": "", "cause": ""})
    assert _status_text(row) == "inconclusive (least favourable k = 4)"  # which k the row shows
    against = pd.Series({**row, "basis": "the paper's ordering, by this run's 95% CI [-0.090, 0.050], "
                                         "holding the paper's bound (estimate on the other side)"})
    assert _status_text(against) == ("inconclusive (estimate on the claim's other side; the two cannot be "
                                     "told apart here)")

    class Tables(TableCache):
        def __init__(self):
            pass

        def get(self, name):
            return pd.DataFrame({"subset": ["G2", "G2", "G1"], "gain": [-0.02, 0.03, -0.5],
                                 "lo": [-0.09, 0.01, -0.6], "hi": [0.05, 0.05, -0.4]})

    got = every_cell(entry, Tables())
    assert [tuple(map(float, c[:3])) for c in got] == [(-0.02, -0.09, 0.05), (0.03, 0.01, 0.05)]
    assert every_cell({**entry, "ordering": False}, Tables()) == []


def test_the_papers_number_is_shown_with_the_decimals_it_prints():
    from toolbench_lib.report.locate import paper_text

    assert paper_text({"value": 0.16}, 0.0005) == "0.160" and paper_text({"value": 0.4}, 0.005) == "0.40"
    assert paper_text({"value": 0.16}) == "0.16"  # not printed in its quote: as stored
    assert paper_text({"value": 46984.0}, 0.5) == "46,984"
    assert paper_text({"min": 2.4, "max": 2.5}) == "2.4–2.5"
