"""The discussion questions of the reading-group session, each with this run's numbers (its makers read
the saved tables; a table the run did not save is named, never replaced) and a facilitator's note."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from ..analysis.references import paper_bounds
from ..data.queries import subset_alias
from ..eval.compare import significant
from .against import QUOTES
from .locate import TableCache, two_sample
from .lookup import SETS, NotInRun, architectures, per_set, value

NO_P = "p = n/a"  # a p-value the run did not save
# The paper's words, verbatim (its setup paragraph, §3).
QUOTE_GT = ("against the Ground-Truth API set from each query’s ToolBench gold trajectory (all APIs executed "
            "in the reference solution)")
QUOTE_G2 = "intra-category multi-tool"
QUOTE_BRAND = ("the raw query often contains the API’s name or brand directly, giving RtP a direct embedding "
               "match while a planning step only abstracts away this signal")
QUOTE_RETRIEVER = "the query is embedded by GTE-base, a fixed model, and matched against the FAISS index"


def g1_difference(c: TableCache) -> str:
    d, lo, hi = (value(c, "paired_tests", col, subset="G1", gt="candidates", metric="recall")
                 for col in ("diff", "ci_low", "ci_high"))
    return (f"dense PtR − RtP on G1 {fmt_signed(d)}, unadjusted 95% CI {fmt_ci(lo, hi)} (`paired_tests`: "
            "diff, ci_low, ci_high)")


def objective_pass_rates(c: TableCache) -> str:
    table = c.get("judge_validity")
    rates = architectures(c, "judge_validity", "objective_pass_rate",
                          **({"plans": "all"} if table is not None and "plans" in table else {}))
    gt = f", {table['gt'].iloc[0]}" if table is not None and "gt" in table and len(table) else ""
    return (f"objective pass rate {fmt_number(rates.min())}–{fmt_number(rates.max())} over the sets and both "
            f"architectures (`judge_validity`: objective_pass_rate{gt})")


def recall_ceiling(c: TableCache) -> str:
    """The highest recall per ground truth: the pass rate is on `relevant`, the paper's fit `candidates`."""
    said = [f"{fmt_number(architectures(c, 'main_results', 'recall_mean', gt=gt).max())} on `{gt}`"
            for gt in ("relevant", "candidates")]
    return f"recall at most {' and '.join(said)} (`main_results`: recall_mean by gt)"


def g3_ground_truths(c: TableCache) -> str:
    r = [fmt_number(value(c, "main_results", "recall_mean", subset="G3", method=m, gt=gt))
         for gt in ("candidates", "relevant") for m in ("rtp", "ptr")]
    return (f"dense G3 recall against `candidates` RtP {r[0]}, PtR {r[1]}; against `relevant` RtP {r[2]}, "
            f"PtR {r[3]} (`main_results`: recall_mean by gt)")


def endpoint(c: TableCache, family: str, column: str, subset: str) -> float:
    """The primary comparison's ``column`` (dense from ``primary_endpoint``, as the front reads it)."""
    table = "primary_endpoint" if family == "dense" and c.get("primary_endpoint") is not None else \
        "primary_endpoint_families"
    return value(c, table, column, subset=subset, retriever=family)


def bm25_tests(c: TableCache) -> str:
    runs, n, groups, p_runs, p, p_holm = (endpoint(c, "bm25", col, "G1") for col in (
        "n_runs", "n_queries", "n_groups", "p_runs_robustness", "p", "p_holm"))
    return (f"BM25 (word matching, beyond the paper: [Retriever families](report.md#retriever-families)) "
            f"on G1, the paper's test over {fmt_count(runs)} runs {fmt_p(p_runs, NO_P)}, the paired "
            f"t-test over {fmt_count(n)} queries clustered in {fmt_count(groups)} API samples "
            f"{fmt_p(p, NO_P)}, both unadjusted (Holm over the sets: {fmt_p(p_holm, NO_P)}) "
            "(`primary_endpoint_families`: p_runs_robustness, p, n_groups, p_holm)")


def g3_clusters(c: TableCache) -> str:
    n, groups = (endpoint(c, "dense", col, "G3") for col in ("n_queries", "n_groups"))
    return (f"G3's {fmt_count(n)} queries come from {fmt_count(groups)} API samples (`primary_endpoint`: "
            "n_groups)")


def bm25_against_dense(c: TableCache) -> str:
    def one(s: str) -> str:
        b, d = ([fmt_number(endpoint(c, f, m, s)) for m in ("rtp", "ptr")] for f in ("bm25", "dense"))
        return f"{s} BM25 RtP {b[0]}, PtR {b[1]}, dense RtP {d[0]}, PtR {d[1]}"
    return per_set(one) + " (`primary_endpoint_families`, `primary_endpoint`: rtp, ptr)"


