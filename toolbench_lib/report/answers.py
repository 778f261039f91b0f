"""A model answer to each session block's question, from the report it plans: its section's rows, the
front's sentences and the run's tables; a block whose rows the report lacks gets none."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..analysis.numbers import fmt_count, fmt_number, fmt_signed
from ..analysis.references import paper_value
from ..data.queries import subset_alias
from .against import QUOTES
from .front import llm_free
from .locate import TableCache
from .lookup import NotInRun, value
from .scorecard import SCORECARD_TABLE
from .verdicts import POWER, power_table

Cells = dict[str, list[str]]  # a row's id: its cells after the id (set, paper, this run, CI, status)


def _sentence(report_md: str, start: str) -> str:
    """The report's first sentence that starts with ``start``, its first letter lowered; empty if none."""
    m = re.search(rf"(?:^|[\s*]){re.escape(start)}.*?\.(?=\s|$)", report_md, re.M)
    said = m.group(0).lstrip(" *").rstrip(".") if m else ""
    return said[:1].lower() + said[1:]


def _bounds(ci: str) -> tuple[float, float] | None:
    found = re.findall(r"-?\d+\.\d+", ci)
    return (float(found[0]), float(found[1])) if len(found) >= 2 else None


def _testable(cells: Cells, md: str, cache: TableCache | None) -> str:
    scorecard = cache.having(SCORECARD_TABLE, "status") if cache is not None else None
    free = llm_free(scorecard.astype(object)) if scorecard is not None else None  # an all-empty column: NaN
    return (f"the half that needs no LLM: RtP's retrieval and the data's counts ({fmt_count(free[0])} "
            f"numbers: {fmt_count(free[1])} consistent, {fmt_count(free[2])} differing by construction). "
            "Every comparison of the two architectures rests on PtR's stubs, which a much smaller LLM writes "
            "here, so it is tested for this run's setup only") if free else ""


def _setup(cells: Cells, md: str, cache: TableCache | None) -> str:
    by_design = [f"`{r}`" for r, c in cells.items() if "by construction" in c[4]]
    return ("the LLM's, in the table of what differs from the paper's setup: a small local model writes the "
            "stubs and plans here, not the paper's, and no second one ran"
            + (f"; {' and '.join(by_design)} differ by construction" if by_design else ""))


def _g2(cells: Cells, md: str, cache: TableCache | None) -> str:
    line = re.search(r"^- \*\*G2 \(.*$", md, re.M)
    if not line or "does not appear" not in line[0]:
        return ""
    power = power_table(cache) if cache is not None else None  # the verdict's own power at the paper's lead
    seen = ", though a lead of its size would likely have shown" if power is not None and (
        power.loc[power["subset"].map(subset_alias) == "G2", "power_at_paper"] >= POWER).any() else ""
    other = _sentence(md, "With the same stubs, ")
    weaker = ", fewer and closer to the request than the paper's" * ("tests another PtR" in md)
    return (f"untested for the paper's setup, whose stubs come from a much larger model, matched by a larger "
            f"embedder; not reproduced with this run's, whose stubs a small model writes{weaker}: the "
            f"paper's lead for PtR on G2 does not appear{seen}" + (f"; {other}" if other else ""))


def _budget(cells: Cells, md: str, cache: TableCache | None) -> str:
    c = cells.get("g2_budget_rtp10_vs_ptr5")
    ci = _bounds(c[3]) if c and len(c) > 4 else None
    if ci is None:
        return ""
    more = "more than" if ci[0] > 0 else "less than" if ci[1] < 0 else "about as much as"
    margin = re.search(r"± ?([\d.]+)", c[1])
    undecided = (f"; whether by more than this project's margin (±{margin[1]}, half the paper's G2 lead at "
                 "k = 5) is undecided"
                 if "undecided" in c[4] and margin and more != "about as much as" else "")
    return (f"on G2, RtP at k = 10 finds {more} PtR at k = 5: {c[2]} {c[3].replace(chr(92), '')}, where the "
            f"paper has them nearly identical{undecided}")


