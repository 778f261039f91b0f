"""The scorecard: the paper's numbers against this run's (``references/paper.yaml`` over the saved tables).

Every reference entry names where this run's value is (a table under ``outputs/<run>/tables/``, row
filters, a column, an aggregate); :func:`build_report` looks each one up and compares it with the paper.
A table or column that is not there is reported as such, never raised.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..data.paths import PROJECT_ROOT
from ..eval.stats import wilson_ci
from ..pipeline.experiment import ExperimentConfig
from .numbers import fmt_count, fmt_number, fmt_signed

REFERENCES_FILE = PROJECT_ROOT / "references" / "paper.yaml"
CAUSES_FILE = PROJECT_ROOT / "references" / "causes.yaml"
AGGREGATES = ("first", "mean", "min", "max", "sum")
EXTREMES = {"$min": "min", "$max": "max"}
REPORT_COLUMNS = ["id", "description", "section", "subset", "metric", "method", "paper", "this_run", "ci_low",
                  "ci_high", "difference", "status", "direction", "basis", "objective", "cause", "evidence",
                  "quote", "source", "cause_status", "predicted", "predicted_ci_low", "predicted_ci_high"]


def _ci(*columns: str) -> tuple[str, ...]:
    """The CI columns ``<c>_ci_low``, ``<c>_ci_high`` of each column."""
    return tuple(f"{c}_ci_{end}" for c in columns for end in ("low", "high"))


# The saved tables and the columns the analyses write (extra columns are allowed).
TABLE_SCHEMAS: dict[str, tuple[str, ...]] = {
    "main_results": ("subset", "method", "gt", "n_queries", "n_runs", "recall_mean", "recall_std",
                     "precision_mean", "precision_std", "pass_rate_mean", "pass_rate_std", "n_planned",
                     *_ci("recall", "precision")),
    "wins": ("subset", "gt", "metric", "rtp_wins", "ptr_wins", "ties", "n_queries"),
    "paired_tests": ("subset", "gt", "metric", "n", "rtp_mean", "ptr_mean", "diff", "ci_low", "ci_high",
                     "p", "p_holm", "family", "rtp_wins", "ptr_wins", "ties", "p_wilcoxon_robustness",
                     "p_runs_robustness"),
    "ttests": ("subset", "gt", "metric", "test", "statistic", "p_runs_robustness", "rtp_value", "ptr_mean"),
    "k_ablation": ("subset", "method", "gt", "k", "recall", "precision", "recall_gain", "n_queries",
                   *_ci("recall", "precision", "recall_gain")),
    "budget_check": ("subset", "gt", "rtp_k10_recall", "ptr_k5_recall",
                     *_ci("rtp_k10_recall", "ptr_k5_recall")),
    "scale": ("size", "seed", "subset", "method", "gt", "recall", "precision"),
    "scale_divergence": ("size", "seed", "subset", "no_overlap_share", "n_queries", *_ci("no_overlap_share")),
    "trajectory": ("subset", "method", "fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps",
                   "mean_apis_named", "refusal_rate", "n_plans", "n_queries",
                   *_ci("fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps", "mean_apis_named",
                       "refusal_rate")),
    "miss_behaviour": ("subset", "method", "n_complete_miss", "refusal_rate_on_miss",
                       "wrong_tool_rate_on_miss", "n_refusal_on_miss", "n_wrong_tool_on_miss",
                       *_ci("refusal_rate_on_miss", "wrong_tool_rate_on_miss")),
    "stub_stats": ("subset", "stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                   "cos_incorrect", "fallback_share", "n_stubs", "n_matched", "n_hits",
                   *_ci("stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                       "cos_incorrect")),
    "token_overhead": ("subset", "rtp_tokens", "ptr_tokens", "overhead_pct", "rtp_latency_s",
                       "ptr_latency_s", "n_queries", *_ci("overhead_pct")),
    "routing": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr",
                "n_queries"),
    "routing_overall": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr"),
    "retriever_main": ("subset", "retriever", "method", "recall_mean", "recall_lo", "recall_hi", "n_queries"),
    "routing_signal": ("subset", "signal", "auroc"),
    "data_sources": ("source", "n_apis", "share"),
    "data_categories": ("category", "n_apis", "share", "n_tools"),
    "data_gt_sizes": ("subset", "gt", "n_queries", "mean", "median", *_ci("mean")),
    "paper_query_counts": ("subset", "n_queries"),
    "ablation_decomposition": ("subset", "decomposer", "ptr_recall", "rtp_recall", "stubs_per_query",
                               "coverage", "n_queries"),
    "ablation_stub_text": ("subset", "variant", "recall", "precision", "n_queries"),
    "ablation_divergence": ("subset", "design", "size", "no_overlap_share", "gt_share", "rtp_recall",
                            "ptr_recall", "n_queries"),
    "ablation_stub_echo": ("subset", "mean_cos", "max_cos", "n_stubs", "disjoint_share",
                           "rho_disjoint_vs_echo", "p_value", "disjoint_low_echo", "disjoint_high_echo",
                           "n_queries", "n_low_echo", "n_high_echo"),
    "ablation_embedder": ("subset", "embedder", "method", "recall", "precision"),
    "judge_validity": ("subset", "method", "kappa", "judged_pass_rate", "objective_pass_rate", "n_plans"),
    "g2_sensitivity": ("subset", "basis", "retriever", "k", "n_queries", "n_runs", "rtp", "rtp_lo", "rtp_hi",
                       "ptr", "ptr_lo", "ptr_hi", "diff", "diff_lo", "diff_hi"),
    "g2_sets": ("subset", "basis", "n_queries", "gt_size", "gt_size_lo", "gt_size_hi", "paper_gt_size",
                "example_in_set"),
    "g2_verdict": ("subset", "gt_fits", "example_in_set", "paper_diffs_in_ci", "fits", "text"),
    "scale_claim": ("subset", "size", "rtp", "ptr", "diff", "ci_low", "ci_high", "gt_share", "keeps_all_gt"),
    "scale_claim_verdict": ("subset", "leader", "n_sizes", "sizes_ahead", "sizes_ahead_significant",
                            "gap_std", "holds", "text"),
    "divergence_readings": ("size", "group", "reading", "share", "ci_low", "ci_high", "n_queries"),
    "divergence_verdict": ("group", "reading", "text"),
    "divergence_full": ("retriever", "size", "group", "reading", "share", "ci_low", "ci_high", "n_queries"),
    "divergence_full_verdict": ("group", "reading", "text"),
    "routing_claim": ("retriever", "basis", "against", "routed", "other", "diff", "ci_low", "ci_high", "loss",
                      "text"),
}

# Columns a table has only in some runs (a locator may name them; a table need not hold them).
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "ablation_embedder": ("cos_correct", "cos_incorrect", *_ci("cos_correct", "cos_incorrect")),
}

# Tables only an opt-in step writes (`make ablations`: the embedder ablation of notebook 11).
OPTIONAL_TABLES = frozenset({"ablation_embedder"})

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
    if "paper" in locator:  # a number of the paper: {paper: entry id, bound: value | min | max}
        if set(locator) - {"paper", "bound"} or locator.get("bound", "value") not in ("value", "min", "max"):
            raise ValueError(f"{where}: a paper locator is {{paper: <entry id>, bound: value|min|max}}")
        return
    unknown = set(locator) - _LOCATOR_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    table, column = locator.get("table"), locator.get("column")
    if table not in TABLE_SCHEMAS:
        raise ValueError(f"{where}: unknown table {table!r}")
    columns = TABLE_SCHEMAS[table] + OPTIONAL_COLUMNS.get(table, ())
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
        for key in ("count", "n"):
            if "wilson" in entry:
                check_locator(entry["wilson"][key], f"{entry['id']}.wilson.{key}")
        for extra in ("kappa", "objective"):
            if extra in entry.get("validity", {}):
                check_locator(entry["validity"][extra], f"{entry['id']}.validity.{extra}")
    return data


# -- locating this run's value ------------------------------------------------------------------------------

class TableCache:
    """Tables of one run, each read once; ``None`` for a table that was not saved. ``paper`` holds the
    reference entries' bounds (``{id: bounds}``) for ``{paper: id}`` locators."""

    def __init__(self, tables_dir: Path, paper: Mapping[str, Mapping[str, float]] | None = None):
        self.tables_dir = Path(tables_dir)
        self._tables: dict[str, pd.DataFrame | None] = {}
        self.paper = dict(paper or {})

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
    if "paper" in locator:
        bound = tables.paper.get(str(locator["paper"]), {}).get(locator.get("bound", "value"))
        return (float(bound), None) if bound is not None else (math.nan, f"no paper value {locator['paper']}")
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
    if "paper" in locator:
        return f"the paper's {locator['paper']} ({locator.get('bound', 'value')})"
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


