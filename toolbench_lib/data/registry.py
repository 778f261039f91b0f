"""The merged ToolBench API registry from ``toolenv/tools/``, the queries' ``api_list`` docs, ``toolenv_2023``
and ``retrieval_corpus/*.jsonl``, in that order; an API joins unless an earlier one has its normalised key."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .normalize import norm_name
from .queries import builtin_query_files, doc_key_problem, read_query_file

log = logging.getLogger(__name__)

SOURCES = ("toolenv", "query_api_list", "toolenv_2023", "retrieval_corpus")
COLUMNS = ["api_id", "category", "tool_key", "tool_name", "tool_description", "api_name", "api_description",
           "method", "required_parameters", "optional_parameters", "source", "norm_tool", "norm_api"]
DOC_TEXT_MAX_CHARS = 1200


@dataclass
class MergeStats:
    """Counters of what the merge read, skipped and kept."""

    files_read: int = 0
    malformed_files: list[str] = field(default_factory=list)
    duplicate_api_names: int = 0
    added: dict[str, int] = field(default_factory=lambda: {s: 0 for s in SOURCES})
    incomplete_query_docs: int = 0  # api_list docs without a whole key, left out (each warned about)
    skipped_existing: dict[str, int] = field(default_factory=lambda: {s: 0 for s in SOURCES})


def slug(text: str) -> str:
    """File-name-like slug of a display name (keeps a ``_vN`` suffix)."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "unnamed"


def _params(value: object) -> list[dict]:
    """Parameters as a list of ``{name, type, description, default}`` dicts."""
    if not isinstance(value, list):
        return []
    return [{"name": str(p.get("name")), "type": str(p.get("type", "")),
             "description": str(p.get("description", "") or ""), "default": p.get("default")}
            for p in value if isinstance(p, dict) and p.get("name")]


def _row(category: str, tool_key: str, tool_name: str, tool_description: str, api: dict, source: str,
         required: object, optional: object) -> dict:
    api_name = str(api.get("name") or api.get("api_name") or "").strip()
    return {"category": category, "tool_key": tool_key, "tool_name": tool_name.strip(),
            "tool_description": str(tool_description or "").strip(), "api_name": api_name,
            "api_description": str(api.get("description") or api.get("api_description") or "").strip(),
            "method": str(api.get("method") or "").upper(),
            "required_parameters": json.dumps(_params(required), default=str),
            "optional_parameters": json.dumps(_params(optional), default=str),
            "source": source, "norm_tool": norm_name(tool_name), "norm_api": norm_name(api_name)}


def iter_toolenv(root: Path, source: str, stats: MergeStats) -> Iterator[dict]:
    """APIs of every tool file under ``root/tools/<Category>/<tool>.json``; malformed files are skipped."""
    for path in sorted((root / "tools").glob("*/*.json")):
        stats.files_read += 1
        try:
            tool = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(tool, dict) or not isinstance(tool.get("api_list"), list):
                raise ValueError("no api_list")
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("skipping malformed tool file %s: %s", path, exc)
            stats.malformed_files.append(str(path))
            continue
        category = path.parent.name
        tool_name = str(tool.get("tool_name") or tool.get("name") or path.stem)
        seen: set[str] = set()
        for api in tool["api_list"]:
            name = norm_name(api.get("name")) if isinstance(api, dict) else ""
            if not name:
                continue
            if name in seen:
                stats.duplicate_api_names += 1
                continue
            seen.add(name)
            required, optional = api.get("required_parameters"), api.get("optional_parameters")
            if "parameters" in api and "required_parameters" not in api:
                params = [p for p in api.get("parameters") or [] if isinstance(p, dict)]
                required = [p for p in params if p.get("required")]
                optional = [p for p in params if not p.get("required")]
            yield _row(category, path.stem, tool_name, tool.get("tool_description", ""), api, source,
                       required, optional)


def iter_query_docs(query_files: Iterable[Path], stats: MergeStats) -> Iterator[dict]:
    """API docs of the queries' ``api_list``; a doc lacking a key field is left out with a warning."""
    for path in query_files:
        for index, query in enumerate(read_query_file(path)):
            for position, api in enumerate(query.get("api_list", [])):
                missing = doc_key_problem(api)
                if missing:
                    log.warning("query file %s: item %d, api_list[%d]: no %s; this doc is left out of the "
                                "registry and its ground-truth pair counts as unresolved", path, index,
                                position, missing)
                    stats.incomplete_query_docs += 1
                    continue
                tool_name = str(api.get("tool_name", ""))
                yield _row(str(api.get("category_name", "")), slug(tool_name), tool_name, "", api,
                           "query_api_list", api.get("required_parameters"), api.get("optional_parameters"))


