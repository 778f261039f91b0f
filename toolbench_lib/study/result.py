"""The two architectures end to end (stubs, retrieval, plans and verdicts over runs); run 0 at
``temperature``, later runs at ``run_temperature`` with ``seed = run``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import pandas as pd
from tqdm.auto import tqdm

from ..config import DEPTH, RUN_TEMPERATURE, RUNS, TEMPERATURE, K
from ..llm.base import LLMBackend, LLMResponse
from ..llm.parsing import MAX_STUBS, Plan, Stub, parse_plan, parse_stubs_counted, parse_verdict
from ..llm.plan_names import fidelity, registry_names, resolve_plan_apis
from ..llm.prompts import (
    DEFAULT_JUDGE,
    PLAN_PROMPT,
    STUB_PROMPT,
    PromptTemplate,
    format_api_docs,
    format_plan,
    judge_prompt,
)
from ..retrieval.methods import load_methods
from ..retrieval.rankings import Retrieved
from ..retrieval.retrievers import RunContext, get_retriever, split_method
from ..retrieval.setup import RetrievalSetup
from .stored import FORMAT_VERSION, RANKINGS_COLUMNS, TEXT_RANKINGS_COLUMNS, StudyResult

log = logging.getLogger(__name__)

METHODS = ("rtp", "ptr")


@dataclass
class StudySettings:
    """What a study run depends on besides data, embedder and backend."""

    k: int = K
    depth: int = DEPTH
    runs: int = RUNS
    temperature: float = TEMPERATURE
    run_temperature: float | None = RUN_TEMPERATURE
    plan_limit: int | None = None
    methods: tuple[str, ...] = METHODS
    plan_methods: tuple[str, ...] | None = None  # methods that get plans and verdicts (None: every method)
    plan_runs: int | None = None  # the first runs that get plans and verdicts (None: every run)
    workers: int = 1
    judge: bool = True
    judge_version: str = DEFAULT_JUDGE

    def __post_init__(self) -> None:
        self.depth = max(self.depth, self.k)  # the planner sees the top k

    def temperature_of(self, run: int) -> float:
        return self.temperature if run == 0 or self.run_temperature is None else self.run_temperature


def call(llm: LLMBackend, template: PromptTemplate, run: int, temperature: float, **fields) -> LLMResponse:
    """One templated call; the template version travels with it to caches and cassettes."""
    kwargs = {"prompt_version": template.version} if getattr(llm, "accepts_prompt_version", False) else {}
    return llm.generate(template.render(**fields), system=template.system, json_schema=template.json_schema,
                        temperature=temperature, run=run, **kwargs)


def _map(fn: Callable, queries: pd.DataFrame, workers: int, desc: str, progress: bool) -> list:
    """``fn(qkey, query)`` of every query, in order (on ``workers`` threads)."""
    args = (queries["qkey"].tolist(), queries["query"].tolist())
    bar = {"total": len(queries), "desc": desc, "disable": not progress or len(queries) < 20}
    if workers <= 1:
        return list(tqdm(map(fn, *args), **bar))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(tqdm(pool.map(fn, *args), **bar))


def _call_row(qkey: str, method: str, run: int, stage: str, r: LLMResponse) -> dict:
    return {"qkey": qkey, "method": method, "run": run, "stage": stage, "tokens_in": r.tokens_in,
            "tokens_out": r.tokens_out, "latency_s": r.latency_s, "cached": r.cached,
            "backend": r.backend, "model": r.model}


def generate_stubs(llm: LLMBackend, queries: pd.DataFrame, run: int, temperature: float, workers: int = 1,
                   progress: bool = True) -> tuple[pd.DataFrame, list[dict]]:
    """PtR's first call for every query: stubs (no tools shown), parsed, with fallbacks flagged."""

    def one(qkey: str, query: str) -> tuple[str, list[Stub], bool, int, LLMResponse]:
        resp = call(llm, STUB_PROMPT, run, temperature, query=query)
        return qkey, *parse_stubs_counted(resp.text, query), resp

    rows, calls, over = [], [], []
    for qkey, stubs, fell_back, dropped, resp in _map(one, queries, workers, f"stubs run {run}", progress):
        calls.append(_call_row(qkey, "ptr", run, "stubs", resp))
        over.append(dropped)
        rows += [{"qkey": qkey, "run": run, "stub_idx": i, "name": s.name, "reasoning": s.reasoning,
                  "fell_back": fell_back, "dropped": dropped} for i, s in enumerate(stubs)]
    if any(over):
        log.warning("stubs run %d: %d replies held more than %d stubs; %d stubs beyond the cap were left out",
                    run, sum(d > 0 for d in over), MAX_STUBS, sum(over))
    return pd.DataFrame(rows), calls


