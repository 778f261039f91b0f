"""The scorecard: the paper's numbers (``references/paper.yaml``) against this run's saved tables, with the
cause named for each that differs; a table or column that is not there is reported as such, never raised."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from ..analysis.references import (
    REFERENCES_FILE,
    check_locator,
    is_claim,
    load_references,
    paper_bounds,
    printed_rounding,
    read_yaml,
)
from ..analysis.retrievers import ALPHA
from ..data.paths import PROJECT_ROOT
from ..eval.stats import wilson_ci
from ..study.experiment import ExperimentConfig
from .locate import (
    CONSISTENT,
    DIFFERS,
    EXTREMES,
    INCONCLUSIVE,
    NOT_SCORED,
    UNADJUSTED_ONLY,
    TableCache,
    compare,
    compare_share,
    locate,
    locator_source,
    paper_text,
    select_rows,
    two_sample,
)

CAUSES_FILE = PROJECT_ROOT / "references" / "causes.yaml"
REPORT_COLUMNS = ["id", "description", "section", "subset", "metric", "method", "paper", "this_run", "ci_low",
                  "ci_high", "difference", "status", "direction", "basis", "judged", "cause", "evidence",
                  "quote", "source", "cause_status", "predicted", "predicted_ci_low", "predicted_ci_high",
                  "reading_of", "claim", "two_sample"]

# -- named causes -------------------------------------------------------------------------------------------

EXPLAINED, PARTLY, UNEXPLAINED, SETUP, NOT_TESTED, BY_CONSTRUCTION = (
    "explained", "partly explained", "unexplained", "setup difference", "not tested", "by construction")
# A cause tested only through a stand-in (``proxy:``) points the way without explaining; a cause that is
# another reading of the paper's definition (``reading: true``) fits rather than explains.
INDICATIVE, READING = "indicative, by a proxy", "fits another reading"
CAUSE_KINDS = ("tested", "setup", "construction")
NO_CAUSE = {"cause_status": "", "predicted": math.nan, "predicted_ci_low": math.nan,
            "predicted_ci_high": math.nan, "evidence": ""}
CAUSES = (BY_CONSTRUCTION, SETUP, EXPLAINED, READING, PARTLY, INDICATIVE, UNEXPLAINED,
          NOT_TESTED)  # a differing row's cause
UNTESTED = "cause untested"  # how a row that differs under a setup difference, never tested, is labelled
SCORECARD_TABLE = "scorecard"  # every reference number's row, saved by report.write under tables/


def not_run(cause: dict, tables_dir: Path | None) -> bool:
    """Whether a tested cause's ablation table is missing from ``tables_dir`` (its ablation did not run)."""
    table = (cause.get("ablation") or {}).get("table")
    return tables_dir is not None and bool(table) and not (Path(tables_dir) / f"{table}.csv").is_file()


def load_causes(path: Path = CAUSES_FILE) -> dict[str, dict]:
    """``{cause id: cause}`` from the causes file, each checked: ``tested`` (``explains`` rows by metric,
    method and k, each with an ``effect`` on this run's value or a ``predicted`` value) or ``setup``."""
    out = {}
    for cause in read_yaml(path).get("causes", []):
        cid = cause.get("id", "?")
        if missing := [key for key in ("id", "kind", "title", "prediction") if key not in cause]:
            raise ValueError(f"{path}: cause {cid} lacks {missing[0]!r}")
        if cause["kind"] not in CAUSE_KINDS:
            raise ValueError(f"{path}: cause {cid}: kind must be one of {CAUSE_KINDS}")
        for i, shown in enumerate(cause.get("shows", [])):
            check_locator({k: v for k, v in shown.items() if k != "label"}, f"{cid}.shows[{i}]")
        if not isinstance(cause.get("proxy", ""), str) or not isinstance(cause.get("reading", False), bool):
            raise ValueError(f"{path}: cause {cid}: proxy names its stand-in in words, reading is a boolean")
        if cause["kind"] == "tested" and ("ablation" not in cause or not cause.get("explains")):
            raise ValueError(f"{path}: tested cause {cid} needs an ablation and the rows it explains")
        for i, item in enumerate(cause["explains"] if cause["kind"] == "tested" else []):
            where = f"{path}: cause {cid}.explains[{i}]"
            if not item.get("metric"):
                raise ValueError(f"{where}: names no metric")
            size = {"effect", "predicted"} & (set(item) | set(cause))
            if len(size) != 1:
                raise ValueError(f"{where}: give the size it predicts as one of effect / predicted")
            spec = item.get("effect", item.get("predicted", cause.get("effect", cause.get("predicted"))))
            if "effect" in size:
                check_locator(spec, f"{cid}.effect")
            elif "wilson" in spec:  # a predicted value: wilson {count, n}, or value with low and high
                for key in ("count", "n"):
                    check_locator(spec["wilson"][key], f"{cid}.predicted.wilson.{key}")
            elif not {"value", "low", "high"} <= set(spec):
                raise ValueError(f"{cid}.predicted: needs value, low and high (or wilson)")
            else:
                for key in ("value", "low", "high"):
                    check_locator(spec[key], f"{cid}.predicted.{key}")
        out[cid] = cause
    return out