G2_SETS = ("G2_category_original", "G2_instruction")


def g2_sets(c: TableCache) -> str:
    def one(s: str) -> str:
        n, size, lo, hi = (value(c, "g2_sets", col, subset=subset_alias(s))
                           for col in ("n_queries", "gt_size", "gt_size_lo", "gt_size_hi"))
        return f"{s} {fmt_count(n)} queries, {fmt_number(size)} {fmt_ci(lo, hi)} ground-truth APIs per query"
    return "; ".join(one(s) for s in G2_SETS) + " (`g2_sets`)"


def _g2_dense(c: TableCache, s: str) -> dict[str, float]:
    """The dense primary comparison on one G2 set: the answer table's, or the G2_instruction study's."""
    def one(col: str) -> float:
        if s == G2_SETS[0]:
            return endpoint(c, "dense", col, subset_alias(s))
        return value(c, "primary_endpoint_g2_instruction", col, subset=subset_alias(s), retriever="dense")
    return {col: one(col) for col in ("diff", "ci_low", "ci_high", "n_runs", "significant")}


def g2_dense(c: TableCache) -> str:
    def one(s: str) -> str:
        r = _g2_dense(c, s)
        runs = "one run" if r["n_runs"] == 1 else f"{fmt_count(r['n_runs'])} runs"
        return f"{fmt_signed(r['diff'])} {fmt_ci(r['ci_low'], r['ci_high'])} on {s} ({runs})"
    return (f"dense PtR − RtP {', '.join(one(s) for s in G2_SETS)} (unadjusted 95% CIs; `primary_endpoint`, "
            "`primary_endpoint_g2_instruction`: diff, ci_low, ci_high)")


def g2_note(c: TableCache) -> str:
    flags = [_g2_dense(c, s)["significant"] for s in G2_SETS]
    if any(pd.isna(f) for f in flags):
        raise NotInRun("a G2 row's `significant` is not a yes or no")
    sig = {bool(f) for f in flags}
    if len(sig) > 1:
        return "the dense verdict changes with the set: which set is the paper's G2 decides the G2 answer"
    said = "significant" if sig.pop() else "not significant"
    text = f"the dense verdict is the same on both sets ({said}): the choice of set moves the estimate only"
    try:
        rows = [_g2_dense(c, s) | {"paper": endpoint(c, "dense", "paper_ptr", "G2")
                                   - endpoint(c, "dense", "paper_rtp", "G2")} for s in G2_SETS]
    except NotInRun:
        return text
    if all(not r["ci_low"] <= r["paper"] <= r["ci_high"] for r in rows):
        text += (f"; on both, the 95% CI excludes the paper's {fmt_signed(rows[0]['paper'])}, which tests "
                 "this run's stub writer and embedder, not the paper's")
        wide = [s for s, r in zip(G2_SETS, rows, strict=True)
                if two_sample(r["diff"], r["paper"], (r["ci_low"], r["ci_high"]))]
        text += (f"; on {' and '.join(wide)} not if the paper's number were as uncertain as this run's (a "
                 "two-sample reading)") if wide else ""
    return text


def stub_hits(c: TableCache) -> str:
    """The stub hit share read both ways: a stub's top API, and any API of its own top k ("at all")."""
    def one(s: str) -> str:
        top, any_k = (fmt_number(value(c, "stub_stats", col, subset=s, gt="candidates"))
                      for col in ("stub_hit_share", "stub_hit_share_topk"))
        return f"{s} {top} (any of its top k: {any_k})"
    return f"stub hit share {per_set(one)} (`stub_stats`: stub_hit_share, stub_hit_share_topk, candidates)"


def decomposers(c: TableCache) -> str:
    def one(s: str) -> str:
        llm, rules = (fmt_number(value(c, "ablation_decomposition", "ptr_recall", subset=s, decomposer=d))
                      for d in ("llm", "rules"))
        rtp = fmt_number(value(c, "ablation_decomposition", "rtp_recall", subset=s, decomposer="llm"))
        return f"{s} PtR {llm} with the LLM's stubs, {rules} with rule-based stubs, RtP {rtp}"
    return per_set(one) + " (`ablation_decomposition`, one run: ptr_recall, rtp_recall by decomposer)"


def _brand(c: TableCache, s: str) -> tuple[float, ...]:
    """PtR's recall with the stubs as searched and with their brand words removed, and RtP's (the query) with
    and without them."""
    return tuple(value(c, "ablation_stub_text", "recall", subset=s, variant=v)
                 for v in ("name+reasoning", "name+reasoning-brand", "query", "query-brand"))


