"""The opening of ``teaching.md``: the answer in plain words, and which way each of this run's
substitutions pushes PtR − RtP. Every number comes from a saved table; a missing one is named."""

from __future__ import annotations

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed, join_words
from ..analysis.references import paper_value
from ..config import EMBEDDER, K_MAX
from ..data.queries import subset_alias
from .front import FAMILY_SHORT, LEAD_COLUMNS, holds_paper, leading_elsewhere
from .glossary import MIN_KAPPA
from .locate import TableCache
from .lookup import SETS, NotInRun, judge_rows, rows, solved_share, value
from .verdicts import ALPHA, FEW, POWER, power_table

PLAIN_HEADING = "The answer in plain words"
SUBSTITUTIONS_HEADING = "Which way each substitution pushes PtR − RtP"
FAMILY_WORDS = {"bm25": "word-matching (BM25)", "hybrid": "hybrid (word and embedding)"}
UNTESTED = "not tested: no second LLM ran"
VERDICT = "**The verdict.**"
TERMS_MARK = "**Words used below.**"


def _endpoint(c: TableCache) -> pd.DataFrame:
    """The dense primary comparisons of G1–G3, by set alias."""
    df = rows(c, "primary_endpoint")
    if lack := sorted({"rtp", "ptr", "diff", "significant", "leader", "paper_rtp", "paper_ptr",
                       "paper_leader", "verdict"} - set(df)):
        raise NotInRun(f"`primary_endpoint` has no {', '.join(lack)}")
    df = df.assign(alias=df["subset"].astype(str).map(subset_alias))
    fam, col = c.get("primary_endpoint_families"), "p_holm_all_families_robustness"  # Holm over every family
    if fam is not None and {col, "retriever", "subset"} <= set(fam):
        dense = fam[fam["retriever"] == "dense"].set_index("subset")[col]
        df = df.assign(**{col: df["subset"].map(dense)})
    return df[df["alias"].isin(SETS)].drop_duplicates("alias").set_index("alias", drop=False)


def _said(r, seen: bool = False) -> str:
    """Who does better, in plain words; a missing lead of the paper's size this run would likely have seen
    (``seen``) is said as missing, not as a tie."""
    if not bool(r.significant):
        return ("no lead for a small local model's guesses, though one of the paper's size would likely have "
                "shown; the paper's own guesses untested" if seen else "too close to call")
    return "the request's own words do better" if r.leader == "RtP" else "the guesses do better"


SET_WORDS = {"G1": "G1 (one tool)", "G2": "G2 (tools of one category)", "G3": "G3 (tools across categories)",
             "G2_instruction": "G2, the file whose ground truth fits the paper's"}
G2_FILE = "G2_instruction"  # read beside the primary G2 file: its ground truth fits the paper's G2


def plain_words(c: TableCache, report: str = "report.md", intro: bool = True) -> str:
    """The question in plain words (with ``intro``), then per set each architecture's share of needed APIs
    in the first five results beside the paper's (a table); ``report``: the file its note links to."""
    try:
        table = _endpoint(c)
    except NotInRun as missing:
        return f"Not in this run: {missing}."
    apis = c.having("data_sources", "n_apis")
    among = f"among {fmt_count(int(apis['n_apis'].sum()))}" if apis is not None else "in a registry"
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
    return ((f"An agent must find the few web APIs a request needs {among}. It can search with the request's "
             "own words (retrieve first, RtP), or let a language model first guess which tools it needs and "
             "search with the guesses (plan first, PtR). ") * intro + "Of the APIs each request was written "
            "from (its `candidates`), the first five results hold on average:\n\n"
            "| requests | the paper: words / guesses | this run: words / guesses | this run's difference |\n"
            f"| :--- | :--- | :--- | :--- |\n{rows}\n\nThe paper's shares are on its own ground truth; that "
            "it counts `candidates` is this run's hypothesis, from its sizes ([Where the paper disagrees "
            f"with itself]({report}#where-the-paper-disagrees-with-itself)).")