def _printed(entry: Mapping, bounds: Mapping[str, float]) -> float | None:
    """Half a unit of the last decimal the paper prints the entry's value with (``None``: not printed)."""
    return printed_rounding(bounds["value"], entry.get("quote", "")) if "value" in bounds else None


def _for_row(locator, row: Mapping[str, str]):
    """A copy of ``locator`` (or a cause) with ``{subset}``, ``{method}`` and ``{metric}`` replaced by the
    row's."""
    if isinstance(locator, Mapping):
        return {k: _for_row(v, row) for k, v in locator.items()}
    if isinstance(locator, list):
        return [_for_row(v, row) for v in locator]
    if isinstance(locator, str):
        for key in ("subset", "method", "metric"):
            locator = locator.replace("{" + key + "}", str(row.get(key, "")))
    return locator


def explains(cause: Mapping, entry: Mapping) -> dict | None:
    """The item of a tested cause's ``explains`` that names this entry's metric, method and k, or
    ``None`` (a cause explains no row it does not name)."""
    for item in cause.get("explains", []):
        same_method = item.get("method", entry.get("method")) == entry.get("method")
        if item["metric"] == entry.get("metric") and same_method and item.get("k") == entry.get("k"):
            return dict(item)
    return None


def predict(cause: Mapping, item: Mapping, value: float, ci: tuple[float, float] | None,
            tables: TableCache) -> tuple[float, float, float, str] | None:
    """``(predicted, low, high, how)`` for a report row, or ``None`` when the ablation was not saved:
    ``effect`` shifts this run's value and CI, ``predicted`` reads them off tables."""
    effect = item.get("effect", cause.get("effect"))
    if effect is not None:
        size, problem = locate(effect, tables)
        if problem:
            return None
        low, high = (ci[0] + size, ci[1] + size) if ci else (value + size, value + size)
        return value + size, low, high, (f"this run's {fmt_number(value)} {fmt_signed(size)} "
                                         f"({locator_source(effect)})")
    spec = item.get("predicted", cause.get("predicted"))
    if "wilson" in spec:
        if not (got := _located(spec["wilson"], ("count", "n"), tables)) or not got[1]:
            return None
        count, n = got
        return count / n, *wilson_ci(count, n), f"{fmt_count(count)} of {fmt_count(n)} (Wilson 95%)"
    got = _located(spec, ("value", "low", "high"), tables)
    return (*got, locator_source(spec["value"])) if got else None


def _located(spec: Mapping, keys: tuple[str, ...], tables: TableCache) -> tuple[float, ...] | None:
    """The located value of each of ``spec``'s ``keys``; ``None`` when any is missing."""
    found = [locate(spec[key], tables) for key in keys]
    return None if any(problem for _, problem in found) else tuple(value for value, _ in found)


