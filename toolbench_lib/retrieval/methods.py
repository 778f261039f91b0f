"""Every discovery method by name, the fused ones and the learned rankers registered on import."""

from __future__ import annotations

from . import fused, ltr  # noqa: F401  (register the named fusion specs and the learned rankers)
from .fused import FUSED, spec_of
from .retrievers import RETRIEVERS, Retriever, split_method

ARCH_NAMES = {"rtp": "RtP (retrieve, then plan)", "ptr": "PtR (plan, then retrieve)"}


def load_methods() -> dict[str, Retriever]:
    """Every registered method, the fused ones of :mod:`.fused` included."""
    return RETRIEVERS


def describe_method(name: str) -> str:
    """What a method is, in one sentence: the glossary's definition and the explorer's column note."""
    if name in FUSED:
        return f"Fused: {spec_of(name).describe()}."
    if name.startswith("ltr"):
        return ("A learned ranker (LightGBM lambdarank, cross-fitted over query folds) over features of the "
                "query's and stubs' dense and BM25 rankings and the query's words in the API's name"
                + {"ltr-nollm": ", without any stub (no LLM call).",
                   "ltr-4runs": ", with the agreement of every run's stubs (one stub call per run)."}.get(
                    name, "."))
    arch, family = split_method(name)
    return f"{ARCH_NAMES.get(arch, arch)} with {family} retrieval."
