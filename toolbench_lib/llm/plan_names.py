"""Which API a plan step names, from the shown lines ``[i] Tool / API (Category): description params: a``,
strictly (the original rule) or tolerantly; names are compared by ``norm_name``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..data.normalize import norm_name

RULES = ("pair", "api", "index", "description", "tool", "registry")
_INDEX_REF = re.compile(r"^\s*\[(\d{1,9})\]")
_BARE_INDEX = re.compile(r"^\s*#?(\d{1,9})\s*$")
_PAREN = re.compile(r"\(([^()]*)\)")
_PARAMS_TAIL = re.compile(r"\s+params:.*$", re.IGNORECASE | re.DOTALL)
_TRAILING_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_SEPARATORS = re.compile(r"\s*/\s*")
MIN_SHORT_TOOL = 3
MIN_DESCRIPTION = 16
MAX_FIELD_CHARS = 1000  # a longer field is cut: names are short, and matching stays linear in the field
MAX_SPLITS = 8  # ``Tool / API`` readings tried per field


@dataclass(frozen=True)
class Resolution:
    """A step's ``api_id`` (None when unresolved), the rule that found it, whether it was shown."""

    api_id: str | None
    rule: str | None = None
    shown: bool = False


@dataclass
class RegistryNames:
    """Normalised name lookups over the whole registry: ``(tool, api)`` pairs and their concatenation."""

    pairs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    joined: dict[str, list[str]] = field(default_factory=dict)
    triples: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    categories: frozenset[str] = frozenset()

    @classmethod
    def from_frame(cls, registry) -> RegistryNames:
        """Build from a registry DataFrame (``api_id, tool_name, api_name, category``)."""
        out = cls(categories=frozenset(norm_name(c) for c in registry["category"].unique()))
        cols = (registry[c] for c in ("api_id", "category", "tool_name", "api_name"))
        for api_id, cat, tool, api in zip(*cols, strict=True):
            nt, na = norm_name(tool), norm_name(api)
            out.triples.setdefault((norm_name(cat), nt, na), []).append(api_id)
            out.pairs.setdefault((nt, na), []).append(api_id)
            out.joined.setdefault(nt + na, []).append(api_id)
        return out

    def lookup(self, readings: Iterable[tuple[str, str]], joined: Iterable[str]) -> str | None:
        """The one registry id named by a ``(tool, api)`` reading or a joined ``toolapi`` string."""
        tables = ((self.pairs, readings), (self.joined, joined))
        found = (_unique(table.get(key, [])) for table, keys in tables for key in keys)
        return next((f for f in found if f), None)


_LAST_NAMES: list = [None, None]  # the last registry frame and its names: a process uses one at a time


def registry_names(registry) -> RegistryNames:
    """:meth:`RegistryNames.from_frame` of a registry DataFrame, built once per frame object."""
    if _LAST_NAMES[0] is not registry:
        _LAST_NAMES[:] = [registry, RegistryNames.from_frame(registry)]
    return _LAST_NAMES[1]


_DOC_LINE = re.compile(r"^\[(\d+)\] (.+?) \(([^()]*)\): ?(.*)$")


def parse_api_docs(text: str, registry: RegistryNames | None = None, params: bool = False) -> list[dict]:
    """The APIs of a rendered ``<apis>`` list as dicts; ``api_id`` is the registry's when one ``Tool / API``
    split names one API, else ``shown:<i>``; ``params=True`` keeps a description's ``params: ...`` tail."""
    out = []
    for line in (text or "").splitlines():
        m = _DOC_LINE.match(line.strip())
        if not m:
            continue
        number, head, category, desc = m.groups()
        desc = desc if params else _PARAMS_TAIL.sub("", desc)
        splits = [(head[: x.start()], head[x.end() :]) for x in re.finditer(" / ", head)]
        tool, api, api_id = (*splits[0], None) if splits else ("", head, None)
        if registry is not None:
            cat = norm_name(category)
            for t, a in splits:
                if one := _unique(registry.triples.get((cat, norm_name(t), norm_name(a)), [])):
                    tool, api, api_id = t, a, one
                    break
        out.append({"api_id": api_id or f"shown:{number}", "tool_name": tool, "api_name": api,
                    "category": category, "api_description": desc})
    return out


def _strip_ref(name: object) -> str:
    """A name without a leading ``[n]`` reference."""
    return _INDEX_REF.sub("", str(name or "")).strip()


def clean_name(text: object, categories: Iterable[str] = ()) -> str:
    """A step field without a leading ``[n]``, a ``params: ...`` tail, and the first ``(Category)`` of
    ``categories`` that ends the text or precedes ``:`` (with everything after it)."""
    s = _PARAMS_TAIL.sub("", " ".join(_strip_ref(str(text or "")[:MAX_FIELD_CHARS]).split()))
    cats = {norm_name(c) for c in categories if norm_name(c)}
    for m in _PAREN.finditer(s):
        rest = s[m.end():].strip()
        if norm_name(m.group(1)) in cats and (not rest or rest.startswith(":")):
            return s[: m.start()].strip()
    return s.strip()


def _readings(value: str) -> list[tuple[str, str]]:
    """``(tool, api)`` splits of a ``Tool / API`` string at each slash (normalised)."""
    splits = itertools.islice(_SEPARATORS.finditer(value), MAX_SPLITS)
    return [(norm_name(value[: m.start()]), norm_name(value[m.end() :])) for m in splits
            if value[: m.start()].strip()]


def _api_forms(name: object) -> set[str]:
    """Normalised forms of a listed API name: as is, and without trailing ``(...)`` groups."""
    text = base = str(name or "").strip()
    while (m := _TRAILING_PAREN.search(base)) and m.start() > 0:
        base = base[: m.start()]
    return {f for f in (norm_name(text), norm_name(base)) if f}


