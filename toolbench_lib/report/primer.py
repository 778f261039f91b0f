"""The opening of ``teaching.md`` for a room new to the paper: the answer in plain words, and which way each
of this run's substitutions pushes PtR − RtP (from the ablations it ran; the LLM's effect is untested).
Every number comes from a saved table; one the run did not save is named, never replaced."""

from __future__ import annotations

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from ..config import EMBEDDER
from ..data.queries import subset_alias
from .front import _sets, fare_counts, holds_paper, leading_elsewhere
from .glossary import MIN_KAPPA
from .locate import TableCache
from .lookup import SETS, NotInRun, rows, value
from .scorecard import SETUP
from .verdicts import ALPHA, every_plan, power_table, solved_share

PLAIN_HEADING = "The answer in plain words"
SUBSTITUTIONS_HEADING = "Which way each substitution pushes PtR − RtP"
FAMILY_WORDS = {"bm25": "word-matching (BM25)", "hybrid": "hybrid (word and embedding)"}
UNTESTED = "not tested: no second LLM ran"
VERDICT = "**The verdict.**"


def _endpoint(c: TableCache) -> pd.DataFrame:
    """The dense primary comparisons of G1–G3, by set alias."""
    df = rows(c, "primary_endpoint")
    if lack := sorted({"rtp", "ptr", "diff", "significant", "leader", "paper_rtp", "paper_ptr",
                       "paper_leader", "verdict"} - set(df)):
        raise NotInRun(f"`primary_endpoint` has no {', '.join(lack)}")
    df = df.assign(alias=df["subset"].astype(str).map(subset_alias))
    return df[df["alias"].isin(SETS)].drop_duplicates("alias").set_index("alias", drop=False)


def _said(r, seen: bool = False) -> str:
    """Who does better, in plain words; a missing lead of the paper's size this run would likely have seen
    (``seen``) is said as missing, not as a tie."""
    if not bool(r.significant):
        return "no lead for the guesses (one of the paper's size would likely show)" if seen else \
            "too close to call"
    return "the request's own words do better" if r.leader == "RtP" else "the guesses do better"


SET_WORDS = {"G1": "G1 (one tool)", "G2": "G2 (tools of one category)", "G3": "G3 (tools across categories)",
             "G2_instruction": "G2, the file whose ground truth fits the paper's"}
G2_FILE = "G2_instruction"  # read beside the primary G2 file: its ground truth fits the paper's G2


def plain_words(c: TableCache) -> str:
    """The question without the field's words, then per set the share of needed APIs the first five results
    hold with each architecture, the paper's beside them, and whether the difference stands out (a table)."""
    try:
        table = _endpoint(c)
    except NotInRun as missing:
        return f"Not in this run: {missing}."
    apis = c.get("data_sources")
    among = f"among {fmt_count(int(apis['n_apis'].sum()))}" if apis is not None and "n_apis" in apis else \
        "in a registry"
    g2i = c.get("primary_endpoint_g2_instruction")
    g2i = g2i[g2i["retriever"] == "dense"].head(1) if g2i is not None and "retriever" in g2i else None
    if g2i is not None and len(g2i) and "G2" in table.index:
        at = list(table.index).index("G2") + 1  # the paper's G2 by its ground truth, beside the primary file
        row = g2i.assign(alias=G2_FILE).reindex(columns=table.columns).set_index(pd.Index([G2_FILE]))
        table = pd.concat([table.iloc[:at], row, table.iloc[at:]])
    power = power_table(c)
    seen = set() if power is None else {subset_alias(x.subset) for x in power.itertuples()
                                        if abs(x.paper_diff) >= x.mde}
    missed = [s for s, r in table.iterrows() if r.paper_leader == "PtR" and not holds_paper(r) and s in seen]
    rows = "\n".join(f"| {SET_WORDS.get(s, s)} | {r.paper_rtp:.0%} / {r.paper_ptr:.0%} | {r.rtp:.0%} / "
                     f"{r.ptr:.0%} | {_said(r, s in missed)} |" for s, r in table.iterrows())
    return (f"An agent must find the few web APIs a request needs {among}. It can search with the request's "
            "own words (retrieve first, RtP), or let a language model first guess which tools it needs and "
            "search with the guesses (plan first, PtR). The paper finds the request's words better for "
            "one-tool requests, the guesses better for multi-tool ones within one category and, in recall "
            "in direction only, across categories (“does not reach significance”). Of the APIs each request "
            "was written from (its `candidates`), the first five results hold on average:\n\n"
            "| requests | the paper: words / guesses | this run: words / guesses | this run's difference |\n"
            f"| :--- | :--- | :--- | :--- |\n{rows}")


