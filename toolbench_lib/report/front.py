"""The report's front: the question, the answer per retriever, the setup, what the paper gets right and
wrong, and the limits; each number of its prose goes through a :class:`Ledger`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.endpoint import PRIMARY
from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed, join_words
from ..config import K_MAX
from ..data.markdown import md_table
from ..data.queries import subset_alias
from ..eval.compare import significant
from ..study.experiment import ExperimentConfig
from .locate import CONSISTENT, TableCache, two_sample
from .rows import row_kinds, tolerance_only
from .scorecard import BY_CONSTRUCTION, SETUP, status_counts, without_llm

ENDPOINT_TABLE = "primary_endpoint"  # notebook 02: the paper's (dense) retriever, from the main study
FAMILIES_TABLE = "primary_endpoint_families"  # notebook 12: every retriever family, from the retriever study
RELEVANT_TABLE = "primary_endpoint_relevant"  # notebook 12: every family and set on `relevant`
RELEVANT_COLUMN = "on relevant: PtR − RtP [Holm CI], p"
G2_INSTRUCTION_TABLE = "primary_endpoint_g2_instruction"  # notebook 12: the validation study's G2_instruction
CROSSOVER_TABLES = ("primary_crossover", "primary_crossover_families")  # notebooks 02 and 12, as above
FAMILY_SHORT = {"dense": "dense", "bm25": "BM25", "hybrid": "hybrid"}
FAMILY_FIRST = {**FAMILY_SHORT, "hybrid": "hybrid (dense + BM25)"}  # a family's first mention in the answer
PAPER_CROSSOVER = "RtP ahead on G1, PtR ahead on G2 and G3"
PAPER_NOT_SIGNIFICANT = ("G3",)  # "the recall difference does not reach significance": its direction suffices
SHORT_VERDICT = {"reproduced": "yes, significant", "same direction, not significant": "yes, n.s.",
                 "not reproduced": "no, n.s.", "refuted": "no, the other significantly",
                 "no paper pair": "no paper pair"}  # one vocabulary for every family, the paper's or not


class Ledger:
    """The numbers the report states, by name: each named quantity must carry one value."""

    def __init__(self) -> None:
        self.values: dict[str, list[str]] = {}

    def put(self, name: str, text: str) -> str:
        """Record ``text`` as the value of ``name`` and return it (to be written into the report)."""
        seen = self.values.setdefault(name, [])
        if text not in seen:
            seen.append(text)
        return text

    def as_dict(self) -> dict[str, str | list[str]]:
        return {name: texts[0] if len(texts) == 1 else texts for name, texts in self.values.items()}


def endpoint_rows(cfg: ExperimentConfig,
                  tables: tuple[str, str] = (ENDPOINT_TABLE, FAMILIES_TABLE)) -> pd.DataFrame:
    """The primary comparison per retriever family and set (or ``tables``' rows alike): dense from
    notebook 02, the other families from notebook 12; empty when neither was saved."""
    frames = [TableCache(cfg.tables_dir).get(name) for name in tables]
    frames = [t for t in frames if t is not None and not t.empty]
    if len(frames) == 2:  # the main study's own rows, with Holm over every family from the retriever study
        col, key = "p_holm_all_families_robustness", ["retriever", "subset"]
        if col in frames[1]:
            frames[0] = frames[0].drop(columns=col, errors="ignore").merge(frames[1][key + [col]], on=key,
                                                                           how="left")
        frames[1] = frames[1][~frames[1]["retriever"].isin(set(frames[0]["retriever"]))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def beside_g2(rows: pd.DataFrame, g2i: pd.DataFrame) -> pd.DataFrame:
    """The answer table's rows: each family's G2_instruction row right after its G2 row."""
    if not len(g2i):
        return rows
    parts = []
    for family, g in rows.groupby("retriever", sort=False):
        at = [i for i, s in enumerate(g["subset"]) if subset_alias(s) == "G2"]
        cut = at[0] + 1 if at else len(g)
        parts += [g.iloc[:cut], g2i[g2i["retriever"] == family], g.iloc[cut:]]
    return pd.concat([*parts, g2i[~g2i["retriever"].isin(set(rows["retriever"]))]], ignore_index=True)


def endpoint_table_markdown(rows: pd.DataFrame, ledger: Ledger, relevant: pd.DataFrame | None = None,
                            paper_column: bool = True) -> str:
    """The answer as a table, every number once; with ``relevant`` a column of the same comparisons on
    that ground truth; a retriever column unless all are dense; the paper's recalls with ``paper_column``."""
    rel = {} if relevant is None else {(r.retriever, r.subset): r for r in relevant.itertuples()}
    out, several = [], set(rows["retriever"]) != {"dense"}  # the paper's own family needs no name
    for r in rows.itertuples():
        n = f"{r.retriever} {subset_alias(r.subset)}"
        paper = (f"{fmt_number(r.paper_rtp)} / {fmt_number(r.paper_ptr)}"
                 if pd.notna(r.paper_rtp) and pd.notna(r.paper_ptr) else "not reported")
        row = {
            **({"retriever": r.retriever} if several else {}),
            "set": subset_alias(r.subset) + (" (unadjusted)" if str(r.p_family).startswith("one ") else ""),
            "RtP": ledger.put(f"{n} RtP recall@{PRIMARY.k}", fmt_number(r.rtp)),
            "PtR": ledger.put(f"{n} PtR recall@{PRIMARY.k}", fmt_number(r.ptr)),
            "PtR − RtP [Holm CI]": ledger.put(f"{n} PtR − RtP", fmt_signed(r.diff)) + " "
            + ledger.put(f"{n} PtR − RtP CI", fmt_ci(r.ci_low_holm, r.ci_high_holm)),
            "p": ledger.put(f"{n} p", fmt_p(r.p_holm))}
        if rel:
            x = rel.get((r.retriever, r.subset))
            row[RELEVANT_COLUMN] = "n/a" if x is None else (
                f"{ledger.put(f'{n} relevant PtR − RtP', fmt_signed(x.diff))} "
                f"{ledger.put(f'{n} relevant PtR − RtP CI', fmt_ci(x.ci_low_holm, x.ci_high_holm))}, "
                f"{ledger.put(f'{n} relevant p', fmt_p(x.p_holm))}")
        out.append({**row, **({"paper RtP / PtR": paper} if paper_column else {}),
                    "paper's leader here?": _short_verdict(str(r.verdict))})
    return md_table(pd.DataFrame(out), numparse=False)  # every number as the ledger recorded it


def holm_over_all(rows: pd.DataFrame) -> np.ndarray | None:
    """Every primary comparison's p with Holm over all of them at once (every family and set, the retriever
    study's ``p_holm_all_families_robustness``); None with one family, where that is the primary Holm."""
    col = "p_holm_all_families_robustness"
    if rows["retriever"].nunique() < 2 or col not in rows or rows[col].isna().any():
        return None
    return rows[col].to_numpy(dtype=float)


def runs_test_table(rows: pd.DataFrame, ledger: Ledger) -> str:
    """Per family and set, the primary test's p (Holm over the family's sets), with Holm over all at once,
    the paper's test over runs and Wilcoxon's over queries (robustness columns); each as the ledger has it."""
    over_all, out = holm_over_all(rows), []
    for i, r in enumerate(rows.itertuples()):
        n = f"{r.retriever} {subset_alias(r.subset)}"
        row = {"retriever": r.retriever, "set": subset_alias(r.subset),
               "p, clustered paired t (Holm)": ledger.put(f"{n} p", fmt_p(r.p_holm))}
        if over_all is not None:
            row[f"robustness: Holm over all {fmt_count(len(rows))}"] = ledger.put(f"{n} p Holm over all",
                                                                                 fmt_p(over_all[i]))
        row["robustness: the paper's test over runs (unadjusted)"] = ledger.put(f"{n} p over runs",
                                                                              fmt_p(r.p_runs_robustness))
        if pd.notna(getattr(r, "p_wilcoxon_robustness", np.nan)):
            row["robustness: Wilcoxon over queries (unadjusted)"] = ledger.put(
                f"{n} p Wilcoxon", fmt_p(r.p_wilcoxon_robustness))
        out.append(row)
    return md_table(pd.DataFrame(out), numparse=False)


def _short_verdict(verdict: str) -> str:
    """A verdict in the answer table's words, the same for every family."""
    return SHORT_VERDICT.get(verdict.split(":")[0].split(" (")[0], verdict)


def holds_paper(r) -> bool:
    """Whether a set's verdict holds the paper's: reproduced, or in the same direction where the paper's own
    difference is not significant (:data:`PAPER_NOT_SIGNIFICANT`)."""
    v = str(r.verdict)
    return v == "reproduced" or (subset_alias(r.subset) in PAPER_NOT_SIGNIFICANT and v.startswith("same"))


LEAD_COLUMNS = {"retriever", "subset", "significant", "leader"}


def leading_elsewhere(rows: pd.DataFrame | None, sets: list[str], leader: str) -> list[str]:
    """The families other than dense in which ``leader`` leads significantly on one of ``sets`` (aliases),
    in the rows' order; none without the rows' :data:`LEAD_COLUMNS`."""
    if rows is None or not set(rows) >= LEAD_COLUMNS:
        return []
    won = rows[(rows["retriever"] != "dense") & rows["subset"].astype(str).map(subset_alias).isin(sets)
               & rows["significant"].astype(bool) & (rows["leader"] == leader)]
    return list(dict.fromkeys(won["retriever"]))


def crossover_families(rows: pd.DataFrame) -> list[str]:
    """The families whose crossover holds: every set with a paper leader holds the paper's verdict."""
    return [f for f, g in rows.groupby("retriever", sort=False)
            if len(w := g[g["paper_leader"].notna()]) and all(holds_paper(r) for r in w.itertuples())]


def answer_sentence(rows: pd.DataFrame, beyond_test: str = "",
                    limits: dict[str, list[str]] | None = None) -> str:
    """Beyond dense (:func:`.primer.verdict`): who leads significantly where per other family, where the
    crossover holds and stops (``limits``), and ``beyond_test``; without dense, the answer per family."""
    holds, said_by = [FAMILY_SHORT.get(f, f) for f in crossover_families(rows)], {}
    for family, g in rows.groupby("retriever", sort=False):
        sig = g[g["significant"].astype(bool)]
        lead = {a: [subset_alias(s) for s in sig.loc[sig["leader"] == a, "subset"]] for a in ("RtP", "PtR")}
        none = [subset_alias(s) for s in g.loc[~g["significant"].astype(bool), "subset"]]
        said = [f"{a} leads on {join_words(sets)}" for a, sets in lead.items() if sets]
        said += [f"neither leads significantly on {join_words(none, 'or')}"] if none else []
        said_by[family] = join_words(said)
    if list(said_by) == ["dense"]:
        return ""
    fails = sorted({x for f in crossover_families(rows) for x in (limits or {}).get(f, [])},
                   key=lambda x: x != "`relevant`")
    verdict = (f"the paper's crossover appears with {join_words(holds)} retrieval only"
               + (f", though not on {join_words(fails, 'or')}" if fails else "")
               if holds and len(holds) < len(said_by) else
               f"the paper's crossover ({PAPER_CROSSOVER}) holds with every retriever" if holds else
               f"the paper's crossover ({PAPER_CROSSOVER}) holds with no retriever tested")
    lost = {rows.loc[i, "retriever"] for i in overturned(rows)} & set(crossover_families(rows))
    if lost:  # a family's own Holm keeps it; Holm over every comparison at once does not
        verdict += (f". Under Holm over all {fmt_count(len(rows))} comparisons at once it does not appear "
                    f"even with {join_words([FAMILY_SHORT.get(f, f) for f in sorted(lost)], 'or')}")
    if "dense" in said_by:  # the paper's retriever is the verdict's; the others' crossover only
        others = join_words([FAMILY_SHORT.get(f, f) for f in said_by if f != "dense"])
        return (f"**Beyond the paper** (exploratory: {others}). {verdict[0].upper()}{verdict[1:]}."
                + (f" {beyond_test}" if beyond_test else ""))
    text = "; ".join(f"with {FAMILY_FIRST.get(f, f)} retrieval, {said}" for f, said in said_by.items())
    return f"**The answer.** {text[0].upper()}{text[1:]}: {verdict}."


def weak_lead_lines(rows: pd.DataFrame) -> list[str]:
    """RtP's reproduced dense lead, qualified: both this run's smaller stub writer and `candidates` may
    favour RtP, so it corroborates the paper only weakly."""
    if not {"retriever", "subset", "verdict", "paper_leader"} <= set(rows):
        return []
    held = rows[(rows["retriever"] == "dense") & (rows["verdict"] == "reproduced")
                & (rows["paper_leader"] == "RtP")]
    return [f"RtP's {join_words([subset_alias(s) for s in held['subset']])} lead corroborates the paper only "
            "weakly: a smaller stub writer and `candidates` (crediting every endpoint of a named tool) may "
            "both favour RtP."] if len(held) else []


def crossover_test(rows: pd.DataFrame, ledger: Ledger, family: str = "dense") -> str:
    """The shift towards PtR as one test for ``family``: PtR − RtP's change from G1 to each later set with
    its CI and p (Holm over those sets) and the paper's change, then where it rises significantly."""
    mine = rows[rows["retriever"] == family] if len(rows) else rows
    if not len(mine):
        return ""
    said = []
    for r in mine.itertuples():
        n, aside = f"{family} G1 to {subset_alias(r.second)} change of PtR − RtP", []
        if pd.notna(r.p) and fmt_p(r.p) != fmt_p(r.p_holm):
            aside.append(f"{ledger.put(n + ' p unadjusted', fmt_p(r.p))} unadjusted")
        if pd.notna(r.paper_diff):
            aside.append(f"paper: {fmt_signed(r.paper_diff)}"
                         + ("" if r.ci_low_holm <= r.paper_diff <= r.ci_high_holm else ", outside the CI"))
        said.append(_change(r, family, ledger, ci=True) + (f" ({'; '.join(aside)})" if aside else ""))
    risen = _risen(mine)
    return (f"- **The shift towards PtR as one test** (PtR − RtP's change from G1; Holm over the later "
            f"sets): {'; '.join(said)}. {risen[0].upper()}{risen[1:]}.")


def crossover_beyond(rows: pd.DataFrame, ledger: Ledger) -> str:
    """The shift towards PtR as one test for every family but dense, in one sentence: each change from G1 and
    its p (the CIs are in ``primary_crossover_families``), then where PtR − RtP rises significantly."""
    others = rows[rows["retriever"] != "dense"] if len(rows) else rows
    said = [f"{FAMILY_SHORT.get(f, f)} {', '.join(_change(r, f, ledger) for r in g.itertuples())} "
            f"({_risen(g)})" for f, g in others.groupby("retriever", sort=False)] if len(others) else []
    return f"The shift towards PtR as one test, PtR − RtP's change from G1: {'; '.join(said)}." if said \
        else ""


def _change(r, family: str, ledger: Ledger, ci: bool = False) -> str:
    """One later set's change of PtR − RtP from G1 (a crossover row), with its CI if ``ci``, and its p."""
    n = f"{family} G1 to {subset_alias(r.second)} change of PtR − RtP"
    interval = f" {ledger.put(n + ' CI', fmt_ci(r.ci_low_holm, r.ci_high_holm))}" if ci else ""
    return (f"{subset_alias(r.second)} {ledger.put(n, fmt_signed(r.diff))}{interval}, "
            f"{ledger.put(n + ' p', fmt_p(r.p_holm))}")


def _risen(rows: pd.DataFrame) -> str:
    """On which later sets PtR − RtP changes significantly from G1: rises (the paper's direction) or falls
    (``rows``: one family's crossover tests)."""
    sig = [(subset_alias(r.second), r.diff > 0) for r in rows.itertuples() if significant(r._asdict())]
    up, down = [s for s, rises in sig if rises], [s for s, rises in sig if not rises]
    said = ([f"significant on {join_words(up)}"] if up else []) + (
        [f"falls significantly on {join_words(down)}, against the paper"] if down else [])
    return "; ".join(said) or "none significant"


def crossover_limits(rows: pd.DataFrame,
                     alternatives: dict[str, pd.DataFrame | None]) -> dict[str, list[str]]:
    """``{family: [alternatives]}``: for each family whose crossover holds, the alternatives (``{name:
    rows}``) on which a set's paper leader does not lead significantly (families with none left out)."""
    out = {}
    for family in crossover_families(rows):
        with_paper = rows[(rows["retriever"] == family) & rows["paper_leader"].notna()]
        expected = dict(zip(with_paper["subset"], with_paper["paper_leader"], strict=True))
        fails = []
        for name, alt in alternatives.items():
            mine = alt[alt["retriever"] == family] if alt is not None and len(alt) else pd.DataFrame()
            want = [p if isinstance(p, str) else expected.get(sub) for sub, p in
                    zip(mine.get("subset", []), mine.get("paper_leader", []), strict=True)]
            held = [bool(sig) and lead == w for sig, lead, w in
                    zip(mine.get("significant", []), mine.get("leader", []), want, strict=True) if w]
            fails += [name] if held and not all(held) else []
        out |= {family: fails} if fails else {}
    return out


def overturned(rows: pd.DataFrame) -> list[int]:
    """The significant verdicts that Holm over every family × set comparison at once overturns (it only
    raises p-values; none with one family)."""
    over_all = holm_over_all(rows) if "p" in rows else None
    if over_all is None:
        return []
    return [i for i, p, sig in zip(rows.index, over_all, rows["significant"].astype(bool), strict=True)
            if sig and not significant({"p_holm": p})]


def robustness_sentence(rows: pd.DataFrame) -> str:
    """The answer's verdicts that Holm over every primary comparison at once would overturn, in one
    sentence; empty with one family or without the retriever study's column."""
    if holm_over_all(rows) is None:
        return ""
    test = f"Holm over all {fmt_count(len(rows))} comparisons"
    if not (lost := overturned(rows)):
        return f"{test} keeps every verdict."
    def name(i) -> str:
        family = rows.loc[i, "retriever"]
        return f"{FAMILY_SHORT.get(family, family)} {subset_alias(rows.loc[i, 'subset'])}"
    kept = [name(i) for i in rows.index[rows["significant"].astype(bool)] if i not in lost]
    rest = f"; {join_words(kept)} survive{'s' * (len(kept) == 1)}" if kept else ""
    return f"{test} overturns {join_words([name(i) for i in lost])}{rest}."


def two_questions(rows: pd.DataFrame, ledger: Ledger, later_temperature: float | None = None) -> str:
    """Why the paper's test over runs and the paired test over queries differ, with the former's p for the
    dense sets and, when later runs sampled at ``later_temperature`` > 0, that their spread differs."""
    dense = rows[rows["retriever"] == "dense"] if "p_runs_robustness" in rows else rows[:0]
    if not len(dense):
        return ""
    ps = ", ".join(f"{s} {ledger.put(f'dense {s} p over runs', fmt_p(r.p_runs_robustness))} "
                   f"({r.leader} ahead)" for r in dense.itertuples() if (s := subset_alias(r.subset)))
    warm = (f" This run's later runs sample at temperature {later_temperature:g} (the paper's at 0), so "
            "their spread is not the paper's." if later_temperature else "")
    return ("The two tests answer different questions: the paper's holds the queries fixed and asks whether "
            "another run of the stub writer would give the same difference; the paired test asks whether "
            f"other queries like these would. Read as the paper reads it, over runs, with dense retrieval: "
            f"{ps}.{warm}")


def fit_sentence(report: pd.DataFrame, subset: str = "G2_instruction") -> str:
    """How the paper's G2 numbers fare on ``subset``, the set its G2 fits: its recalls inside this run's CIs
    or not, and PtR − RtP against its means' difference (also two-sample); empty without the rows."""
    if not len(report) or "reading_of" not in report:
        return ""
    rows = report[report["subset"] == subset].set_index("reading_of")
    need = ("g2_rtp_recall", "g2_ptr_recall", "g2_ptr_minus_rtp_recall")
    if not set(need) <= set(rows.index):
        return ""
    rtp, ptr, d = (rows.loc[n] for n in need)
    paper = float(ptr.paper) - float(rtp.paper)  # the difference of its means, as the answer's
    inside = [r.status == CONSISTENT for r in (rtp, ptr)]
    where = ("both of its G2 recalls lie inside this run's CIs" if all(inside) else
             "none of its G2 recalls lies inside this run's CIs" if not any(inside) else
             "one of its G2 recalls lies inside this run's CIs")
    each = ", ".join(f"{a} {fmt_number(float(r.paper))} in {fmt_ci(r.ci_low, r.ci_high)}"
                     for a, r in (("RtP", rtp), ("PtR", ptr)))
    held = float(d.ci_low) <= paper <= float(d.ci_high)
    read = (f"holds the paper's {fmt_signed(paper)}" if held else
            f"leaves out the paper's {fmt_signed(paper)}"
            + (", though not if the paper's number were as uncertain as this run's (a two-sample reading)"
               if two_sample(float(d.this_run), paper, (float(d.ci_low), float(d.ci_high))) else ""))
    return (f"On {subset}, the file whose ground truth fits the paper's G2, {where} ({each}); PtR − RtP, "
            f"{fmt_signed(float(d.this_run))} {fmt_ci(d.ci_low, d.ci_high)}, {read}")


TERMS = ("**Words used below.** `candidates`: every API of the tools a query was written from; `relevant`: "
         "the APIs it was written to need. A *Holm CI* is adjusted for several tests (the scorecard rows "
         "give the unadjusted 95% CI of the same difference). *Consistent*: this run cannot tell the paper's "
         "number from its own (not confirmed); for a claim in words, its CI lies wholly on the claim's side "
         "(within the margin, for a claim of equality). *Cause untested*: a difference of setup no ablation "
         "tested. Every term: the [glossary](#glossary).")


def fare_line(report: pd.DataFrame) -> str:
    """How the paper's reference numbers fare here, in two sentences: those that differ by kind of cause,
    then those measured without an LLM."""
    claim, again = row_kinds(report) if len(report) else (None, None)
    numbers = report[~claim & ~again] if len(report) else report
    if not len(numbers):
        return ""
    every = status_counts(numbers)
    loose = int(tolerance_only(numbers).sum())  # consistent only by rounding or this project's tolerance
    other = every["differs"] - every[BY_CONSTRUCTION] - every[SETUP]  # differs for another cause
    head = (f"**How the paper's numbers fare.** Of its {fmt_count(len(numbers))} reference numbers, this run "
            f"cannot tell {fmt_count(every['consistent'])} from its own (*consistent*, not confirmed"
            + (f"; {fmt_count(loose)} only by the paper's rounding or this project's tolerance" * bool(loose))
            + "); "
            f"{fmt_count(every['differs'])} differ: {fmt_count(every[BY_CONSTRUCTION])} by this run's own "
            f"data or definitions, {fmt_count(every[SETUP])} for an untested setup difference (the LLM above "
            "all)" + (f", {fmt_count(other)} for another cause" if other else "") + ".")
    if free := llm_free(numbers):
        head += (f" All {fmt_count(free[0])} measured without an LLM (RtP's retrieval with this run's "
                 f"embedder, the data's counts) are consistent ({fmt_count(free[1])}) or differ by "
                 f"construction ({fmt_count(free[2])}).")
    return head


def llm_free(report: pd.DataFrame) -> tuple[int, int, int] | None:
    """The paper's reference numbers this run measures without an LLM (:func:`.scorecard.without_llm`): how
    many, how many are consistent and how many differ by construction, when that is all of them; else None."""
    claim, again = row_kinds(report)
    numbers = report[~claim & ~again]
    free = without_llm(numbers)
    alone = status_counts(numbers[free])
    if not free.any() or alone["differs"] != alone[BY_CONSTRUCTION] or alone["inconclusive"]:
        return None
    return int(free.sum()), alone["consistent"], alone[BY_CONSTRUCTION]


def g2_gain_line(cache: TableCache, references: dict, k: int = K_MAX) -> str:
    """PtR − RtP on G2 as k grows (``k_ablation``): its change from k = 1 to ``k`` on `candidates`, then at
    ``k`` itself beside G2_instruction's and `relevant`'s and the paper's gain (empty without them)."""
    table, g2i = cache.get("k_ablation"), cache.get("g2_sensitivity")
    paper = {e["id"]: e["paper"] for e in references["entries"]}
    first, last = paper.get("g2_ptr_gain_k1"), paper.get(f"g2_ptr_gain_k{k}")
    if table is None or not isinstance(last, (int, float)) or "recall_gain_ci_low" not in table:
        return ""
    r = table[(table["subset"].astype(str).map(subset_alias) == "G2") & (table["k"] == k)
              & (table["method"] == "ptr")].set_index("gt")
    said = {gt: f"{fmt_signed(x.recall_gain)} {fmt_ci(x.recall_gain_ci_low, x.recall_gain_ci_high)}"
            for gt, x in r.iterrows()}
    if "candidates" not in said:
        return ""
    if g2i is not None and {"subset", "retriever", "k", "diff", "diff_lo", "diff_hi"} <= set(g2i):
        x = g2i[(g2i["subset"] == "G2_instruction") & (g2i["retriever"] == "dense") & (g2i["k"] == k)]
        said["candidates"] += "".join(f" (G2_instruction: {fmt_signed(y.diff)} "
                                      f"{fmt_ci(y.diff_lo, y.diff_hi)})" for y in x.head(1).itertuples())
    c = r.loc["candidates"]
    trend = (f"from k = 1 to {k} it changes by {fmt_signed(c.recall_gain_vs_k1)} "
             f"{fmt_ci(c.recall_gain_vs_k1_ci_low, c.recall_gain_vs_k1_ci_high)} on `candidates` (paper: "
             f"{fmt_signed(last - first)}); " if isinstance(first, (int, float)) and
             "recall_gain_vs_k1_ci_low" in r else "")
    rel = "" if "relevant" not in said else (
        f"; on `relevant`, the ground truth the paper's words name, {said['relevant']} at k = {k}, grown "
        f"from k = 1 by {fmt_signed((x := r.loc['relevant']).recall_gain_vs_k1)} (Holm "
        f"{fmt_p(x.recall_gain_vs_k1_p_holm)})")
    return (f"- **PtR − RtP on G2 as k grows:** {trend}at k = {k} itself (unadjusted, one cell of the k "
            f"ablation) {said['candidates']}{rel} (paper: {fmt_signed(last)}).")