def _bounds(r) -> tuple[float, float]:
    """A dense comparison's Holm CI where it has one, else its unadjusted CI."""
    holm = pd.notna(r.get("ci_low_holm"))
    return (r["ci_low_holm"], r["ci_high_holm"]) if holm else (r["ci_low"], r["ci_high"])


def _ci(r) -> str:
    """A dense comparison's PtR − RtP and its CI (:func:`_bounds`), as the tables print them."""
    return f"{fmt_signed(r['diff'])} {fmt_ci(*_bounds(r))}"


def _set_line(s: str, r, g2i, power: float = float("nan"), on_relevant: str = "") -> str:
    """One set's dense verdict against the paper's: who leads, PtR − RtP and its CI, the paper's difference;
    ``on_relevant`` where the lead is lost there; a null of little ``power`` is said as such."""
    paper, head = fmt_signed(r.paper_ptr - r.paper_rtp), f"- **{SET_WORDS.get(s, s)}:** "
    if holds_paper(r) and bool(r.significant):
        over = r.get("p_holm_all_families_robustness")
        return (f"{head}{r.leader} finds more, as in the paper: {_ci(r)} (paper {paper})"
                + (f", on `candidates`; not significant on `relevant` ({on_relevant})" if on_relevant else "")
                + (f" or under Holm over every family's comparisons ({fmt_p(over)})"
                   if pd.notna(over) and over >= ALPHA else "") + ".")
    if holds_paper(r) and power < POWER:
        return (f"{head}neither leads significantly in recall: {_ci(r)} (paper {paper}, *“does not reach "
                f"significance”*); a test with {power:.0%} power at the paper's difference could hardly have "
                "told them apart" + (f" ({fmt_count(int(g))} API samples)" if pd.notna(g := r.get("n_groups"))
                                     else "") + ", so it neither confirms nor contradicts the paper.")
    if holds_paper(r):
        return (f"{head}neither leads in recall, as in the paper: {_ci(r)} (paper {paper}, *“does not reach "
                "significance”*).")
    both = g2i is not None and s == "G2"
    lo, hi = _bounds(r)
    out = not lo <= r.paper_ptr - r.paper_rtp <= hi
    return (f"{head}with this run's stubs, the paper's lead for {r.paper_leader} does not appear"
            + " in either G2 file" * both + f": {_ci(r)}" + f", a CI that excludes the paper's {paper}" * out
            + (f", and {_ci(g2i)} (unadjusted) on {G2_FILE}{FIT}" if both else "")
            + ("." if out else f" (paper {paper})."))


FIT = ", whose ground-truth size fits the paper's"
RESTS = "**What it rests on.**"


