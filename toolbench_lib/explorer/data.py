"""The explorer's data: method names, per-query outcomes and filters, API labels, the catalogue of stored
studies and the link of a view."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

import pandas as pd

from ..config import K
from ..data.paths import OUTPUTS_DIR, PROCESSED_DIR
from ..data.queries import DEFAULT_GT, check_gt, subset_alias
from ..eval.evaluation import evaluate
from ..study.experiment import stored_study_dir
from ..study.stored import TABLE_CHECKSUMS, StudyResult, checked_bytes
from ..study.validation import check_run_name

API_FILTERS = ("a_found_b_missed", "only_a", "all_missed")  # by the ground-truth APIs each method found
FILTERS = ("all", "a_wins", "b_wins", "both_missed", "both_hit", *API_FILTERS)
SORTS = ("query", "subset", "text", "a", "b", "gap", "abs_gap", "winner")  # a header click or a link's sort=
ALL_SUBSETS = "all"
SHORT_NAMES = {"rtp": "RtP", "ptr": "PtR"}
LONG_NAMES = {"rtp": "retrieve, then plan", "ptr": "plan, then retrieve"}
PAGE_ROWS = 12
NO_PLAN = "no plan recorded for this query"
NO_QUERY = "no query in this view (its set, search and filter)"
LABEL_COLUMNS = ["api_id", "tool_name", "api_name", "category"]
STATE_KEYS = ("run_name", "run", "subset", "filter", "a", "b", "more", "show", "k", "gt", "search", "sort",
              "desc", "page", "query")
EXPLORE_URL = "http://127.0.0.1:8866/"  # where `make explore` serves the explorer
MEAN_RUNS = "mean"  # the run control's value for the mean over every run (the report's basis)


def run_options(runs: list[int]) -> list[tuple[str, int | str]]:
    """The run control's choices: the mean over every run first (where there are several), then each run."""
    each = [(f"run {r}", r) for r in runs]
    return [(f"mean of {len(runs)} runs", MEAN_RUNS), *each] if len(runs) > 1 else each

log = logging.getLogger(__name__)


def _ids(value) -> list[str]:
    """A stored list of registry ids (list, numpy array or None) as a Python list."""
    return [] if value is None else [str(v) for v in value]


def method_label(method: str, long: bool = False) -> str:
    """A method's shown name (``RtP``, ``PtR@bm25``, a fused method's own); ``long`` says what it is."""
    family, sep, rest = method.partition("@")
    short = SHORT_NAMES.get(family, family) + (f"@{rest}" if sep else "")
    return f"{short} ({LONG_NAMES[family]})" if long and family in LONG_NAMES else short


def query_outcomes(result: StudyResult, run: int, k: int, gt: str = DEFAULT_GT,
                   methods: tuple[str, ...] | list[str] = ("rtp", "ptr")) -> pd.DataFrame:
    """Per query: ``qkey, subset`` and ``<method>_recall, <method>_hits`` at ``k`` for one run, read from
    the study's evaluation."""
    check_gt(gt)
    s = evaluate(result).scores(k, gt, ("recall",), methods)
    s = s[s["run"] == run]  # each method's rows in the study's query order
    out = result.queries[["qkey", "subset"]].copy()
    for method in methods:
        mine = s[s["method"] == method]
        out[f"{method}_recall"], out[f"{method}_hits"] = mine["recall"].to_numpy(), mine["hits"].to_numpy()
    return out


