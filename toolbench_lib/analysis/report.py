"""The paper's numbers against this run's: ``references/paper.yaml`` read over the saved tables.

Every reference entry names where this run's value is (a table under ``outputs/<run>/tables/``, row
filters, a column, an aggregate); :func:`build_report` looks each one up and compares it with the paper.
A table or column that is not there is reported as such, never raised.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..data.markdown import md_table
from ..data.paths import PROJECT_ROOT
from ..pipeline.experiment import ExperimentConfig
from .numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from .teaching import teaching_material, worked_examples  # noqa: F401  (worked_examples: re-exported)

REFERENCES_FILE = PROJECT_ROOT / "references" / "paper.yaml"
CAUSES_FILE = PROJECT_ROOT / "references" / "causes.yaml"
AGGREGATES = ("first", "mean", "min", "max", "sum")
EXTREMES = {"$min": "min", "$max": "max"}
REPORT_COLUMNS = ["id", "description", "section", "subset", "metric", "method", "paper", "this_run", "ci_low",
                  "ci_high", "difference", "status", "direction", "basis", "objective", "cause", "evidence",
                  "quote", "source"]

# The saved tables and the columns the analyses write (extra columns are allowed).
TABLE_SCHEMAS: dict[str, tuple[str, ...]] = {
    "main_results": ("subset", "method", "gt", "n_queries", "n_runs", "recall_mean", "recall_std",
                     "precision_mean", "precision_std", "pass_rate_mean", "pass_rate_std", "n_planned",
                     "recall_ci_low", "recall_ci_high", "precision_ci_low", "precision_ci_high"),
    "wins": ("subset", "gt", "metric", "rtp_wins", "ptr_wins", "ties", "n_queries"),
    "paired_tests": ("subset", "gt", "metric", "n", "rtp_mean", "ptr_mean", "diff", "ci_low", "ci_high",
                     "p_t_holm", "p_wilcoxon_holm", "p_sign_holm", "rtp_wins", "ptr_wins", "ties"),
    "ttests": ("subset", "gt", "metric", "test", "statistic", "p_value", "rtp_value", "ptr_mean"),
    "k_ablation": ("subset", "method", "gt", "k", "recall", "precision"),
    "budget_check": ("subset", "gt", "rtp_k10_recall", "ptr_k5_recall"),
    "scale": ("size", "seed", "subset", "method", "gt", "recall", "precision"),
    "scale_divergence": ("size", "seed", "subset", "no_overlap_share"),
    "trajectory": ("subset", "method", "fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps",
                   "mean_apis_named", "refusal_rate", "n_plans"),
    "miss_behaviour": ("subset", "method", "n_complete_miss", "refusal_rate_on_miss",
                       "wrong_tool_rate_on_miss"),
    "stub_stats": ("subset", "stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                   "cos_incorrect", "fallback_share"),
    "token_overhead": ("subset", "rtp_tokens", "ptr_tokens", "overhead_pct", "rtp_latency_s",
                       "ptr_latency_s"),
    "routing": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr"),
    "routing_overall": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr"),
    "retriever_main": ("subset", "retriever", "method", "recall_mean", "recall_lo", "recall_hi", "n_queries"),
    "routing_signal": ("subset", "signal", "auroc"),
    "data_sources": ("source", "n_apis", "share"),
    "data_categories": ("category", "n_apis", "share", "n_tools"),
    "data_gt_sizes": ("subset", "gt", "n_queries", "mean", "median"),
    "paper_query_counts": ("subset", "n_queries"),
    "ablation_decomposition": ("subset", "decomposer", "ptr_recall", "rtp_recall", "stubs_per_query",
                               "coverage", "n_queries"),
    "ablation_stub_text": ("subset", "variant", "recall", "precision", "n_queries"),
    "ablation_divergence": ("subset", "design", "size", "no_overlap_share", "gt_share", "rtp_recall",
                            "ptr_recall"),
    "ablation_stub_echo": ("subset", "mean_cos", "max_cos", "n_stubs", "disjoint_share",
                           "rho_disjoint_vs_echo", "p_value", "disjoint_low_echo", "disjoint_high_echo"),
    "ablation_embedder": ("subset", "embedder", "method", "recall", "precision"),
    "judge_validity": ("subset", "method", "kappa", "judged_pass_rate", "objective_pass_rate", "n_plans"),
}

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
_LOCATOR_KEYS = {"table", "where", "column", "agg", "scale"}


# -- the reference file -----------------------------------------------------------------------------------

def paper_bounds(paper) -> dict[str, float]:
    """``{"value": x}`` or ``{"min": a, "max": b}`` (either bound alone) from an entry's ``paper`` field."""
    if isinstance(paper, int | float) and not isinstance(paper, bool):
        return {"value": float(paper)}
    if isinstance(paper, Mapping) and paper and set(paper) <= {"value", "min", "max"}:
        if "value" in paper and len(paper) > 1:
            raise ValueError(f"paper: give a value or min/max, not both ({dict(paper)})")
        return {key: float(v) for key, v in paper.items()}
    raise ValueError(f"paper must be a number or a mapping of value/min/max, got {paper!r}")


def expression_names(expr: str) -> set[str]:
    """Names an ``expr`` uses (checked against the locator's keys)."""
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def check_locator(locator: Mapping, where: str = "locator") -> None:
    """Raise ``ValueError`` when a locator is malformed or names an unknown table or column."""
    if "expr" in locator:
        names = expression_names(str(locator["expr"]))
        missing = names - set(locator)
        if missing:
            raise ValueError(f"{where}: expr uses {sorted(missing)} without a locator for them")
        for name in names:
            check_locator(locator[name], f"{where}.{name}")
        return
    unknown = set(locator) - _LOCATOR_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    table, column = locator.get("table"), locator.get("column")
    if table not in TABLE_SCHEMAS:
        raise ValueError(f"{where}: unknown table {table!r}")
    columns = TABLE_SCHEMAS[table]
    if column not in columns and "{" not in str(column):  # "{metric}": the report row's metric
        raise ValueError(f"{where}: table {table} has no column {column!r}")
    if not isinstance(locator.get("where") or {}, Mapping):
        raise ValueError(f"{where}: where must be a mapping of column to value")
    if locator.get("agg", "first") not in AGGREGATES:
        raise ValueError(f"{where}: agg must be one of {AGGREGATES}")