def verdict(c: TableCache, llm: str = "") -> str:
    """The answer from the saved comparisons: a line per set with a paper leader (dense, stubs by ``llm``),
    then what it rests on, a line each."""
    try:
        table = _endpoint(c)
    except NotInRun as missing:
        return f"{VERDICT} Not in this run: {missing}."
    g2i = c.get("primary_endpoint_g2_instruction")
    g2i = g2i[g2i["retriever"] == "dense"] if g2i is not None and "retriever" in g2i else pd.DataFrame()
    g2i = g2i.iloc[0] if len(g2i) else None
    rel, rests, lost = c.get("primary_endpoint_relevant"), [], {}
    for s, r in table.iterrows():
        x = rel[(rel["subset"] == r.subset) & (rel["retriever"] == "dense")] if rel is not None else ()
        if holds_paper(r) and bool(r.significant) and len(x) and not bool(x["significant"].iloc[0]):
            lost[s] = f"Holm, {fmt_p(x['p_holm'].iloc[0])}"
            rests += [f"{s}'s lead {held}" for held in (_lead_holds(c, s, r),) if held]
    power = power_table(c)  # by set: power_at_paper, and power_at_paper_holm at Holm's strictest level
    power = pd.DataFrame(columns=["power_at_paper", "power_at_paper_holm"], dtype=float) if power is None \
        else power.set_index("subset")
    at = power["power_at_paper"]
    lines = [_set_line(s, r, g2i, at.get(r.subset, float("nan")), lost.get(s, ""))
             for s, r in table.iterrows() if isinstance(r.paper_leader, str)]
    rests += [_leans(s, r) for s, r in table.iterrows()
              if pd.notna(r.get("p_holm_no_largest_cluster_robustness"))]
    if missed := [s for s, r in table.iterrows() if r.paper_leader == "PtR" and not holds_paper(r)]:
        shift = c.having("primary_crossover", "retriever", "second", "p_holm")
        shift = shift[(shift["retriever"] == "dense") & shift["second"].astype(str).map(subset_alias).isin(
            missed)] if shift is not None else ()
        rests += [f"{subset_alias(x.second)}'s shift towards PtR from G1, {fmt_signed(x.diff)}, Holm CI "
                  f"{fmt_ci(x.ci_low_holm, x.ci_high_holm)}, is in the paper's direction (paper "
                  f"{fmt_signed(x.paper_diff)}) but not significant under Holm ({fmt_p(x.p_holm)}; "
                  f"unadjusted {fmt_p(x.p)})"
                  for x in getattr(shift, "itertuples", lambda: ())() if x.diff > 0 and x.p_holm >= ALPHA]
        rests += [x for x in (_relevant_k_line(c, table, missed), _stubs_line(c, table, missed)) if x]
        names = [*table.loc[missed, "subset"], *[G2_FILE] * (g2i is not None)]
        if chance := [f"{at[n]:.0%} ({n})" for n in names if pd.notna(at.get(n))]:
            rests.append(f"had this run's stubs produced a lead of the paper's size, it would have shown "
                         f"with {' and '.join(chance)} likelihood (power at p < {ALPHA:g}, unadjusted)")
    judge = judge_rows(c.having("judge_validity", "evidence_none", "solved_rate_none", "kappa"))
    if judge is not None:  # the rows the main section reads the judge from
        kappa, (blind, _) = judge["kappa"].max(), solved_share(judge)
        leads = [f"{s}'s, {fmt_number(b)} against {fmt_number(a)}" for s in table.index
                 if holds_paper(table.loc[s]) and not bool(table.loc[s, "significant"])
                 and pd.notna(a := paper_value(f"{s.lower()}_rtp_pass_rate"))
                 and pd.notna(b := paper_value(f"{s.lower()}_ptr_pass_rate")) and b > a]
        if pd.notna(blind) and not kappa >= MIN_KAPPA:
            rests.append("the paper's pass rates" + (f", with its PtR lead where recall has none "
                                                      f"({'; '.join(leads)}), " if leads else " ")
                         + f"cannot be checked, since this run's judge calls {blind:.0%} of plans that name "
                         "no needed API “Solved”")
    said = "\n".join(f"- {x[0].upper()}{x[1:].rstrip('.')}." for x in rests)
    stated = [f"{s} {fmt_signed(v)}" for s in table.index
              if (v := paper_value(f"{s.lower()}_ptr_minus_rtp_recall")) is not None]
    stated = f"; its text states {', '.join(stated)}" if stated else ""
    return (f"{_answer(c, table, llm, at, lost)}\n\n{VERDICT} PtR − RtP in recall@5 on `candidates`, its "
            f"Holm CI, then the paper's (from its means{stated}):\n\n" + "\n".join(lines)
            + (f"\n\n{RESTS}\n\n{said}" if said else ""))


PLAIN_SETS = {"G1": "one-tool requests (G1)", "G2": "requests for tools of one category (G2)",
              "G3": "requests for tools across categories (G3)"}
ANSWER = "**The answer.**"