def _tool_matches(cand: str, tool: str) -> bool:
    """A normalised tool candidate names ``tool`` (normalised): equal, or a prefix of >= 3 characters."""
    return bool(cand) and (cand == tool or (len(cand) >= MIN_SHORT_TOOL and tool.startswith(cand)))


def _index_ref(step: dict, n_retrieved: int) -> int | None:
    """0-based index named by a ``[3]``-style (or bare ``3``) reference in the step, if in range."""
    for key in ("api_name", "tool_name"):
        value = str(step.get(key) or "")
        m = _INDEX_REF.match(value) or _BARE_INDEX.match(value)
        if m and 1 <= int(m.group(1)) <= n_retrieved:
            return int(m.group(1)) - 1
    return None


def resolve_step_strict(step: dict, retrieved: list[dict]) -> str | None:
    """The api_id of ``retrieved`` a step names: (tool, API) pair, unique API name or ``[n]``; else None."""
    tool, api = norm_name(_strip_ref(step.get("tool_name"))), norm_name(_strip_ref(step.get("api_name")))
    keys = [(norm_name(r.get("tool_name")), norm_name(r.get("api_name"))) for r in retrieved]
    if api:
        exact = [r["api_id"] for r, key in zip(retrieved, keys, strict=True) if key == (tool, api)]
        same_api = [r["api_id"] for r, key in zip(retrieved, keys, strict=True) if key[1] == api]
        if exact or len(same_api) == 1:
            return (exact or same_api)[0]
    idx = _index_ref(step, len(retrieved))
    return retrieved[idx]["api_id"] if idx is not None else None


def _unique(ids: list[str]) -> str | None:
    """The id when ``ids`` holds exactly one distinct id."""
    return ids[0] if ids and len(set(ids)) == 1 else None


def _by_description(texts: list[str], retrieved: list[dict]) -> str | None:
    """The one shown API whose description starts with (or is the start of) a field's text."""
    descs = [(r["api_id"], norm_name(r.get("api_description"))) for r in retrieved]
    return _unique([i for t in texts if len(t) >= MIN_DESCRIPTION for i, d in descs
                    if len(d) >= MIN_DESCRIPTION and (d.startswith(t) or t.startswith(d))])


def resolve_step_detail(step: dict, retrieved: list[dict],
                        registry: RegistryNames | None = None) -> Resolution:
    """A step's tolerant resolution: the first of the rules ``pair`` (best-ranked), ``api``, ``index``,
    ``description``, ``tool`` naming exactly one shown API, else ``registry`` (one registry API)."""
    cats = {str(r.get("category") or "") for r in retrieved} | set(registry.categories if registry else ())
    raw_tool, raw_api = clean_name(step.get("tool_name"), cats), clean_name(step.get("api_name"), cats)
    fields = [f for f in (raw_api, raw_tool) if f]
    normed = [norm_name(f) for f in fields]
    tool_cands = [norm_name(raw_tool)] + [t for f in fields for t, _ in _readings(f)]
    keys = [(norm_name(r.get("tool_name")), _api_forms(r.get("api_name"))) for r in retrieved]
    api_field = norm_name(raw_api)
    pair = [r["api_id"] for r, (t, forms) in zip(retrieved, keys, strict=True) if forms and (
        any(n == t + a for n in normed for a in forms)
        or any(_tool_matches(tc, t) and a2 in forms for f in fields for tc, a2 in _readings(f))
        or (api_field in forms and any(_tool_matches(tc, t) for tc in tool_cands)))]
    api_cands = set(normed) | {a for f in fields for _, a in _readings(f)}
    api_only = [r["api_id"] for r, (_, forms) in zip(retrieved, keys, strict=True) if forms & api_cands]
    idx = _index_ref(step, len(retrieved))
    tool_only = [r["api_id"] for r, (t, _) in zip(retrieved, keys, strict=True)
                 if any(_tool_matches(n, t) for n in normed)]
    candidates = (("pair", pair[0] if pair else None), ("api", _unique(api_only)),
                  ("index", retrieved[idx]["api_id"] if idx is not None else None),
                  ("description", _by_description(normed, retrieved)), ("tool", _unique(tool_only)))
    for rule, api_id in candidates:
        if api_id is not None:
            return Resolution(api_id, rule, True)
    if registry is not None and fields:
        readings = [(norm_name(raw_tool), norm_name(raw_api))] + [x for f in fields for x in _readings(f)]
        hit = registry.lookup([r for r in readings if r[0] and r[1]], normed)
        if hit is not None:
            return Resolution(hit, "registry", hit in {r["api_id"] for r in retrieved})
    return Resolution(None)


def resolve_plan_apis(plan, retrieved: list[dict], registry: RegistryNames | None = None,
                      strict: bool = False) -> list[str | None]:
    """The api_id (or None) each step of ``plan`` (a Plan or steps) names; the original rule if ``strict``."""
    if strict:
        return [resolve_step_strict(s, retrieved) for s in getattr(plan, "steps", plan)]
    return [d.api_id for d in resolve_plan_detail(plan, retrieved, registry)]


def resolve_plan_detail(plan, retrieved: list[dict],
                        registry: RegistryNames | None = None) -> list[Resolution]:
    """The tolerant :class:`Resolution` of every step."""
    return [resolve_step_detail(s, retrieved, registry) for s in getattr(plan, "steps", plan)]


def fidelity(named_ids: Sequence[str | None], retrieved_ids) -> float | None:
    """Share of named APIs (one per step) that are in the retrieved set; None when none were named."""
    if not named_ids:
        return None
    pool = set(retrieved_ids)
    return sum(1 for x in named_ids if x is not None and x in pool) / len(named_ids)