def _overlaps(low: float, high: float, a: float, b: float) -> bool:
    return low - 1e-12 <= b and a <= high + 1e-12


def compare(this_run: float, bounds: Mapping[str, float], tolerance: float | None = None,
            ci: tuple[float, float] | None = None) -> tuple[float, str, str, str]:
    """``(difference, status, direction, basis)`` of this run's value against the paper's.

    ``difference`` is this run minus the paper, or the distance outside the paper's range. With a 95% CI
    (``ci``) the status is "consistent" when the CI meets the paper's value, or its range, or (a "~"
    number) its value ± ``tolerance``. Without one: within ``tolerance``, else equal at the paper's last
    decimal, or inside the paper's range. "differs" otherwise, with the direction of this run against
    the paper (above / below).
    """
    if "value" in bounds:
        paper = bounds["value"]
        diff = this_run - paper
        if ci is not None:
            low, high = ci
            tol = 0.0 if tolerance is None else float(tolerance)
            ok = _overlaps(low, high, paper - tol, paper + tol)
            target = f"paper ±{tol:g}" if tol else "paper"
            basis = (f"{target} {'in' if ok else 'outside'} this run's 95% CI "
                     f"[{fmt_number(low)}, {fmt_number(high)}]")
        else:
            tol = default_tolerance(paper) if tolerance is None else float(tolerance)
            ok = abs(diff) <= tol + 1e-12
            basis = (f"tolerance ±{tol:g}" if tolerance is not None else
                     f"the paper's precision (±{tol:g})")
        return diff, CONSISTENT if ok else DIFFERS, "" if ok else _direction(diff), basis
    low, high = bounds.get("min", -math.inf), bounds.get("max", math.inf)
    basis = "the paper's range" if math.isfinite(low) and math.isfinite(high) else "the paper's bound"
    if ci is not None:
        ok = _overlaps(ci[0], ci[1], low, high)
        basis += (f" {'meets' if ok else 'misses'} this run's 95% CI "
                  f"[{fmt_number(ci[0])}, {fmt_number(ci[1])}]")
        if ok:
            return 0.0, CONSISTENT, "", basis
    if this_run < low:
        return this_run - low, DIFFERS, "below", basis
    if this_run > high:
        return this_run - high, DIFFERS, "above", basis
    return 0.0, CONSISTENT, "", basis


