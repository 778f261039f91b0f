"""Where the paper disagrees with itself, from its reference entries: printed p-values its own summaries do
not give, numbers that do not fit together, and questions its text leaves open."""

from __future__ import annotations

import re

import pandas as pd

from ..analysis.numbers import fmt_count, fmt_number, fmt_p, fmt_signed
from ..analysis.references import paper_bounds
from ..eval.stats import runs_test_summary, two_sample_summary
from .verdicts import ALPHA

QUOTES = {  # the paper's words that paper_against_itself sets side by side (tests find each in its text)
    "budget": "budget-equivalent",
    "g3_ns": "does not reach significance",
    "g3_favours": "G3 recall favors PtR",
    "temperature": "temperature =0",
    "gt": "all APIs executed in the reference solution",
    "upper": "retrieval quality upper-bounds task completion",
    "vary": "both stub generation and planner output vary across runs",
    "ablation_run": "0.184 in the ablation",
    "two_sample": "two-sample t-test for pass rate",
    "one_sample": ("one-sample t-test for precision and recall (PtR’s 4-run mean vs. the deterministic RtP "
                   "value)"),
}
PAPER_RUNS = 4  # the runs behind the paper's mean ± std
# "A{\pm}s vs. B (p{=}x)" or "B vs. A{\pm}s (p{=}x)" in a quote: PtR's mean ± std, RtP's value, the printed p
PRINTED_TEST = re.compile(  # its (p{=}x) or (p{<}x) after "A{\pm}s vs. B" or "B vs. A{\pm}s"
    r"([0-9.]+)(\{\\pm\}[0-9.]+)? vs\. ([0-9.]+)(\{\\pm\}[0-9.]+)? \(p\{([=<])\}([0-9.]+)\)")


def printed_p_lines(refs: dict) -> list[str]:
    """Where a p the paper prints does not follow from its own mean ± std (over twice, under half or
    over a printed bound), then those that do; each printed test once."""
    lines, fine, seen, named = [], [], set(), set()  # named: the tests already quoted in full
    for e in refs["entries"]:
        m = PRINTED_TEST.search(str(e.get("quote", "")))
        if not m or e.get("std") is None or m.group(0) in seen:  # a std: PtR's entry (or a pass rate's)
            continue
        seen.add(m.group(0))
        (a, sa), (b, sb) = ((m.group(i), (m.group(i + 1) or "").split("}")[-1]) for i in (1, 3))
        printed, two = float(m.group(6)), bool(sa and sb)
        p = (two_sample_summary(float(a), float(sa), float(b), float(sb), PAPER_RUNS) if two else
             runs_test_summary(float(a if sa else b), float(sa or sb), PAPER_RUNS, float(b if sa else a)))
        said = f"{e['subset']} {str(e['metric']).replace('_', ' ')} p {m.group(5)} {m.group(6)}"
        if (printed / 2 if m.group(5) == "=" else 0) <= p <= printed * 2:
            rounding = (", within its numbers' rounding" if m.group(5) == "<" and p >= printed else
                        ", its two-sample test" if two else "")
            fine.append(f"{said} (recomputed {fmt_p(p).removeprefix('p ').removeprefix('= ')}{rounding})")
            continue
        kind = "two_sample" if two else "one_sample"
        test = "the same test" if kind in named else f"its *“{QUOTES[kind]}”*"
        named.add(kind)
        means = (f"{a} ± {sa} against {b} ± {sb} (its SDs)" if two else
                 f"{a if sa else b} ± {sa or sb} (its SD) over {PAPER_RUNS} runs against {b if sa else a}")
        lines.append(f"Its {said} does not follow from its own numbers by {test}: {means} gives {fmt_p(p)}, "
                     + ("smaller than it prints, so its conclusion stands." if p < printed else
                        "larger than it prints."))
    g3 = next((e for e in refs["entries"] if e["id"] == "g3_ptr_recall"), None)
    m = re.search(r"([0-9.]+)\{\\pm\}([0-9.]+) vs\. ([0-9.]+)", str(g3.get("quote", ""))) if g3 else None
    if m and g3.get("std"):
        p = runs_test_summary(float(m.group(1)), float(m.group(2)), PAPER_RUNS, float(m.group(3)))
        if p >= ALPHA:  # its words for it: no p printed
            fine.append(f"G3 recall *“{QUOTES['g3_ns']}”* ({fmt_p(p)})")
    return lines + [f"Its other {fmt_count(len(fine))} p-value{'s' * (len(fine) > 1)} follow"
                    f"{'s' * (len(fine) == 1)} from its numbers: {'; '.join(fine)}." for _ in fine[:1]]