def load_references(path: Path = REFERENCES_FILE) -> dict:
    """The reference file, checked: ``version``, ``source`` and ``entries`` with unique ids."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    for key in ("version", "source", "entries"):
        if key not in data:
            raise ValueError(f"{path}: missing top-level {key!r}")
    seen: set[str] = set()
    for entry in data["entries"]:
        for key in ("id", "description", "section", "quote", "subset", "paper", "locator"):
            if key not in entry:
                raise ValueError(f"{path}: entry {entry.get('id', '?')} lacks {key!r}")
        if entry["id"] in seen:
            raise ValueError(f"{path}: duplicate id {entry['id']!r}")
        seen.add(entry["id"])
        paper_bounds(entry["paper"])
        check_locator(entry["locator"], entry["id"])
        for extra in ("low", "high"):
            if "ci" in entry:
                check_locator(entry["ci"][extra], f"{entry['id']}.ci.{extra}")
        if "share" in entry:
            check_locator(entry["share"]["n"], f"{entry['id']}.share.n")
        for extra in ("kappa", "objective"):
            if extra in entry.get("validity", {}):
                check_locator(entry["validity"][extra], f"{entry['id']}.validity.{extra}")
    return data


# -- locating this run's value ------------------------------------------------------------------------------

class TableCache:
    """Tables of one run, each read once; ``None`` for a table that was not saved."""

    def __init__(self, tables_dir: Path):
        self.tables_dir = Path(tables_dir)
        self._tables: dict[str, pd.DataFrame | None] = {}

    def get(self, name: str) -> pd.DataFrame | None:
        if name not in self._tables:
            path = self.tables_dir / f"{name}.csv"
            try:
                self._tables[name] = pd.read_csv(path) if path.exists() else None
            except pd.errors.EmptyDataError:
                self._tables[name] = pd.DataFrame()
        return self._tables[name]


def _equal_to(series: pd.Series, value) -> pd.Series:
    if isinstance(value, bool):
        return series.astype(str).str.lower() == str(value).lower()
    if isinstance(value, int | float):
        numbers = pd.to_numeric(series, errors="coerce")
        return pd.Series(np.isclose(numbers, float(value)), index=series.index) & numbers.notna()
    return series.astype(str) == str(value)


def select_rows(df: pd.DataFrame, where: Mapping | None) -> pd.DataFrame:
    """Rows equal to every filter; ``"$min"``/``"$max"`` then keep the extreme of a numeric column."""
    where = dict(where or {})
    extremes = {c: v for c, v in where.items() if isinstance(v, str) and v in EXTREMES}
    for col, value in where.items():
        if col not in extremes:
            df = df[_equal_to(df[col], value)]
    for col, value in extremes.items():
        numbers = pd.to_numeric(df[col], errors="coerce")
        if numbers.notna().any():
            target = numbers.min() if EXTREMES[value] == "min" else numbers.max()
            df = df[np.isclose(numbers, target)]
        else:
            df = df.iloc[0:0]
    return df


def _aggregate(values: pd.Series, agg: str) -> float:
    numbers = pd.to_numeric(values, errors="coerce")
    if agg == "first":
        return float(numbers.iloc[0])
    numbers = numbers.dropna()
    if numbers.empty:
        return math.nan
    return float(getattr(numbers, agg)())


def evaluate_expr(expr: str, values: Mapping[str, float]) -> float:
    """Arithmetic (``+ - * / **``, numbers, parentheses) over named values; NaN on division by zero."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in values:
            return float(values[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](ev(node.operand))
        raise ValueError(f"unsupported expression element {ast.dump(node)} in {expr!r}")

    try:
        return ev(ast.parse(expr, mode="eval"))
    except ZeroDivisionError:
        return math.nan


def locate(locator: Mapping, tables: TableCache) -> tuple[float, str | None]:
    """This run's value and ``None``, or NaN and why it is missing (``missing table``, ...)."""
    if "expr" in locator:
        values = {}
        for name in sorted(expression_names(str(locator["expr"]))):
            value, problem = locate(locator[name], tables)
            if problem:
                return math.nan, problem
            values[name] = value
        value = evaluate_expr(str(locator["expr"]), values)
        return (value, None) if not math.isnan(value) else (math.nan, "no value")
    df = tables.get(locator["table"])
    if df is None:
        return math.nan, "missing table"
    where = locator.get("where") or {}
    for col in [*where, locator["column"]]:
        if col not in df.columns:
            return math.nan, f"missing column {col}"
    rows = select_rows(df, where)
    if rows.empty:
        return math.nan, "no matching rows"
    value = _aggregate(rows[locator["column"]], locator.get("agg", "first"))
    if math.isnan(value):
        return math.nan, "no value"
    return value * float(locator.get("scale", 1)), None


def locator_source(locator: Mapping) -> str:
    """Where a value comes from, for the report's ``source`` column."""
    if "expr" in locator:
        names = sorted(expression_names(str(locator["expr"])))
        parts = [f"{n} = {locator_source(locator[n])}" for n in names]
        return f"{locator['expr']} with " + "; ".join(parts)
    where = ", ".join(f"{k}={v}" for k, v in (locator.get("where") or {}).items())
    agg = locator.get("agg", "first")
    text = f"{locator['table']}.{locator['column']}" + (f" [{where}]" if where else "")
    text += f" ({agg})" if agg != "first" else ""
    return text + (f" ×{locator['scale']}" if "scale" in locator else "")


# -- comparing ----------------------------------------------------------------------------------------------

CONSISTENT, DIFFERS, NOT_SCORED = "consistent", "differs", "not scored"


def default_tolerance(value: float) -> float:
    """Half a unit of the paper's last decimal (at least two decimals for a non-integer)."""
    if float(value).is_integer():
        return 0.5
    decimals = max(2, len(repr(float(value)).split(".")[1]))
    return 0.5 * 10 ** -decimals


def _direction(diff: float) -> str:
    return "above" if diff > 0 else "below" if diff < 0 else ""


def compare(this_run: float, bounds: Mapping[str, float], tolerance: float | None = None,
            ci: tuple[float, float] | None = None) -> tuple[float, str, str, str]:
    """``(difference, status, direction, basis)`` of this run's value against the paper's.

    ``difference`` is this run minus the paper, or the distance outside the paper's range. The status is
    "consistent" when the paper's value lies in this run's 95% CI (``ci``), else within ``tolerance``,
    else (with neither) equal at the paper's last decimal, or when this run's value lies in the paper's
    range; "differs" otherwise, with the direction of this run against the paper (above / below).
    """
    if "value" in bounds:
        paper = bounds["value"]
        diff = this_run - paper
        if ci is not None:
            low, high = ci
            ok = low - 1e-12 <= paper <= high + 1e-12
            basis = f"paper in this run's 95% CI [{fmt_number(low)}, {fmt_number(high)}]" if ok else \
                f"paper outside this run's 95% CI [{fmt_number(low)}, {fmt_number(high)}]"
        else:
            tol = default_tolerance(paper) if tolerance is None else float(tolerance)
            ok = abs(diff) <= tol + 1e-12
            basis = (f"tolerance ±{tol:g}" if tolerance is not None else
                     f"the paper's precision (±{tol:g})")
        return diff, CONSISTENT if ok else DIFFERS, "" if ok else _direction(diff), basis
    low, high = bounds.get("min", -math.inf), bounds.get("max", math.inf)
    basis = "the paper's range" if math.isfinite(low) and math.isfinite(high) else "the paper's bound"
    if this_run < low:
        return this_run - low, DIFFERS, "below", basis
    if this_run > high:
        return this_run - high, DIFFERS, "above", basis
    return 0.0, CONSISTENT, "", basis


def compare_share(count: float, n: float, paper_count: float, paper_n: float) -> tuple[float, str, str, str]:
    """A count compared as a share of its set: consistent when the paper's share lies in the Wilson 95%
    interval of this run's (``count / n``)."""
    from statsmodels.stats.proportion import proportion_confint

    share, paper_share = count / n, paper_count / paper_n
    low, high = proportion_confint(int(round(count)), int(round(n)), alpha=0.05, method="wilson")
    ok = low - 1e-12 <= paper_share <= high + 1e-12
    basis = (f"share {fmt_number(share)} ({fmt_count(count)} of {fmt_count(n)}), Wilson 95% CI "
             f"[{fmt_number(low)}, {fmt_number(high)}]; paper {fmt_number(paper_share)} "
             f"({fmt_count(paper_count)} of {fmt_count(paper_n)})")
    diff = share - paper_share
    return diff, CONSISTENT if ok else DIFFERS, "" if ok else _direction(diff), basis


def paper_text(bounds: Mapping[str, float]) -> str:
    """The paper's number as the report shows it: ``0.372``, ``2.4–2.5``, ``≥ 0.96``, ``46,984``."""

    def fmt(x: float) -> str:
        return fmt_count(x) if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"

    if "value" in bounds:
        return fmt(bounds["value"])
    if "min" in bounds and "max" in bounds:
        return f"{fmt(bounds['min'])}–{fmt(bounds['max'])}"
    return f"≥ {fmt(bounds['min'])}" if "min" in bounds else f"≤ {fmt(bounds['max'])}"


def paper_numbers(entry: Mapping) -> list[float]:
    """Every number an entry (or worked example) takes from the paper: its value or bounds, its std, and
    a worked example's two recalls."""
    out = list(paper_bounds(entry["paper"]).values()) if "paper" in entry else []
    out += [float(entry[key]) for key in ("std", "ptr_recall", "rtp_recall") if key in entry]
    return out


def paper_value(entry_id: str, bound: str = "value", path: Path = REFERENCES_FILE) -> float | None:
    """The paper's value of one reference entry, or its ``min``/``max`` bound (``None`` when absent)."""
    for e in load_references(path)["entries"]:
        if e["id"] == entry_id:
            return paper_bounds(e["paper"]).get(bound)
    return None


def paper_query_counts(path: Path = REFERENCES_FILE) -> pd.DataFrame:
    """``subset, n_queries``: the paper's query count per set, from the reference file's entries."""
    entries = load_references(path)["entries"]
    rows = [{"subset": e["subset"], "n_queries": paper_bounds(e["paper"])["value"]}
            for e in entries if e["id"].endswith("_query_count")]
    return pd.DataFrame(rows, columns=["subset", "n_queries"])


# -- named causes -------------------------------------------------------------------------------------------

def load_causes(path: Path = CAUSES_FILE) -> dict[str, dict]:
    """``{cause id: cause}`` from the causes file, each prediction and check validated."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    out = {}
    for cause in data.get("causes", []):
        for key in ("id", "title", "ablation", "prediction", "predicts", "checks"):
            if key not in cause:
                raise ValueError(f"{path}: cause {cause.get('id', '?')} lacks {key!r}")
        for p in cause["predicts"]:
            if p.get("direction") not in ("above", "below") or not p.get("metric"):
                raise ValueError(f"{path}: cause {cause['id']}: a prediction needs a metric and a direction "
                                 f"above/below, got {p}")
        for i, check in enumerate(cause["checks"]):
            check_locator(check, f"{cause['id']}.checks[{i}]")
            if "**" in str(check["expr"]):
                raise ValueError(f"{path}: cause {cause['id']}: a check is signed, not a power "
                                 f"({check['expr']})")
        out[cause["id"]] = cause
    return out


def _for_row(locator, row: Mapping[str, str]):
    """A copy of ``locator`` with ``{subset}``, ``{method}`` and ``{metric}`` replaced by the row's."""
    if isinstance(locator, Mapping):
        return {k: _for_row(v, row) for k, v in locator.items()}
    if isinstance(locator, str):
        for key in ("subset", "method", "metric"):
            locator = locator.replace("{" + key + "}", str(row.get(key, "")))
        return locator
    return locator


def _for_subset(locator, subset: str):
    """A copy of ``locator`` with ``{subset}`` in its filters replaced by ``subset``."""
    return _for_row(locator, {"subset": subset})


def predicts(cause: Mapping, metric: str, method: str, direction: str) -> bool:
    """Whether ``cause`` predicts a difference of this metric (and method) in this direction."""
    return any(p["metric"] == metric and p.get("method", method) == method and p["direction"] == direction
               for p in cause["predicts"])


def check_cause(cause: Mapping, row: Mapping | str, tables: TableCache,
                paper: float | None = None) -> tuple[bool | None, str]:
    """``(holds, evidence)``: whether every check is > 0 in this run (``None`` when a table is missing)."""
    row = {"subset": row} if isinstance(row, str) else dict(row)
    shown = []
    for check in cause["checks"]:
        check = _for_row(check, row)
        values = {} if paper is None else {"paper": paper}
        for name in sorted(expression_names(str(check["expr"])) - {"paper"}):
            value, problem = locate(check[name], tables)
            if problem:
                return None, f"{check[name].get('table', name)}: {problem}"
            values[name] = value
        result = evaluate_expr(str(check["expr"]), values)
        shown.append(f"{check['expr']} = {fmt_number(result)} with "
                     + ", ".join(f"{n} = {fmt_number(v)}" for n, v in values.items()))
        if math.isnan(result) or result <= 0:
            return False, "; ".join(shown)
    return True, "; ".join(shown)


def ablation_text(cause: Mapping) -> str:
    a = cause["ablation"]
    if isinstance(a, Mapping):
        return f"table {a['table']}" + (f" (notebook {a['notebook']})" if a.get("notebook") else "")
    return str(a)


def name_cause(entry: Mapping, status: str, causes: Mapping[str, dict], tables: TableCache,
               direction: str = "") -> tuple[str, str]:
    """``(cause, evidence)`` of a report row: the first listed cause that predicts this metric and direction
    and whose checks hold in this run; "unexplained" (with what was tried) when none does."""
    if status != DIFFERS:
        return "", ""
    listed = entry.get("causes", [])
    if not listed:
        return "unexplained", "no testable cause listed"
    row = {"subset": str(entry["subset"]), "method": str(entry.get("method", "")),
           "metric": str(entry.get("metric", ""))}
    point = paper_bounds(entry["paper"]).get("value")
    tried = []
    for cause_id in listed:
        cause = causes.get(cause_id)
        if cause is None:
            raise ValueError(f"entry {entry['id']}: unknown cause {cause_id!r}")
        if not predicts(cause, row["metric"], row["method"], direction):
            tried.append(f"{cause_id} does not predict {row['metric']} {direction}")
            continue
        holds, evidence = check_cause(cause, row, tables, point)
        if holds:
            return f"{cause_id}: {cause['title']}", f"{ablation_text(cause)}: {evidence}"
        tried.append(f"{cause_id} {'not measured' if holds is None else 'fails'} ({evidence})")
    return "unexplained", "; ".join(tried)


def judge_entry(entry: Mapping, tables: TableCache) -> dict:
    """One report row: this run's value, its CI, the status by evidence, the direction and the basis."""
    bounds = paper_bounds(entry["paper"])
    row = {"this_run": math.nan, "ci_low": math.nan, "ci_high": math.nan, "difference": math.nan,
           "status": "", "direction": "", "basis": "", "objective": math.nan}
    value, problem = locate(entry["locator"], tables)
    if problem:
        row["status"] = problem
        return row
    row["this_run"] = value
    validity = entry.get("validity")
    if validity:
        objective, _ = locate(validity["objective"], tables) if "objective" in validity else (math.nan, None)
        row["objective"] = objective
        kappa, why = locate(validity["kappa"], tables)
        if why or kappa < float(validity.get("min_kappa", 0.4)):
            row["difference"] = value - bounds.get("value", math.nan)
            row["status"] = NOT_SCORED
            row["basis"] = (f"judge validity not measured ({why})" if why else
                            f"judge kappa {fmt_number(kappa)} < {validity.get('min_kappa', 0.4)}")
            return row
    if "share" in entry and "value" in bounds:
        n, why = locate(entry["share"]["n"], tables)
        if not why and n > 0:
            diff, status, direction, basis = compare_share(value, n, bounds["value"],
                                                           entry["share"]["paper_n"])
            row.update(difference=diff, status=status, direction=direction, basis=basis)
            return row
    ci = None
    if "ci" in entry:
        low, why_low = locate(entry["ci"]["low"], tables)
        high, why_high = locate(entry["ci"]["high"], tables)
        if not (why_low or why_high):
            ci = (low, high)
            row["ci_low"], row["ci_high"] = low, high
    diff, status, direction, basis = compare(value, bounds, entry.get("tolerance"), ci)
    if "ci" in entry and ci is None:
        basis += " (no CI saved)"
    row.update(difference=diff, status=status, direction=direction, basis=basis)
    return row


def compare_entries(entries: list[dict], tables_dir: Path,
                    causes: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """One row per reference entry: the paper's number, this run's with its CI, the status by evidence,
    the direction, and the named cause of a difference."""
    tables = TableCache(tables_dir)
    causes = load_causes() if causes is None else causes
    rows = []
    for entry in entries:
        judged = judge_entry(entry, tables)
        cause, evidence = name_cause(entry, judged["status"], causes, tables, judged["direction"])
        rows.append({"id": entry["id"], "description": entry["description"],
                     "section": entry.get("section", ""), "subset": entry["subset"],
                     "metric": entry.get("metric", ""), "method": entry.get("method", ""),
                     "paper": paper_text(paper_bounds(entry["paper"])), **judged, "cause": cause,
                     "evidence": evidence, "quote": entry.get("quote", ""),
                     "source": locator_source(entry["locator"])})
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def build_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE) -> pd.DataFrame:
    """The paper's reference numbers against the tables this run saved under ``cfg.tables_dir``."""
    return compare_entries(load_references(references)["entries"], cfg.tables_dir)


def status_counts(report: pd.DataFrame) -> dict[str, int]:
    """Counts of consistent / differs / explained / unexplained / not scored / not found rows."""
    differs = report["status"] == DIFFERS
    return {"consistent": int((report["status"] == CONSISTENT).sum()), "differs": int(differs.sum()),
            "explained": int((differs & ~report["cause"].isin(["unexplained", ""])).sum()),
            "unexplained": int((differs & (report["cause"] == "unexplained")).sum()),
            "not scored": int((report["status"] == NOT_SCORED).sum()),
            "not found": int((~report["status"].isin([CONSISTENT, DIFFERS, NOT_SCORED])).sum())}


# -- the written report -------------------------------------------------------------------------------------

def run_provenance(cfg: ExperimentConfig) -> list[dict]:
    """Provenance of the studies stored for this run; the configuration's own study first."""
    files = sorted((cfg.out_dir / "runs").glob("*/provenance.json"))
    own = cfg.out_dir / "runs" / cfg.study_key() / "provenance.json"
    files.sort(key=lambda p: p != own)
    out = []
    for path in files:
        prov = json.loads(path.read_text())
        prov["study_folder"] = str(path.parent.relative_to(cfg.out_dir))
        out.append(prov)
    return out


def provenance_markdown(prov: Mapping) -> str:
    """A study's model, backend, data and parameters as a Markdown list."""
    s = prov.get("settings", {})
    requested = prov.get("model_requested")
    embedder = prov.get("model") if requested in (None, prov.get("model")) else \
        f"{prov.get('model')} (requested {requested})"
    lines = [
        f"- embedder: {embedder}",
        f"- backend: {prov.get('backend')} (model {prov.get('llm_model')}); pass rate: "
        f"{prov.get('pass_rate_kind', 'n/a')}",
        f"- data: fingerprint {prov.get('data_fingerprint')}, registry {prov.get('registry_size')} of "
        f"{prov.get('registry_full_size')} APIs (sub-registry seed {prov.get('sub_registry_seed')})",
        f"- parameters: k={s.get('k')}, depth={s.get('depth')}, runs={s.get('runs')}, "
        f"plan_limit={s.get('plan_limit')}, temperature={s.get('temperature')}, "
        f"run_temperature={s.get('run_temperature')}, queries={prov.get('n_queries')} "
        f"({prov.get('n_planned_queries')} planned)",
        f"- prompts: {', '.join(prov.get('prompt_versions', [])) or 'n/a'}",
        f"- stored in: `{prov.get('study_folder')}`",
    ]
    return "\n".join(lines)


# The report's sections in the paper's order: (key, heading, the paper.yaml section prefixes it holds).
SECTIONS = (("setup", "Setup and data (§3)", ("§3",)),
            ("main", "Main results (§4.1, Figure 2)", ("§4.1 Main",)),
            ("budget", "Retrieval budget (Table 1)", ("§4.1 Table 1", "§4.2 Budget")),
            ("scale", "Registry scale (§4.2, Figure 3)", ("§4.2 Registry",)),
            ("trajectory", "Trajectories (§4.3, Figure 4)", ("§4.3",)),
            ("stubs", "Stubs (§4.4, Table 4)", ("§4.4", "§5 Discussion (Intent")),
            ("cost", "Cost and routing (§5)", ("§5 Discussion (cost", "§5 Discussion (routing")))
# Figures by name (exact, or prefix ending in "_"): (section key, caption).
FIGURES = {
    "pipeline": ("setup", "The two pipelines drawn by the toolkit (the paper's Figure 1): RtP searches with "
                          "the query; PtR has the planner write stubs first (no tools shown), searches with "
                          "each and keeps the best similarity per API. The retriever family (dense, BM25, "
                          "hybrid) is where a searched text meets the registry index."),
    "data_categories": ("setup", "APIs per category in this run's registry."),
    "data_doc_lengths": ("setup", "Length of the API documents that are embedded."),
    "figure2": ("main", "The paper's Figure 2 for this run: recall, precision and pass rate per set and "
                        "method (bars with 95% CIs, the paper's values as markers) and per-query wins."),
    "headline": ("main", "Recall@k per set and method, error bars the std over runs."),
    "runs_recall": ("main", "PtR's recall in each run against RtP's, per set (the paper's test over runs)."),
    "k_ablation": ("budget", "Recall against the retrieval budget k, per set and method (candidate ground "
                             "truth)."),
    "k_ablation_relevant": ("budget", "Recall against k with the relevant-API ground truth."),
    "scale_recall": ("scale", "Recall on sub-registries of growing size (mean over seeds)."),
    "scale_divergence": ("scale", "Share of queries whose RtP and PtR top-k lists share no API, by registry "
                                  "size."),
    "figure4": ("trajectory", "The paper's Figure 4 for this run: plan fidelity, overlap, used share, steps "
                              "and APIs named, with the paper's values as markers."),
    "routing_recall_vs_share": ("cost", "Recall against the share of queries routed to PtR, for each routing "
                                        "policy."),
    "retriever_": ("retriever", "Retriever families: recall per set, retriever and method."),
    "ablation_": ("ablations", "An ablation behind a named cause (notebook 11)."),
    "beyond_": ("beyond", "Beyond the paper (notebook 10)."),
}


def figure_section(stem: str) -> tuple[str, str]:
    """``(section key, caption)`` of a saved figure; ``("other", ...)`` for a figure no section claims."""
    if stem in FIGURES:
        return FIGURES[stem]
    for prefix, (key, caption) in FIGURES.items():
        if prefix.endswith("_") and stem.startswith(prefix):
            return key, f"{caption[:-1]}: {stem[len(prefix):].replace('_', ' ')}."
    return "other", f"Figure {stem.replace('_', ' ')} (saved by a notebook; no section of the paper)."


def figure_files(cfg: ExperimentConfig) -> list[Path]:
    folder = cfg.figures_dir
    if not folder.is_dir():
        return []
    return sorted(p for ext in ("png", "svg", "jpg") for p in folder.glob(f"*.{ext}"))


def figure_links(cfg: ExperimentConfig) -> list[str]:
    """Markdown image links, relative to the run folder, of every figure saved for this run."""
    return [f"![{p.stem}]({p.relative_to(cfg.out_dir).as_posix()})" for p in figure_files(cfg)]


def figures_markdown(cfg: ExperimentConfig, key: str) -> list[str]:
    """The figures of one section, each with its caption."""
    parts = []
    for p in figure_files(cfg):
        section, caption = figure_section(p.stem)
        if section == key:
            parts += [f"![{p.stem}]({p.relative_to(cfg.out_dir).as_posix()})", "",
                      f"*Figure `{p.stem}`.* {caption}", ""]
    return parts


def _shown(report: pd.DataFrame, full: bool = False) -> pd.DataFrame:
    """Report rows with every number formatted once (3 decimals, counts with separators, no nan)."""
    out = pd.DataFrame({
        "id": report["id"], "subset": report["subset"], "paper": report["paper"],
        "this run": [fmt_count(v) if m in ("count", "wins") else fmt_number(v)
                     for v, m in zip(report["this_run"], report["metric"], strict=True)],
        "95% CI": [fmt_ci(lo, hi) for lo, hi in zip(report["ci_low"], report["ci_high"], strict=True)],
        "status": [s + (f" ({d})" if d else "") for s, d in zip(report["status"], report["direction"],
                                                                  strict=True)],
        "basis": report["basis"]})
    if report["objective"].notna().any():
        out["objective pass rate"] = report["objective"].map(fmt_number)
    if full:
        out["cause"] = report["cause"].fillna("")
        out["description"] = report["description"]
    return out


def _report_table(report: pd.DataFrame, full: bool = True) -> str:
    return md_table(_shown(report, full)) if len(report) else "No reference number here."


def section_rows(report: pd.DataFrame, prefixes) -> pd.DataFrame:
    return report[report["section"].astype(str).str.startswith(tuple(prefixes))]


def section_sentence(rows: pd.DataFrame) -> str:
    """A generated sentence on a section's rows: how many are consistent, which differ and why."""
    c = status_counts(rows)
    found = c["consistent"] + c["differs"]
    parts = [f"{c['consistent']} of {found} numbers found are consistent with the paper"]
    differs = rows[rows["status"] == DIFFERS]
    if len(differs):
        parts.append("differs: " + ", ".join(
            f"{r.id} ({r.direction}, {r.cause.split(':')[0] if r.cause else 'unexplained'})"
            for r in differs.itertuples()))
    if c["not scored"]:
        parts.append(f"{c['not scored']} not scored")
    if c["not found"]:
        parts.append(f"{c['not found']} not found in this run's tables")
    return "; ".join(parts) + "."


def summary_verdicts(cfg: ExperimentConfig, report_refs: dict, alpha: float = 0.05) -> list[dict]:
    """One verdict per set on recall@k, from the saved ``main_results`` and ``paired_tests`` tables and the
    same :func:`~toolbench_lib.analysis.findings.recall_verdict` notebook 02's findings use."""
    from .findings import recall_verdict

    tables = TableCache(cfg.tables_dir)
    main, paired = tables.get("main_results"), tables.get("paired_tests")
    if main is None or paired is None or main.empty or paired.empty:
        return []
    by_id = {e["id"]: paper_bounds(e["paper"]).get("value") for e in report_refs["entries"]}
    m = main[main["gt"] == "candidates"].set_index(["subset", "method"])
    p = paired[(paired["gt"] == "candidates") & (paired["metric"] == "recall")].set_index("subset")
    out = []
    for subset in dict.fromkeys(main["subset"]):
        if (subset, "rtp") not in m.index or (subset, "ptr") not in m.index or subset not in p.index:
            continue
        t = p.loc[subset]
        paper = {k: v for k in ("rtp", "ptr") if (v := by_id.get(f"{subset.lower()}_{k}_recall")) is not None}
        v = recall_verdict(m.loc[(subset, "rtp"), "recall_mean"], m.loc[(subset, "ptr"), "recall_mean"],
                           t["p_wilcoxon_holm"], paper, alpha)
        out.append({"subset": subset, "n": int(m.loc[(subset, "rtp"), "n_queries"]),
                    "rtp": m.loc[(subset, "rtp"), "recall_mean"],
                    "ptr": m.loc[(subset, "ptr"), "recall_mean"],
                    "diff": t["diff"], "ci_low": t["ci_low"], "ci_high": t["ci_high"],
                    "p": t["p_wilcoxon_holm"], "paper": paper, **v})
    return out


def setup_differences(cfg: ExperimentConfig, provenance: list[dict], refs: dict) -> list[str]:
    """The box "what differs from the paper's setup": embedder, LLM, runs, query counts and sets."""
    from ..data.queries import DEFAULT_SUBSETS

    prov = provenance[0] if provenance else {}
    settings = prov.get("settings", {})
    main = TableCache(cfg.tables_dir).get("main_results")
    counts = {}
    if main is not None and not main.empty:
        rows = main[(main["method"] == "rtp") & (main["gt"] == "candidates")]
        counts = dict(zip(rows["subset"], rows["n_queries"], strict=True))
    paper_n = {e["subset"]: paper_bounds(e["paper"])["value"] for e in refs["entries"]
               if e["id"].endswith("_query_count")}
    rows = [("embedder", "GTE-base (thenlper/gte-base)", str(prov.get("model", "n/a"))),
            ("LLM (stubs, plans)", "Gemini 2.5 Flash",
             f"{prov.get('backend', 'n/a')} ({prov.get('llm_model', 'n/a')})"),
            ("runs", "4", fmt_count(settings.get("runs"))),
            ("registry", fmt_count(46984), fmt_count(prov.get("registry_size")))]
    for subset in cfg.subsets:
        rows.append((f"{subset} queries", fmt_count(paper_n.get(subset)), f"{fmt_count(counts.get(subset))} "
                     f"({DEFAULT_SUBSETS.get(subset, subset)})"))
    table = md_table(pd.DataFrame(rows, columns=["", "paper", "this run"]))
    return ["> **What differs from the paper's setup**", ">",
            *[f"> {line}" for line in table.splitlines()], ""]


def summary_markdown(cfg: ExperimentConfig, report: pd.DataFrame, refs: dict,
                     provenance: list[dict]) -> list[str]:
    """The one-page summary: the question, one verdict per set, the setup box, the status counts."""
    parts = ["## Summary", "",
             "**The question.** Does retrieving tools with the raw query (RtP) or with stubs the planner "
             "writes first (PtR) find more of a query's ground-truth APIs, and does the answer flip between "
             "single-tool (G1) and multi-tool (G2, G3) queries?", ""]
    verdicts = summary_verdicts(cfg, refs)
    if verdicts:
        parts.append("**Verdicts on recall@k** (PtR − RtP, bootstrap 95% CI over queries, Holm-corrected "
                     "Wilcoxon test):")
        parts.append("")
        for v in verdicts:
            paper = (f"paper: {v['paper_leader']} ahead (RtP {fmt_number(v['paper']['rtp'])}, PtR "
                     f"{fmt_number(v['paper']['ptr'])})" if v["paper_leader"] else "no paper pair")
            parts.append(f"- **{v['subset']}** ({fmt_count(v['n'])} queries): RtP {fmt_number(v['rtp'])}, "
                         f"PtR {fmt_number(v['ptr'])}; PtR − RtP {fmt_signed(v['diff'])} "
                         f"{fmt_ci(v['ci_low'], v['ci_high'])}, {fmt_p(v['p'])}; {paper}: "
                         f"**{v['verdict']}**.")
        parts.append("")
    else:
        parts += ["No verdict: this run saved no `main_results` and `paired_tests` tables.", ""]
    retr = TableCache(cfg.tables_dir).get("retriever_verdicts")
    if retr is not None and not retr.empty and {"subset", "retriever", "text"} <= set(retr.columns):
        overall = retr[retr["subset"] == "all"]["text"].tolist()
        fused = TableCache(cfg.tables_dir).get("retriever_fusion_verdicts")
        fused = fused["text"].tolist() if fused is not None and "text" in fused else []
        parts += ["**With which retriever?** " + " ".join(overall) + " Per set and family: the section "
                  "Retriever families below.", ""]
        parts += [f"- {t}" for t in fused] + ([""] if fused else [])
    parts += setup_differences(cfg, provenance, refs)
    c = status_counts(report)
    parts += [f"**Against the paper's {fmt_count(len(report))} reference numbers:** {c['consistent']} "
              f"consistent, {c['differs']} differ ({c['explained']} explained by a tested cause, "
              f"{c['unexplained']} "
              f"unexplained), {c['not scored']} not scored (judged with a judge of kappa below 0.4 or not "
              f"measured), {c['not found']} not found in this run's tables. The scorecard at the end lists "
              "each.", ""]
    return parts


def retriever_section(cfg: ExperimentConfig) -> list[str]:
    """The retriever families' table and figures, when the run saved them; nothing otherwise."""
    table = TableCache(cfg.tables_dir).get("retriever_main")
    figs = figures_markdown(cfg, "retriever")
    if (table is None or table.empty) and not figs:
        return []
    parts = ["## Retriever families", ""]
    if table is not None and not table.empty:
        shown = table.copy()
        for col in shown.columns:
            if col == "n_queries":
                shown[col] = shown[col].map(fmt_count)
            elif pd.api.types.is_float_dtype(shown[col]):
                shown[col] = shown[col].map(fmt_number)
        parts += [md_table(shown), ""]
    cache = TableCache(cfg.tables_dir)
    verdicts = cache.get("retriever_verdicts")
    if verdicts is not None and "text" in verdicts:
        parts += ["### Does PtR beat RtP, with each retriever?", "",
                  *[f"- {t}" for t in verdicts["text"]], ""]
    parts += table_section(cfg, "", RETRIEVER_TABLES)[2:]
    fused = cache.get("retriever_fusion_verdicts")
    if fused is not None and "text" in fused:
        parts += ["### Fused methods against the better dense architecture", "",
                  *[f"- {t}" for t in fused["text"]], ""]
    return parts + figs


RETRIEVER_TABLES = (("retriever_tests", "PtR against RtP per set and family (per query and over runs, Holm)"),
                    ("retriever_crossover", "The paper's crossover per family"),
                    ("retriever_routing", "Routing by subset per family"),
                    ("retriever_divergence", "Disjoint top-k lists per family"),
                    ("retriever_scale_gap", "BM25 against registry size"),
                    ("retriever_fusion_choice", "Fused methods chosen on G1-G3 (out-of-fold recall)"),
                    ("retriever_fusion_design", "Fused methods and families on the design sets"),
                    ("retriever_fusion_unseen", "The same, unchanged, on the unseen sets"),
                    ("retriever_costs", "Cost per query"))


BEYOND_TABLES = (("beyond_leaderboard", "Discovery methods on the design sets (notebook 10)"),
                 ("beyond_goal", "Recall margin over the better architecture per set"),
                 ("beyond_validation", "The same methods on sets not used for design"),
                 ("beyond_validation_pooled", "Validation sets pooled: recall minus each set's better one"),
                 ("beyond_validation_losses", "Where the validation gap comes from"))


def table_section(cfg: ExperimentConfig, heading: str, tables) -> list[str]:
    """A report section of saved Markdown tables (``(name, title)`` pairs); nothing when none was saved."""
    parts = []
    for name, title in tables:
        path = cfg.tables_dir / f"{name}.md"
        if path.exists():
            parts += [f"### {title}", "", path.read_text(encoding="utf-8").strip(), ""]
    return [f"## {heading}", "", *parts] if parts else []


def beyond_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 10's leaderboards, as saved under ``tables/``; nothing when that notebook did not run."""
    return table_section(cfg, "Beyond the paper", BEYOND_TABLES)


ABLATION_TABLES = (("ablation_verdicts", "What the ablations found (notebook 11)"),
                   ("ablation_decomposition", "Decomposition against architecture"),
                   ("ablation_stub_echo", "Stub echo against divergence"))


def ablation_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 11's verdicts and key tables, behind the report's named causes."""
    return table_section(cfg, "Ablations behind the named causes", ABLATION_TABLES)


JUDGE_TABLES = (("judge_findings", "What the judge analysis found (notebook 02)"),
                ("pass_rate_judged_objective", "Judged against objective pass rates, with the judge's kappa"),
                ("pass_rate_ordering", "The paper's pass-rate ordering under each pass rate"))


RUNS_TABLES = (("paired_tests", "Paired per-query tests of PtR against RtP, one run (notebook 02)"),
               ("runs_tests", "The paper's test over runs, on the queries recorded in every run"))


def runs_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 02's statistics: the paired per-query tests and the test over several runs."""
    return table_section(cfg, "Statistics", RUNS_TABLES)


def judge_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 02's judge validity tables, as saved under ``tables/``; nothing when they are absent."""
    return table_section(cfg, "The pass rate: judged and objective", JUDGE_TABLES)


def glossary_section(material) -> list[str]:
    """The glossary, after the summary: the terms the report uses, each with where the toolkit computes it."""
    return ["## Glossary", "", "The terms this report uses; the figure `pipeline` (in the setup section) "
            "draws both architectures.", "", material.glossary, ""]


def teaching_sections(material) -> dict[str, list[str]]:
    """``{section key: lines}``: the worked queries after the main results, the paper's Table 2 examples
    after the stubs (where the paper sets them)."""
    return {"main": ["## Worked queries", "", *material.worked],
            "stubs": ["## The paper's Table 2 examples in this run", "", *material.examples]}


def report_markdown(cfg: ExperimentConfig, report: pd.DataFrame, references: dict,
                    provenance: list[dict], material=None) -> str:
    """The whole ``report.md``: the summary, the glossary, the paper's sections with their numbers and
    figures (the worked queries and Table 2 examples among them), this toolkit's own sections, the
    scorecard last. ``material`` is the run's :class:`~toolbench_lib.analysis.teaching.TeachingMaterial`
    (read from its stored study when not given)."""
    material = teaching_material(cfg) if material is None else material
    after = teaching_sections(material)
    parts = [f"# Reproduction report: {cfg.run_name}", "",
             f"Reference numbers: {references['source']} (`references/paper.yaml`, version "
             f"{references['version']}, every number quoted from the paper's text).", "",
             *summary_markdown(cfg, report, references, provenance), *glossary_section(material)]
    for key, heading, prefixes in SECTIONS:
        rows = section_rows(report, prefixes)
        parts += [f"## {heading}", "", section_sentence(rows) if len(rows) else "", "",
                  _report_table(rows, full=False), "", *figures_markdown(cfg, key), *after.get(key, [])]
    parts += [*retriever_section(cfg), *runs_section(cfg), *ablation_section(cfg)]
    parts += figures_markdown(cfg, "ablations")
    parts += [*judge_section(cfg), *beyond_section(cfg), *figures_markdown(cfg, "beyond")]
    other = figures_markdown(cfg, "other")
    if other:
        parts += ["## Other figures", "", *other]
    if not figure_files(cfg):
        parts += ["No figures were saved for this run.", ""]
    parts += ["## This run", ""]
    if provenance:
        parts.append(provenance_markdown(provenance[0]))
        if len(provenance) > 1:
            others = ", ".join(f"`{p['study_folder']}`" for p in provenance[1:])
            parts += ["", f"Other studies stored for this run: {others}."]
    else:
        parts.append(f"No stored study found under `{cfg.out_dir / 'runs'}`.")
    parts += ["", f"Run settings: smoke={cfg.smoke}, subsets={', '.join(cfg.subsets)}.", "",
              "## Scorecard", "",
              "`status` is *consistent* when the paper's value lies in this run's 95% CI (or, without one, "
              "within the stated tolerance, the paper's range or its last decimal), *differs* (with the "
              "direction of this run against the paper) otherwise, *not scored* for a pass rate judged by a "
              "judge of kappa below 0.4. `cause` is the first listed cause that predicts this metric and "
              "direction and whose ablation check holds (`references/causes.yaml`).", "",
              _report_table(report, full=True), ""]
    return "\n".join(parts).rstrip() + "\n"


def write_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE, material=None) -> Path:
    """Write ``outputs/<run>/report.md`` and ``report.csv``; returns the Markdown path. ``material``: the
    teaching material already built for this run (built from its stored study when not given)."""
    refs = load_references(references)
    report = compare_entries(refs["entries"], cfg.tables_dir)
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    report.to_csv(cfg.out_dir / "report.csv", index=False)
    path = cfg.out_dir / "report.md"
    path.write_text(report_markdown(cfg, report, refs, run_provenance(cfg), material), encoding="utf-8")
    return path