def weigh_cause(cause: Mapping, entry: Mapping, judged: Mapping, tables: TableCache) -> dict:
    """One cause against one row that differs: ``cause_status``, ``predicted`` (with its CI), evidence; a
    subgroup's cause (``association: true``) is at most partly explained."""
    row = {"subset": str(entry["subset"]), "method": str(entry.get("method", "")),
           "metric": str(entry.get("metric", ""))}
    cause, out = _for_row(cause, row), dict(NO_CAUSE)
    if cause["kind"] in ("setup", "construction"):
        shown = []
        for s in cause.get("shows", []):
            (value, problem), label = locate(s, tables), s.get("label", locator_source(s))
            shown.append(f"{label}: {problem}" if problem else f"{label} = {fmt_number(value)}")
        shown = "; ".join(shown)
        status = SETUP if cause["kind"] == "setup" else BY_CONSTRUCTION
        return {**out, "cause_status": status, "evidence": f"{status}, not tested: "
                f"{cause['prediction'].strip()}" + (f" ({shown})" if shown else "")}
    if (item := explains(cause, entry)) is None:
        return {**out, "cause_status": UNEXPLAINED,
                "evidence": f"{cause['id']} names no {row['metric']} row of this method and k"}
    value = judged["this_run"]
    ci = None if math.isnan(judged["ci_low"]) else (judged["ci_low"], judged["ci_high"])
    if (got := predict(cause, item, value, ci, tables)) is None:
        return {**out, "cause_status": NOT_TESTED, "evidence": f"{ablation_text(cause)} not in this run"}
    predicted, low, high, how = got
    out.update(predicted=predicted, predicted_ci_low=low, predicted_ci_high=high)
    bounds = paper_bounds(entry["paper"])
    _, status, _, basis = compare(predicted, bounds, entry.get("tolerance"), (low, high),
                                  rounding=_printed(entry, bounds))
    gap = -judged["difference"]
    moved = predicted - value
    text = f"{ablation_text(cause)}: predicts {fmt_number(predicted)} {fmt_ci(low, high)} = {how}"
    covers = not gap or abs(moved) >= abs(gap) / 2
    association = ", an association in a subgroup" if cause.get("association") else ""
    proxy = f"; tested by a proxy: {cause['proxy']}" if cause.get("proxy") else ""
    if proxy and gap and moved * gap > 0:  # a stand-in's direction, not its size: never "explained"
        out.update(cause_status=f"{INDICATIVE} (moves {fmt_number(abs(moved))} of {fmt_number(abs(gap))})",
                   evidence=f"{text}; moves {fmt_number(abs(moved))} of the {fmt_number(abs(gap))} gap"
                            f"{proxy}")
    elif status == CONSISTENT and covers and not association:
        out.update(cause_status=READING if cause.get("reading") else EXPLAINED, evidence=f"{text}; {basis}")
    elif gap and moved * gap > 0 and (abs(moved) < abs(gap) or status == CONSISTENT):
        share = min(abs(moved) / abs(gap), 1.0)
        out.update(cause_status=f"{PARTLY} ({fmt_number(abs(moved))} of {fmt_number(abs(gap))}, "
                                f"{share:.0%}){association}",
                   evidence=f"{text}; recovers {fmt_number(abs(moved))} of the {fmt_number(abs(gap))} gap "
                            f"({share:.0%}){association}")
    else:
        why = "past the paper's" if moved * gap > 0 else "away from the paper's"
        out.update(cause_status=UNEXPLAINED, evidence=f"{text}; moves {why} value{proxy}")
    return out


def ablation_text(cause: Mapping) -> str:
    a = cause.get("ablation", "")
    if isinstance(a, Mapping):
        return f"table {a['table']}" + (f" (notebook {a['notebook']})" if a.get("notebook") else "")
    return str(a)


