"""How the scorecard's rows are shown: the section tables, their sentence, and Appendix A's lists."""

from __future__ import annotations

import re

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_percent
from ..data.markdown import md_table
from .appendix import APPENDIX_TABLES_HEADING
from .glossary import MIN_KAPPA
from .locate import (
    CONSISTENT,
    DIFFERS,
    INCONCLUSIVE,
    NOT_SCORED,
    ONLY_BY_TOLERANCE,
    OWN_TOLERANCE,
    UNADJUSTED_ONLY,
)
from .scorecard import (
    BY_CONSTRUCTION,
    BY_CONSTRUCTION_NOTE,
    CAUSES,
    PARTLY,
    READING,
    SETUP,
    UNTESTED,
    recovered,
    status_counts,
    without_llm,
)

JUDGED_IN = APPENDIX_TABLES_HEADING.split(":")[0]  # where the judged pass rates are shown


def against_claim(status, paper, lo, hi) -> bool:
    """An inconclusive equivalence (``claim: 0 ± m``) whose CI excludes 0 but crosses the margin: evidence
    against the paper's claim, its size undecided."""
    return (status == INCONCLUSIVE and str(paper).startswith("claim: 0 ±") and pd.notna(lo) and pd.notna(hi)
            and (float(lo) > 0 or float(hi) < 0))


def leans_against(rows: pd.DataFrame) -> pd.Series:
    """The rows :func:`against_claim` marks."""
    return pd.Series([against_claim(r.get("status"), r.get("paper", ""), pd.to_numeric(r.get("ci_low"),
                                                                                         errors="coerce"),
                                    pd.to_numeric(r.get("ci_high"), errors="coerce"))
                      for _, r in rows.iterrows()], index=rows.index, dtype=bool)


def _status_text(r) -> str:
    basis = str(getattr(r, "basis", ""))
    tol = re.search(r"paper ±([\d.]+) in", basis)
    own = r.status == DIFFERS and OWN_TOLERANCE in basis and tol
    status = r.status + (f" ({r.direction}" + (f"; the CI excludes the paper's value, only its end reaching "
                                               f"this project's ±{tol.group(1)} reading of the paper's “~”"
                                               if own else "") + ")" if r.direction else "")
    if r.status == CONSISTENT and ONLY_BY_TOLERANCE in basis:
        status += " (only by the paper's rounding: the paper's value lies outside the CI)"
    bounds = (getattr(r, c, None) for c in ("ci_low", "ci_high"))
    if against_claim(r.status, getattr(r, "paper", ""), *bounds):  # counted inconclusive, said for what it is
        status = "against the claim, its size undecided (the CI excludes 0, crosses the margin)"
    if r.status == NOT_SCORED and basis.startswith(BY_CONSTRUCTION_NOTE):
        status += f" ({basis.split(';')[0]})"
    if r.status == INCONCLUSIVE and "(estimate on the other side)" in basis:  # the CI holds the bound
        status += " (estimate on the claim's other side; the two cannot be told apart here)"
    holm = re.search(rf"{UNADJUSTED_ONLY} (p [=<] [\d.]+)", basis)
    if holm and r.status in (CONSISTENT, DIFFERS):  # a change scanned over every set: Holm does not back it
        status += f" ({UNADJUSTED_ONLY} {holm.group(1)})"
    shown = re.search(r"shown: the least favourable, (k = \d+)", basis)
    status += f" (least favourable {shown.group(1)})" if shown else ""  # an ordering claimed at every k
    cause = getattr(r, "cause_status", "") or ""
    if r.status == DIFFERS and isinstance(cause, str) and cause:
        shown = UNTESTED if cause == SETUP else cause  # a setup difference: named, not tested
        status += f"; {shown}" + (f": {r.cause.split(':')[0]}" if isinstance(r.cause, str) and r.cause
                                  and cause != "unexplained" else "")
    return status


def ci_text(low: float, high: float, paper: str) -> str:
    """A row's CI at 3 decimals; a bound that would print as one of the paper's numbers without being it gets
    3 significant digits where short (0.00245 against the paper's 0.002)."""
    marks = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", str(paper).replace(",", ""))]

    def bound(b: float) -> str:
        close = any(b != m and fmt_number(b) == fmt_number(m) for m in marks)
        return f"{b:.3g}" if close and 0.001 <= abs(b) < 0.1 else fmt_number(b)

    return f"[{bound(low)}, {bound(high)}]"