POSSIBLE = "paper's recalls fit"  # report.teaching's examples column: a ground truth, both or neither


def possible_line(examples: pd.DataFrame | None) -> str:
    """In how many Table 2 examples found here both of the paper's recalls fit each ground truth's size
    (``teaching``'s examples table); empty without them."""
    if examples is None or POSSIBLE not in examples or examples.empty:
        return ""
    fit = examples[POSSIBLE].astype(str)
    c, r = fit.isin(["both", "candidates"]), fit.isin(["both", "relevant"])
    only = {"candidates": c & ~r, "relevant": r & ~c}
    told = {g: int(m.sum()) for g, m in only.items()}
    said = ("hardly tell the two apart" if sum(told.values()) <= 1 else "do not favour either"
            if told["candidates"] == told["relevant"] else f"fit `{max(told, key=told.get)}` better")
    loose = examples.get("match", pd.Series("", index=examples.index)) == "loose"
    apart = "; ".join(f"only `{g}` fits {n}" + ((", a loose match" if n == 1 else ", all loose matches")
                                                 if (only[g] <= loose).all() else "")
                      for g, n in told.items() if n)
    return (f"Its Table 2 recalls {said}: both of an example's recalls could come from this data's "
            f"`candidates` in {int(c.sum())} and from `relevant` in {int(r.sum())} of its {len(fit)} "
            "examples here" + (f" ({apart})" if apart else "") + ".")


def gt_text_line(paper: dict, sizes: pd.DataFrame | None, examples: pd.DataFrame | None = None) -> list[str]:
    """Its ground truth's words against its counts: APIs per query it gives beside this run's on each
    ground truth (``data_gt_sizes``), and which ground truth its Table 2 recalls fit."""
    if sizes is None or not {"subset", "gt", "mean"} <= set(sizes):
        return []
    mean = sizes.set_index(["subset", "gt"])["mean"]
    said = []
    g2 = "G2_instruction" if ("G2_instruction", "candidates") in mean else "G2"
    for s, here in (("G1", "G1"), ("G2", g2)):
        p = paper.get(f"{s.lower()}_gt_size")
        if p is not None and {(here, "candidates"), (here, "relevant")} <= set(mean.index):
            said.append(f"{s} {p:g} (here {fmt_number(mean[(here, 'candidates')])} on `candidates`, "
                        f"{fmt_number(mean[(here, 'relevant')])} on `relevant`"
                        f"{', ' + here if here != s else ''})")
    if not said:
        return []
    return [f"It defines ground truth as *“{QUOTES['gt']}”*, yet its mean APIs per query, "
            f"{' and '.join(said)}, fit every API of the tools a query was written from, not the few its "
            "solution needs: a hypothesis from two means, not a finding; its words could also fit, were "
            "every call of a reference solution counted, failed calls and retries included (the solutions "
            f"are not in this data). {possible_line(examples)}".rstrip()]


AGAINST_ITSELF = ("Its numbers that do not fit together (some perhaps from runs it does not name)",
                  "Questions its text leaves open",
                  "Its p-values that do not follow from its own numbers")  # in order of consequence