def compare_share(count: float, n: float, paper_count: float, paper_n: float) -> tuple[float, str, str, str]:
    """A count compared as a share of its set: consistent when the paper's share lies in the Wilson 95%
    interval of this run's (``count / n``)."""
    share, paper_share = count / n, paper_count / paper_n
    low, high = wilson_ci(count, n)
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

EXPLAINED, PARTLY, UNEXPLAINED, SETUP, NOT_TESTED = (
    "explained", "partly explained", "unexplained", "setup difference", "not tested")
CAUSE_KINDS = ("tested", "setup")


def load_causes(path: Path = CAUSES_FILE) -> dict[str, dict]:
    """``{cause id: cause}`` from the causes file, each cause checked.

    A cause is ``tested`` (``explains`` rows by metric, method and k, each with the ``effect`` it adds to
    this run's value or the ``predicted`` value itself) or a ``setup`` difference (what differs, shown by
    optional ``shows`` locators, not tested).
    """
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    out = {}
    for cause in data.get("causes", []):
        cid = cause.get("id", "?")
        for key in ("id", "kind", "title", "prediction"):
            if key not in cause:
                raise ValueError(f"{path}: cause {cid} lacks {key!r}")
        if cause["kind"] not in CAUSE_KINDS:
            raise ValueError(f"{path}: cause {cid}: kind must be one of {CAUSE_KINDS}")
        for i, shown in enumerate(cause.get("shows", [])):
            check_locator({k: v for k, v in shown.items() if k != "label"}, f"{cid}.shows[{i}]")
        if cause["kind"] == "setup":
            out[cid] = cause
            continue
        if "ablation" not in cause or not cause.get("explains"):
            raise ValueError(f"{path}: tested cause {cid} needs an ablation and the rows it explains")
        for i, item in enumerate(cause["explains"]):
            where = f"{path}: cause {cid}.explains[{i}]"
            if not item.get("metric"):
                raise ValueError(f"{where}: names no metric")
            size = {"effect", "predicted"} & (set(item) | set(cause))
            if len(size) != 1:
                raise ValueError(f"{where}: give the size it predicts as one of effect / predicted")
            spec = item.get("effect", item.get("predicted", cause.get("effect", cause.get("predicted"))))
            if "effect" in size:
                check_locator(spec, f"{cid}.effect")
            else:
                _check_predicted(spec, f"{cid}.predicted")
        out[cid] = cause
    return out


