"""The report's appendices, named once: their headings, and the wide tables as the report prints them
(values with their intervals in one cell, words for column names, p columns named for their test)."""

from __future__ import annotations

import pandas as pd

from ..analysis.numbers import fmt_ci, fmt_number
from ..data.markdown import md_table
from ..study.experiment import ExperimentConfig

APPENDIX_A = "Appendix A: scorecard and causes"
APPENDIX_BEYOND = "Appendix B: fused and learned methods, beyond the paper"
APPENDIX_TABLES_HEADING = "Appendix C: leaderboards and wide tables"  # the judged pass rates live here
APPENDIX_WORKED = "Appendix D: worked queries and the Table 2 examples"
APPENDIX_RUN = "Appendix E: this run"
FUSION_TABLES = ("retriever_fusion_design", "retriever_fusion_unseen")  # notebook 12's: Appendix B links them
APPENDIX_TABLES = (
    ("retriever_costs", "Cost per query of each method"),
    ("ablation_verdicts", "What the ablations found"),
    ("judge_validity", "Judged and objective pass rates of every planned query, with the judge's kappa",
     "plans == 'all'", ["subset", "method", "judge_version", "n_plans", "judged_pass_rate",
                        "objective_pass_rate", "kappa", "kappa_max"]),
    ("pass_rate_judged_objective", "Two judges on the same plans, with each judge's kappa", None,
     ["subset", "method", "judge_version", "n_judged", "judged_pass_rate", "objective_pass_rate", "kappa",
      "kappa_any", "solved_rate_none"]),
)
# A p-value column of a saved table is compare's paired t-test, unadjusted: its header says so.
P_HEADERS = {"p_value": "p_paired_t_unadjusted", "p": "p_paired_t_unadjusted"}


CI_ENDS = (("_lo", "_hi"), ("_ci_low", "_ci_high"))


def narrow(table: pd.DataFrame) -> pd.DataFrame:
    """A saved table as the report prints it: each value with its interval in one cell (``0.598 [0.418,
    0.770]``), without empty columns and without rows comparing a method with itself (``reference``)."""
    if {"method", "reference"} <= set(table.columns):
        table = table[table["method"].astype(str) != table["reference"].astype(str)]
    out = table.dropna(axis=1, how="all")
    out = out.loc[:, [c for c in out.columns if not (out[c].astype(str).str.strip() == "").all()]]
    for col in list(out.columns):
        for lo, hi in CI_ENDS:
            if f"{col}{lo}" in out and f"{col}{hi}" in out and pd.api.types.is_numeric_dtype(out[col]):
                out[col] = [f"{fmt_number(v)} {fmt_ci(a, b)}" if pd.notna(v) else v
                            for v, a, b in zip(out[col], out[f"{col}{lo}"], out[f"{col}{hi}"], strict=True)]
                out = out.drop(columns=[f"{col}{lo}", f"{col}{hi}"])
    return out


def table_section(cfg: ExperimentConfig, heading: str, tables, level: str = "###") -> list[str]:
    """A report section of saved tables (``(name, title)``, or ``(name, title, query or None, columns)``),
    each :func:`narrow`-ed; nothing when none was saved."""
    parts = []
    for name, title, *keep in tables:
        path = cfg.tables_dir / f"{name}.csv"
        if path.exists():
            frame = pd.read_csv(path, keep_default_na=True)
            if keep:
                rows, columns = keep
                frame = (frame if rows is None else frame.query(rows))[[c for c in columns if c in frame]]
            head, sep, body = md_table(narrow(frame).rename(columns=P_HEADERS)).partition("\n")
            head = head.replace("_", " ") if head.startswith("|") else head  # words for the column names
            parts += [f"{level} {title}", "", head + sep + body, ""]
    return [f"## {heading}", "", *parts] if parts and heading else parts
