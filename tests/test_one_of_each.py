"""Grep-level facts of the package: one bootstrap and paired test (``eval.stats``), one fold maker
(``data.folds``), one fusion stack (``retrieval.fused`` and its specs)."""

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
    assert not (PACKAGE / "pipeline" / "fusion.py").exists()
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
    assert _defining(r"^\s*(from|import) (scipy\.stats|statsmodels|sklearn\.metrics)|^\s*from scipy import stats"
                     ) == ["eval/pass_rates.py", "eval/stats.py"]  # pass_rates: the judge's kappa