SETTING = {"G1": "For single-tool requests (G1)", "G3": "For multi-tool requests across categories (G3)",
           "G2": "For multi-tool requests within one category (G2)"}


def _diff(r, p: str = "p_holm") -> str:
    """A dense comparison's PtR − RtP, its Holm CI where it has one, and its p, as the tables print them."""
    holm = pd.notna(r.get("ci_low_holm"))
    lo, hi = (r["ci_low_holm"], r["ci_high_holm"]) if holm else (r["ci_low"], r["ci_high"])
    return f"{fmt_signed(r['diff'])} {fmt_ci(lo, hi)}, {fmt_p(r[p])}"


def _set_sentence(c: TableCache, s: str, r, g2i, power: pd.DataFrame | None) -> str:
    """One set's verdict against the paper's: who leads with dense retrieval, PtR − RtP and its test, the
    paper's difference; a lead lost on ``relevant``; a missing lead in both G2 files, with the power to see
    it."""
    paper = r.paper_ptr - r.paper_rtp
    if holds_paper(r) and bool(r.significant):
        rel = c.get("primary_endpoint_relevant")
        rel = rel[(rel["subset"] == r.subset) & (rel["retriever"] == "dense")] if rel is not None else rel
        lost = rel is not None and len(rel) and not bool(rel["significant"].iloc[0])
        who = ("searching with the request's own words (RtP) finds more of the needed APIs than searching "
               "with the planner's guesses (PtR)" if r.leader == "RtP" else
               "searching with the planner's guesses (PtR) finds more of the needed APIs than searching with "
               "the request's own words (RtP)")
        lost = (f", though not significantly on the stricter ground truth `relevant` "
                f"({fmt_p(rel['p_holm'].iloc[0])})") if lost else ""
        return (f"{SETTING[s]}, {who}, as the paper found (PtR − RtP in recall@5: {_diff(r)}; paper "
                f"{fmt_signed(paper)}){lost}.")
    if holds_paper(r):
        return (f"{SETTING[s]}, neither leads significantly ({_diff(r)}), as in the paper, whose own "
                f"difference ({fmt_signed(paper)}) *“does not reach significance”*.")
    files = [(r.subset, r)] + ([(G2_FILE, g2i)] if g2i is not None and s == "G2" else [])
    said = "; ".join(f"{name}{FIT * (name == G2_FILE)}: {_diff(x, 'p' if name == G2_FILE else 'p_holm')}"
                     for name, x in files)
    at = power.set_index("subset")["power_at_paper"] if power is not None else pd.Series(dtype=float)
    chance = [f"{at[name]:.0%}" for name, _ in files if pd.notna(at.get(name))]
    likely = (f", though this run would have seen a lead of its size with {' and '.join(chance)} likelihood "
              f"(power at p < {ALPHA:g})" if len(chance) == len(files) else "")
    whose = "the planner's guesses (PtR" if r.paper_leader == "PtR" else "the request's own words (RtP"
    return (f"{SETTING.get(s, s)}, the paper's lead for {whose}, {fmt_signed(paper)}) does not "
            "appear" + (" in either G2 file" if len(files) > 1 else "") + f" ({said}){likely}.")


FIT = ", whose ground truth fits the paper's G2"