_CORPUS_RE = re.compile(
    r"^category_name:(?P<category>.*?), tool_name:(?P<tool>.*?), api_name:(?P<api>.*?), "
    r"api_description:(?P<desc>.*?), required_params: (?P<req>\[.*?\]), "
    r"optional_params: (?P<opt>\[.*?\])(?:, return_schema: .*)?$", re.DOTALL)


def parse_corpus_text(text: str) -> dict | None:
    """Parse one retriever-corpus document; ``None`` when it does not have the expected shape."""
    m = _CORPUS_RE.match(text)
    if not m:
        return None

    def load(s: str) -> list:
        try:
            v = json.loads(s)
            return v if isinstance(v, list) else []
        except ValueError:
            return []

    return {"category": m["category"].strip(), "tool_name": m["tool"].strip(),
            "api": {"name": m["api"].strip(), "description": m["desc"].strip()},
            "required": load(m["req"]), "optional": load(m["opt"])}


def iter_corpus(files: Iterable[Path], stats: MergeStats) -> Iterator[dict]:
    """APIs of ToolBench retriever-corpus files (``{"_id", "text"}`` per line)."""
    for path in files:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = parse_corpus_text(json.loads(line)["text"])
            except (ValueError, KeyError, TypeError, RecursionError):
                doc = None
            if doc is None:
                log.warning("skipping malformed corpus line %s:%d", path, lineno)
                stats.malformed_files.append(f"{path}:{lineno}")
                continue
            yield _row(doc["category"], slug(doc["tool_name"]), doc["tool_name"], "", doc["api"],
                       "retrieval_corpus", doc["required"], doc["optional"])


def query_files(data_dir: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """Every query file of the data folder, built-in sets' first (fixed rows), then ``extra`` ones."""
    builtin = builtin_query_files(data_dir)
    files = sorted((data_dir / "test_instruction").glob("*.json"))
    files += sorted((data_dir / "test_instruction_original").glob("*.json"))
    return [p for p in files if p in builtin] + [p for p in files if p not in builtin] + list(extra)


def merge_registry(data_dir: Path, extra_query_files: Iterable[Path] = ()) -> tuple[pd.DataFrame, MergeStats]:
    """Build the merged registry from a ToolBench data folder (and the docs of query files given apart)."""
    stats = MergeStats()
    rows: list[dict] = []
    keys: set[tuple[str, str, str]] = set()

    def add(items: Iterable[dict], source: str, dedup_within_source: bool) -> None:
        new_keys: set[tuple[str, str, str]] = set()
        for row in items:
            key = (norm_name(row["category"]), row["norm_tool"], row["norm_api"])
            if not row["norm_api"] or key in keys or (dedup_within_source and key in new_keys):
                stats.skipped_existing[source] += 1
                continue
            new_keys.add(key)
            rows.append(row)
            stats.added[source] += 1
        keys.update(new_keys)

    add(iter_toolenv(data_dir / "toolenv", "toolenv", stats), "toolenv", False)
    add(iter_query_docs(query_files(data_dir, extra_query_files), stats), "query_api_list", True)
    add(iter_toolenv(data_dir / "toolenv_2023", "toolenv_2023", stats), "toolenv_2023", True)  # when present
    add(iter_corpus(sorted((data_dir / "retrieval_corpus").glob("*.jsonl")), stats), "retrieval_corpus", True)

    if not rows:
        raise ValueError(f"no API found in {data_dir}: {stats.files_read} tool file(s) read under toolenv/, "
                         f"{len(stats.malformed_files)} malformed, and no query file lists an API")
    df = pd.DataFrame(rows)
    df.insert(0, "api_id", _stable_ids(df))
    return df[COLUMNS].reset_index(drop=True), stats


def _stable_ids(df: pd.DataFrame) -> list[str]:
    """``Category/tool_key/api_name`` ids, made unique with a ``#n`` suffix when needed."""
    base = df["category"] + "/" + df["tool_key"] + "/" + df["norm_api"]
    n = base.groupby(base, sort=False).cumcount()
    return base.where(n == 0, base + "#" + n.astype(str)).tolist()


def api_text(row: dict | pd.Series, max_chars: int = DOC_TEXT_MAX_CHARS) -> str:
    """The text an API is embedded as, whitespace collapsed, capped at ``max_chars``:
    ``"<tool name> (<category>): <tool description> | <API name>: <API description> | parameters: a, b"``."""
    params = [p["name"] for p in json.loads(row["required_parameters"])]
    params += [p["name"] for p in json.loads(row["optional_parameters"])]
    category = str(row["category"]).replace("_", " ")
    parts = [f"{row['tool_name']} ({category}): {row['tool_description']}".rstrip(": "),
             f"{row['api_name']}: {row['api_description']}".rstrip(": ")]
    if params:
        parts.append("parameters: " + ", ".join(params))
    text = re.sub(r"\s+", " ", " | ".join(parts)).strip()
    return text[:max_chars]