def name_cause(entry: Mapping, judged: Mapping, causes: Mapping[str, dict], tables: TableCache) -> dict:
    """``cause``, ``cause_status``, ``predicted`` (and CI) and ``evidence`` of a report row that differs: the
    best of its listed causes; "unexplained" with what was tried when none does better."""
    empty = {"cause": "", **NO_CAUSE}
    if judged["status"] != DIFFERS:
        return empty
    if not (listed := entry.get("causes", [])):
        return {**empty, "cause": UNEXPLAINED, "cause_status": UNEXPLAINED, "evidence": "no cause listed"}
    if unknown := [cause_id for cause_id in listed if causes.get(cause_id) is None]:
        raise ValueError(f"entry {entry['id']}: unknown cause {unknown[0]!r}")
    results = [(cid, causes[cid], weigh_cause(causes[cid], entry, judged, tables)) for cid in listed]

    def moved(r) -> float:
        return abs(r[2]["predicted"] - judged["this_run"])

    def weak(r) -> bool:  # a stand-in moving under half the gap: named after an untested setup, not first
        return r[2]["cause_status"].startswith(INDICATIVE) and moved(r) < abs(judged["difference"]) / 2

    def key(r):  # best first: explained, partly (the most recovered first), setup, a weak proxy, not tested
        status = r[2]["cause_status"]
        if status.startswith((PARTLY, INDICATIVE)):
            return (2.5 if weak(r) else 1), -moved(r)
        return {EXPLAINED: 0, READING: 0, BY_CONSTRUCTION: 2, SETUP: 2, NOT_TESTED: 3}.get(status, 4), 0.0

    best_id, best, result = min(results, key=key)
    proxies = [r for r in results if weak(r)] if result["cause_status"] == SETUP else []
    if proxies:  # the untested setup leads; the stand-in's small move is named after it, with its prediction
        cid, _, weakest = nearest = min(proxies, key=lambda r: -moved(r))
        result = {**result, **{c: weakest[c] for c in ("predicted", "predicted_ci_low", "predicted_ci_high")}}
    tried = [f"{cid}: {r['cause_status']} ({r['evidence']})" for cid, _, r in results if cid != best_id]
    evidence = result["evidence"] + (f". Also tried {'; '.join(tried)}" if tried else "")
    if result["cause_status"] == UNEXPLAINED:
        return {**result, "cause": UNEXPLAINED, "evidence": f"{best_id}: {evidence}"}
    # An untested setup difference is not the only candidate beside another untested one, or a tested one
    # that did not rule itself out.
    also = [cid for cid, _, r in results if cid != best_id and result["cause_status"] == SETUP
            and r["cause_status"] in (UNEXPLAINED, NOT_TESTED, SETUP)]
    # A reading that fits is still this run's measurement: an untested setup difference listed beside it
    # could move it too, so the row names it.
    open_setup = [cid for cid, _, r in results if cid != best_id and result["cause_status"] == READING
                  and r["cause_status"] == SETUP]
    label = " or ".join([best_id, *also]) + (f"; {' or '.join(open_setup)} untested" if open_setup else "")
    if proxies:
        share = moved(nearest) / abs(judged["difference"])  # a direction: a proxy's size is no estimate
        label += f"; {cid}, by a proxy, {share:.0%} of the gap" if share >= 0.005 else f"; {cid}, by a proxy"
    return {**result, "cause": f"{label}: {best['title']}", "evidence": evidence}


def every_cell(entry: Mapping, tables: TableCache) -> list[tuple]:
    """Every cell an ordering "at every k" ranges over, ``(value, ci_low, ci_high, k)`` (k ``None``
    without one), before the extreme is kept; none for any other entry."""
    loc, ci = entry.get("locator", {}), entry.get("ci", {})
    where = dict(loc.get("where") or {})
    if not entry.get("ordering") or where.get(loc.get("column")) not in EXTREMES or not ci:
        return []
    if (table := tables.get(loc["table"])) is None:
        return []
    where.pop(loc["column"])
    rows = select_rows(table, where)
    return list(zip(*(pd.to_numeric(rows[c], errors="coerce") for c in (loc["column"], ci["low"]["column"],
                                                                       ci["high"]["column"])),
                    rows["k"] if "k" in rows else [None] * len(rows), strict=True))


def intersection_union(cells: list[tuple], bounds: Mapping[str, float],
                       value: float) -> tuple[float, str, str, str]:
    """``(difference, status, direction, basis)`` of an ordering claimed at every cell: consistent when
    every CI is on the paper's side, differs when any is wholly on the other, else inconclusive."""
    low, high = bounds.get("min", -math.inf), bounds.get("max", math.inf)
    held = sum(lo > low and hi < high for _, lo, hi, *_ in cells)
    beyond = sum(hi < low or lo > high for _, lo, hi, *_ in cells)
    at = next((c[3] for c in cells if c[0] == value and len(c) > 3 and c[3] is not None), None)
    basis = (f"the paper's ordering at each of {len(cells)} cells (intersection-union): {held} with the 95% "
             f"CI on the paper's side, {beyond} wholly on the other"
             + (f"; shown: the least favourable, k = {int(at)}" if at is not None else ""))
    if held == len(cells):
        return 0.0, CONSISTENT, "", basis
    if beyond:
        below = value < low
        return value - (low if below else high), DIFFERS, "below" if below else "above", basis
    return 0.0, INCONCLUSIVE, "", basis