def brand_words(c: TableCache) -> str:
    def one(s: str) -> str:
        ptr, plain, rtp, rtp_plain = (fmt_number(x) for x in _brand(c, s))
        return f"{s} PtR {ptr}, {plain} without brand words, RtP {rtp}, {rtp_plain} without"
    return per_set(one) + " (`ablation_stub_text`, one run: recall by variant)"


# -- the facilitator's notes: what this run's numbers answer ------------------------------------------------

def brand_note(c: TableCache) -> str:
    def one(s: str) -> str:
        ptr, plain, _, _ = _brand(c, s)
        return f"{s} {(ptr - plain) / ptr:.0%}" if ptr else f"{s} n/a"
    gap, lo, hi = (value(c, "ablation_query_coupling", col, subset="G1")
                   for col in ("diff_nobrand", "diff_nobrand_lo", "diff_nobrand_hi"))
    return (f"Brand words in the stubs carry a share of PtR's recall ({per_set(one)}). Removed from the "
            f"query too, G1's PtR − RtP is {fmt_signed(gap)} {fmt_ci(lo, hi)} against "
            f"{fmt_signed(value(c, 'ablation_query_coupling', 'diff', subset='G1'))} as run "
            "(`ablation_query_coupling`): what is left of the coupling once the brand words go? The stubs "
            "were still written from the whole query; a full test would have the LLM write them from the "
            "query without its brand words")


def in_ci_note(c: TableCache, stated: float, computed: float) -> str:
    lo, hi = (value(c, "paired_tests", col, subset="G1", gt="candidates", metric="recall")
              for col in ("ci_low", "ci_high"))
    where = {x: "inside" if lo <= x <= hi else "outside" for x in (stated, computed)}
    both = "so this run cannot tell them apart" if where[stated] == where[computed] == "inside" else \
        "so this run's setup tells them apart"
    return (f"the stated {fmt_signed(stated)} lies {where[stated]} this run's unadjusted CI {fmt_ci(lo, hi)} "
            f"and the computed {fmt_signed(computed)} {where[computed]}, {both}; the gap between them is the "
            "paper's own arithmetic, which no CI of this run settles")


def ceiling_note(c: TableCache) -> str:
    table = c.get("judge_validity")
    ceiling = architectures(c, "judge_validity", "ceiling",
                            **({"plans": "all"} if table is not None and "plans" in table else {}))
    return (f"a plan passes objectively only when its prompt listed every ground-truth API, which happened "
            f"for at most {fmt_number(ceiling.max())} of plans here (`judge_validity`: ceiling); a pass rate "
            "above that counts something other than plans that name the right APIs")


def leader_note(c: TableCache) -> str:
    cis, clear, signs = [], [], set()
    for gt in ("candidates", "relevant"):
        d, lo, hi = (value(c, "paired_tests", col, subset="G3", gt=gt, metric="recall")
                     for col in ("diff", "ci_low_holm", "ci_high_holm"))
        cis.append(f"{fmt_signed(d)} {fmt_ci(lo, hi)} on `{gt}`")
        clear += [gt] if lo > 0 or hi < 0 else []
        signs.add("PtR" if d > 0 else "RtP")
    by = f"{signs.pop()} leads by estimate under both" if len(signs) == 1 else "the estimate's sign changes"
    said = (f"{by}, significantly under neither (the CI holds 0 on both)" if not clear else
            f"{by}, significantly under both" if len(clear) == 2 else
            f"only on `{clear[0]}` does the CI exclude 0, so on G3 the definition decides whether this run "
            "supports a G3 difference")
    return (f"dense G3 PtR − RtP recall is {' and '.join(cis)} (`paired_tests`, each CI adjusted as its "
            f"Holm p): {said}{flipped_sets(c)}")


def flipped_sets(c: TableCache) -> str:
    """The sets whose dense verdict (Holm p below 0.05, :func:`.eval.compare.significant`) the ground-truth
    definition changes, with both estimates and p: a verdict can flip while the estimate hardly moves."""
    flips = []
    for s in SETS:
        try:
            d, p = ({gt: value(c, t, col, retriever="dense", subset=s) for gt, t in
                     (("candidates", "primary_endpoint"), ("relevant", "primary_endpoint_relevant"))}
                    for col in ("diff", "p_holm"))
        except NotInRun:
            continue
        still = "; the estimate hardly moves, its CI does" * (abs(d["candidates"] - d["relevant"]) < .01)
        flips += [f"{s} ({fmt_signed(d['candidates'])}, Holm {fmt_p(p['candidates'])}, on `candidates`; "
                  f"{fmt_signed(d['relevant'])}, {fmt_p(p['relevant'])}, on `relevant`{still})"] * (
            significant({"p_holm": p["candidates"]}) != significant({"p_holm": p["relevant"]}))
    return f"; the definition changes the dense verdict on {', '.join(flips)}" if flips else ""