def filter_outcomes(outcomes: pd.DataFrame, name: str, a: str = "rtp", b: str = "ptr",
                    found: dict[str, pd.DataFrame] | None = None,
                    selected: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """The queries of one filter of methods ``a`` and ``b`` (``selected``: every method shown; ``found``:
    ``{method: qkey, api_id}`` of the ground truth each found, for :data:`API_FILTERS`)."""
    ra, rb = outcomes[f"{a}_recall"], outcomes[f"{b}_recall"]
    masks = {"all": ra == ra, "a_wins": ra > rb, "b_wins": rb > ra,
             "both_missed": (ra == 0) & (rb == 0), "both_hit": (ra > 0) & (rb > 0)}
    if name == "all_missed":
        hits = outcomes[[f"{m}_hits" for m in dict.fromkeys([a, b, *selected])]].to_numpy()
        return outcomes[~(hits > 0).any(axis=1)]
    if name in API_FILTERS:
        pairs = {m: set(zip(f["qkey"], f["api_id"], strict=True)) for m, f in (found or {}).items()}
        others = (pairs[b] if name == "a_found_b_missed"
                  else set().union(*(p for m, p in pairs.items() if m != a)))
        return outcomes[outcomes["qkey"].isin({q for q, _ in pairs[a] - others}).to_numpy()]
    if name not in masks:
        raise ValueError(f"unknown filter {name!r}; choose one of {FILTERS}")
    return outcomes[masks[name]]


def filter_labels(a: str, b: str, n_selected: int = 2) -> list[tuple[str, str]]:
    """The filter dropdown's ``(label, key)`` pairs for methods ``a`` and ``b`` (of ``n_selected``)."""
    la, lb = method_label(a), method_label(b)
    every = ("both missed every ground-truth API" if n_selected <= 2
             else f"every selected method ({n_selected}) missed")
    return [("all", "all"), (f"{la} higher recall", "a_wins"), (f"{lb} higher recall", "b_wins"),
            ("both recall 0", "both_missed"), ("both recall > 0", "both_hit"),
            (f"{la} found a ground-truth API {lb} missed", "a_found_b_missed"),
            (f"only {la} found a ground-truth API", "only_a"), (every, "all_missed")]


def filter_phrase(name: str, a: str, b: str, n_selected: int = 2) -> str:
    """What a filter keeps, in words (the result line states it)."""
    return dict((key, label) for label, key in filter_labels(a, b, n_selected))[name]


def explorer_url(run_name: str, query: str | None = None,
                 methods: tuple[str, ...] | list[str] = ("rtp", "ptr"), k: int = K, gt: str = DEFAULT_GT,
                 run: int = 0, filter: str | None = None,
                 subset: str | None = None, base: str = EXPLORE_URL) -> str:
    """The link of an explorer view (``make explore`` serves it) as the explorer's query string."""
    methods = list(methods) or ["rtp"]
    state = {"run_name": run_name, "run": str(run), "subset": subset, "filter": filter, "a": methods[0],
             "b": methods[1] if len(methods) > 1 else methods[0],
             "more": ",".join(methods[2:]) or None, "k": str(k), "gt": gt, "query": query}
    return base + "?" + urlencode({key: v for key, v in state.items() if v}, quote_via=quote, safe=":@,")


# Counts of the shown queries: mean recall of both methods, ``a`` wins, ties and ``b`` wins.
Summary = namedtuple("Summary", "n mean_a mean_b a_wins ties b_wins")


def api_labels(registry: pd.DataFrame | None) -> dict[str, str]:
    """``{api_id: "tool / API (category)"}`` from a registry table; empty without one."""
    if registry is None:
        return {}
    return {a: f"{t} / {n} ({c})" for a, t, n, c in registry[LABEL_COLUMNS].itertuples(index=False)}


def stored_registry(result: StudyResult, processed_dir: Path | None = None) -> pd.DataFrame | None:
    """Label columns of the APIs a study shows, from the processed registry of its data fingerprint; None
    (ids shown alone) when that registry is not on this machine."""
    fp = result.provenance.get("data_fingerprint")
    path = (processed_dir or PROCESSED_DIR) / str(fp) / "registry.parquet"
    if not fp or not path.exists():
        log.info("no processed registry %s: API ids are shown without names", path)
        return None
    ids = {str(a) for t in (result.rankings, result.text_rankings) for a in t["api_id"].unique()}
    named = result.plans["named_ids"] if len(result.plans) and "named_ids" in result.plans else []
    lists = [*result.queries["candidates"], *result.queries["relevant"], *named]
    ids.update(a for v in lists for a in _ids(v))
    return pd.read_parquet(path, columns=LABEL_COLUMNS, filters=[("api_id", "in", sorted(ids))])


def served_by_voila() -> bool:
    """Whether this kernel serves a Voilà page (Voilà names itself in ``SERVER_SOFTWARE``)."""
    return os.environ.get("SERVER_SOFTWARE", "").startswith("voila")


def page_query_string() -> str:
    """The query string of the page this kernel serves (Voilà's ``QUERY_STRING``); empty elsewhere."""
    return os.environ.get("QUERY_STRING", "") if served_by_voila() else ""


def run_name_of(query_string: str) -> str | None:
    """The ``run_name`` a link names (None when none); ``UsageError`` when it is not a folder name."""
    value = dict(parse_qsl(query_string or "")).get("run_name")
    return check_run_name(value) if value else None


@dataclass(frozen=True)
class CatalogueEntry:
    """One stored study of a run of the family: where it is and what it holds."""

    run_name: str
    folder: Path
    subsets: tuple[str, ...]
    methods: tuple[str, ...]
    runs: int
    n_queries: int

    def label(self) -> str:
        """The study picker's label: run name, sets, the methods it stored (the method lists add the fused
        ones its views compute) and runs."""
        sets = ", ".join(subset_alias(s) for s in self.subsets)
        runs = f"{self.runs} run{'s' * (self.runs > 1)}"
        return f"{self.run_name} ({sets}; {len(self.methods)} stored methods; {runs})"


def family_base(run_name: str) -> str:
    """The main run a run belongs to: ``default`` for ``default-retrievers``, ``default-runs4`` and
    ``default-validation-retrievers`` and ``default-g2-instruction-retrievers``."""
    return re.sub(r"(-validation-retrievers|-g2-instruction-retrievers|-validation|-retrievers|-rules)$", "",
                  re.sub(r"-runs\d+$", "", run_name))


def catalogue(run_name: str, outputs_dir: Path | None = None) -> tuple[list[CatalogueEntry], dict]:
    """The readable stored studies of ``run_name``'s family (main run first) and ``{run_name: queries}``."""
    root = Path(outputs_dir) if outputs_dir else OUTPUTS_DIR
    base = family_base(run_name)
    names = {p.name for p in root.glob(f"{base}*") if p.is_dir() and base in (p.name, family_base(p.name))}
    names = sorted(names | {run_name}, key=lambda n: (n != base, n))
    entries, queries = [], {}
    for name in names:
        try:
            folder = stored_study_dir(name, outputs_dir=root / name)
            sums = json.loads((folder / TABLE_CHECKSUMS).read_bytes())
            data = checked_bytes(folder, "queries.parquet", sums)  # StoredStudyError: not the table written
            q = pd.read_parquet(io.BytesIO(data), columns=["qkey", "subset", "query_id", "query"])
            settings = json.loads((folder / "provenance.json").read_bytes()).get("settings", {})
        except (FileNotFoundError, OSError, ValueError) as exc:
            log.info("catalogue: run %s left out (%s)", name, exc)
            continue
        entries.append(CatalogueEntry(name, folder, tuple(dict.fromkeys(q["subset"])),
                                      tuple(settings.get("methods") or ()), int(settings.get("runs", 1)),
                                      len(q)))
        queries[name] = q
    return entries, queries


def search_queries(queries: pd.DataFrame, term: str) -> pd.DataFrame:
    """The queries whose key, id or text holds ``term`` (case-insensitive)."""
    text = searched_text(queries["qkey"], queries["query_id"], queries["query"])
    return queries[text.str.contains(term.strip().lower(), regex=False).to_numpy()]


def searched_text(keys: pd.Series, ids: pd.Series, texts: pd.Series) -> pd.Series:
    """What a search looks in: each query's key, id and text, lower-cased."""
    return (keys.astype(str) + "\n" + ids.astype(str) + "\n" + texts.astype(str)).str.lower()
