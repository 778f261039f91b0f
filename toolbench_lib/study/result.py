"""The two architectures end to end: stubs, retrieval, plans and judge verdicts over independent runs.

A study run stores these tables, each once per configuration, that every analysis reads (beside
``queries``):

* ``stubs``: ``qkey, run, stub_idx, name, reasoning, fell_back`` (PtR's generated stubs),
* ``rankings``: ``qkey, method, run, rank, row, api_id, score``: the final ranking of every method, run
  and query, with the retriever's own scores; every method has every run ``0..runs-1`` (a deterministic
  method, listed in ``provenance["deterministic"]``, is retrieved once and its ranking repeated per run),
* ``text_rankings``: ``qkey, method, run, text_idx, rank, row, api_id, score``: each searched text's own
  ranking (``text_idx`` from 0: the query for RtP, each stub for PtR; none for a fused method),
* ``plans``: ``qkey, method, run, refusal, parse_ok, n_steps, named_ids, fidelity, named_ids_strict,
  fidelity_strict, steps_json, reason, verdict, judge_version`` (tolerant and strict plan-name
  resolution; steps and reason let another judge re-judge a stored plan),
* ``calls``: ``qkey, method, run, stage, tokens_in, tokens_out, latency_s, cached, backend, model``.

Runs are independent samples. Run 0 uses ``temperature`` (0, as in the paper); later runs use
``run_temperature`` with ``seed = run`` so that a backend that is deterministic at temperature 0 still
gives independent samples. ``run_temperature=None`` keeps every run at ``temperature``.

A stored study records its layout in ``provenance["format_version"]`` (:data:`FORMAT_VERSION`). A folder of
format 1 (one ``hits`` table mixing the final rankings with the texts' own, a deterministic method stored
once for every run) is read through :func:`convert_format_1`; a folder of a newer format than this code's is
refused with one line naming its version.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..config import DEPTH, RUN_TEMPERATURE, RUNS, TEMPERATURE, K
from ..data.atomic import atomic_folder, file_sha256, folder_lock
from ..data.queries import DEFAULT_GT, check_gt
from ..llm.base import LLMBackend, LLMResponse
from ..llm.parsing import (
    MAX_STUBS,
    Plan,
    Stub,
    fidelity,
    parse_plan,
    parse_stubs_counted,
    parse_verdict,
    resolve_plan_apis,
)
from ..llm.plan_names import registry_names
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

log = logging.getLogger(__name__)

METHODS = ("rtp", "ptr")
FORMAT_VERSION = 2  # the stored layout: rankings and text_rankings (1: one hits table, see convert_format_1)
RANKINGS_COLUMNS = ["qkey", "method", "run", "rank", "row", "api_id", "score"]
TEXT_RANKINGS_COLUMNS = ["qkey", "method", "run", "text_idx", "rank", "row", "api_id", "score"]


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
        self.depth = max(self.depth, self.k)  # the planner sees the top k, so every text keeps at least k

    def temperature_of(self, run: int) -> float:
        if run == 0 or self.run_temperature is None:
            return self.temperature
        return self.run_temperature


TABLE_CHECKSUMS = "checksums.json"  # sha256 of each stored table and of provenance.json, written before it
PROVENANCE = "provenance.json"  # written last: its presence marks a complete study


class StoredStudyError(ValueError):
    """A stored study whose tables are missing, unreadable or not the ones written."""


@dataclass
class StudyResult:
    """The stored tables of one study run and their provenance."""

    queries: pd.DataFrame
    stubs: pd.DataFrame
    rankings: pd.DataFrame
    text_rankings: pd.DataFrame
    plans: pd.DataFrame
    calls: pd.DataFrame
    provenance: dict = field(default_factory=dict)
    folder: Path | None = None  # where the study is stored (set by save and load); its evaluation goes there

    TABLES = ("queries", "stubs", "rankings", "text_rankings", "plans", "calls")

    def stored_rankings_sha256(self) -> str | None:
        """The sha256 of the stored ``rankings`` table while it is the table saved or loaded, else None (a
        study converted from format 1 has none until it is saved)."""
        stored = self.__dict__.get("_rankings_sha256")
        return stored[1] if stored is not None and stored[0] is self.rankings else None

    def save(self, folder: Path) -> Path:
        """Write every table and their sha256 checksums, then ``provenance.json`` last (with
        ``format_version``): its presence marks a complete study."""
        self.provenance = {**self.provenance, "format_version": FORMAT_VERSION}
        with atomic_folder(folder, last=(PROVENANCE,)) as out:  # a failed write leaves it as it was
            for name in self.TABLES:
                getattr(self, name).to_parquet(out.path(f"{name}.parquet"), index=False)
            sums = {f"{name}.parquet": file_sha256(out.tmp / f"{name}.parquet") for name in self.TABLES}
            provenance = json.dumps(self.provenance, indent=2, default=str).encode()
            sums[PROVENANCE] = hashlib.sha256(provenance).hexdigest()  # every file a load reads is covered
            out.path(TABLE_CHECKSUMS).write_text(json.dumps(sums, indent=2))
            out.path(PROVENANCE).write_bytes(provenance)
        self.folder = Path(folder)
        self.__dict__["_rankings_sha256"] = (self.rankings, sums["rankings.parquet"])
        return folder

    @classmethod
    def load(cls, folder: Path) -> StudyResult:
        """The stored study of ``folder``; a table that fails its checksum is a :class:`StoredStudyError`,
        and so is a format newer than :data:`FORMAT_VERSION` (one line naming it). A study of format 1 is
        converted in memory (:func:`convert_format_1`).

        Each table is read once and its checksum computed over the very bytes that are parsed, under the
        folder's shared lock (a save moves its files in under the exclusive one), so a load never mixes
        two saves' tables."""
        folder = Path(folder)
        try:
            with folder_lock(folder, shared=True):
                sums = json.loads((folder / TABLE_CHECKSUMS).read_bytes())
                data = (folder / PROVENANCE).read_bytes()
                if hashlib.sha256(data).hexdigest() != sums.get(PROVENANCE):
                    raise StoredStudyError(f"stored study {folder}: {PROVENANCE} does not match its checksum "
                                           f"(or {TABLE_CHECKSUMS} lists none); delete the folder to run the "
                                           "study again")
                provenance = json.loads(data)
                version = stored_format_version(provenance, folder)
                tables = {}
                for name in cls.TABLES if version == FORMAT_VERSION else FORMAT_1_TABLES:
                    data = (folder / f"{name}.parquet").read_bytes()
                    if hashlib.sha256(data).hexdigest() != sums.get(f"{name}.parquet"):
                        raise StoredStudyError(f"stored study {folder}: {name}.parquet does not match its "
                                               "checksum; delete the folder to run the study again")
                    tables[name] = pd.read_parquet(io.BytesIO(data))
        except StoredStudyError:
            raise
        except (OSError, ValueError, AttributeError) as exc:  # missing, unreadable or not JSON / parquet
            raise StoredStudyError(f"stored study {folder} is incomplete or damaged ({type(exc).__name__}: "
                                   f"{exc}); delete the folder to run the study again") from None
        if version != FORMAT_VERSION:
            tables, provenance = convert_format_1(tables, provenance)
        result = cls(**tables, provenance=provenance, folder=folder)
        if version == FORMAT_VERSION:
            result.__dict__["_rankings_sha256"] = (result.rankings, sums["rankings.parquet"])
        return result

    @property
    def n_runs(self) -> int:
        """Independent runs of the study."""
        return int(self.provenance.get("settings", {}).get("runs", 1))

    @property
    def methods(self) -> list[str]:
        """The study's methods in the order of its settings; one that found nothing for any query stays
        (every query an empty ranking, recall 0), so no table, export or summary drops it."""
        listed = (self.provenance.get("settings", {}).get("methods")
                  or list(dict.fromkeys(self.rankings["method"])))
        return list(listed)

    @property
    def deterministic(self) -> list[str]:
        """The methods whose retrieval is the same in every run (their ranking is repeated per run)."""
        return list(self.provenance.get("deterministic", []))

    def _of(self, table: pd.DataFrame, method: str, run: int) -> pd.DataFrame:
        """The rows of ``method`` in ``run`` of one of the rankings tables."""
        mine = table[table["method"] == method]
        if method not in self.methods and not (self.rankings["method"] == method).any():
            raise KeyError(f"no rankings of method {method!r} in this study (has {self.methods})")
        if not 0 <= run < self.n_runs:
            raise KeyError(f"run {run} is not in this study (runs 0..{self.n_runs - 1})")
        return mine[mine["run"] == run]

    def retrieved(self, method: str, run: int = 0) -> Retrieved:
        """``method``'s rankings of ``run`` as its retriever returned them (the final rankings and each
        text's own, without the ``run`` column)."""
        return Retrieved(self._of(self.rankings, method, run).drop(columns="run"),
                         self._of(self.text_rankings, method, run).drop(columns="run"))

    def api_rows(self) -> dict[str, int]:
        """``{api_id: registry row}`` of every API the study's rankings hold (a study has one registry, so
        one row per id)."""
        cols = ["api_id", "row"]
        both = pd.concat([t.reindex(columns=cols) for t in (self.rankings, self.text_rankings)])
        both = both.dropna().drop_duplicates("api_id")
        return dict(zip(both["api_id"].astype(str), both["row"].astype("int64").tolist(), strict=True))

    def ranking(self, method: str, run: int = 0, k: int | None = None) -> dict[str, list[str]]:
        """``{qkey: [api_id, ...]}``: each query's final ranking of ``method`` in ``run``, cut at ``k``."""
        final = self._of(self.rankings, method, run)
        if k is not None:
            final = final[final["rank"] <= k]
        final = final.sort_values(["qkey", "rank"])
        return final.groupby("qkey", sort=False)["api_id"].apply(list).to_dict()

    def scored_ranking(self, method: str, run: int = 0) -> dict[str, dict[str, float]]:
        """``{qkey: {api_id: cosine}}`` of the final ranking (the scores the retriever ranked by)."""
        final = self._of(self.rankings, method, run).sort_values(["qkey", "rank"])
        return {q: dict(zip(g["api_id"], g["score"].astype(float), strict=True))
                for q, g in final.groupby("qkey", sort=False)}

    def scored_text_rankings(self, method: str, run: int = 0) -> dict[str, list[dict[str, float]]]:
        """``{qkey: [{api_id: cosine}, ...]}``: every searched text's own ranking, in text order."""
        own = self._of(self.text_rankings, method, run).sort_values(["qkey", "text_idx", "rank"])
        return {q: [dict(zip(t["api_id"], t["score"].astype(float), strict=True))
                    for _, t in g.groupby("text_idx", sort=True)]
                for q, g in own.groupby("qkey", sort=False)}

    def qrels(self, gt: str = DEFAULT_GT) -> dict[str, set[str]]:
        """``{qkey: {api_id, ...}}`` under one ground-truth definition."""
        check_gt(gt)
        return {key: set(ids) for key, ids in zip(self.queries["qkey"], self.queries[gt], strict=True)}


