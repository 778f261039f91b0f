"""Grep-level facts of the package: one bootstrap and paired test (``eval.stats``), one fold maker
(``data.folds``), one fusion stack (``retrieval.fused`` and its specs), no ``-1`` sentinel in the study's
tables."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "toolbench_lib"


def _defining(pattern: str) -> list[str]:
    """The package's modules whose source matches ``pattern`` (multiline regex)."""
    rx = re.compile(pattern, re.MULTILINE)
    return sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if rx.search(p.read_text()))


def test_one_bootstrap_and_paired_test() -> None:
    assert _defining(r"^def (bootstrap\w*|paired|paired_test|holm)\(") == ["eval/stats.py"]
    assert _defining(r"ttest_rel|np\.random\.default_rng\(seed\)\s*\n.*integers") == ["eval/stats.py"]


def test_one_fold_maker() -> None:
    assert _defining(r"^\s*from sklearn\.model_selection import") == ["data/folds.py"]
    assert _defining(r"^def \w*folds?(_ids)?\(") == ["data/folds.py"]


def test_one_fusion_stack() -> None:
    assert not (PACKAGE / "study" / "fusion.py").exists()
    assert _defining(r"^class Fused\w*Retriever\b") == ["retrieval/fused.py"]
    assert _defining(r"^class Tuned\b") == ["retrieval/tuning.py"]
    assert _defining(r"^class FusionSpec\b") == ["retrieval/fusion_specs.py"]


def test_one_source_of_defaults() -> None:
    """The embedders' names and the defaults of k, runs, depth, seeds and folds live in config.py (the
    packaged model's own name, retrieval.embedding.OFFLINE_MODEL, is a fact about that package)."""
    assert _defining(r'"(all-MiniLM-L6-v2|thenlper/gte-base)"') == ["config.py", "retrieval/embedding.py"]
    assert _defining(r"\b(k|tune_k|plan_k|depth|runs|seed|folds|scale_seeds): int( \| None)? = \d") == []
    assert _defining(r"add_argument\(\"--(k|runs|depth|seed)\".*default=\d") == []


def test_counts_and_statistics_live_in_eval() -> None:
    """One count of hits (eval.evaluation), one Wilson interval and every test (eval.stats); ranx only as the
    tests' oracle."""
    assert _defining(r"^\s*(from|import) ranx\b") == []
    assert _defining(r"^def (relevance|metric_values|recall_at|hits_at)\(") == ["eval/evaluation.py"]
    assert _defining(r"& *(set\()?(rel|truth|gt_set|qrels\[)|len\(\w+ & rel\)") == []  # no hit count by hand
    assert _defining(r"proportion_confint|^def wilson") == ["eval/stats.py"]
    tests = r"^\s*(from|import) (scipy\.stats|statsmodels|sklearn\.metrics)|^\s*from scipy import stats"
    assert _defining(tests) == ["eval/pass_rates.py", "eval/stats.py"]  # pass_rates: the judge's kappa


# A -1 (or a sign test) standing for "final ranking" in text_idx or "every run" in run, as the old hits table
# had them: named constants, comparisons, literals in a row beside the method, and "-1 if ... else run".
SENTINELS = [
    r"\b(MERGED|MERGED_TEXT|SHARED_RUN)\b",
    r"\btext_idx\b.*((?<![\w.])-\s*1\b|<\s*0\b|>=\s*0\b)",
    r"(?<![\w.])-\s*1\b.*\btext_idx\b",
    r"\bruns?\b[\"'\])]*\s*(==|!=|<=|<|=|:)\s*-\s*1\b",
    r"\bruns?\b[\"'\])]*\s*(<|>=)\s*0\b",
    r"(?<![\w.])-\s*1\s+if\b.*\belse\b",
    r"[\"']run[\"']\]?.*(?<![\w.])-\s*1\b",
    r"\b(method|self\.name|\[[\"']method[\"']\])\s*,\s*-\s*1\b",
    r"[\"']run[\"']\].*(>=|<)\s*0\b",
]
def _sentinel_lines(path: Path) -> list[str]:
    """``module:line: text`` of every line of ``path`` that matches a sentinel pattern."""
    rxs = [re.compile(p) for p in SENTINELS]
    return [f"{path.relative_to(PACKAGE)}:{i}: {line.strip()}"
            for i, line in enumerate(path.read_text().splitlines(), 1) if any(rx.search(line) for rx in rxs)]


def test_no_minus_one_sentinel_for_text_idx_or_run() -> None:
    """The final rankings and the texts' own are two tables, and every method is stored for every run:
    nothing in the package reads or writes ``text_idx = -1`` or ``run = -1`` (a stored study of the old
    format, which did, is refused)."""
    found = [hit for p in sorted(PACKAGE.rglob("*.py")) for hit in _sentinel_lines(p)]
    assert found == []
    old = ['final = h[h["text_idx"] == -1]', 'take = rel & ((runs == run) | (runs < 0))',
           'h.insert(2, "run", SHARED_RUN if r.deterministic else run)',
           'recs = [(key, self.name, -1, rank, row_of[a], a, float(s))',
           'rows_of.get((p["qkey"], p["method"], -1), [])', 'top.get((q, m, -1 if m == "rtp" else r), [])',
           'runs = sorted(int(r) for r in self.result.hits["run"].unique() if int(r) >= 0)',
           'top1 = h[(h["method"] == "ptr") & (h["text_idx"] >= 0) & (h["rank"] == 1)]']
    assert all(any(re.search(p, line) for p in SENTINELS) for line in old)  # each old decode is caught