def verdict(c: TableCache, report: pd.DataFrame | None = None) -> str:
    """The answer in five sentences from the saved comparisons: one per set with a paper leader (dense
    retrieval, :func:`_set_sentence`), what a missing lead can say (the untested setup, another search), and
    how the paper's numbers fare (``report``, the scorecard) with whether its pass rates can be checked."""
    try:
        table = _endpoint(c)
    except NotInRun as missing:
        return f"{VERDICT} Not in this run: {missing}."
    g2i = c.get("primary_endpoint_g2_instruction")
    g2i = g2i[g2i["retriever"] == "dense"] if g2i is not None and "retriever" in g2i else pd.DataFrame()
    g2i = g2i.iloc[0] if len(g2i) else None
    power = power_table(c)
    said = [_set_sentence(c, s, r, g2i, power) for s, r in table.iterrows()
            if isinstance(r.paper_leader, str)]
    if missed := [s for s, r in table.iterrows() if r.paper_leader == "PtR" and not holds_paper(r)]:
        said.append("The guesses here come from a much smaller model than the paper's, matched to the APIs "
                    "by a smaller embedder, so the paper's own setup stays untested"
                    + _other_search(c, missed))
    every = fare_counts(report) if report is not None else None
    fare = (f"Of the paper's {fmt_count(every['n'])} reference numbers, this run cannot tell "
            f"{fmt_count(every['consistent'])} from its own and {fmt_count(every['differs'])} differ, "
            f"{fmt_count(every[SETUP])} of them for an untested setup difference (the LLM above all)"
            if every else "")
    judge = c.get("judge_validity")
    if judge is not None and {"evidence_none", "solved_rate_none", "kappa"} <= set(judge):
        kappa, (blind, _) = judge["kappa"].max(), solved_share(every_plan(judge))
        if pd.notna(blind) and not kappa >= MIN_KAPPA:
            fare += ("; the" if fare else "The") + (" paper's pass rates cannot be checked, since this run's "
                                                    f"judge calls {blind:.0%} of plans that name no needed "
                                                    "API “Solved”")
    said += [fare[0].upper() + fare[1:] + "."] if fare else []
    return f"{VERDICT} {' '.join(said)}"


def _other_search(c: TableCache, sets: list[str]) -> str:
    """Where another search (BM25, hybrid) with the same guesses does give them a significant lead on
    ``sets`` (``primary_endpoint_families``), on G2 also on G2_instruction
    (``primary_endpoint_g2_instruction``), as the end of a sentence; "." where none does."""
    other = c.get("primary_endpoint_families")
    where = [s for s in sets if leading_elsewhere(other, [s], "PtR")] if other is not None and \
        {"retriever", "subset", "significant", "leader"} <= set(other) else []
    if not where:
        return "."
    g2i = c.get("primary_endpoint_g2_instruction")
    both = set(leading_elsewhere(g2i, ["G2_instruction"], "PtR")) if g2i is not None and "G2" in where and \
        {"retriever", "subset", "significant", "leader"} <= set(g2i) else None
    each = [FAMILY_WORDS.get(f, f) + ("" if both is None else " search in both G2 files" if f in both else
                                      " search in one of them")
            for f in leading_elsewhere(other, where, "PtR")]
    return (f"; the same guesses do lead significantly on {' and '.join(where)} with {_sets(each)}"
            + (" search" if both is None else "") + ", so this run cannot tell how much of the missing lead "
            "is the small model's and how much the embedder's.")


def _embedder_shift(c: TableCache, s: str) -> float:
    """PtR − RtP with the stand-in embedder minus with the run's (point estimates, ``ablation_embedder``)."""
    def recall(embedder: str, method: str) -> float:
        return value(c, "ablation_embedder", "recall", subset=s, embedder=embedder, method=method)
    other = next(e for e in rows(c, "ablation_embedder", subset=s)["embedder"].astype(str) if e != EMBEDDER)
    return (recall(other, "ptr") - recall(other, "rtp")) - (recall(EMBEDDER, "ptr") - recall(EMBEDDER, "rtp"))