def _answer(c: TableCache, table: pd.DataFrame, llm: str = "", weak: pd.Series | None = None,
            lost: dict | None = None) -> str:
    """The verdict in short plain sentences, set by set (``table``; ``weak``: each set's power at the
    paper's difference), then other searches that give the stubs a lead, then what stays untested."""
    weak = {} if weak is None else weak
    said, beyond = [], []
    for s, r in table.iterrows():
        where = PLAIN_SETS.get(s, s)
        if holds_paper(r) and bool(r.significant):
            said.append(f"{ARCH_WORDS[r.leader]} finds more for {where}, as in the paper")
        elif holds_paper(r) and weak.get(r.subset, 1.0) < POWER:
            said.append(f"neither finds significantly more for {where}, which this run could hardly have "
                        "told apart")
        elif holds_paper(r):
            said.append(f"neither finds significantly more for {where}, as in the paper")
        elif isinstance(r.paper_leader, str):
            said.append(f"{ARCH_WORDS[r.paper_leader]} shows none of the paper's lead for {where}")
            beyond.append(_other_search(c, [s]) if r.paper_leader == "PtR" else "")
    writer = f"stubs written by a small local model ({llm})" if llm else "this run's stubs"
    return (f"{ANSWER} With dense retrieval and {writer}: " + "; ".join(said) + ". " + "".join(beyond)
            + "The paper's own stub writer (Gemini 2.5 Flash) and embedder (GTE-base) were not tested.")


ARCH_WORDS = {"RtP": "retrieving first (RtP)", "PtR": "planning first (PtR)"}
NUMBER_WORDS = {2: "two", 3: "three"}


def _leans(s: str, r) -> str:
    """How set ``s``'s difference reads without its largest cluster (``primary_endpoint``'s robustness)."""
    now = r.p_holm_no_largest_cluster_robustness < ALPHA
    lo, hi = r.ci_low_holm_no_largest_cluster_robustness, r.ci_high_holm_no_largest_cluster_robustness
    return (f"one API sample holds {fmt_count(int(r.largest_cluster_n))} of {s}'s "
            f"{fmt_count(int(r.n_queries))} queries: without it, PtR − RtP is "
            f"{fmt_signed(r.diff_no_largest_cluster_robustness)}, Holm CI {fmt_ci(lo, hi)}, "
            f"{'still' if now == bool(r.significant) else 'then'} {'' if now else 'not '}significant")


def _lead_holds(c: TableCache, s: str, r) -> str:
    """Where set ``s``'s lead also holds: run 0 alone (temperature 0, ``primary_endpoint``'s robustness) and,
    on G1, further G1 files (``beyond_validation``, paired, unadjusted)."""
    where, sign = [], 1 if r["diff"] > 0 else -1  # the lead's direction: a check that holds keeps it
    if pd.notna(p0 := r.get("p_holm_run0_robustness")) and p0 < ALPHA and sign * r.diff_run0_robustness > 0:
        where.append(f"at temperature 0 alone (run 0: {fmt_signed(r.diff_run0_robustness)}, "
                     f"Holm {fmt_p(p0)})")
    t = c.having("beyond_validation", "subset", "method", "recall_reference", "recall_diff", "recall_p_value")
    if s == "G1" and t is not None:
        g1 = t[t["subset"].astype(str).str.startswith("G1_") & (t["method"] == "ptr")
               & (t["recall_reference"] == "rtp") & (sign * t["recall_diff"] > 0)
               & (t["recall_p_value"] < ALPHA)]
        if len(g1):
            where.append(f"in {NUMBER_WORDS.get(len(g1), len(g1))} further G1 files ("
                         + "; ".join(f"{x.subset} {fmt_signed(x.recall_diff)}, {fmt_p(x.recall_p_value)}"
                                     for x in g1.itertuples()) + "; unadjusted)")
    return f"holds {' and '.join(where)}" if where else ""