BY_CONSTRUCTION_NOTE = "untestable by construction: "


def judge_entry(entry: Mapping, tables: TableCache) -> dict:
    """One report row: this run's value, its CI, the status by evidence, the direction and the basis."""
    bounds = paper_bounds(entry["paper"])
    row = {"this_run": math.nan, "ci_low": math.nan, "ci_high": math.nan, "difference": math.nan,
           "status": "", "direction": "", "basis": "", "judged": math.nan, "two_sample": ""}
    value, problem = locate(entry["locator"], tables)
    if problem:
        row["status"] = problem
        return row
    row["this_run"] = value
    validity = entry.get("validity")
    if validity:  # a judged rate: this_run is the objective rate unless the judge is valid
        row["judged"] = value
        kappa, why = locate(validity["kappa"], tables)
        if why or kappa < float(validity.get("min_kappa", 0.4)):
            objective, _ = (locate(validity["objective"], tables) if "objective" in validity
                            else (math.nan, None))
            basis = (f"judge validity not measured ({why})" if why else
                     f"judge kappa {fmt_number(kappa)} < {validity.get('min_kappa', 0.4)}")
            row.update(this_run=objective, difference=objective - bounds.get("value", math.nan),
                       status=NOT_SCORED, basis=basis)
            return row
    if "share" in entry and "value" in bounds:
        n, why = locate(entry["share"]["n"], tables)
        if not why and n > 0:
            ci = _located(entry["share"]["ci"], ("low", "high"), tables) if "ci" in entry["share"] else None
            paper_n = entry["share"]["paper_n"]  # ci: as the table saved it (resampling API samples)
            diff, status, direction, basis = compare_share(value, n, bounds["value"], paper_n, ci)
            low, high = ci or wilson_ci(value, n)  # shown as shares: the two sets differ in size
            row.update(this_run=value / n, difference=diff, status=status, direction=direction, basis=basis,
                       ci_low=low, ci_high=high, metric=f"{entry.get('metric', '')} share",
                       two_sample=_two_sample(status, value / n, bounds["value"] / paper_n, (low, high)),
                       paper=f"{fmt_number(bounds['value'] / paper_n)} ({fmt_count(bounds['value'])} of "
                             f"{fmt_count(paper_n)})")
            return row
    ci = None
    if "wilson" in entry and (got := _located(entry["wilson"], ("count", "n"), tables)) and got[1] > 0:
        ci = wilson_ci(*got)
    if "ci" in entry and (got := _located(entry["ci"], ("low", "high"), tables)):
        ci = got
    if ci is not None:
        row["ci_low"], row["ci_high"] = ci
    margin, why = _margin(entry, tables)
    diff, status, direction, basis = compare(value, bounds, entry.get("tolerance"), ci,
                                             bool(entry.get("ordering")), _printed(entry, bounds), margin)
    if cells := every_cell(entry, tables):  # each cell judged, not the extreme one alone
        diff, status, direction, basis = intersection_union(cells, bounds, value)
    if "ci" in entry and ci is None:
        basis += " (no CI saved)"
    holm, _ = locate(entry["p_holm"], tables) if "p_holm" in entry else (math.nan, None)
    if status in (CONSISTENT, DIFFERS) and holm >= ALPHA:  # decided by a CI that Holm's p does not back
        basis += f"; {UNADJUSTED_ONLY} {fmt_p(holm)}"
    if why:
        basis += f" ({why})"
    if cause := entry.get("construction"):  # a claim this run's setup cannot test: shown, never scored
        status, direction, basis = NOT_SCORED, "", f"{BY_CONSTRUCTION_NOTE}{cause}; {basis}"
    row.update(difference=diff, status=status, direction=direction, basis=basis)
    if ci is not None and not is_claim(entry):  # the paper's value, or its range's nearest end
        nearest = min(max(value, bounds.get("min", -math.inf)), bounds.get("max", math.inf))
        paper = bounds.get("value", nearest)
        tol = entry.get("tolerance", _printed(entry, bounds) or 0.0)
        row["two_sample"] = _two_sample(status, value, paper, ci, float(tol))
    return row