PERCENT_METRICS = ("token_overhead", "routing_tokens_saved", "routing_overhead_saved")  # numbers in percent


def _value(v: float, metric: str) -> str:
    return (fmt_count(v) if metric in ("count", "wins") else fmt_percent(v) if metric in PERCENT_METRICS
            else fmt_number(v))


def shown(report: pd.DataFrame) -> pd.DataFrame:
    """Report rows with every number formatted once; a judged rate the judge cannot support (not scored) shows
    the objective rate, which ``this_run`` holds for it."""
    objective = (report["status"] == NOT_SCORED) & report.get(
        "judged", pd.Series(float("nan"), index=report.index)).notna()
    percent = report["metric"].isin(PERCENT_METRICS)
    return pd.DataFrame({
        "reference": report["id"], "set": report["subset"],
        "paper": [f"{p}%" if pc else p for p, pc in zip(report["paper"], percent, strict=True)],
        "this run": ["n/a (the judge fails)" if o else _value(v, m)
                     for v, m, o in zip(report["this_run"], report["metric"], objective, strict=True)],
        "unadjusted 95% CI": [f"not comparable: {b} (judged rate: {JUDGED_IN}); objective rate, stricter: "
                              f"{_value(v, m)}"
                   if o else f"[{fmt_percent(lo)}, {fmt_percent(hi)}]" if pc and pd.notna(lo)
                   else ci_text(lo, hi, pa) if pd.notna(lo)
                   else "no CI: " + (str(b) if isinstance(b, str) else "")
                   for lo, hi, b, o, pa, pc, v, m in zip(
                       report["ci_low"], report["ci_high"], report["basis"], objective, report["paper"],
                       percent, report["this_run"], report["metric"], strict=True)],
        "status": [_status_text(r) for r in report.itertuples()]})


MARGIN = re.compile(r"\(margin: (.+)\)$")


def margin_lines(rows: pd.DataFrame) -> list[str]:
    """Each equivalence row's margin (``claim: 0 ± m``) with its reason, from the row's basis: a margin is a
    reading of the paper's words, often this project's choice, so the section says where it comes from."""
    why: dict[str, list[str]] = {}  # a reason shared by several rows is said once
    for r in rows.itertuples():
        if str(r.paper).startswith("claim: 0 ±") and (m := MARGIN.search(str(getattr(r, "basis", "")))):
            why.setdefault(m.group(1), []).append(f"`{r.id}` {str(r.paper).removeprefix('claim: 0 ')}")
    said = [f"{', '.join(ids)}: {reason}" for reason, ids in why.items()]
    head = "Margins (this project's, chosen after reading the paper)"
    return [f"{head}: {'; '.join(said)}.", ""] if said else []