def _relevant_k_line(c: TableCache, table: pd.DataFrame, sets: list[str], k: int = K_MAX) -> str:
    """Where a lead the paper claims and this run misses on ``sets`` shows on `relevant` at the largest k
    (``k_ablation``: PtR − RtP at ``k``, unadjusted, and its change from k = 1 with its Holm p)."""
    t = c.having("k_ablation", "subset", "gt", "k", "method", "recall_gain", "recall_gain_ci_low",
                 "recall_gain_ci_high", "recall_gain_vs_k1", "recall_gain_vs_k1_p_holm")
    if t is None:
        return ""
    t = t[(t["k"] == k) & (t["method"] == "ptr")].assign(alias=t["subset"].astype(str).map(subset_alias))
    cand = {x.alias: f"{fmt_signed(x.recall_gain)} {fmt_ci(x.recall_gain_ci_low, x.recall_gain_ci_high)}"
            for x in t[t["gt"] == "candidates"].itertuples()}
    said = [f"{s}'s k = {k} difference is {fmt_signed(x.recall_gain)} "
            f"{fmt_ci(x.recall_gain_ci_low, x.recall_gain_ci_high)} (paper {fmt_signed(g)}; on `candidates` "
            f"{cand.get(s, 'not saved')}), grown from k = 1 by {fmt_signed(x.recall_gain_vs_k1)} (Holm over "
            f"the sets only, {fmt_p(x.recall_gain_vs_k1_p_holm)})"
            for x in t[(t["gt"] == "relevant") & (t["recall_gain_ci_low"] > 0)].itertuples()
            if (s := x.alias) in sets and (g := paper_value(f"{s.lower()}_ptr_gain_k{k}") or 0) > 0]
    return ("on `relevant`, the ground truth the paper's words name (a reading chosen after seeing the "
            f"data), PtR's lead appears at large k: {'; '.join(said)}") if said else ""


def _stubs_line(c: TableCache, table: pd.DataFrame, sets: list[str]) -> str:
    """What this run's stubs are on ``sets``: closeness to the request, their brand words, their count
    against the paper's and the rule splitter's shift; empty without the first two tables."""
    def by_set(name: str, col: str, **where) -> pd.Series:
        if (t := c.having(name, "subset", col, *where)) is None:
            return pd.Series(dtype=float)
        for k, v in where.items():
            t = t[t[k] == v]
        return t.set_index(t["subset"].astype(str).map(subset_alias))[col]

    echo, kept = by_set("ablation_stub_echo", "max_cos"), by_set("ablation_stub_text", "recall",
                                                                  variant="name+reasoning")
    gone = by_set("ablation_stub_text", "recall", variant="name+reasoning-brand")
    sets = [s for s in sets if s in echo and s in kept and s in gone]
    if not sets:
        return ""
    said = []
    n, low, high = (by_set("stub_stats", "stubs_per_query", gt="candidates"),
                    *(paper_value(f"{sets[0].lower()}_stubs_per_query", b) for b in ("min", "max")))
    if low is not None and all(s in n for s in sets):
        said.append(f"fewer ({join_words([f'{s} {fmt_number(n[s])} per query' for s in sets])} against the "
                    f"paper's {low:g}–{high:g})")
    said += [f"close to the request (the best one's cosine to it: "
             f"{join_words([f'{s} {fmt_number(echo[s])}' for s in sets])})",
             "keeping its names (without its capitalised words, places included, PtR's run-0 recall falls "
             f"from {join_words([f'{fmt_number(kept[s])} to {fmt_number(gone[s])} on {s}' for s in sets])})"]
    moved = []
    for s in sets:
        try:
            d = _breadth_shift(c, s)
        except (NotInRun, StopIteration):
            continue
        way = "towards" if (d > 0) == (table.loc[s, "paper_ptr"] > table.loc[s, "paper_rtp"]) else "away from"
        moved.append(f"{s}'s difference by {fmt_signed(d)}, {way} the paper's")
    return ("this run's stubs differ from the paper's: " + ", ".join(said)
            + ", so this tests another PtR than the paper's"
            + (f"; the one stub change tried, a rule splitter's more stubs, moved {join_words(moved)} (one "
               "run, unscaled, no CI)" if moved else ""))