def _breadth_shift(c: TableCache, s: str) -> float:
    """PtR − RtP with the rule splitter's stubs minus with the LLM's (``ablation_decomposition``)."""
    return (value(c, "ablation_decomposition", "ptr_minus_rtp", subset=s, decomposer="rules")
            - value(c, "ablation_decomposition", "ptr_minus_rtp", subset=s, decomposer="llm"))


def _row(c: TableCache, table: pd.DataFrame, what: str, how, shift) -> str:
    """One substitution: how it was tested, then per set the change of PtR − RtP and whether it moves this
    run's difference towards the paper's (a set the ablation did not save is said so)."""
    try:
        tested = how(c)
    except (NotInRun, StopIteration) as missing:
        return f"| {what} | not in this run: {missing or 'no stand-in embedder'} | | |"
    moves, towards = [], []
    for s, r in table.iterrows():
        try:
            delta = shift(c, s)
        except (NotInRun, StopIteration):
            moves.append(f"{s} not in this run")
            continue
        d, paper = r["diff"], r.paper_ptr - r.paper_rtp
        moves.append(f"{s} {fmt_signed(delta)}")
        crossed = (d + delta - paper) * (d - paper) < 0  # beyond the paper's value, whether nearer or not
        closer = abs(d + delta - paper) < abs(d - paper)
        towards.append(f"{s} {'past it' if crossed else 'towards' if closer else 'away'}")
    return f"| {what} | {tested} | {', '.join(moves)} | {', '.join(towards)} |"


def substitution_lines(c: TableCache) -> list[str]:
    """Which way each substitution moves PtR − RtP recall@5 on candidates, set by set, and whether towards
    the paper's difference: the embedder and the stub breadth from their ablations (point estimates, one run,
    read as a direction only), the LLM untested."""
    try:
        table = _endpoint(c)
    except NotInRun as missing:
        return [f"### {SUBSTITUTIONS_HEADING}", "", f"Not in this run: {missing}.", ""]

    def embedder(c: TableCache) -> str:
        e = rows(c, "ablation_embedder")
        stand_in = ", ".join(sorted(set(e["embedder"].astype(str)) - {EMBEDDER}))
        return (f"{stand_in} for {EMBEDDER} (GTE-base is not offline), "
                f"{fmt_count(int(e['n_queries'].max()))} queries per set, a "
                f"{fmt_count(int(e['registry_size'].max()))}-API sub-registry (`ablation_embedder`)")

    def breadth(c: TableCache) -> str:
        n = {d: value(c, "ablation_decomposition", "stubs_per_query", subset="G1", decomposer=d)
             for d in ("rules", "llm")}
        return (f"a rule splitter's stubs ({fmt_number(n['rules'])} per G1 query) for the LLM's "
                f"({fmt_number(n['llm'])} in run 0; the scorecard's counts average every run), full "
                "registry (`ablation_decomposition`); the change below is the splitter's whole; the "
                "scorecard scales it to the paper's 2.45 stubs (`stub_breadth`)")

    paper = ", ".join(f"{s} {fmt_signed(r.paper_ptr - r.paper_rtp)}" for s, r in table.iterrows())
    here = ", ".join(f"{s} {fmt_signed(r['diff'])}" for s, r in table.iterrows())
    return [f"### {SUBSTITUTIONS_HEADING}", "",
            f"PtR − RtP recall@5 on `candidates` with dense retrieval is here {here}; in the paper {paper}. "
            "Each tested substitution moves it by the change below (point estimates of one run, on the "
            "ablation's own queries: a direction, not a correction).", "",
            "| substitution | tested by | change of PtR − RtP | towards the paper's difference? |",
            "| :--- | :--- | :--- | :--- |",
            _row(c, table, "embedder: MiniLM, not GTE-base", embedder, _embedder_shift),
            _row(c, table, "stub breadth: fewer stubs than the paper's 2.4–2.5", breadth, _breadth_shift),
            f"| stub writer and planner: a small local LLM, not Gemini 2.5 Flash | {UNTESTED} | unknown | "
            "unknown |", ""]
