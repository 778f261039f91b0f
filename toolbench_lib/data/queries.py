"""ToolBench query sets (built-in, other ``test_instruction/<name>.json`` *user sets*, ``--queries`` files)
with both ground truths as registry ids: ``candidates`` (the whole ``api_list``) and ``relevant``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..config import DEFAULT_GT, GT_DEFINITIONS  # noqa: F401 (re-exported: the ground truths)
from .normalize import norm_name

log = logging.getLogger(__name__)

# Every query set by name: (folder, file stem).
QUERY_SETS: dict[str, tuple[str, str]] = {
    **{n: ("test_instruction", n) for n in ("G1_instruction", "G1_category", "G1_tool", "G2_instruction",
                                            "G2_category", "G3_instruction")},
    **{f"{n}_original": ("test_instruction_original", n) for n in ("G2_category", "G3_instruction")},
}
DEFAULT_SUBSETS: dict[str, str] = {"G1": "G1_instruction", "G2": "G2_category_original",
                                   "G3": "G3_instruction_original"}


def subset_alias(name: str) -> str:
    """Short alias of a canonical set name (``G1_instruction`` -> ``G1``), else the name itself."""
    return {canonical: alias for alias, canonical in DEFAULT_SUBSETS.items()}.get(name, name)


class UnknownSubsetError(KeyError):
    """A query-set name that is neither a set nor a default-subset alias."""


# A user set's name: a plain file stem (no path, no leading dot or dash).
USER_SET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
USER_SET_FOLDER = "test_instruction"
_WARNED: set[Path] = set()  # files already warned about as no query set


def resolve_subset(name: str, user_sets: Iterable[str] | None = None) -> str:
    """Canonical query-set name of ``name`` (``G1`` -> ``G1_instruction``); any other name is a user set,
    checked against ``user_sets`` when given, else only for its form."""
    if name in DEFAULT_SUBSETS:
        return DEFAULT_SUBSETS[name]
    if name in QUERY_SETS:
        return name
    listed = None if user_sets is None else list(user_sets)
    if isinstance(name, str) and USER_SET_NAME.match(name) and (listed is None or name in listed):
        return name
    known = ", ".join([*DEFAULT_SUBSETS, *QUERY_SETS, *(listed or ())])
    raise UnknownSubsetError(f"unknown query set {name!r}; known: {known} (and any other "
                             f"{USER_SET_FOLDER}/<name>.json of the data folder)")


def is_builtin(name: str) -> bool:
    """True for a built-in set name or alias."""
    return name in QUERY_SETS or name in DEFAULT_SUBSETS


def check_gt(gt: str) -> str:
    """Validate a ground-truth definition name."""
    if gt not in GT_DEFINITIONS:
        raise ValueError(f"unknown ground truth {gt!r}; choose one of {GT_DEFINITIONS}")
    return gt


class QueryFileError(ValueError):
    """A query file that is not a JSON list of query objects."""


def _json_type(value: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _query_problem(q: object) -> str | None:
    """What is wrong with one query object, or None."""
    if not isinstance(q, dict):
        return f"a JSON {_json_type(q)} instead of a query object"
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        return "no query text"
    if q.get("query_id") is None or isinstance(q["query_id"], (dict, list)):
        return "no scalar query_id"
    apis = q.get("api_list", [])
    if not isinstance(apis, list) or not all(isinstance(a, dict) for a in apis):
        return "api_list is not a list of objects"
    pairs = q.get("relevant APIs", [])
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        return "'relevant APIs' is not a list of [tool, API] pairs"
    return None


DOC_KEY_FIELDS = ("category_name", "tool_name", "api_name")  # what an api_list doc's registry key is made of


def doc_key_problem(api: dict) -> str | None:
    """The first key field an ``api_list`` doc lacks (missing, not a string, or without a letter or digit),
    or None; such a doc never joins the registry and its ground-truth pair counts as unresolved."""
    for name in DOC_KEY_FIELDS:
        value = api.get(name)
        if not isinstance(value, str) or not norm_name(value):
            return name
    return None


def read_query_file(path: Path) -> list[dict]:
    """The queries of one ToolBench query file, checked; a bad file is a :class:`QueryFileError` naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise QueryFileError(f"query file {path} is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise QueryFileError(f"query file {path} is not valid JSON: {exc.msg} at line {exc.lineno} "
                             f"column {exc.colno}") from None
    except RecursionError:
        raise QueryFileError(f"query file {path} is nested too deeply to be a query list") from None
    if not isinstance(data, list):
        raise QueryFileError(f"query file {path} holds a JSON {_json_type(data)}; expected a list of "
                             "query objects")
    seen: dict[str, int] = {}
    for i, q in enumerate(data):
        problem = _query_problem(q)
        if problem is None and str(q["query_id"]) in seen:
            problem = f"query_id {q['query_id']} again (first at item {seen[str(q['query_id'])]})"
        if problem:
            raise QueryFileError(f"query file {path}: item {i}: {problem}")
        seen[str(q["query_id"])] = i
    return data


