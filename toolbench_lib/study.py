"""The two architectures end to end: stubs, retrieval, plans and judge verdicts over independent runs.

A study run stores four tables, each once per configuration, that every analysis reads:

* ``stubs``: ``qkey, run, stub_idx, name, reasoning, fell_back`` (PtR's generated stubs),
* ``hits``: ``qkey, method, run, text_idx, rank, row, api_id, score`` (per-text and merged rankings;
  RtP is deterministic and stored once with ``run = -1``),
* ``plans``: ``qkey, method, run, refusal, parse_ok, n_steps, named_ids, fidelity, named_ids_strict,
  fidelity_strict, steps_json, reason, verdict, judge_version`` (tolerant and strict plan-name
  resolution; steps and reason let another judge re-judge a stored plan),
* ``calls``: ``qkey, method, run, stage, tokens_in, tokens_out, latency_s, cached, backend, model``.

Runs are independent samples. Run 0 uses ``temperature`` (0, as in the paper); later runs use
``run_temperature`` with ``seed = run`` so that a backend that is deterministic at temperature 0 still
gives independent samples. ``run_temperature=None`` keeps every run at ``temperature``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .atomic import atomic_path
from .evaluate import RetrievalSetup, ranked_lists, run_rtp
from .llm.base import LLMBackend, LLMResponse
from .metrics import per_query_metrics
from .parsing import (
    Plan,
    Stub,
    fidelity,
    parse_plan,
    parse_stubs,
    parse_verdict,
    resolve_plan_apis,
    stub_text,
)
from .plan_names import registry_names
from .prompts import (
    DEFAULT_JUDGE,
    PLAN_PROMPT,
    STUB_PROMPT,
    PromptTemplate,
    format_api_docs,
    format_plan,
    judge_prompt,
)
from .queries import DEFAULT_GT, check_gt, resolve_subset
from .retrieval import hits_frame, retrieve_multi

log = logging.getLogger(__name__)

METHODS = ("rtp", "ptr")


@dataclass
class StudySettings:
    """What a study run depends on besides data, embedder and backend."""

    k: int = 5
    depth: int = 20
    runs: int = 4
    temperature: float = 0.0
    run_temperature: float | None = 0.3
    plan_limit: int | None = None
    methods: tuple[str, ...] = METHODS
    workers: int = 1
    judge: bool = True
    judge_version: str = DEFAULT_JUDGE

    def __post_init__(self) -> None:
        self.depth = max(self.depth, self.k)  # the planner sees the top k, so every text keeps at least k

    def temperature_of(self, run: int) -> float:
        if run == 0 or self.run_temperature is None:
            return self.temperature
        return self.run_temperature


@dataclass
class StudyResult:
    """The stored tables of one study run and their provenance."""

    queries: pd.DataFrame
    stubs: pd.DataFrame
    hits: pd.DataFrame
    plans: pd.DataFrame
    calls: pd.DataFrame
    provenance: dict = field(default_factory=dict)

    TABLES = ("queries", "stubs", "hits", "plans", "calls")

    def save(self, folder: Path) -> Path:
        """Write every table, then ``provenance.json`` last: its presence marks a complete study."""
        for name in self.TABLES:
            with atomic_path(folder / f"{name}.parquet") as tmp:
                getattr(self, name).to_parquet(tmp, index=False)
        with atomic_path(folder / "provenance.json") as tmp:
            tmp.write_text(json.dumps(self.provenance, indent=2, default=str))
        return folder

    @classmethod
    def load(cls, folder: Path) -> StudyResult:
        tables = {n: pd.read_parquet(folder / f"{n}.parquet") for n in cls.TABLES}
        return cls(**tables, provenance=json.loads((folder / "provenance.json").read_text()))


def call(llm: LLMBackend, template: PromptTemplate, run: int, temperature: float, **fields) -> LLMResponse:
    """One templated call; the template version travels with it to caches and cassettes."""
    kwargs = {"prompt_version": template.version} if getattr(llm, "accepts_prompt_version", False) else {}
    return llm.generate(template.render(**fields), system=template.system, json_schema=template.json_schema,
                        temperature=temperature, run=run, **kwargs)


def _map(fn: Callable, items: Sequence, workers: int, desc: str, progress: bool) -> list:
    bar = tqdm(total=len(items), desc=desc, disable=not progress or len(items) < 20)
    if workers <= 1:
        out = []
        for item in items:
            out.append(fn(item))
            bar.update()
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            out = []
            for result in pool.map(fn, items):
                out.append(result)
                bar.update()
    bar.close()
    return out


def _call_row(qkey: str, method: str, run: int, stage: str, r: LLMResponse) -> dict:
    return {"qkey": qkey, "method": method, "run": run, "stage": stage, "tokens_in": r.tokens_in,
            "tokens_out": r.tokens_out, "latency_s": r.latency_s, "cached": r.cached,
            "backend": r.backend, "model": r.model}


def generate_stubs(llm: LLMBackend, queries: pd.DataFrame, run: int, temperature: float, workers: int = 1,
                   progress: bool = True) -> tuple[pd.DataFrame, list[dict]]:
    """PtR's first call for every query: stubs (no tools shown), parsed, with fallbacks flagged."""
    items = list(zip(queries["qkey"], queries["query"], strict=True))

    def one(item: tuple[str, str]) -> tuple[str, list[Stub], bool, LLMResponse]:
        qkey, query = item
        resp = call(llm, STUB_PROMPT, run, temperature, query=query)
        stubs, fell_back = parse_stubs(resp.text, query)
        return qkey, stubs, fell_back, resp

    rows, calls = [], []
    for qkey, stubs, fell_back, resp in _map(one, items, workers, f"stubs run {run}", progress):
        calls.append(_call_row(qkey, "ptr", run, "stubs", resp))
        for i, s in enumerate(stubs):
            rows.append({"qkey": qkey, "run": run, "stub_idx": i, "name": s.name, "reasoning": s.reasoning,
                         "fell_back": fell_back})
    return pd.DataFrame(rows), calls