def _stubs(cells: Cells, md: str, cache: TableCache | None) -> str:
    if not (c := cells.get("g1_stub_hit_share")):
        return ""
    fewer = "less often" if "(below)" in c[4] else "more often" if "(above)" in c[4] else "about as often"
    other = ""
    if o := cells.get("g1_stub_hit_share_topk"):  # the second reading the row's cause names
        same, ci = "as in" if o[4].startswith("consistent") else "unlike", o[3].replace(chr(92), "")
        other = f"; counted as any of a stub's top five, {o[2]} {ci}, {same} the paper"
    try:
        ptr, nobrand = (value(cache, "ablation_query_coupling", col, subset="G1")
                        for col in ("ptr", "ptr_nobrand"))
        kept = (f"; the request's brand words carry much of what they find (without them PtR's G1 recall "
                f"falls from {fmt_number(ptr)} to {fmt_number(nobrand)})")
    except NotInRun:
        kept = ""
    return (f"judge them against the paper's Table 2 stubs: a G1 stub's first API is a needed one {fewer} "
            f"here than in the paper ({c[2]} against {c[1]}){other}{kept}. Where a stub already names the "
            "paper's tool and still misses, what is left is the matching, untested here: this run's embedder "
            "and the similar APIs crowding that tool's neighbourhood in the registry")


def _misses(cells: Cells, md: str, cache: TableCache | None) -> str:
    c = cells.get("wrong_tool_on_miss")
    try:
        more = "more" if float(c[2]) > float(c[1]) else "less"
    except (TypeError, ValueError):  # no row, or no value in this run
        return ""
    said = ("as in the paper" if c[4].startswith("consistent") else f"somewhat {more} often than the "
            "paper's “~” value, which the CI excludes" if "reading of the paper's" in c[4] else
            "unlike the paper")
    return (f"it mostly goes on with wrong tools: {c[2]} {c[3].replace(chr(92), '')} of plans after a total "
            f"miss, {said} ({c[1]})")


def _divergence(cells: Cells, md: str, cache: TableCache | None) -> str:
    name = {r: r.split("smallest_")[-1].rsplit("_", 1)[0].replace("_", "-") for r in cells}
    fits = [r for r, c in cells.items() if c[4].startswith("consistent")]
    return (f"the {' and '.join(name[r] for r in fits)} reading ("
            + "; ".join(f"{name[r]} {c[2]}" for r, c in cells.items()) + f", the paper {cells[fits[0]][1]})"
            ) if fits else ""


def _routing(cells: Cells, md: str, cache: TableCache | None) -> str:
    mix = _sentence(md, "Always RtP, which calls no LLM")
    try:  # the CI the report cites above
        diff, low, high = (value(cache, "routing_claim", col, against="always_rtp")
                           for col in ("diff", "ci_low", "ci_high"))
        mix = mix.replace("the CI above", f"routed − always RtP {fmt_signed(diff)} [{fmt_signed(low)}, "
                                          f"{fmt_signed(high)}]")
    except NotInRun:
        pass
    auroc = cells.get("g1_top1_cosine_routing_auroc")
    ci = _bounds(auroc[3]) if auroc else None
    if not mix or ci is None:
        return ""
    tell = "is not shown to tell when (its CI holds chance, 0.5)" if ci[0] <= 0.5 <= ci[1] else "tells when"
    return f"not here: {mix}; RtP's top-1 cosine {tell}: AUROC {auroc[2]}"


def _ground_truth(cells: Cells, md: str, cache: TableCache | None) -> str:
    try:
        here, strict = (value(cache, "data_gt_sizes", "mean", subset="G1", gt=gt) for gt in ("candidates",
                                                                                            "relevant"))
    except NotInRun:
        return ""
    if (paper := paper_value("g1_gt_size")) is None:
        return ""
    return (f"its ground truth first: it defines it as *“{QUOTES['gt']}”*, yet its G1 mean of {paper:g} APIs "
            f"per query fits `candidates` ({fmt_number(here)} here) rather than that definition (`relevant`, "
            f"{fmt_number(strict)}); which one it scored decides what every recall and pass rate it reports "
            "means, and what a replication must match")


ANSWERS: dict[str, Callable[[Cells, str, TableCache | None], str]] = {
    "The question and the answer": _testable, "Setup and data": _setup,
    "Which architecture finds more tools": _g2, "A larger retrieval budget": _budget,
    "Stubs and Intent-Registry Coupling": _stubs, "Trajectories": _misses, "Registry scale": _divergence,
    "Cost and routing": _routing, "Where the paper disagrees with itself": _ground_truth,
}


def block_answer(start: str, cells: Cells, report_md: str, cache: TableCache | None = None) -> str:
    """The model answer for the section whose heading starts with ``start`` (a clause), or empty; ``cache``:
    the run's tables, where an answer reads one."""
    make = ANSWERS.get(start)
    return make(cells, report_md, cache) if make else ""