def _check_predicted(spec: Mapping, where: str) -> None:
    """A ``predicted`` block: ``value`` with ``low``/``high`` locators, or ``wilson: {count, n}``."""
    if "wilson" in spec:
        for key in ("count", "n"):
            check_locator(spec["wilson"][key], f"{where}.wilson.{key}")
        return
    for key in ("value", "low", "high"):
        if key not in spec:
            raise ValueError(f"{where}: needs value, low and high (or wilson)")
        check_locator(spec[key], f"{where}.{key}")


def _for_row(locator, row: Mapping[str, str]):
    """A copy of ``locator`` with ``{subset}``, ``{method}`` and ``{metric}`` replaced by the row's."""
    if isinstance(locator, Mapping):
        return {k: _for_row(v, row) for k, v in locator.items()}
    if isinstance(locator, str):
        for key in ("subset", "method", "metric"):
            locator = locator.replace("{" + key + "}", str(row.get(key, "")))
        return locator
    return locator



def explains(cause: Mapping, entry: Mapping) -> dict | None:
    """The item of a tested cause's ``explains`` that names this entry's metric, method and k, or
    ``None`` (a cause explains no row it does not name)."""
    for item in cause.get("explains", []):
        same_method = item.get("method", entry.get("method")) == entry.get("method")
        if item["metric"] == entry.get("metric") and same_method and item.get("k") == entry.get("k"):
            return dict(item)
    return None


def _located(locator: Mapping, row: Mapping, tables: TableCache) -> tuple[float, str | None]:
    return locate(_for_row(locator, row), tables)


def predict(cause: Mapping, item: Mapping, row: Mapping, value: float, ci: tuple[float, float] | None,
            tables: TableCache) -> tuple[float, float, float, str] | None:
    """``(predicted, low, high, how)`` for a report row, or ``None`` when the ablation was not saved.

    ``effect``: this run's value plus the effect, its CI shifted by the same amount (a point when the row
    has no CI). ``predicted``: the value and interval the cause's tables give (``wilson``: a share).
    """
    effect = item.get("effect", cause.get("effect"))
    if effect is not None:
        size, problem = _located(effect, row, tables)
        if problem:
            return None
        low, high = (ci[0] + size, ci[1] + size) if ci else (value + size, value + size)
        how = f"this run's {fmt_number(value)} {fmt_signed(size)} ({locator_source(_for_row(effect, row))})"
        return value + size, low, high, how
    spec = item.get("predicted", cause.get("predicted"))
    if "wilson" in spec:
        count, p1 = _located(spec["wilson"]["count"], row, tables)
        n, p2 = _located(spec["wilson"]["n"], row, tables)
        if p1 or p2 or not n:
            return None
        low, high = wilson_ci(count, n)
        return count / n, low, high, f"{fmt_count(count)} of {fmt_count(n)} (Wilson 95%)"
    got = {key: _located(spec[key], row, tables) for key in ("value", "low", "high")}
    if any(problem for _, problem in got.values()):
        return None
    return got["value"][0], got["low"][0], got["high"][0], locator_source(_for_row(spec["value"], row))