def query_set_path(data_dir: Path, name: str) -> Path:
    """Where a query set's file is: a built-in set's own place, else ``test_instruction/<name>.json``."""
    canonical = resolve_subset(name)
    folder, stem = QUERY_SETS.get(canonical, (USER_SET_FOLDER, canonical))
    return data_dir / folder / f"{stem}.json"


def builtin_query_files(data_dir: Path) -> set[Path]:
    """The files of the built-in sets (present or not)."""
    return {query_set_path(data_dir, name) for name in QUERY_SETS}


def user_set_files(data_dir: Path) -> dict[str, Path]:
    """``{name: file}`` of the user sets of a data folder (a built-in or odd stem: skipped, warned)."""
    builtin = builtin_query_files(data_dir)
    out: dict[str, Path] = {}
    for path in sorted((data_dir / USER_SET_FOLDER).glob("*.json")):
        if path in builtin:
            continue
        if is_builtin(path.stem) or not USER_SET_NAME.match(path.stem):
            if path not in _WARNED:
                _WARNED.add(path)
                log.warning("%s is not read as a query set: its name %r is a built-in set or alias, or not "
                            "a plain name; rename it", path, path.stem)
            continue
        out[path.stem] = path
    return out


def available_sets(data_dir: Path) -> list[str]:
    """Query sets present in the data folder: the built-in ones, then the user sets by name."""
    return [n for n in QUERY_SETS if query_set_path(data_dir, n).exists()] + list(user_set_files(data_dir))


def own_set_files(data_dir: Path) -> dict[Path, str]:
    """``{resolved file: set name}`` of every query set in the data folder."""
    sets = {**{n: query_set_path(data_dir, n) for n in QUERY_SETS}, **user_set_files(data_dir)}
    return {p.resolve(): n for n, p in sets.items()}


def query_file_sets(data_dir: Path, files: Iterable[str | Path]) -> list[str]:
    """The query-set name of each file given by path: its set in the data folder, else its stem."""
    own = own_set_files(data_dir)
    return list(dict.fromkeys(own.get(Path(f).resolve(), Path(f).stem) for f in files))


def external_sets(data_dir: Path, files: Iterable[str | Path]) -> dict[str, Path]:
    """``{name: file}`` of query files given by path (``--queries``), named after their stems; the data
    folder's own sets are left out, a stem naming another set or given file is a ``ValueError``."""
    own = own_set_files(data_dir)
    out: dict[str, Path] = {}
    for f in files:
        path = Path(f).resolve()
        if path in own or out.get(path.stem) == path:  # the data folder's own file, or one given twice
            continue
        name = path.stem
        if not USER_SET_NAME.match(name):
            raise ValueError(f"--queries: {str(f)!r}: the file name {name!r} is not a plain set name "
                             "(letters, digits, '_', '.', '+', '-'); rename the file")
        taken = ("a built-in query set or alias" if is_builtin(name) else
                 f"a query set of the data folder ({USER_SET_FOLDER}/{name}.json)"
                 if name in user_set_files(data_dir) else
                 f"another --queries file ({out[name]})" if name in out else None)
        if taken:
            raise ValueError(f"--queries: {str(f)!r} would be the query set {name!r}, which is {taken}; "
                             "rename the file")
        out[name] = path
    return out


class ApiResolver:
    """Maps (category, tool, API) names to registry ids through normalised keys."""

    def __init__(self, registry: pd.DataFrame) -> None:
        self.by_cat: dict[tuple[str, str, str], str] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        cols = zip(registry["api_id"], registry["category"], registry["norm_tool"],
                   registry["norm_api"], strict=True)
        for api_id, cat, tool, api in cols:
            self.by_cat.setdefault((norm_name(cat), tool, api), api_id)
            self.by_name.setdefault((tool, api), api_id)

    def resolve(self, category: str | None, tool: str, api: str) -> str | None:
        """Registry id of an API, preferring the same category; ``None`` when unresolved."""
        key = (norm_name(tool), norm_name(api))
        hit = self.by_cat.get((norm_name(category), *key)) if category else None
        return hit or self.by_name.get(key)


