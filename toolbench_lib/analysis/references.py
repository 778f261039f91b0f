"""The paper's reference numbers (``references/paper.yaml``): the file checked on load, the tables and
columns a locator may name (:mod:`toolbench_lib.report.scorecard` looks each one up), and the paper's value
of one entry."""

from __future__ import annotations

import ast
import copy
import functools
import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import yaml

from ..data.paths import PROJECT_ROOT
from .intervals import ci_of

REFERENCES_FILE = PROJECT_ROOT / "references" / "paper.yaml"
PAPER_TEXT_FILE = PROJECT_ROOT.parent / "shared" / "paper" / "plan-or-retrieve-first.txt"  # not committed


def paper_text_collapsed(path: Path = PAPER_TEXT_FILE) -> str | None:
    """The paper's text with whitespace collapsed (what a verbatim quote is checked against); None when the
    text is not beside the checkout."""
    try:
        return " ".join(path.read_text(encoding="utf-8").split())
    except OSError:
        return None
AGGREGATES = ("first", "mean", "min", "max", "sum")

# The saved tables and the columns the analyses write (extra columns are allowed).
TABLE_SCHEMAS: dict[str, tuple[str, ...]] = {
    "main_results": ("subset", "method", "gt", "n_queries", "n_runs", "recall_mean", "recall_std",
                     "precision_mean", "precision_std", "judged_pass_rate_mean", "judged_pass_rate_std",
                     "n_planned",
                     *ci_of("recall", "precision")),
    "wins": ("subset", "gt", "metric", "rtp_wins", "ptr_wins", "ties", "n_queries", "rtp_wins_share_ci_low",
             "rtp_wins_share_ci_high", "ptr_wins_share_ci_low", "ptr_wins_share_ci_high"),
    "paired_tests": ("subset", "gt", "metric", "n", "rtp_mean", "ptr_mean", "diff", "ci_low", "ci_high",
                     "p", "p_holm", "family", "rtp_wins", "ptr_wins", "ties", "p_wilcoxon_robustness",
                     "p_runs_robustness"),
    "ttests": ("subset", "gt", "metric", "test", "statistic", "p_runs_robustness", "rtp_value", "ptr_mean"),
    "k_ablation": ("subset", "method", "gt", "k", "recall", "precision", "recall_gain", "recall_gain_vs_k1",
                   "recall_ratio", "recall_ratio_vs_k1", "n_queries", "recall_gain_vs_k1_p_holm",
                   *ci_of("recall", "precision", "recall_gain", "recall_gain_vs_k1", "recall_ratio_vs_k1")),
    "budget_check": ("subset", "gt", "rtp_k10_recall", "ptr_k5_recall", "rtp10_minus_ptr5",
                     *ci_of("rtp_k10_recall", "ptr_k5_recall", "rtp10_minus_ptr5")),
    "scale": ("size", "seed", "subset", "method", "gt", "recall", "precision"),
    "scale_divergence": ("size", "seed", "subset", "no_overlap_share", "n_queries",
                         *ci_of("no_overlap_share")),
    "trajectory": ("subset", "method", "fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps",
                   "mean_apis_named", "refusal_rate", "n_plans", "n_queries", "apis_named_ptr_minus_rtp",
                   "used_share_ptr_minus_rtp", "steps_ptr_minus_rtp",
                   *ci_of("fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps", "mean_apis_named",
                         "refusal_rate", "apis_named_ptr_minus_rtp", "used_share_ptr_minus_rtp",
                         "steps_ptr_minus_rtp")),
    "miss_behaviour": ("subset", "method", "n_complete_miss", "refusal_rate_on_miss",
                       "wrong_tool_rate_on_miss", "n_refusal_on_miss", "n_wrong_tool_on_miss",
                       *ci_of("refusal_rate_on_miss", "wrong_tool_rate_on_miss")),
    "stub_stats": ("subset", "stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                   "cos_incorrect", "fallback_share", "n_stubs", "n_matched", "n_hits",
                   *ci_of("stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                         "cos_incorrect", "cos_gap", "stub_hit_share_topk"), "cos_gap", "cos_sd",
                   "stub_hit_share_topk"),
    "token_overhead": ("subset", "rtp_tokens", "ptr_tokens", "overhead_pct", "rtp_latency_s",
                       "ptr_latency_s", "n_queries", *ci_of("overhead_pct")),
    "routing": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr",
                "n_queries"),
    "routing_overall": ("subset", "policy", "recall", "precision", "tokens_per_query", "share_routed_ptr"),
    "retriever_main": ("subset", "retriever", "method", "recall_mean", "recall_lo", "recall_hi", "n_queries"),
    "routing_signal": ("subset", "signal", "auroc", "auroc_ci_low", "auroc_ci_high"),
    "plan_name_fidelity": ("subset", "method", "fidelity_strict", "fidelity", "n_plans"),
    "data_sources": ("source", "n_apis", "share"),
    "data_categories": ("category", "n_apis", "share", "n_tools"),
    "data_gt_sizes": ("subset", "gt", "n_queries", "mean", "median", *ci_of("mean")),
    "paper_query_counts": ("subset", "n_queries"),
    "ablation_decomposition": ("subset", "decomposer", "ptr_recall", "rtp_recall", "stubs_per_query",
                               "coverage", "n_queries"),
    "ablation_stub_text": ("subset", "variant", "recall", "precision", "n_queries"),
    "ablation_query_coupling": ("subset", "n_queries", "brand_share", "rtp", "rtp_nobrand", "ptr",
                                "ptr_nobrand", "diff", "diff_nobrand", "change", "change_lo", "change_hi",
                                "p_change"),
    "ablation_divergence": ("subset", "design", "size", "no_overlap_share", "gt_share", "rtp_recall",
                            "ptr_recall", "n_queries"),
    "ablation_stub_echo": ("subset", "mean_cos", "max_cos", "n_stubs", "disjoint_share",
                           "rho_disjoint_vs_echo", "low_minus_high_ci_low", "low_minus_high_ci_high",
                           "disjoint_low_echo", "disjoint_high_echo",
                           "n_queries", "n_low_echo", "n_high_echo"),
    "ablation_embedder": ("subset", "embedder", "method", "recall", "precision"),
    "judge_validity": ("subset", "method", "judge_version", "plans", "kappa", "judged_pass_rate",
                       "objective_pass_rate", "n_plans"),
    "g2_sensitivity": ("subset", "basis", "retriever", "k", "n_queries", "n_runs", "rtp", "rtp_lo", "rtp_hi",
                       "ptr", "ptr_lo", "ptr_hi", "diff", "diff_lo", "diff_hi"),
    "primary_endpoint_g2_instruction": ("retriever", "subset", "diff", "ci_low", "ci_high", "p_holm"),
    "g2_sets": ("subset", "basis", "n_queries", "gt_size", "gt_size_lo", "gt_size_hi", "paper_gt_size",
                "example_in_set"),
    "g2_verdict": ("subset", "gt_fits", "example_in_set", "paper_diffs_in_ci", "fits", "text"),
    "scale_claim": ("subset", "size", "rtp", "ptr", "diff", "ci_low", "ci_high", "gt_share", "keeps_all_gt"),
    "scale_claim_verdict": ("subset", "leader", "paper_claims", "n_sizes", "sizes_ahead",
                            "sizes_ahead_significant", "gap_std", "holds", "text"),
    "divergence_readings": ("size", "group", "reading", "share", "ci_low", "ci_high", "n_queries"),
    "divergence_verdict": ("group", "reading", "text"),
    "divergence_full": ("retriever", "size", "group", "reading", "share", "ci_low", "ci_high", "n_queries"),
    "divergence_full_verdict": ("group", "reading", "text"),
    "routing_claim": ("retriever", "basis", "against", "routed", "other", "diff", "ci_low", "ci_high", "loss",
                      "text"),
}