def _shown(cause: Mapping, row: Mapping, tables: TableCache) -> str:
    parts = []
    for shown in cause.get("shows", []):
        value, problem = _located({k: v for k, v in shown.items() if k != "label"}, row, tables)
        label = shown.get("label", locator_source(_for_row(shown, row)))
        parts.append(f"{label}: {problem}" if problem else f"{label} = {fmt_number(value)}")
    return "; ".join(parts)


def weigh_cause(cause: Mapping, entry: Mapping, judged: Mapping, tables: TableCache) -> dict:
    """One cause against one row that differs: ``cause_status``, ``predicted`` (with its CI), evidence.

    "explained" when the predicted value's CI meets the paper's value (by the row's own rule); "partly
    explained (x of y)" when the prediction moves this run's value toward the paper's by x of the gap y
    but not enough; "unexplained" when it moves away or past the paper's; "not tested" when the ablation's
    table is not in this run. A setup cause is labelled "setup difference", untested.
    """
    row = {"subset": str(entry["subset"]), "method": str(entry.get("method", "")),
           "metric": str(entry.get("metric", ""))}
    out = {"cause_status": "", "predicted": math.nan, "predicted_ci_low": math.nan,
           "predicted_ci_high": math.nan, "evidence": ""}
    if cause["kind"] == "setup":
        shown = _shown(cause, row, tables)
        out.update(cause_status=SETUP,
                   evidence=f"setup difference, not tested: {cause['prediction'].strip()}"
                   + (f" ({shown})" if shown else ""))
        return out
    item = explains(cause, entry)
    if item is None:
        out.update(cause_status=UNEXPLAINED,
                   evidence=f"{cause['id']} names no {row['metric']} row of this method and k")
        return out
    value = judged["this_run"]
    ci = None if math.isnan(judged["ci_low"]) else (judged["ci_low"], judged["ci_high"])
    got = predict(cause, item, row, value, ci, tables)
    if got is None:
        out.update(cause_status=NOT_TESTED, evidence=f"{ablation_text(cause)} not in this run")
        return out
    predicted, low, high, how = got
    out.update(predicted=predicted, predicted_ci_low=low, predicted_ci_high=high)
    bounds = paper_bounds(entry["paper"])
    _, status, _, basis = compare(predicted, bounds, entry.get("tolerance"), (low, high))
    gap = -judged["difference"]
    moved = predicted - value
    text = (f"{ablation_text(cause)}: predicts {fmt_number(predicted)} [{fmt_number(low)}, "
            f"{fmt_number(high)}] = {how}")
    if status == CONSISTENT:
        out.update(cause_status=EXPLAINED, evidence=f"{text}; {basis}")
    elif gap and moved * gap > 0 and abs(moved) < abs(gap):
        out.update(cause_status=f"{PARTLY} ({fmt_number(abs(moved))} of {fmt_number(abs(gap))})",
                   evidence=f"{text}; recovers {fmt_number(abs(moved))} of the {fmt_number(abs(gap))} gap")
    else:
        why = "past the paper's" if moved * gap > 0 else "away from the paper's"
        out.update(cause_status=UNEXPLAINED, evidence=f"{text}; moves {why} value")
    return out


def ablation_text(cause: Mapping) -> str:
    a = cause.get("ablation", "")
    if isinstance(a, Mapping):
        return f"table {a['table']}" + (f" (notebook {a['notebook']})" if a.get("notebook") else "")
    return str(a)