def _api_docs(setup: RetrievalSetup, rows: Sequence[int]) -> list[dict]:
    reg = setup.ds.registry
    cols = ["api_id", "tool_name", "api_name", "api_description", "category", "required_parameters"]
    return reg.iloc[list(rows)][cols].to_dict("records")


def judge_plan(llm: LLMBackend, template: PromptTemplate, query: str, plan: Plan, api_docs: str, run: int,
               temperature: float) -> LLMResponse:
    """The judge's call on one plan; ``api_docs`` is the API list the planner saw (judge-v2 reads it)."""
    return call(llm, template, run, temperature, query=query, api_docs=api_docs,
                plan=format_plan(plan.steps, plan.refusal, plan.reason))


def plan_and_judge(llm: LLMBackend, setup: RetrievalSetup, queries: pd.DataFrame, ranking: pd.DataFrame,
                   method: str, run: int, temperature: float, k: int, judge: bool = True, workers: int = 1,
                   progress: bool = True,
                   judge_version: str = DEFAULT_JUDGE) -> tuple[pd.DataFrame, list[dict]]:
    """The planner on each query's top-``k`` APIs of ``ranking``, then the judge on its plan."""
    judge_template = judge_prompt(judge_version)
    names = registry_names(setup.ds.registry)
    final = ranking[ranking["rank"] <= k].sort_values(["qkey", "rank"])
    rows_by_q = final.groupby("qkey", sort=False)["row"].apply(list).to_dict()

    def one(qkey: str, query: str) -> tuple[dict, list[dict]]:
        docs = _api_docs(setup, rows_by_q.get(qkey, []))
        shown = format_api_docs(docs)
        resp = call(llm, PLAN_PROMPT, run, temperature, query=query, api_docs=shown)
        plan = parse_plan(resp.text)
        named = resolve_plan_apis(plan, docs, names)
        strict = resolve_plan_apis(plan, docs, strict=True)
        retrieved = [d["api_id"] for d in docs]
        row = {"qkey": qkey, "method": method, "run": run, "refusal": plan.refusal, "parse_ok": plan.parse_ok,
               "n_steps": len(plan.steps), "named_ids": [n for n in named if n],
               "n_named_unresolved": sum(n is None for n in named), "fidelity": fidelity(named, retrieved),
               "named_ids_strict": [n for n in strict if n], "fidelity_strict": fidelity(strict, retrieved),
               "steps_json": json.dumps(plan.steps), "reason": plan.reason, "verdict": None,
               "judge_version": None}
        calls = [_call_row(qkey, method, run, "plan", resp)]
        if judge:
            jr = judge_plan(llm, judge_template, query, plan, shown, run, temperature)
            row.update(verdict=parse_verdict(jr.text), judge_version=judge_template.version)
            calls.append(_call_row(qkey, method, run, "judge", jr))
        return row, calls

    done = _map(one, queries, workers, f"plans {method} run {run}", progress)
    return pd.DataFrame([row for row, _ in done]), [c for _, calls in done for c in calls]