def ptr_texts(queries: pd.DataFrame, stubs: pd.DataFrame, run: int) -> list[list[str]]:
    """The texts PtR searches per query in one run (its stubs, else the raw query), in query order."""
    mine = stubs[stubs["run"] == run].sort_values(["qkey", "stub_idx"])
    by_q = {q: [stub_text(Stub(n, r)) for n, r in zip(g["name"], g["reasoning"], strict=True)]
            for q, g in mine.groupby("qkey", sort=False)}
    return [by_q.get(k) or [q] for k, q in zip(queries["qkey"], queries["query"], strict=True)]


def ptr_hits(setup: RetrievalSetup, queries: pd.DataFrame, stubs: pd.DataFrame, run: int,
             depth: int) -> pd.DataFrame:
    """PtR retrieval: every stub searched, merged by each API's best cosine over the query's stubs."""
    per_query, merged = retrieve_multi(setup.index, ptr_texts(queries, stubs, run), setup.encode, depth)
    hits = hits_frame(queries["qkey"].tolist(), "ptr", per_query, merged, setup.api_ids)
    hits.insert(2, "run", run)
    return hits


def _api_docs(setup: RetrievalSetup, rows: Sequence[int]) -> list[dict]:
    reg = setup.ds.registry
    cols = ["api_id", "tool_name", "api_name", "api_description", "category", "required_parameters"]
    return reg.iloc[list(rows)][cols].to_dict("records")


def judge_plan(llm: LLMBackend, template: PromptTemplate, query: str, plan: Plan, api_docs: str, run: int,
               temperature: float) -> LLMResponse:
    """The judge's call on one plan; ``api_docs`` is the API list the planner saw (judge-v2 reads it)."""
    return call(llm, template, run, temperature, query=query, api_docs=api_docs,
                plan=format_plan(plan.steps, plan.refusal, plan.reason))