def _rank(status: str) -> tuple[int, float]:
    """Order of cause statuses, best first (a larger recovered share first among partial ones)."""
    if status.startswith(PARTLY):
        return 1, 0.0
    return {EXPLAINED: 0, SETUP: 2, NOT_TESTED: 3}.get(status, 4), 0.0


def name_cause(entry: Mapping, judged: Mapping, causes: Mapping[str, dict], tables: TableCache) -> dict:
    """``cause``, ``cause_status``, ``predicted`` (and CI) and ``evidence`` of a report row that differs:
    the best of its listed causes (explained, then partly explained by the most, then a setup difference,
    then not tested); "unexplained" with what was tried when none does better."""
    empty = {"cause": "", "cause_status": "", "predicted": math.nan, "predicted_ci_low": math.nan,
             "predicted_ci_high": math.nan, "evidence": ""}
    if judged["status"] != DIFFERS:
        return empty
    listed = entry.get("causes", [])
    if not listed:
        return {**empty, "cause": UNEXPLAINED, "cause_status": UNEXPLAINED, "evidence": "no cause listed"}
    results = []
    for cause_id in listed:
        cause = causes.get(cause_id)
        if cause is None:
            raise ValueError(f"entry {entry['id']}: unknown cause {cause_id!r}")
        results.append((cause_id, cause, weigh_cause(cause, entry, judged, tables)))

    def key(r):
        status = r[2]["cause_status"]
        recovered = abs(r[2]["predicted"] - judged["this_run"]) if status.startswith(PARTLY) else 0.0
        return _rank(status)[0], -recovered

    best_id, best, result = min(results, key=key)
    tried = [f"{cid}: {r['cause_status']} ({r['evidence']})" for cid, _, r in results if cid != best_id]
    evidence = result["evidence"] + (f". Also tried {'; '.join(tried)}" if tried else "")
    if result["cause_status"] == UNEXPLAINED:
        return {**result, "cause": UNEXPLAINED, "evidence": f"{best_id}: {evidence}"}
    return {**result, "cause": f"{best_id}: {best['title']}", "evidence": evidence}


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
            low, high = wilson_ci(value, n)
            row.update(difference=diff, status=status, direction=direction, basis=basis,
                       ci_low=low * n, ci_high=high * n)
            return row
    ci = None
    if "wilson" in entry:
        count, why_c = locate(entry["wilson"]["count"], tables)
        n, why_n = locate(entry["wilson"]["n"], tables)
        if not (why_c or why_n) and n > 0:
            ci = wilson_ci(count, n)
            row["ci_low"], row["ci_high"] = ci
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
                     "paper": paper_text(paper_bounds(entry["paper"])), **judged, **named,
                     "quote": entry.get("quote", ""), "source": locator_source(entry["locator"])})
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def build_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE) -> pd.DataFrame:
    """The paper's reference numbers against the tables this run saved under ``cfg.tables_dir``."""
    return compare_entries(load_references(references)["entries"], cfg.tables_dir)


STATUS_KEYS = ("consistent", "differs", EXPLAINED, PARTLY, UNEXPLAINED, SETUP, NOT_TESTED, "not scored",
               "not found")


def status_counts(report: pd.DataFrame) -> dict[str, int]:
    """Counts of the rows by status (consistent / differs / not scored / not found) and of the rows that
    differ by cause status (explained / partly explained / unexplained / setup difference / not tested)."""
    differs = report["status"] == DIFFERS
    cause = report.get("cause_status", pd.Series("", index=report.index)).fillna("").astype(str)
    out = {"consistent": int((report["status"] == CONSISTENT).sum()), "differs": int(differs.sum())}
    for key in (EXPLAINED, UNEXPLAINED, SETUP, NOT_TESTED):
        out[key] = int((differs & (cause == key)).sum())
    out[PARTLY] = int((differs & cause.str.startswith(PARTLY)).sum())
    out[UNEXPLAINED] += int((differs & (cause == "")).sum())
    out["not scored"] = int((report["status"] == NOT_SCORED).sum())
    out["not found"] = int((~report["status"].isin([CONSISTENT, DIFFERS, NOT_SCORED])).sum())
    return {key: out[key] for key in STATUS_KEYS}
