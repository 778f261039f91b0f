"""Every discovery method by name, the fused ones and the learned rankers registered on import."""

from __future__ import annotations

from . import fused, ltr  # noqa: F401  (register the named fusion specs and the learned rankers)
from .fused import FUSED, spec_of
from .retrievers import RETRIEVERS, Retriever, split_method

ARCH_NAMES = {"rtp": "RtP (retrieve, then plan)", "ptr": "PtR (plan, then retrieve)"}


def load_methods() -> dict[str, Retriever]:
    """Every registered method, the fused ones of :mod:`.fused` included."""
    return RETRIEVERS


# The fused methods notebook 12 shows by these names: chosen on each run's design sets, or fixed.
CHOSEN_FUSIONS = {
    "fused (1 stub call)": ("Fused: the best of reciprocal-rank fusion and min-max weighted sums of the "
                            "query's and the stubs' dense and BM25 rankings, chosen by cross-validation on "
                            "the design sets (`retriever_fusion_choice` names it)."),
    "fused (no LLM call)": "Fused: the same choice over the query's dense and BM25 rankings only.",
    "fuse4 (fixed a priori)": "Fused: `fuse4` (below), its weights fixed before any run.",
}


def describe_method(name: str) -> str:
    """What a method is, in one sentence: the glossary's definition and the explorer's column note."""
    if name in CHOSEN_FUSIONS:
        return CHOSEN_FUSIONS[name]
    if name in FUSED:
        return f"Fused: {spec_of(name).describe()}."
    if name in ("ltr-nollm", "ltr-4runs"):  # the learned ranker `ltr` with other inputs
        return {"ltr-nollm": "The learned ranker `ltr` without any stub (no LLM call).",
                "ltr-4runs": "The learned ranker `ltr` with the agreement of every run's stubs (one stub "
                             "call per run)."}[name]
    if name.startswith("ltr"):
        return ("A learned ranker (LightGBM lambdarank, cross-fitted over query folds that keep queries "
                "sharing a text or a ground-truth set together) over features of the query's and stubs' "
                "dense and BM25 rankings and the query's words in the API's name.")
    arch, family = split_method(name)
    return f"{ARCH_NAMES.get(arch, arch)} with {family} retrieval."