def tests_note(c: TableCache) -> str:
    p_runs, p_pairs, runs = (endpoint(c, "bm25", col, "G1")  # both unadjusted, as question 4 sets them
                             for col in ("p_runs_robustness", "p", "n_runs"))
    smaller = "over runs" if p_runs < p_pairs else "over queries"
    pair = f"{fmt_p(min(p_runs, p_pairs))} against {fmt_p(max(p_runs, p_pairs))}"
    return (f"on BM25 G1 the test {smaller} gives the smaller p ({pair}, from two different tests): its "
            f"{fmt_count(runs)} run means vary only with the LLM's sampling, while the paired test sees the "
            "difference vary from query to query")


def families_note(c: TableCache) -> str:
    ahead, sets = {"RtP": 0, "PtR": 0}, 0
    for s in SETS:
        try:
            pairs = [(endpoint(c, "bm25", m, s), endpoint(c, "dense", m, s)) for m in ("rtp", "ptr")]
        except NotInRun:
            continue
        sets += 1
        for arch, (bm25, dense) in zip(ahead, pairs, strict=True):
            ahead[arch] += bm25 > dense
    if not sets:
        raise NotInRun("no set with both BM25 and dense rows")
    said = (f"BM25's recall is above dense retrieval's for RtP on {ahead['RtP']} and for PtR on "
            f"{ahead['PtR']} of {sets} sets (`primary_endpoint_families`, `primary_endpoint`)")
    try:
        _, _, rtp, plain = _brand(c, "G1")
    except NotInRun:
        return said
    return (f"{said}; the queries are lexical: without their brand words RtP's G1 recall falls from "
            f"{fmt_number(rtp)} to {fmt_number(plain)} (`ablation_stub_text`), so word matching has much to "
            "match. A fair dense opponent is a stronger embedder (the paper's GTE-base, untested here) or "
            "hybrid search, which keeps both signals")


def decomposer_note(c: TableCache) -> str:
    def one(s: str) -> str:
        llm, rules = (value(c, "ablation_decomposition", "ptr_recall", subset=s, decomposer=d)
                      for d in ("llm", "rules"))
        return f"{s} {fmt_signed(rules - llm)}"
    said = (f"rule-based stubs (more stubs from a splitter, not a better writer) change PtR's recall by "
            f"{per_set(one)}; a stronger writer is untested here, so the run cannot say on which sets PtR "
            "would overtake RtP")
    try:
        g3 = endpoint(c, "dense", "diff", "G3")
        x = c.having("ablation_decomposition", "subset", "decomposer", "ptr_minus_rtp", "ci_low", "ci_high")
        r = x[(x["subset"].astype(str).map(subset_alias) == "G2") & (x["decomposer"] == "rules")].iloc[0]
    except (NotInRun, TypeError, IndexError):
        return said
    return (f"{said}. What it can say: G3 is level already ({fmt_signed(g3)}), and on G2 the splitter's "
            f"stubs give PtR − RtP {fmt_signed(r.ptr_minus_rtp)} {fmt_ci(r.ci_low, r.ci_high)}, "
            + ("its CI holding 0" if r.ci_low <= 0 <= r.ci_high else "its CI excluding 0"))


# -- the questions ------------------------------------------------------------------------------------------

Maker = Callable[[TableCache], str]