QUERY_COLUMNS = ["subset", "query_id", "query", "candidates", "relevant", "n_candidate_pairs",
                 "n_relevant_pairs", "unresolved_candidates", "unresolved_relevant"]


def load_queries(data_dir: Path, names: list[str], registry: pd.DataFrame,
                 files: Mapping[str, Path] | None = None) -> pd.DataFrame:
    """Queries of the named sets (``files``: those not in the data folder) with both ground truths as lists
    of registry ids (:data:`QUERY_COLUMNS`; ``unresolved_*`` count pairs without a registry id)."""
    resolver = ApiResolver(registry)
    files = files or {}
    rows = []
    for name in names:
        subset = name if name in files else resolve_subset(name)
        path = files.get(subset) or query_set_path(data_dir, subset)
        if not path.exists():
            raise FileNotFoundError(f"query set {subset} not found at {path}")
        for q in read_query_file(path):
            cats: dict[tuple[str, str], str] = {}
            incomplete: set[tuple[str, str]] = set()  # pairs of docs without a whole key: never guessed
            cand = []  # each api_list doc's id (None: unresolved)
            for api in q.get("api_list", []):
                tool, name_ = str(api.get("tool_name", "")), str(api.get("api_name", ""))
                whole = not doc_key_problem(api)
                if whole:
                    cats.setdefault((norm_name(tool), norm_name(name_)), api.get("category_name", ""))
                else:
                    incomplete.add((norm_name(tool), norm_name(name_)))
                cand.append(resolver.resolve(api.get("category_name"), tool, name_) if whole else None)
            rel = []
            for tool, name_ in q.get("relevant APIs", []):
                pair = (norm_name(tool), norm_name(name_))
                cat = cats.get(pair)
                rel.append(None if pair in incomplete and cat is None else resolver.resolve(cat, tool, name_))
            rows.append({"subset": subset, "query_id": str(q.get("query_id")),
                         "query": str(q.get("query", "")).strip(),
                         "candidates": list(dict.fromkeys(a for a in cand if a is not None)),
                         "relevant": list(dict.fromkeys(a for a in rel if a is not None)),
                         "n_candidate_pairs": len(cand), "n_relevant_pairs": len(rel),
                         "unresolved_candidates": cand.count(None), "unresolved_relevant": rel.count(None)})
    return pd.DataFrame(rows, columns=QUERY_COLUMNS)  # the columns even when every set is empty


def query_keys(queries: pd.DataFrame) -> list[str]:
    return [f"{s}:{q}" for s, q in zip(queries["subset"], queries["query_id"], strict=True)]


def clusters(queries: pd.DataFrame, qkeys=None) -> list:
    """The cluster of each of ``qkeys`` (:func:`ground_truth_groups`; a key not in ``queries``: its own),
    of every query of ``queries`` in order without them."""
    groups = ground_truth_groups(queries)
    return list(groups.values()) if qkeys is None else [groups.get(q, q) for q in qkeys]


def ground_truth_groups(queries: pd.DataFrame, gt: str = "candidates") -> dict[str, str]:
    """``{qkey: group}``: per subset, the queries with the same ``gt`` set (by default the `candidates`, which
    do not change with the ground truth a comparison scores) form one group, named by its first query."""
    first: dict[tuple[str, frozenset], str] = {}
    keys = (queries["qkey"] if "qkey" in queries else query_keys(queries) if "query_id" in queries
            else queries.index)
    return {q: first.setdefault((subset, frozenset(apis if apis is not None else ())), q)
            for q, subset, apis in zip(keys, queries["subset"], queries[check_gt(gt)], strict=True)}


def shared_tool_groups(queries: pd.DataFrame, gt: str = "candidates") -> dict[str, str]:
    """``{qkey: group}``: per subset, the queries linked through any shared tool (an API id's
    ``category/tool`` part) of their ``gt`` APIs form one group, named by its first query: a coarser
    clustering than :func:`ground_truth_groups`."""
    keys = queries["qkey"] if "qkey" in queries else query_keys(queries)
    parent = {q: q for q in keys}

    def root(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    holder: dict[tuple[str, str], str] = {}
    for q, subset, apis in zip(keys, queries["subset"], queries[check_gt(gt)], strict=True):
        for tool in sorted({str(a).rsplit("/", 1)[0] for a in (apis if apis is not None else ())}):
            first = holder.setdefault((subset, tool), q)
            parent[root(q)] = root(first)
    named: dict[str, str] = {}  # a group by its first query in the table, whatever order merged it
    return {q: named.setdefault(root(q), q) for q in keys}