def plan_and_judge(llm: LLMBackend, setup: RetrievalSetup, queries: pd.DataFrame, hits: pd.DataFrame,
                   method: str, run: int, temperature: float, k: int, judge: bool = True, workers: int = 1,
                   progress: bool = True,
                   judge_version: str = DEFAULT_JUDGE) -> tuple[pd.DataFrame, list[dict]]:
    """The planner on each query's top-``k`` retrieved APIs, then the pass-rate judge on its plan.

    Plan steps are resolved both ways (:mod:`toolbench_lib.plan_names`): ``named_ids`` / ``fidelity``
    tolerantly (shown APIs first, then the registry), ``named_ids_strict`` / ``fidelity_strict`` strictly.
    """
    judge_template = judge_prompt(judge_version)
    names = registry_names(setup.ds.registry)
    final = hits[(hits["text_idx"] == -1) & (hits["rank"] <= k)].sort_values(["qkey", "rank"])
    rows_by_q = final.groupby("qkey", sort=False)["row"].apply(list).to_dict()
    items = list(zip(queries["qkey"], queries["query"], strict=True))

    def one(item: tuple[str, str]) -> tuple[dict, list[dict]]:
        qkey, query = item
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
            row["judge_version"] = judge_template.version
            row["verdict"] = parse_verdict(jr.text)
            calls.append(_call_row(qkey, method, run, "judge", jr))
        return row, calls

    out, calls = [], []
    for row, c in _map(one, items, workers, f"plans {method} run {run}", progress):
        out.append(row)
        calls.extend(c)
    return pd.DataFrame(out), calls


def plan_queries(queries: pd.DataFrame, plan_limit: int | None) -> pd.DataFrame:
    """The first ``plan_limit`` queries of each set (all when None): those that get plans and verdicts."""
    if plan_limit is None:
        return queries
    return queries.groupby("subset", sort=False, group_keys=False).head(plan_limit)


def run_study(setup: RetrievalSetup, llm: LLMBackend, settings: StudySettings,
              progress: bool = True) -> StudyResult:
    """Run both architectures over ``settings.runs`` runs on the setup's queries."""
    q = setup.queries
    planned = plan_queries(q, settings.plan_limit)
    stubs, hits, plans, calls = [], [], [], []
    method_hits: dict[str, pd.DataFrame] = {}
    if "rtp" in settings.methods:
        rtp = run_rtp(setup, settings.depth)
        rtp.insert(2, "run", -1)
        hits.append(rtp)
        method_hits["rtp"] = rtp
    for run in range(settings.runs):
        temp = settings.temperature_of(run)
        if "ptr" in settings.methods:
            s, c = generate_stubs(llm, q, run, temp, settings.workers, progress)
            stubs.append(s)
            calls.extend(c)
            method_hits["ptr"] = ptr_hits(setup, q, s, run, settings.depth)
            hits.append(method_hits["ptr"])
        if settings.plan_limit == 0:
            continue
        for method in settings.methods:
            p, c = plan_and_judge(llm, setup, planned, method_hits[method], method, run, temp, settings.k,
                                  settings.judge, settings.workers, progress, settings.judge_version)
            plans.append(p)
            calls.extend(c)
    empty_stubs = pd.DataFrame(columns=["qkey", "run", "stub_idx", "name", "reasoning", "fell_back"])
    prov = {
        **setup.provenance,
        "backend": llm.name,
        "llm_model": llm.model,
        "is_llm": bool(llm.is_llm),
        "pass_rate_kind": "llm_judge" if llm.is_llm else "rules_proxy (not an LLM judgement)",
        "prompt_versions": [STUB_PROMPT.version, PLAN_PROMPT.version, settings.judge_version],
        "settings": json.loads(json.dumps(asdict(settings))),
        "n_queries": int(len(q)),
        "n_planned_queries": int(len(planned)) if settings.plan_limit != 0 else 0,
    }
    return StudyResult(q, pd.concat(stubs, ignore_index=True) if stubs else empty_stubs,
                       pd.concat(hits, ignore_index=True), pd.concat(plans, ignore_index=True)
                       if plans else pd.DataFrame(), pd.DataFrame(calls), prov)