def verdict_block(report_md: str, until: str = TERMS_MARK) -> str:
    """The report's answer, verdict and what it rests on, from :data:`ANSWER` (or :data:`VERDICT`) to
    ``until``; empty where either end is missing or out of order."""
    start, end = report_md.find(ANSWER if ANSWER in report_md else VERDICT), report_md.find(until)
    return report_md[start:end].strip() if 0 <= start < end else ""


def session_answer(report_md: str, report_file: str) -> str:
    """The written report's answer for the session plan, with a link to its verdict and what it rests on
    (the whole block where the report has no answer paragraph)."""
    answer = verdict_block(report_md, VERDICT)
    return (f"{answer}\n\nThe verdict set by set and what it rests on: [the report]({report_file}"
            "#the-question-and-the-answer).") if answer else verdict_block(report_md)


def _other_search(c: TableCache, sets: list[str]) -> str:
    """Where another search (BM25, hybrid) with the same stubs gives them a significant lead on ``sets``
    (on G2 also on G2_instruction), in a sentence; empty where none does."""
    other = c.get("primary_endpoint_families")
    if not (where := [s for s in sets if leading_elsewhere(other, [s], "PtR")]):
        return ""
    g2i = c.having("primary_endpoint_g2_instruction", *LEAD_COLUMNS)
    both = set(leading_elsewhere(g2i, ["G2_instruction"], "PtR")) if g2i is not None and "G2" in where else \
        None
    each = [FAMILY_WORDS.get(f, f) + ("" if both is None else " search in both G2 files" if f in both else
                                      " search in one of them")
            for f in leading_elsewhere(other, where, "PtR")]
    col = "p_holm_tool_clusters_robustness"
    led = other[other["retriever"].isin(leading_elsewhere(other, where, "PtR"))
                & other["subset"].astype(str).map(subset_alias).isin(where)] if col in other else other[:0]
    n = "n_groups_tool_clusters_robustness"  # few clusters: no support (t on at most G − 1 df)
    kept = "; ".join(f"{FAMILY_SHORT.get(x.retriever, x.retriever)} {fmt_p(getattr(x, col))}"
                     for x in led.itertuples() if getattr(x, col) < ALPHA and getattr(x, n, 0) >= FEW)
    return (f"With the same stubs, {join_words(each)}" + (" search" if both is None else "")
            + f", beyond the paper and exploratory, give{'s' * (len(each) == 1)} PtR a significant lead on "
            f"{' and '.join(where)}" + (f", also with queries sharing any tool in one cluster ({kept})"
                                        if kept else "") + ". ")


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
        way = "none" if abs(delta) < NONE else "past it" if crossed else "towards" if closer else "away"
        towards.append(f"{s} {way}")
    return f"| {what} | {tested} | {', '.join(moves)} | {', '.join(towards)} |"


NONE = 0.005  # a change of PtR − RtP that rounds to 0.00 moves nothing


def substitution_lines(c: TableCache) -> list[str]:
    """Which way each substitution moves PtR − RtP recall@5 on candidates, set by set, and whether towards
    the paper's: embedder and stub breadth from their ablations (a direction only), the LLM untested."""
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
            "Each tested substitution moves it by the change below: point estimates of one run, on the "
            "ablation's own queries, with no CI of the change, so not even a direction is established (a "
            f"change under {NONE:g} is none).", "",
            "| substitution | tested by | change of PtR − RtP | towards the paper's difference (point "
            "estimate)? |",
            "| :--- | :--- | :--- | :--- |",
            _row(c, table, "embedder: MiniLM, not GTE-base", embedder, _embedder_shift),
            _row(c, table, "stub breadth: fewer stubs than the paper's 2.4–2.5", breadth, _breadth_shift),
            f"| stub writer and planner: a small local LLM, not Gemini 2.5 Flash | {UNTESTED} | unknown | "
            "unknown |", ""]