def _margin(entry: Mapping, tables: TableCache) -> tuple[float | None, str]:
    """An equality claim's equivalence margin (a number, or a locator's value) and why it is that size."""
    if not (eq := entry.get("equivalence")):
        return None, ""
    m = eq["margin"]
    value, problem = (float(m), None) if isinstance(m, int | float) else locate(m, tables)
    return (None, f"no margin: {problem}") if problem else (value, f"margin: {eq['why']}")


def _two_sample(status: str, this_run: float, paper: float, ci: tuple[float, float],
                margin: float = 0.0) -> str:
    """A differing row's status under :func:`.locate.two_sample` (empty for a row that does not differ)."""
    if status != DIFFERS:
        return ""
    return CONSISTENT if two_sample(this_run, paper, ci, margin) else DIFFERS


def compare_entries(entries: list[dict], tables_dir: Path,
                    causes: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """One row per reference entry: the paper's number, this run's with its CI, the status by evidence,
    the direction, and the cause of a difference with the value it predicts."""
    tables = TableCache(tables_dir, {e["id"]: paper_bounds(e["paper"]) for e in entries})
    causes = load_causes() if causes is None else causes
    rows = []
    for entry in entries:
        judged = judge_entry(entry, tables)
        named = name_cause(entry, judged, causes, tables)
        rows.append({"id": entry["id"], "description": entry["description"],
                     "section": entry.get("section", ""), "subset": entry["subset"],
                     "metric": entry.get("metric", ""), "method": entry.get("method", ""),
                     "paper": ("claim: " if is_claim(entry) else "")
                     + paper_text(bounds := paper_bounds(entry["paper"]), _printed(entry, bounds))
                     + ("" if (m := _margin(entry, tables)[0]) is None else f" ± {fmt_number(m)}"),
                     **judged, **named,
                     "quote": entry.get("quote", ""), "source": locator_source(entry["locator"]),
                     "reading_of": entry.get("reading_of", ""), "claim": is_claim(entry)})
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def build_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE) -> pd.DataFrame:
    """The paper's reference numbers against the tables this run saved under ``cfg.tables_dir``."""
    return compare_entries(load_references(references)["entries"], cfg.tables_dir)


def without_llm(report: pd.DataFrame) -> pd.Series:
    """The rows this run measures with no LLM in the path: RtP's recall and precision and the data's own
    counts; every other row rests on this run's substitute LLM."""
    metric = report.get("metric", pd.Series("", index=report.index)).fillna("").astype(str)
    method = report.get("method", pd.Series("", index=report.index)).fillna("").astype(str)
    return metric.isin(("count", "gt_size")) | ((method == "rtp") & metric.isin(("recall", "precision")))


def recovered(rows: pd.DataFrame) -> str:
    """The range of the shares of their gaps that the partly explained rows' causes recover (empty without
    one)."""
    cause = rows.get("cause_status", pd.Series("", index=rows.index)).fillna("").astype(str)
    got = sorted(int(x) for x in cause[cause.str.startswith(PARTLY)].str.extract(r"(\d+)%\)")[0].dropna())
    return f" ({got[0]}{f'–{got[-1]}' * (got[-1] != got[0])}% of the gap)" if got else ""


def status_counts(report: pd.DataFrame) -> dict[str, int]:
    """Counts of the rows by status, and of the rows that differ by cause status (a row without one is
    unexplained)."""
    status = report["status"]
    cause = report.get("cause_status", pd.Series("", index=report.index)).fillna("").astype(str)
    differs = status == DIFFERS
    counts = {"consistent": status == CONSISTENT, "differs": differs,
              EXPLAINED: differs & (cause == EXPLAINED), READING: differs & (cause == READING),
              PARTLY: differs & cause.str.startswith(PARTLY),
              INDICATIVE: differs & cause.str.startswith(INDICATIVE),
              UNEXPLAINED: differs & cause.isin([UNEXPLAINED, ""]), SETUP: differs & (cause == SETUP),
              BY_CONSTRUCTION: differs & (cause == BY_CONSTRUCTION),
              NOT_TESTED: differs & (cause == NOT_TESTED), INCONCLUSIVE: status == INCONCLUSIVE,
              NOT_SCORED: status == NOT_SCORED,
              "not found": ~status.isin([CONSISTENT, DIFFERS, INCONCLUSIVE, NOT_SCORED])}
    return {key: int(rows.sum()) for key, rows in counts.items()}