def per_query_runs(result: StudyResult, k: int, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Recall and precision at ``k`` per query, method and run (RtP repeated for every run)."""
    check_gt(gt)
    q = result.queries
    qrels = {key: set(ids) for key, ids in zip(q["qkey"], q[gt], strict=True)}
    runs = int(result.provenance["settings"]["runs"])
    frames = []
    for (method, run), h in result.hits.groupby(["method", "run"]):
        pq = per_query_metrics(ranked_lists(h), qrels, k)
        for r in (range(runs) if run == -1 else [run]):
            frames.append(pq.assign(method=method, run=r))
    out = pd.concat(frames, ignore_index=True)
    return out.merge(q[["qkey", "subset"]], on="qkey")


def _mean_std(values: np.ndarray) -> tuple[float, float]:
    if len(values) == 0:
        return float("nan"), float("nan")
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def summarise_study(result: StudyResult, subsets: list[str], k: int, gt: str = DEFAULT_GT) -> dict:
    """Per subset and method: recall, precision and pass rate (mean and std over runs), stubs, tokens."""
    pq = per_query_runs(result, k, gt)
    calls = result.calls
    plans = result.plans
    out = {**result.provenance, "k": k, "gt": gt, "subsets": {}}
    for name in subsets:
        subset = resolve_subset(name)
        sq = result.queries[result.queries["subset"] == subset]
        keys = set(sq["qkey"])
        entry = {"subset": subset, "n_queries": int(len(sq)), "methods": {}}
        for method in result.provenance["settings"]["methods"]:
            m = pq[(pq["subset"] == subset) & (pq["method"] == method)]
            by_run = m.groupby("run")[["recall", "precision"]].mean()
            rec, rec_sd = _mean_std(by_run["recall"].to_numpy())
            pre, pre_sd = _mean_std(by_run["precision"].to_numpy())
            res = {"recall": rec, "recall_std": rec_sd, "precision": pre, "precision_std": pre_sd,
                   "recall_by_run": by_run["recall"].round(6).tolist()}
            if not plans.empty:
                pm = plans[(plans["method"] == method) & plans["qkey"].isin(keys)]
                judged = pm[pm["verdict"].notna()]
                pr = judged.assign(ok=judged["verdict"] == "Solved").groupby("run")["ok"].mean().to_numpy()
                res["pass_rate"], res["pass_rate_std"] = _mean_std(pr)
                res["n_planned"] = int(pm["qkey"].nunique())
                res["fidelity"] = float(pm["fidelity"].dropna().mean()) if len(pm) else float("nan")
                res["refusal_rate"] = float(pm["refusal"].mean()) if len(pm) else float("nan")
            mc = calls[(calls["method"] == method) & calls["qkey"].isin(keys)] if len(calls) else calls
            # A method's cost per query: the mean call of each of its own stages (stubs, plan), summed;
            # plans exist only for planned queries, so each stage is averaged over the calls it has.
            cost = mc[mc["stage"] != "judge"] if len(mc) else mc
            by_stage = cost.groupby("stage")[["tokens_in", "tokens_out", "latency_s"]].mean() if len(cost) \
                else pd.DataFrame(columns=["tokens_in", "tokens_out", "latency_s"])
            res["tokens_in"] = float(by_stage["tokens_in"].sum())
            res["tokens_out"] = float(by_stage["tokens_out"].sum())
            res["latency_s"] = float(by_stage["latency_s"].sum())
            if method == "ptr" and len(result.stubs):
                st = result.stubs[result.stubs["qkey"].isin(keys)]
                per_q = st.groupby(["run", "qkey"]).agg(n=("stub_idx", "size"), fb=("fell_back", "first"))
                res["stubs_per_query"] = float(per_q["n"].mean())
                res["fallback_stubs"] = int(per_q["fb"].sum())
                pooled = st.groupby("run")["name"].apply(lambda s: s.str.lower().nunique() / len(s))
                res["unique_stub_name_share"] = float(pooled.mean())  # distinct names / stubs of the set
                per_q = st.groupby(["run", "qkey"])["name"].apply(lambda s: s.str.lower().nunique() / len(s))
                res["unique_stub_name_share_per_query"] = float(per_q.mean())
            entry["methods"][method] = res
        if len(entry["methods"]) == 1:
            only = next(iter(entry["methods"].values()))
            entry.update({"recall": only["recall"], "precision": only["precision"]})
        out["subsets"][name] = entry
    return out