def questions(refs: Mapping[str, Mapping],
              runs_line: str = "") -> list[tuple[str, str, tuple[Maker, ...], str, Maker]]:
    """``(title, the paper's numbers, makers of this run's numbers, what to discuss, the facilitator's
    note)`` per question; ``refs``: id to entry; ``runs_line`` closes the question on the test over runs."""
    def paper(entry: str) -> float:
        return paper_bounds(refs[entry]["paper"]).get("value", math.nan) if entry in refs else math.nan

    def sec(entry: str) -> str:
        return str(refs.get(entry, {}).get("section", "section not found"))

    ptr, rtp = paper("g1_ptr_recall"), paper("g1_rtp_recall")
    passes = [paper(f"{s.lower()}_{m}_pass_rate") for s in SETS for m in ("rtp", "ptr")]
    recalls = [paper(f"{s.lower()}_{m}_recall") for s in SETS for m in ("rtp", "ptr")]
    setup = sec("g1_query_count")
    return [  # the session's four first, each on a section the plan walks through
        ("Pass rate against recall",
         f"It reports pass rates of {fmt_number(min(passes))}–{fmt_number(max(passes))} while recall is at "
         f"most {fmt_number(max(recalls))} ({sec('g1_rtp_pass_rate')}), and says “{QUOTES['upper']}” "
         f"({setup}, evaluation proxy).",
         (objective_pass_rates, recall_ceiling),
         "Can both statements hold? Under which ground truth could a plan pass without most of its APIs? "
         "What would you need to know about an LLM judge before trusting its pass rate?", ceiling_note),
        ("The test over runs against the test over queries",
         f"It uses “a {QUOTES['one_sample']}” ({setup}).",
         (bm25_tests, g3_clusters, *((lambda c: runs_line.rstrip("."),) if runs_line else ())),
         "Which p-value is smaller here? A test over a few run means of the same queries treats the queries "
         "as fixed: what variation does it leave out, and what does that do to its p-value? How many "
         "independent observations does G3 hold?", tests_note),
        ("What would a stronger stub writer change?",
         f"Its stubs match a relevant API for {fmt_number(paper('g1_stub_hit_share'))} of G1 stubs and "
         f"{fmt_number(paper('g3_stub_hit_share'))} of G3 stubs ({sec('g1_stub_hit_share')}).",
         (stub_hits, decomposers),
         "PtR searches with hypothetical tool descriptions instead of the query, as HyDE (Gao et al., 2023, "
         "*Precise Zero-Shot Dense Retrieval without Relevance Labels*) searches with a hypothetical answer. "
         "If this run's stub writer reached the paper's hit share, on which sets would PtR overtake RtP? "
         "Does the gap between rule-based and LLM stubs hint at what a better writer could gain?",
         decomposer_note),
        ("Does the query name its tool?",
         f"It explains the crossover by Intent-Registry Coupling: on G1 “{QUOTE_BRAND}” "
         f"({sec('g2_gt_size')}).",
         (brand_words,),
         "This run removes the query's brand words from the stubs, then from the query too. What does each "
         "drop say about where the hits come from? Does RtP's G1 lead outlive its brand words?",
         brand_note),
        ("Which ground truth?",
         f"It scores retrieval “{QUOTE_GT}” ({setup}); its G3 recall is RtP "
         f"{fmt_number(paper('g3_rtp_recall'))}, PtR {fmt_number(paper('g3_ptr_recall'))}.",
         (g3_ground_truths,),
         "Does the leader change with the definition? Which definition matches the paper's words, and which "
         "its numbers?", leader_note),
        ("Is BM25's win a fair comparison?",
         f"It uses one retriever: “{QUOTE_RETRIEVER}” ({setup}).", (bm25_against_dense,),
         "BM25 indexes the same API texts, and queries often name tools and brands. Where BM25 leads, does "
         "that test the architectures or how lexical the queries are? What would make the dense side a fair "
         "opponent?", families_note),
        ("Which G2?",
         f"Its G2 holds {fmt_count(paper('g2_query_count'))} “{QUOTE_G2}” queries ({setup}) with a mean "
         f"of {refs.get('g2_gt_size', {}).get('paper', 'n/a')} ground-truth APIs ({sec('g2_gt_size')}).",
         (g2_sets, g2_dense),
         "Which set fits the paper's count, and which its ground truth? Does the G2 answer depend on the "
         "choice, and which set would you pre-register?", g2_note),
        ("The paper's G1 difference, twice",
         f"It gives PtR − RtP recall on G1 as {fmt_signed(paper('g1_ptr_minus_rtp_recall'))} "
         f"({sec('g1_ptr_minus_rtp_recall')}), while its own recalls ({sec('g1_ptr_recall')}) give "
         f"{fmt_number(ptr)} − {fmt_number(rtp)} = {fmt_signed(ptr - rtp)}.", (g1_difference,),
         "Can this run tell the paper's two values apart? What can make a stated difference differ from the "
         "difference of the stated means (another run, another table), and what should a paper say when it "
         "does?", lambda c: in_ci_note(c, paper("g1_ptr_minus_rtp_recall"), ptr - rtp)),
    ]


def run_numbers(cache: TableCache, makers: tuple[Maker, ...]) -> str:
    """This run's numbers of a question, one clause per maker; a missing table is said in its clause."""
    parts = []
    for make in makers:
        try:
            parts.append(make(cache))
        except NotInRun as missing:
            parts.append(f"not in this run: {missing}")
    return "**This run.** " + " ".join(f"{t[:1].upper()}{t[1:]}." for t in parts)
