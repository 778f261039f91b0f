"""Re-judge plans with another judge prompt version, without planning again.
A cassette's plans (recorded by ``python -m toolbench_lib.study.rejudge --export``) or a stored study's."""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..data.atomic import atomic_path
from ..data.dataset import load_dataset
from ..data.queries import DEFAULT_SUBSETS, resolve_subset
from ..llm.base import LLMBackend
from ..llm.cassettes import read_cassette
from ..llm.factory import DEFAULT_CASSETTE, make_backend
from ..llm.parsing import Plan, parse_plan, parse_verdict
from ..llm.prompts import PLAN_PROMPT, extract_section, format_api_docs, judge_prompt
from .result import StudySettings, _api_docs, judge_plan
from .stored import StudyResult
from .stub_recording import merge_export
from .validation import OneLineParser, data_dir, existing_file, int_at_least, output_file, report, subset_name

log = logging.getLogger(__name__)


@dataclass
class StoredPlan:
    """A plan as recorded: what the planner was asked and what it replied."""

    subset: str
    position: int
    query: str
    api_docs: str
    plan: Plan
    run: int
    temperature: float


def cassette_plans(cassette: str | Path, queries: pd.DataFrame, per_subset: int | None = None,
                   subsets: Sequence[str] = tuple(DEFAULT_SUBSETS)) -> list[StoredPlan]:
    """The cassette's run-0 plans of the first ``per_subset`` queries of each subset, matched by text."""
    wanted: dict[str, tuple[str, int]] = {}
    for name in subsets:
        canonical = resolve_subset(name)
        texts = queries.loc[queries["subset"] == canonical, "query"].tolist()
        for i, text in enumerate(texts[:per_subset] if per_subset is not None else texts):
            wanted.setdefault(text, (canonical, i))
    out = []
    for r in read_cassette(cassette):
        if r["prompt_version"] != PLAN_PROMPT.version or int(r["run"]) != 0:
            continue
        query = extract_section(r["prompt"], "query")
        if query not in wanted:
            continue
        subset, pos = wanted[query]
        out.append(StoredPlan(subset, pos, query, extract_section(r["prompt"], "apis") or "",
                              parse_plan(r["text"]), int(r["run"]), float(r["temperature"])))
    order = {resolve_subset(name): i for i, name in enumerate(subsets)}
    return sorted(out, key=lambda p: (p.position, order[p.subset], p.api_docs))


def record_verdicts(plans: Sequence[StoredPlan], llm: LLMBackend, version: str,
                    progress: bool = True) -> pd.DataFrame:
    """Judge each stored plan with judge prompt ``version``; ``subset, position, run, verdict, ...``."""
    template = judge_prompt(version)
    rows = []
    for p in tqdm(plans, desc=f"{version} verdicts", disable=not progress):
        resp = judge_plan(llm, template, p.query, p.plan, p.api_docs, p.run, p.temperature)
        rows.append({"subset": p.subset, "position": p.position, "run": p.run,
                     "verdict": parse_verdict(resp.text), "judge_version": version, "cached": resp.cached,
                     "latency_s": resp.latency_s, "tokens_in": resp.tokens_in, "tokens_out": resp.tokens_out})
    return pd.DataFrame(rows)


def rejudge(result: StudyResult, setup, llm: LLMBackend, version: str,
            per_subset: int | None = None) -> pd.DataFrame:
    """``qkey, method, run, verdict, judge_version`` of judge ``version`` on a study's stored plans."""
    plans = result.plans
    if plans.empty:
        return pd.DataFrame(columns=["qkey", "method", "run", "verdict", "judge_version"])
    if "reason" not in plans:
        raise ValueError("these stored plans lack their 'reason' column (stored by an older version); "
                         "run the study again to re-judge them")
    template = judge_prompt(version)
    settings = result.provenance.get("settings", {})
    temps = StudySettings(temperature=settings.get("temperature", 0.0),
                          run_temperature=settings.get("run_temperature"))
    q = result.queries.set_index("qkey")
    keep = set(result.queries.groupby("subset", sort=False).head(per_subset)["qkey"]) if per_subset \
        else set(q.index)
    rows_of = result.shown().groupby(["qkey", "method", "run"])["row"].apply(list).to_dict()
    out = []
    for p in plans[plans["qkey"].isin(keep)].to_dict("records"):
        run = int(p["run"])
        rows = rows_of.get((p["qkey"], p["method"], run), [])
        plan = Plan(steps=json.loads(p["steps_json"]), refusal=bool(p["refusal"]), reason=p["reason"] or "",
                    parse_ok=bool(p["parse_ok"]))
        resp = judge_plan(llm, template, q.loc[p["qkey"], "query"], plan,
                          format_api_docs(_api_docs(setup, rows)), run, temps.temperature_of(run))
        out.append({"qkey": p["qkey"], "method": p["method"], "run": run, "verdict": parse_verdict(resp.text),
                    "judge_version": version})
    return pd.DataFrame(out)


def recorded_judge_versions(cassette: str | Path) -> dict[str, int]:
    """``{judge version: records}`` of a cassette (a replayed study can re-judge only with these)."""
    versions = (r["prompt_version"] for r in read_cassette(cassette))
    return dict(Counter(v for v in versions if v.startswith("judge-")))


def main(argv: list[str] | None = None) -> int:
    """Record verdicts of one judge version on a cassette's plans (see the module docstring)."""
    ap = OneLineParser(prog="python -m toolbench_lib.study.rejudge", description=__doc__.split("\n")[0])
    ap.add_argument("--judge", default="judge-v2", help="judge prompt version")
    ap.add_argument("--cassette", default=str(DEFAULT_CASSETTE), type=existing_file,
                    help="cassette holding the plans")
    ap.add_argument("--per-subset", type=int_at_least(1), default=50, help="first N queries of each subset")
    ap.add_argument("--subset", action="append", default=None, type=subset_name,
                    help="subset (repeatable; default G1, G2, G3)")
    ap.add_argument("--backend", default="local", help="backend of the judge (behind the call cache)")
    ap.add_argument("--data-dir", default=None, type=data_dir)
    ap.add_argument("--out", default=None, type=output_file, help="CSV of the verdicts")
    ap.add_argument("--export", action="store_true",
                    help="then merge the call cache (this model) into the cassette, keeping all its records")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:  # one line for any bad input, before any judging where it can be
        ds = load_dataset(args.data_dir)
        subsets = [str(ds.subset_queries(s, 1)["subset"].iloc[0]) for s in args.subset or DEFAULT_SUBSETS]
        plans = cassette_plans(args.cassette, ds.queries, args.per_subset, subsets)
        log.info("%d recorded plans to judge with %s", len(plans), args.judge)
        llm = make_backend(args.backend)
        if args.export and not hasattr(llm, "store"):
            raise ValueError(f"--export needs a live backend behind the call cache, not {args.backend!r}")
        table = record_verdicts(plans, llm, args.judge)
        if args.export:
            before, after = merge_export(llm.store, args.cassette, llm.model)
            log.info("cassette %s: %d -> %d records", args.cassette, before, after)
        if args.out:
            with atomic_path(args.out) as tmp:
                table.to_csv(tmp, index=False)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return report(exc)
    summary = table.groupby("subset")["verdict"].value_counts().unstack(fill_value=0) if len(table) else table
    print(summary.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