def paper_against_itself(refs: dict, readings: pd.DataFrame | None = None,
                         gt_sizes: pd.DataFrame | None = None,
                         examples: pd.DataFrame | None = None) -> list[tuple[str, list[str]]]:
    """Where the paper disagrees with itself, under the titles of :data:`AGAINST_ITSELF`: numbers that
    do not fit together, questions its text leaves open, printed p-values its mean ± std do not give."""
    bounds = {e["id"]: paper_bounds(e["paper"]) for e in refs["entries"]}  # the ids are unique
    v = {i: b.get("value", b.get("max")) for i, b in bounds.items()}
    lines, other, unnamed = [], [], []
    fid = bounds.get("trajectory_fidelity", {}).get("min")
    div, j1, j3 = (v.get(i) for i in ("divergence_full", "g1_plan_jaccard", "g3_plan_jaccard"))
    if None not in (div, fid, j1, j3):
        lines.append(f"Its divergence, {div:.0%} of queries whose two top-k lists are *“entirely "
                     f"non-overlapping”* at the full registry, hardly sits beside its fidelity (at least "
                     f"{fid:.0%} of plan steps name a retrieved API) and its plan overlap (Jaccard "
                     f"{j1:.2f} on G1, {j3:.2f} on G3) if all three count the same APIs: plans drawn from "
                     "disjoint lists could share almost no API (if it matched plans by tool, not endpoint, "
                     "they could).")
    for s in ("g1", "g2"):
        stated, a, b = (v.get(f"{s}_{n}") for n in ("ptr_minus_rtp_recall", "ptr_recall", "rtp_recall"))
        if None not in (stated, a, b) and abs(stated - (a - b)) > 0.0015:
            k5 = v.get(f"{s}_budget_ptr_k5")  # its k ablation's PtR at k = 5, a run it names for G2
            near = (f"; its k ablation's PtR, {fmt_number(k5)}, gives {fmt_signed(k5 - b)}, perhaps its "
                    "source"
                    if k5 is not None and abs(stated - (k5 - b)) <= 0.0015 else "")
            lines.append(f"{s.upper()}: its PtR − RtP recall is stated as {fmt_signed(stated)}, but its own "
                         f"means give {fmt_number(a)} − {fmt_number(b)} = {fmt_signed(a - b)}{near}.")
    k5, main = v.get("g1_budget_ptr_k5"), v.get("g1_ptr_recall")
    if None not in (k5, main) and abs(k5 - main) > 0.0015:
        unnamed = [f"Its G1 PtR recall@5 is {fmt_number(k5)} in its budget paragraph and {fmt_number(main)} "
                   "in its main results, without saying which run the first comes from; for G2 it says so "
                   f"(*“{QUOTES['ablation_run']}”*)."]
    rates = [x for s in ("g1", "g2", "g3") for m in ("rtp", "ptr") if (x := v.get(f"{s}_{m}_pass_rate"))]
    recalls = [x for s in ("g1", "g2", "g3") for m in ("rtp", "ptr") if (x := v.get(f"{s}_{m}_recall"))]
    if rates and recalls:
        other.append(f"Its pass rates ({fmt_number(min(rates))}–{fmt_number(max(rates))}) are far above its "
                     f"recall@5 (at most {fmt_number(max(recalls))}), though it says *“{QUOTES['upper']}”*. "
                     f"Under its definition, *“{QUOTES['gt']}”*, a plan is shown on average at most "
                     f"{max(recalls):.0%} of what it needs; under the broader `candidates`, whose size its "
                     "numbers fit, a plan can pass without most of them. It does not say which it means.")
    entries = {e["id"]: e for e in refs["entries"]}
    stubs, rtp, ptr = (entries.get(f"g2_{i}") for i in ("stubs_per_query", "budget_rtp_k10", "budget_ptr_k5"))
    if stubs and rtp and ptr and "min" in bounds["g2_stubs_per_query"]:
        m, k, k_ptr = bounds["g2_stubs_per_query"]["min"], int(rtp["k"]), int(ptr["k"])
        if abs(m * k_ptr - k) >= 1:
            other.append(f"It calls RtP at k = {k} *“{QUOTES['budget']}”* with PtR at k = {k_ptr}, yet by "
                         f"its own count of {m:g} stubs each searching the top {k_ptr}, PtR searches up to "
                         f"{m * k_ptr:g} APIs (fewer where its stubs find the same ones).")
    a, b = v.get("g3_ptr_recall"), v.get("g3_rtp_recall")
    if None not in (a, b):
        other.append(f"On G3 its recall difference ({fmt_signed(a - b)}) *“{QUOTES['g3_ns']}”*, yet its "
                     f"discussion explains why *“{QUOTES['g3_favours']}”* as if it were an effect.")
    other.append(f"It runs its models at *“{QUOTES['temperature']}”*, yet reports a spread over 4 runs "
                 f"because *“{QUOTES['vary']}”*; a hosted model can vary at temperature 0, but it does not "
                 "say how much of its spread that is.")
    other += unnamed + gt_text_line(v, gt_sizes, examples)
    if readings is not None and len(readings) and {"size", "group", "reading", "share"} <= set(readings):
        full = readings[(readings["size"] == readings["size"].max()) & (readings["group"] == "G1+G2")]
        share = dict(zip(full["reading"], full["share"], strict=False))
        if {"disjoint", "non_identical"} <= set(share) and v.get("divergence_full") is not None:
            other.insert(0, "From this run's data, not its text alone: it defines divergence as "
                         "top-k sets that are *“entirely non-overlapping”*, yet its "
                         f"{v['divergence_full']:.0%} at the full registry fits lists that merely differ: "
                         f"this run gives {share['non_identical']:.0%} non-identical against "
                         f"{share['disjoint']:.0%} disjoint (G1 and G2), with its own stubs, which restate "
                         "their queries: a writer that abstracts more could raise the disjoint share.")
    return [(t, x) for t, x in zip(AGAINST_ITSELF, (lines, other, printed_p_lines(refs)), strict=True) if x]