def run_study(setup: RetrievalSetup, llm: LLMBackend | None, settings: StudySettings,
              progress: bool = True) -> StudyResult:
    """Run the settings' methods over ``settings.runs`` runs (retrieval only with ``plan_limit=0``)."""
    q = setup.queries
    planned = q if settings.plan_limit is None else q.groupby("subset", sort=False).head(settings.plan_limit)
    load_methods()  # every method registered, the fused ones of retrieval.fused included
    retrievers = [get_retriever(m) for m in settings.methods]
    needs_stubs = any(r.uses_stubs for r in retrievers)
    to_plan = [m for m in settings.methods if settings.plan_methods is None or m in settings.plan_methods]
    if llm is None and (needs_stubs or settings.plan_limit != 0):
        raise ValueError("an LLM backend is needed for stubs or plans (--backend)")
    stubs, finals, texts, plans, calls = [], [], [], [], []
    shared: dict[str, Retrieved] = {}
    notes: dict[str, dict] = {}
    for run in range(settings.runs):
        temp = settings.temperature_of(run)
        ctx = RunContext(setup, q, run, settings.depth)
        if needs_stubs:
            s, c = generate_stubs(llm, q, run, temp, settings.workers, progress)
            stubs.append(s)
            calls.extend(c)
            ctx.stubs = s
        for r in retrievers:
            got = ctx.retrieved[r.name] = shared.get(r.name) or r.retrieve(ctx)
            if r.deterministic:  # the same in every run: retrieved once, stored for each run
                shared[r.name] = got
            notes.update(ctx.notes)
            finals.append(got.final.assign(run=run)[RANKINGS_COLUMNS])
            texts.append(got.texts.assign(run=run)[TEXT_RANKINGS_COLUMNS])
        if settings.plan_limit == 0 or (settings.plan_runs is not None and run >= settings.plan_runs):
            continue
        for method in to_plan:
            p, c = plan_and_judge(llm, setup, planned, ctx.retrieved[method].final, method, run, temp,
                                  settings.k, settings.judge, settings.workers, progress,
                                  settings.judge_version)
            plans.append(p)
            calls.extend(c)
    empty_stubs = pd.DataFrame(columns=["qkey", "run", "stub_idx", "name", "reasoning", "fell_back"])
    rankings, text_rankings = _stack(finals, RANKINGS_COLUMNS), _stack(texts, TEXT_RANKINGS_COLUMNS)
    describe = getattr(setup, "retriever_provenance", None)  # BM25's analyzer, the hybrid's fusion, ...
    families = list(dict.fromkeys(split_method(m)[1] for m in settings.methods))
    prov = {
        **setup.provenance, "backend": getattr(llm, "name", None), "llm_model": getattr(llm, "model", None),
        "is_llm": bool(getattr(llm, "is_llm", False)),
        "pass_rate_kind": None if llm is None
        else "llm_judge" if llm.is_llm else "rules_proxy (not an LLM judgement)",
        "prompt_versions": [STUB_PROMPT.version, PLAN_PROMPT.version, settings.judge_version],
        "settings": json.loads(json.dumps(asdict(settings))),
        "retrievers": describe(families) if describe is not None else {}, "n_queries": int(len(q)),
        "n_planned_queries": int(len(planned)) if settings.plan_limit != 0 else 0,
        "empty_rankings": empty_rankings(rankings, q["qkey"], settings.methods, settings.runs),
        "stub_cap": stub_cap_counts(stubs), "deterministic": [r.name for r in retrievers if r.deterministic],
        "format_version": FORMAT_VERSION,
        "retriever_notes": notes,  # e.g. a learned ranker's queries that repeat a design query's text
    }
    stubs = [s.drop(columns="dropped", errors="ignore") for s in stubs]  # counted in provenance
    return StudyResult(q, pd.concat(stubs, ignore_index=True) if stubs else empty_stubs,
                       rankings, text_rankings, pd.concat(plans, ignore_index=True)
                       if plans else pd.DataFrame(), pd.DataFrame(calls), prov)


def _stack(frames: Sequence[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The non-empty frames one below the other (an empty table of ``columns`` when there are none)."""
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def empty_rankings(rankings: pd.DataFrame, qkeys: Sequence[str], methods: Sequence[str],
                   runs: int) -> dict[str, list[int]]:
    """Per method, how many queries got an empty final ranking in each run ``0..runs-1`` (each logged)."""
    n = len(set(qkeys))
    out = {}
    for m in methods:
        h = rankings[rankings["method"] == m]
        out[m] = [int(n - h.loc[h["run"] == r, "qkey"].nunique()) for r in range(runs)]
        if any(out[m]):
            log.warning("method %s: %s of %d queries have an empty ranking (no indexable term, or nothing "
                        "found); they count as recall 0", m, "/".join(map(str, out[m])), n)
    return out


def stub_cap_counts(stubs: Sequence[pd.DataFrame]) -> dict:
    """The stub cap and, over every run, the replies that held more stubs than it and the stubs left out."""
    table = pd.concat(stubs, ignore_index=True) if stubs else pd.DataFrame()
    if "dropped" not in table or table.empty:
        return {"max_stubs": MAX_STUBS, "replies_over_cap": 0, "stubs_dropped": 0}
    per_reply = table.groupby(["run", "qkey"])["dropped"].first()
    return {"max_stubs": MAX_STUBS, "replies_over_cap": int((per_reply > 0).sum()),
            "stubs_dropped": int(per_reply.sum())}
