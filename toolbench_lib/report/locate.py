"""This run's value of a reference entry, located in the saved tables, and its comparison with the paper's;
a table or column that is not there is reported as such, never raised."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_count, fmt_number
from ..analysis.references import expression_names
from ..eval.stats import wilson_ci

EXTREMES = {"$min": "min", "$max": "max"}
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


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

    def having(self, name: str, *columns: str) -> pd.DataFrame | None:
        """The table ``name`` if it was saved with every one of ``columns``; ``None`` otherwise."""
        table = self.get(name)
        return table if table is not None and set(columns) <= set(table) else None


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
        df = df[np.isclose(numbers, getattr(numbers, EXTREMES[value])())]  # none when every value is NaN
    return df


def _aggregate(values: pd.Series, agg: str) -> float:
    numbers = pd.to_numeric(values, errors="coerce")
    if agg == "first":
        return float(numbers.iloc[0])
    return float(getattr(numbers.dropna(), agg)()) if numbers.notna().any() else math.nan


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
    if (df := tables.get(locator["table"])) is None:
        return math.nan, "missing table"
    where = locator.get("where") or {}
    for col in [*where, locator["column"]]:
        if col not in df.columns:
            return math.nan, f"missing column {col}"
    rows = select_rows(df, where)
    if rows.empty:
        return math.nan, "no matching rows"
    value = _aggregate(rows[locator["column"]], locator.get("agg", "first"))
    return (math.nan, "no value") if math.isnan(value) else (value * float(locator.get("scale", 1)), None)


def locator_source(locator: Mapping) -> str:
    """Where a value comes from, for the report's ``source`` column."""
    if "expr" in locator:
        return f"{locator['expr']} with " + "; ".join(
            f"{n} = {locator_source(locator[n])}" for n in sorted(expression_names(str(locator["expr"]))))
    if "paper" in locator:
        return f"the paper's {locator['paper']} ({locator.get('bound', 'value')})"
    where = ", ".join(f"{k}={v}" for k, v in (locator.get("where") or {}).items())
    agg = locator.get("agg", "first")
    text = f"{locator['table']}.{locator['column']}" + (f" [{where}]" if where else "")
    text += f" ({agg})" if agg != "first" else ""
    return text + (f" ×{locator['scale']}" if "scale" in locator else "")


# -- comparing ----------------------------------------------------------------------------------------------

CONSISTENT, DIFFERS, INCONCLUSIVE, NOT_SCORED = "consistent", "differs", "inconclusive", "not scored"


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


def two_sample(this_run: float, paper: float, ci: tuple[float, float], margin: float = 0.0) -> bool:
    """Whether the paper's value lies within this run's 95% CI widened by √2 on the paper's side (±
    ``margin``): a two-sample reading, as if the paper's number were as uncertain as this run's."""
    half = (ci[1] - this_run) if paper > this_run else (this_run - ci[0])
    return abs(paper - this_run) <= math.sqrt(2) * max(half, 0.0) + margin + 1e-12


# consistent by its rounding or tolerance only
ONLY_BY_TOLERANCE = "the paper's value itself lies outside the CI"
OWN_TOLERANCE = "within this project's tolerance only: differs"  # the paper states none
UNADJUSTED_ONLY = "its CI unadjusted only: Holm over the sets"  # a change scanned over every set