FORMAT_1_TABLES = ("queries", "stubs", "hits", "plans", "calls")  # the tables of a format-1 folder


def stored_format_version(provenance: dict, folder: Path) -> int:
    """The format of a stored study (1 when its provenance names none: written before the field existed);
    :class:`StoredStudyError` naming the version when it is not one this code reads."""
    version = provenance.get("format_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= FORMAT_VERSION:
        return version
    why = (f"newer than this toolkit reads ({FORMAT_VERSION}); update toolbench_lib to read it"
           if isinstance(version, int) and version > FORMAT_VERSION
           else f"not one this toolkit reads (1..{FORMAT_VERSION}); run the study again")
    raise StoredStudyError(f"stored study {folder} has format version {version!r}, {why}")


def convert_format_1(tables: dict[str, pd.DataFrame],
                     provenance: dict) -> tuple[dict[str, pd.DataFrame], dict]:
    """A format-1 study's tables and provenance in this format: its one ``hits`` table split into
    ``rankings`` (the rows of ``text_idx = -1``) and ``text_rankings`` (the rest), each row stored once
    for every run (``run = -1``) repeated for every run ``0..runs-1``, the methods stored so listed in
    ``provenance["deterministic"]``, and ``format_version`` recorded.

    The one place the old sentinels are read. A load converts in memory and never writes: the folder
    keeps format 1 (older code still reads it, a read-only run folder stays readable) until the study is
    saved again, and its evaluation is keyed by the converted rankings' content."""
    tables = dict(tables)
    hits = tables.pop("hits")
    runs = int(provenance.get("settings", {}).get("runs", 1))
    once = hits["run"] < 0
    deterministic = [str(m) for m in dict.fromkeys(hits.loc[once, "method"])]
    repeated = [hits.loc[once].assign(run=r) for r in range(runs)]
    hits = pd.concat([hits.loc[~once], *repeated], ignore_index=True).astype({"run": "int64"})
    final = hits["text_idx"] < 0
    tables["rankings"] = hits.loc[final, RANKINGS_COLUMNS].reset_index(drop=True)
    tables["text_rankings"] = hits.loc[~final, TEXT_RANKINGS_COLUMNS].reset_index(drop=True)
    return tables, {**provenance, "format_version": FORMAT_VERSION, "deterministic": deterministic}


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

    def one(item: tuple[str, str]) -> tuple[str, list[Stub], bool, int, LLMResponse]:
        qkey, query = item
        resp = call(llm, STUB_PROMPT, run, temperature, query=query)
        return qkey, *parse_stubs_counted(resp.text, query), resp

    rows, calls, over = [], [], []
    for qkey, stubs, fell_back, dropped, resp in _map(one, items, workers, f"stubs run {run}", progress):
        calls.append(_call_row(qkey, "ptr", run, "stubs", resp))
        over.append(dropped)
        for i, s in enumerate(stubs):
            rows.append({"qkey": qkey, "run": run, "stub_idx": i, "name": s.name, "reasoning": s.reasoning,
                         "fell_back": fell_back, "dropped": dropped})
    if any(over):
        log.warning("stubs run %d: %d replies held more than %d stubs; the %d beyond the cap were left out",
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
    """The planner on each query's top-``k`` retrieved APIs (``ranking``: the method's final rankings of the
    run), then the pass-rate judge on its plan.

    Plan steps are resolved both ways (:mod:`toolbench_lib.llm.plan_names`): ``named_ids`` / ``fidelity``
    tolerantly (shown APIs first, then the registry), ``named_ids_strict`` / ``fidelity_strict`` strictly.
    """
    judge_template = judge_prompt(judge_version)
    names = registry_names(setup.ds.registry)
    final = ranking[ranking["rank"] <= k].sort_values(["qkey", "rank"])
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


def run_study(setup: RetrievalSetup, llm: LLMBackend | None, settings: StudySettings,
              progress: bool = True) -> StudyResult:
    """Run the settings' methods over ``settings.runs`` runs on the setup's queries: the one pipeline.

    Retrieval-only evaluation is this pipeline with ``plan_limit=0`` (then RtP alone needs no ``llm``).
    """
    q = setup.queries
    planned = plan_queries(q, settings.plan_limit)
    load_methods()  # every method registered, the fused ones of retrieval.fused included
    retrievers = [get_retriever(m) for m in settings.methods]
    needs_stubs = any(r.uses_stubs for r in retrievers)
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
            got = shared.get(r.name)
            if got is None:
                got = r.retrieve(ctx)
                if r.deterministic:  # the same in every run: retrieved once, stored for each run
                    shared[r.name] = got
            ctx.retrieved[r.name] = got
            notes.update(ctx.notes)
            finals.append(got.final.assign(run=run)[RANKINGS_COLUMNS])
            texts.append(got.texts.assign(run=run)[TEXT_RANKINGS_COLUMNS])
        if settings.plan_limit == 0 or (settings.plan_runs is not None and run >= settings.plan_runs):
            continue
        for method in settings.methods:
            if settings.plan_methods is not None and method not in settings.plan_methods:
                continue
            p, c = plan_and_judge(llm, setup, planned, ctx.retrieved[method].final, method, run, temp,
                                  settings.k, settings.judge, settings.workers, progress,
                                  settings.judge_version)
            plans.append(p)
            calls.extend(c)
    empty_stubs = pd.DataFrame(columns=["qkey", "run", "stub_idx", "name", "reasoning", "fell_back"])
    rankings, text_rankings = _stack(finals, RANKINGS_COLUMNS), _stack(texts, TEXT_RANKINGS_COLUMNS)
    prov = {
        **setup.provenance,
        "backend": llm.name if llm is not None else None,
        "llm_model": llm.model if llm is not None else None,
        "is_llm": bool(llm.is_llm) if llm is not None else False,
        "pass_rate_kind": None if llm is None
        else "llm_judge" if llm.is_llm else "rules_proxy (not an LLM judgement)",
        "prompt_versions": [STUB_PROMPT.version, PLAN_PROMPT.version, settings.judge_version],
        "settings": json.loads(json.dumps(asdict(settings))),
        "retrievers": _retriever_provenance(setup, settings.methods),
        "n_queries": int(len(q)),
        "n_planned_queries": int(len(planned)) if settings.plan_limit != 0 else 0,
        "empty_rankings": empty_rankings(rankings, q["qkey"], settings.methods, settings.runs),
        "stub_cap": stub_cap_counts(stubs),
        "deterministic": [r.name for r in retrievers if r.deterministic],
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
    """Per method, how many queries got an empty final ranking in each run ``0..runs-1``: a text with no
    indexable term, or nothing found. Each method with any is logged."""
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
    """The stub cap (:data:`~toolbench_lib.llm.parsing.MAX_STUBS`) and, over every run, the replies that
    held more stubs than it and the stubs left out beyond it (:func:`generate_stubs` logs each run)."""
    table = pd.concat(stubs, ignore_index=True) if stubs else pd.DataFrame()
    if "dropped" not in table or table.empty:
        return {"max_stubs": MAX_STUBS, "replies_over_cap": 0, "stubs_dropped": 0}
    per_reply = table.groupby(["run", "qkey"])["dropped"].first()
    return {"max_stubs": MAX_STUBS, "replies_over_cap": int((per_reply > 0).sum()),
            "stubs_dropped": int(per_reply.sum())}


def _retriever_provenance(setup: RetrievalSetup, methods: Sequence[str]) -> dict:
    """What each retriever family the methods use is (BM25's analyzer, the hybrid's fusion)."""
    families = list(dict.fromkeys(split_method(m)[1] for m in methods))
    describe = getattr(setup, "retriever_provenance", None)
    return describe(families) if describe is not None else {}
