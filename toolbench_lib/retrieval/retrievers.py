"""The retriever interface: a method's ``retrieve(ctx) -> Retrieved``; :func:`register` adds one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pandas as pd

from ..config import DEFAULT_FAMILY
from ..llm.parsing import Stub, stub_text
from .families import FAMILIES, Family, check_family
from .rankings import Retrieved, retrieved_frames, search_and_merge

if TYPE_CHECKING:
    from .setup import RetrievalSetup


@dataclass
class RunContext:
    """What a retriever sees in one run: setup, queries, this run's stubs and earlier methods' rankings."""

    setup: RetrievalSetup
    queries: pd.DataFrame
    run: int
    depth: int
    stubs: pd.DataFrame | None = None
    retrieved: dict[str, Retrieved] = field(default_factory=dict)
    notes: dict[str, dict] = field(default_factory=dict)  # what a retriever reports of its run (provenance)


class Retriever(Protocol):
    name: str
    uses_stubs: bool
    deterministic: bool

    def retrieve(self, ctx: RunContext) -> Retrieved: ...


ARCHITECTURES = ("rtp", "ptr")
FAMILY_SEP = "@"


def method_name(architecture: str, family: str = DEFAULT_FAMILY) -> str:
    """A method's name: the architecture, with ``@family`` unless the family is dense (``ptr@bm25``)."""
    check_family(family)
    return architecture if family == DEFAULT_FAMILY else f"{architecture}{FAMILY_SEP}{family}"


def split_method(name: str) -> tuple[str, str]:
    """``(architecture or fused method, retriever family)`` of a method name (``rtp`` -> ``rtp, dense``)."""
    base, _, family = name.partition(FAMILY_SEP)
    return base, family or DEFAULT_FAMILY


def ptr_texts(queries: pd.DataFrame, stubs: pd.DataFrame, run: int) -> list[list[str]]:
    """The texts PtR searches per query in one run (its stubs, else the raw query), in query order."""
    mine = stubs[stubs["run"] == run].sort_values(["qkey", "stub_idx"])
    by_q = {q: [stub_text(Stub(n, r)) for n, r in zip(g["name"], g["reasoning"], strict=True)]
            for q, g in mine.groupby("qkey", sort=False)}
    return [by_q.get(k) or [q] for k, q in zip(queries["qkey"], queries["query"], strict=True)]


class ArchitectureRetriever:
    """RtP (the query searched) or PtR (every stub searched, merged by best score) with one family."""

    def __init__(self, architecture: str, family: str = DEFAULT_FAMILY) -> None:
        self.family, self.name = family, method_name(architecture, family)
        self.uses_stubs = architecture == "ptr"
        self.deterministic = not self.uses_stubs

    def retrieve(self, ctx: RunContext) -> Retrieved:
        if self.uses_stubs and ctx.stubs is None:
            raise ValueError("PtR needs the run's stubs")
        texts = (ptr_texts(ctx.queries, ctx.stubs, ctx.run) if self.uses_stubs
                 else [[q] for q in ctx.queries["query"]])
        per_query, merged = search_and_merge(ctx.setup.searcher(self.family), texts, ctx.depth)
        return retrieved_frames(ctx.queries["qkey"].tolist(), self.name, per_query, merged, ctx.setup.api_ids)


class SpecRetriever:
    """A method made of a spec over other methods' rankings (fused, learned)."""

    def __init__(self, name: str, spec) -> None:
        self.name, self.spec = name, spec
        self.uses_stubs = spec.uses_stubs
        self.deterministic = not spec.uses_stubs

    @staticmethod
    def parts(ctx: RunContext, methods) -> dict[str, Retrieved]:
        """The run's rankings of ``methods`` (retrieved now when the run has none yet)."""
        return {m: ctx.retrieved[m] if m in ctx.retrieved else get_retriever(m).retrieve(ctx)
                for m in methods}


RETRIEVERS: dict[str, Retriever] = {}


def register(retriever: Retriever) -> Retriever:
    """Make ``retriever`` selectable by its name (``--method``, ``StudySettings.methods``)."""
    RETRIEVERS[retriever.name] = retriever
    return retriever


def get_retriever(name: str) -> Retriever:
    """The registered method ``name`` (the fused ones register when :mod:`.methods` is imported)."""
    if name not in RETRIEVERS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(RETRIEVERS)}")
    return RETRIEVERS[name]


def register_family(family: Family) -> Family:
    """Add a retriever family: its RtP and PtR become methods, and fused specs may read it."""
    FAMILIES[family.name] = family
    for architecture in ARCHITECTURES:
        register(ArchitectureRetriever(architecture, family.name))
    return family


for _family in list(FAMILIES.values()):
    register_family(_family)