def row_kinds(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """``(claims, again)``: the rows that are claims in words and those that read the paper again another
    way (a claim read again counts as a reading); the rest are its numbers."""
    again = rows.get("reading_of", pd.Series("", index=rows.index)).fillna("") != ""
    claim = rows.get("claim", pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    return claim & ~again, again


def section_sentence(rows: pd.DataFrame) -> str:
    """A generated sentence on a section's rows: how many, then how many of each status."""
    c = status_counts(rows)
    found = c["consistent"] + c["differs"] + c[INCONCLUSIVE]
    if found == 0:
        return (f"None of the paper's {len(rows)} numbers of this section was measured in this run "
                f"({c['not scored']} not scored, {c['not found']} not found in its tables).")
    claims, again = row_kinds(rows)
    kinds = [f"{fmt_count(n)} {what if n != 1 else one}" for n, what, one in (
        (int(claims.sum()), "claims in words", "claim in words"),
        (int(again.sum()), "second readings", "second reading")) if n]
    leaning = int(leans_against(rows).sum())
    parts = [f"{c[key]} {what}" for key, what in (
        ("consistent", "consistent"), ("differs", "differ" if c["differs"] != 1 else "differs"),
        (INCONCLUSIVE, "inconclusive (the 95% CI holds the paper's bound or crosses its margin"
                       + f"; {leaning} of them against the claim, its size undecided" * bool(leaning) + ")"),
        ("not scored", "not scored"), ("not found", "not found in this run's tables")) if c[key]]
    return (f"{fmt_count(len(rows))} rows" + (f" ({' and '.join(kinds)} among them)" if kinds else "")
            + ": " + ", ".join(parts) + ".")


def two_sample_lines(report: pd.DataFrame) -> list[str]:
    """The differing rows that the paper's own sampling error would cover (``two_sample``: the paper's number
    read as an estimate as uncertain as this run's, each CI widened by √2), named."""
    if "two_sample" not in report:
        return []
    rows = report[report["two_sample"] == CONSISTENT]
    tested = int(report["two_sample"].isin([CONSISTENT, DIFFERS]).sum())
    numbers = int((rows.get("reading_of", pd.Series("", index=rows.index)).fillna("") == "").sum())
    front = (f" ({fmt_count(numbers)} of them among the paper's numbers the front counts)"
             if numbers != len(rows) else "")
    return [f"*Within both samples' error*: were each of the paper's numbers an estimate as uncertain as "
            f"this run's (a two-sample reading: this run's CI widened by √2 toward the paper's value), "
            f"{fmt_count(len(rows))} of the {fmt_count(tested)} differing rows with a two-sample reading "
            f"would not differ{front}" + (f": {', '.join(f'`{i}`' for i in rows['id'])}." if len(rows) else
                                          "."), ""]


def scorecard_lines(report: pd.DataFrame) -> list[str]:
    """Appendix A: the rows not differing, a line per status; those differing by an untested setup or by
    construction, a line per cause; then the other differing rows with their causes' predictions."""
    how = pd.Series(report.get("cause_status", ""), index=report.index)
    untested = (report["status"] == DIFFERS) & how.isin([SETUP, BY_CONSTRUCTION])
    differs = (report["status"] == DIFFERS) & ~untested
    def count(g: pd.DataFrame) -> str:  # the claims in words and the second readings, as counted apart above
        claims, again = row_kinds(g)
        alone = int(claims.sum())
        parts = [f"{fmt_count(n)} {what}" for n, what in (
            (alone, "claim in words" if alone == 1 else "claims in words"), (again.sum(), "read again")) if n]
        return fmt_count(len(g)) + (f": {', '.join(parts)}" if parts else "")

    lines = []
    for status, g in report[~differs & ~untested].groupby("status", sort=False):
        ids = ("each in its section's table and `tables/scorecard.csv`" if status == CONSISTENT
               else ", ".join(f"`{i}`" for i in g["id"]))
        lines.append(f"- *{status}* ({count(g)}): {ids}")
    causes = report.loc[untested, "cause"].astype(str).str.split(":").str[0].str.split("; ").str[0]  # no note
    for (kind, cause), g in report[untested].groupby([how[untested], causes], sort=False):
        ids = ", ".join(f"`{i}`" for i in g["id"])
        lines.append(f"- *differs; {UNTESTED if kind == SETUP else kind}: {cause}* ({count(g)}): {ids}")
    if not differs.any():
        return lines
    d, empty = report[differs], pd.Series(index=report.index[differs], dtype=float)
    cols = [d.get(c, empty) for c in ("predicted", "predicted_ci_low", "predicted_ci_high", "metric")]
    predicted = [(f"{fmt_percent(v)} [{fmt_percent(lo)}, {fmt_percent(hi)}]" if m in PERCENT_METRICS
                  else f"{fmt_number(v)} {fmt_ci(lo, hi)}") if pd.notna(v) else ""
                 for v, lo, hi, m in zip(*cols, strict=True)]
    return [*lines, "", md_table(pd.DataFrame({"reference": d["id"], "what": d["description"],
                                               "status": [_status_text(r) for r in d.itertuples()],
                                               "predicted by the cause": predicted}))]


COUNT_LABEL = {SETUP: UNTESTED, READING: "fit another reading"}  # a cause status as a count reads


def right_and_wrong(report: pd.DataFrame) -> list[str]:
    """How the paper's numbers fare here: the scorecard's counts by status and cause, the numbers no LLM
    touches apart (Appendix A; the front says it in one line)."""
    lines = ["### How the paper's numbers fare, by cause", ""]
    if len(report):
        claim, reread = row_kinds(report)
        numbers, claims, again = report[~claim & ~reread], report[claim], report[reread]

        def counts(rows: pd.DataFrame, unscored: str = "") -> str:  # differing, by cause
            c, shares = status_counts(rows), {PARTLY: recovered(rows)}
            causes = [f"{fmt_count(c[k])} {COUNT_LABEL.get(k, k)}{shares.get(k, '')}"
                      for k in CAUSES if c[k]]
            against = int(leans_against(rows).sum())
            why = {"differs": "; ".join(causes), "consistent": by_tolerance(rows), "not scored": unscored,
                   INCONCLUSIVE: f"{fmt_count(against)} against the claim, its size undecided" * bool(against)
                   }
            return ", ".join(f"{fmt_count(n)} {'differ' if name == 'differs' and n > 1 else name}"
                             + (f" ({why[name]})" if why.get(name) else "")
                             for name, n in c.items() if n and name not in CAUSES)

        basis = numbers.get("basis", pd.Series("", index=numbers.index)).astype(str)
        unscored = basis[numbers["status"] == "not scored"]
        why = f"judged pass rates, kappa below {MIN_KAPPA}" * bool(unscored.str.startswith("judge").all())
        free, n = without_llm(numbers), fmt_count(len(numbers))
        head = f"- The paper's {n} reference numbers here: {counts(numbers, why)}."
        if free.any() and not free.all():  # apart: what the substitute LLM cannot have moved
            head = (f"- Of the paper's {n} reference numbers, the {fmt_count(free.sum())} measured without "
                    f"an LLM (RtP's retrieval, the data's counts): {counts(numbers[free])}. The "
                    f"{fmt_count((~free).sum())} resting on this run's substitute LLM: "
                    f"{counts(numbers[~free], why)}.")
        lines.append(head + consistent_width(numbers))
        if len(again):
            lines.append(f"- Read again another way ({fmt_count(len(again))} row{'s' * (len(again) != 1)}: "
                         "a number or claim of the "
                         "paper scored a second time, on another set, ground truth or definition): "
                         f"{counts(again)}.")
        if len(claims):
            lines.append(f"- Its {fmt_count(len(claims))} claims in words: {counts(claims)}.")
    return lines + [""]


def consistent_width(rows: pd.DataFrame, alpha: float = 0.05) -> str:
    """What *consistent* means, with the median CI width of the consistent shares, and how many rows would
    differ by chance at ``alpha`` were every paper number right."""
    ok = rows[(rows["status"] == CONSISTENT) & rows["ci_low"].notna()] if "ci_low" in rows else rows[:0]
    ok = ok[(ok["ci_low"].astype(float) >= -1) & (ok["ci_high"].astype(float) <= 1)] if len(ok) else ok
    scored = int(rows["status"].isin([CONSISTENT, DIFFERS, INCONCLUSIVE]).sum())
    chance = (f" Each row is judged alone at 95%: were every paper number right, about "
              f"{fmt_count(round(alpha * scored))} of these {fmt_count(scored)} would still differ by chance."
              if round(alpha * scored) else "")
    if not len(ok):
        return chance
    width = float((ok["ci_high"].astype(float) - ok["ci_low"].astype(float)).median())
    return (f" Consistent means indistinguishable here (median CI width of the shares among them "
            f"{fmt_number(width)}), not confirmed.{chance}")


def tolerance_only(rows: pd.DataFrame) -> pd.Series:
    """The consistent rows that are so only within the paper's rounding or a stated tolerance: outside the
    CI, or without a CI at all."""
    basis = rows.get("basis", pd.Series("", index=rows.index)).astype(str)
    return (rows["status"] == CONSISTENT) & (basis.str.contains(ONLY_BY_TOLERANCE, regex=False)
                                             | basis.str.startswith("this project's tolerance"))


def by_tolerance(rows: pd.DataFrame) -> str:
    """How many consistent rows are so only within a tolerance (:func:`tolerance_only`; empty if none)."""
    n = int(tolerance_only(rows).sum())
    return f"{fmt_count(n)} only within a tolerance" if n else ""