# Columns a table has only in some runs (a locator may name them; a table need not hold them).
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "ablation_embedder": ("cos_correct", "cos_incorrect", *ci_of("cos_correct", "cos_incorrect")),
}

# Tables only an opt-in step writes (`make ablations`: the embedder ablation of notebook 11).
OPTIONAL_TABLES = frozenset({"ablation_embedder"})
_LOCATOR_KEYS = {"table", "where", "column", "agg", "scale"}


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


def read_yaml(path: str | Path):
    """A YAML file, safely, through libyaml's parser where PyYAML has it (9x faster on the reference file)."""
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader",
                                                                             yaml.SafeLoader))


def load_references(path: Path = REFERENCES_FILE) -> dict:
    """The reference file, checked: ``version``, ``source`` and ``entries`` with unique ids; read and checked
    once per version of the file (its modification time and size), each caller given a copy of its own."""
    return copy.deepcopy(_shared_references(path))


def _shared_references(path: Path) -> dict:
    """The checked reference file shared by every caller of this version of it: read it, never change it."""
    stat = Path(path).stat()
    return _checked_references(str(path), (stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _checked_references(path: str, version: tuple[int, int]) -> dict:
    data = read_yaml(path)
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
        for part, keys in (("ci", ("low", "high")), ("share", ("n",)), ("wilson", ("count", "n"))):
            for key in keys if part in entry else ():
                check_locator(entry[part][key], f"{entry['id']}.{part}.{key}")
        for key in ("low", "high") if "ci" in entry.get("share", {}) else ():
            check_locator(entry["share"]["ci"][key], f"{entry['id']}.share.ci.{key}")
        if "p_holm" in entry:
            check_locator(entry["p_holm"], f"{entry['id']}.p_holm")
        if "construction" in entry and entry["construction"] not in entry.get("causes", []):
            raise ValueError(f"{path}: entry {entry['id']}: construction names none of its causes")
        margin = entry.get("equivalence", {}).get("margin")
        if isinstance(margin, Mapping):
            check_locator(margin, f"{entry['id']}.equivalence.margin")
        for extra in ("kappa", "objective"):
            if extra in entry.get("validity", {}):
                check_locator(entry["validity"][extra], f"{entry['id']}.validity.{extra}")
    for entry in data["entries"]:
        if "reading_of" in entry and entry["reading_of"] not in seen - {entry["id"]}:
            raise ValueError(f"{path}: entry {entry['id']}: reading_of names no other entry")
    return data


def is_claim(entry: Mapping) -> bool:
    """A claim the paper makes in words (an ordering, or a stability), which the report reads as a bound or
    a value of its own: not a number the paper prints."""
    return bool(entry.get("ordering") or entry.get("stable"))


NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?")


def quoted_numbers(quote: str) -> dict[float, int]:
    """Every number written in a quote (thousands separators dropped, signs ignored), with the decimals it
    is printed with."""
    return {abs(float(m.replace(",", "").replace("−", "-"))): len(m.partition(".")[2])
            for m in NUMBER.findall(quote)}


def printed_rounding(value: float, quote: str) -> float | None:
    """Half a unit of the last decimal ``value`` is printed with in ``quote`` (as itself or, in a quote in
    percent, as ``100 * value``); ``None`` when the quote does not print it."""
    found = quoted_numbers(quote)
    for scale in (1, 100) if "%" in quote else (1,):
        for number, decimals in found.items():
            if abs(abs(value) * scale - number) < 1e-9:
                return 0.5 * 10 ** -decimals / scale
    return None


def paper_value(entry_id: str, bound: str = "value", path: Path = REFERENCES_FILE) -> float | None:
    """The paper's value of one reference entry, or its ``min``/``max`` bound (``None`` when absent)."""
    for e in _shared_references(path)["entries"]:  # read only: paper_bounds makes a dict of its own
        if e["id"] == entry_id:
            return paper_bounds(e["paper"]).get(bound)
    return None


def paper_query_counts(path: Path = REFERENCES_FILE) -> pd.DataFrame:
    """``subset, n_queries``: the paper's query count per set, from the reference file's entries."""
    entries = load_references(path)["entries"]
    rows = [{"subset": e["subset"], "n_queries": paper_bounds(e["paper"])["value"]}
            for e in entries if e["id"].endswith("_query_count")]
    return pd.DataFrame(rows, columns=["subset", "n_queries"])