def compare(this_run: float, bounds: Mapping[str, float], tolerance: float | None = None,
            ci: tuple[float, float] | None = None, ordering: bool = False,
            rounding: float | None = None, margin: float | None = None) -> tuple[float, str, str, str]:
    """``(difference, status, direction, basis)`` of this run's value against the paper's value, range or
    bound (its ``ci``, ``rounding`` or ``tolerance``); ``ordering`` and ``margin`` read claims in words."""
    if margin is not None and "value" in bounds:
        bounds = {"min": bounds["value"] - margin, "max": bounds["value"] + margin}
    if "value" in bounds:
        paper = bounds["value"]
        diff = this_run - paper
        if rounding is None:
            rounding = default_tolerance(paper)
        if ci is not None:
            low, high = ci
            tol = (0.0 if float(paper).is_integer() else rounding) if tolerance is None else float(tolerance)
            ok = _overlaps(low, high, paper - tol, paper + tol)
            why = " (its rounding)" if tolerance is None else ""
            target = f"paper ±{tol:g}{why}" if tol else "paper"
            basis = f"{target} {'in' if ok else 'outside'} this run's 95% CI {fmt_ci(low, high)}"
            if ok and not low <= paper <= high:
                basis += f"; {ONLY_BY_TOLERANCE}"
                if tolerance is not None:  # a tolerance this project chose, not the paper's own precision
                    ok, basis = False, f"{basis}; {OWN_TOLERANCE}"
        else:
            tol = rounding if tolerance is None else float(tolerance)
            ok = abs(diff) <= tol + 1e-12
            basis = (f"this project's tolerance ±{tol:g}" if tolerance is not None else
                     f"the paper's precision (±{tol:g})")
        return diff, CONSISTENT if ok else DIFFERS, "" if ok else _direction(diff), basis
    low, high = bounds.get("min", -math.inf), bounds.get("max", math.inf)
    basis = "the paper's range" if math.isfinite(low) and math.isfinite(high) else "the paper's bound"
    one_sided = math.isfinite(low) != math.isfinite(high)
    claim = ("the paper's ordering" if ordering else f"equivalence within ±{fmt_number(margin)}"
             if margin is not None else "the paper's bound")
    if ordering and this_run in (low, high):
        return 0.0, DIFFERS, "", "the paper's ordering: a tie"
    if (ordering or one_sided or margin is not None) and ci is not None:
        basis = f"{claim}, by this run's 95% CI {fmt_ci(*ci)}"
        inside = (low < ci[0] and ci[1] < high) if ordering else (low <= ci[0] and ci[1] <= high)
        if inside:
            return 0.0, CONSISTENT, "", basis
        if ci[0] <= low <= ci[1] or ci[0] <= high <= ci[1]:
            ours = (low < this_run < high) if ordering else (low <= this_run <= high)
            if margin is not None:
                where = "inside" if ours else "outside"
                return 0.0, INCONCLUSIVE, "", f"{basis}, crossing the margin (estimate {where})"
            side = "the paper's" if ours else "the other"
            return 0.0, INCONCLUSIVE, "", f"{basis}, holding the paper's bound (estimate on {side} side)"
    elif ordering:
        basis = "the paper's ordering, by this run's estimate (no CI)"
    elif ci is not None:
        ok = _overlaps(ci[0], ci[1], low, high)
        basis += f" {'meets' if ok else 'misses'} this run's 95% CI {fmt_ci(*ci)}"
        if ok:
            return 0.0, CONSISTENT, "", basis
    if this_run < low:
        return this_run - low, DIFFERS, "below", basis
    if this_run > high:
        return this_run - high, DIFFERS, "above", basis
    return 0.0, CONSISTENT, "", basis


def compare_share(count: float, n: float, paper_count: float, paper_n: float,
                  ci: tuple[float, float] | None = None) -> tuple[float, str, str, str]:
    """A count compared as a share of its set: consistent when the paper's share lies in this run's 95% CI of
    ``count / n``: ``ci`` (as the table saved it, resampling API samples), else Wilson's."""
    share, paper_share = count / n, paper_count / paper_n
    low, high = ci or wilson_ci(count, n)
    ok = _overlaps(low, high, paper_share, paper_share)
    how = "Wilson 95% CI" if ci is None else "95% CI"
    basis = (f"share {fmt_number(share)} ({fmt_count(count)} of {fmt_count(n)}), {how} "
             f"[{fmt_number(low)}, {fmt_number(high)}]; paper {fmt_number(paper_share)} "
             f"({fmt_count(paper_count)} of {fmt_count(paper_n)})")
    diff = share - paper_share
    return diff, CONSISTENT if ok else DIFFERS, "" if ok else _direction(diff), basis


def paper_text(bounds: Mapping[str, float], rounding: float | None = None) -> str:
    """The paper's number as the report shows it: ``0.372``, ``2.4–2.5``, ``≥ 0.96``, ``46,984``; a value
    with the decimals the paper prints it with (``rounding``: half a unit of its last one), ``0.160``."""

    def fmt(x: float) -> str:
        return fmt_count(x) if float(x).is_integer() and abs(x) >= 1000 else f"{x:g}"

    if "value" in bounds and rounding and abs(bounds["value"]) < 1000:
        return f"{bounds['value']:.{max(round(-math.log10(2 * rounding)), 0)}f}"
    if "value" in bounds:
        return fmt(bounds["value"])
    if "min" in bounds and "max" in bounds:
        return f"{fmt(bounds['min'])}–{fmt(bounds['max'])}"
    return f"≥ {fmt(bounds['min'])}" if "min" in bounds else f"≤ {fmt(bounds['max'])}"
