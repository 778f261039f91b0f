"""Features of the learned ranker from a study's stored rankings (:class:`LtrSpec` chooses them)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..config import DEPTH
from .bm25 import tokens
from .fuse import Ranking, as_scores, min_max
from .fusion_specs import check_components, component_table, rankings_by, text_rankings
from .rankings import Retrieved

GROUPS = ("tool", "category", "stub_evidence", "lexical", "agreement")


@dataclass(frozen=True)
class LtrSpec:
    """The components a ranker reads and whether it uses tool-level and category-level features."""

    components: tuple[str, ...]
    tool: bool = True
    category: bool = True
    stub_evidence: bool = True  # per-stub best rank and tool hits (with a stub component)
    lexical: bool = True  # the query's terms in the API's name, tool and category
    agreement: bool = False  # every run's stub rankings (one stub call per run)

    def __post_init__(self) -> None:
        if not check_components(self.components, "ranker"):
            raise ValueError("a ranker needs at least one component")

    @property
    def uses_stubs(self) -> bool:
        """Whether a component is a stub ranking (then the ranker pays PtR's stub call)."""
        return bool(self.stub_components)

    @property
    def stub_components(self) -> list[str]:
        return [c for c in self.components if c.startswith("s.")]

    @property
    def stub_families(self) -> list[str]:
        return [c.split(".", 1)[1] for c in self.stub_components]

    @property
    def methods(self) -> list[str]:
        """The study methods whose rankings the components are."""
        return [component_table()[c][0] for c in self.components]  # (method, per-stub rankings?)

    @property
    def feature_names(self) -> list[str]:
        names = []
        for c in self.components:
            tag = c.replace(".", "_")
            names += [f"rr_{tag}", f"mm_{tag}"]
            if self.tool:
                names += [f"tool_best_{tag}", f"tool_n_{tag}"]
            if self.category:
                names.append(f"cat_tools_{tag}")
        names.append("n_lists")
        names += [f"stubs_{f}" for f in self.stub_families]
        if self.uses_stubs:
            names.append("n_stubs")
        if self.stub_evidence:
            names += [f"stub_{x}_{f}" for f in self.stub_families for x in ("rr", "tool")]
        if self.lexical:
            names += ["lex_api", "lex_tool", "lex_cat"]
        if self.agreement:
            names += [f"runs_{x}_{c.replace('.', '_')}" for c in self.stub_components for x in ("n", "rr")]
        return names

    def describe(self) -> str:
        groups = [g.replace("_", " ") for g in GROUPS if getattr(self, g)]
        return f"{' + '.join(self.components)}; feature groups: {', '.join(groups) or 'none'}"


COMPONENT_WORDS = {"q_dense": "the query's dense ranking", "q_bm25": "the query's BM25 ranking",
                   "s_dense": "the stubs' dense ranking", "s_bm25": "the stubs' BM25 ranking"}


def feature_words(name: str, value: float, n_stubs: int | None = None) -> str | None:
    """One feature's value in words ("found by 3 of 4 stubs' dense rankings"); None for 0 or ``n_stubs``."""
    if not value or name == "n_stubs":
        return None
    kind, _, rest = name.rpartition("_")
    for tag, words in COMPONENT_WORDS.items():  # a component's feature: <kind>_<component>
        if name.endswith("_" + tag):
            kind = name[: -len(tag) - 1]
            return {"rr": f"rank {round(1 / value)} in {words}",
                    "mm": f"normalised score {value:.2f} in {words}",
                    "tool_best": f"another API of its tool scores {value:.2f} in {words}",
                    "tool_n": f"{value:.0f} other API(s) of its tool in {words}",
                    "cat_tools": f"{value:.0f} other tool(s) of its category in {words}",
                    "runs_n": f"in {value:.0f} runs' versions of {words}",
                    "runs_rr": f"mean reciprocal rank {value:.2f} over the runs of {words}"}.get(kind)
    of = f" of {n_stubs}" if n_stubs else ""
    family = rest.upper() if rest == "bm25" else rest
    return {"n_lists": f"in {value:.0f} of the ranker's rankings",
            "stubs": f"found by {value:.0f}{of} stubs ({family})",
            "stub_rr": f"rank {round(1 / value)} in one stub's own {family} ranking",
            "stub_tool": f"{value:.0f}{of} stubs ({family}) find an API of its tool",
            "lex": f"{value:.0%} of its {'name' if rest == 'api' else rest.replace('cat', 'category')}'s "
                   f"terms are in the query"}.get(kind if name != "n_lists" else "n_lists")


@dataclass
class QueryRuns:
    """One query's stored rankings: each component's final one and, per stub family, each stub's own."""

    lists: dict[str, Ranking]
    stubs: dict[str, list[Ranking]] = field(default_factory=dict)
    text: str = ""  # the query's text (lexical features)
    runs: dict[str, list[Ranking]] = field(default_factory=dict)  # per stub component, every run's ranking


def tool_of(api_id: str) -> str:
    """The tool of an API id (``category/tool_key``; the id itself when it has no ``/``)."""
    parts = api_id.split("/", 2)
    return "/".join(parts[:2]) if len(parts) > 1 else api_id


def category_of(api_id: str) -> str:
    """The category of an API id (its first part)."""
    return api_id.split("/", 1)[0]


class Terms:
    """Texts as sets of BM25's analyzer terms (split on ``_``, ``-`` and camel case first), analysed once."""

    def __init__(self) -> None:
        self._terms: dict[str, frozenset[str]] = {}

    def add(self, texts: Iterable[str]) -> None:
        new = list(dict.fromkeys(t for t in texts if t not in self._terms))
        if new:
            plain = [re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", t).replace("_", " ").replace("-", " ")
                     for t in new]
            for t, terms in zip(new, tokens(plain), strict=True):
                self._terms[t] = frozenset(x for x in terms if x)

    def __call__(self, text: str) -> frozenset[str]:
        if text not in self._terms:
            self.add([text])
        return self._terms[text]

    def overlap(self, query: str, name: str) -> float:
        """The share of ``name``'s terms that ``query`` holds (0 for a name without terms)."""
        mine = self(name)
        return len(mine & self(query)) / len(mine) if mine else 0.0


def _parts(api_id: str) -> tuple[str, str, str]:
    """An API id's name, tool and category as texts."""
    parts = api_id.split("/", 2)
    return parts[-1], parts[1] if len(parts) > 1 else api_id, parts[0]


def _ranks(ranking: Ranking, depth: int) -> dict[str, int]:
    """Each API's rank in the ranking's top ``depth`` (a repeated id keeps its first, best place)."""
    return {a: i for i, a in enumerate(dict.fromkeys(x for x, _ in ranking[:depth]), 1)}


def _list_stats(ranking: Ranking, depth: int) -> tuple[dict, dict, Counter, dict, dict]:
    """One component's top ``depth``: ranks, min-max scores, tools' counts and best two, categories' tools."""
    first = as_scores(ranking[:depth])  # a repeated id keeps its first (best) place
    mm = min_max(first)
    tool_top: dict[str, list[tuple[float, str]]] = {}
    cat_tools: dict[str, set[str]] = {}
    for a in first:
        tool_top.setdefault(tool_of(a), []).append((mm[a], a))
        cat_tools.setdefault(category_of(a), set()).add(tool_of(a))
    return (_ranks(ranking, depth), mm, Counter(map(tool_of, first)),
            {t: sorted(v, key=lambda x: -x[0])[:2] for t, v in tool_top.items()}, cat_tools)


def query_features(q: QueryRuns, spec: LtrSpec, depth: int = DEPTH,
                   terms: Terms | None = None) -> tuple[list[str], np.ndarray]:
    """The candidates of one query (in order of first appearance) and their feature rows."""
    stats = [_list_stats(q.lists.get(c, []), depth) for c in spec.components]
    ids = list(dict.fromkeys(a for ranks, *_ in stats for a in ranks))
    stub_ranks = {f: [_ranks(r, depth) for r in q.stubs.get(f, [])] for f in spec.stub_families}
    stub_counts = {f: Counter(a for top in tops for a in top) for f, tops in stub_ranks.items()}
    stub_best = {f: {a: 1.0 / min(top[a] for top in tops if a in top) for a in stub_counts[f]}
                 for f, tops in stub_ranks.items()}  # the best reciprocal rank of each API's stubs
    stub_tools = {f: Counter(t for top in tops for t in set(map(tool_of, top)))
                  for f, tops in stub_ranks.items()}
    run_ranks = ({c: [_ranks(r, depth) for r in q.runs.get(c, [])] for c in spec.stub_components}
                 if spec.agreement else {})
    n_stubs = max((len(v) for v in q.stubs.values()), default=0)
    terms = terms if terms is not None else Terms()
    X = np.zeros((len(ids), len(spec.feature_names)))
    for i, a in enumerate(ids):
        tool, cat = tool_of(a), category_of(a)
        row: list[float] = []
        for ranks, mm, tool_n, tool_top, cat_tools in stats:
            held = a in ranks
            row += [1.0 / ranks[a] if held else 0.0, mm.get(a, 0.0)]
            if spec.tool:
                best = next((v for v, b in tool_top.get(tool, ()) if b != a), 0.0)
                row += [best, float(tool_n[tool] - held)]
            if spec.category:
                tools = cat_tools.get(cat, ())
                row.append(float(len(tools) - (tool in tools)))
        row.append(float(sum(a in ranks for ranks, *_ in stats)))
        row += [float(stub_counts[f][a]) for f in spec.stub_families]
        if spec.uses_stubs:
            row.append(float(n_stubs))
        if spec.stub_evidence:
            for f in spec.stub_families:
                row += [stub_best[f].get(a, 0.0), float(stub_tools[f][tool])]
        if spec.lexical:
            row += [terms.overlap(q.text, part) for part in _parts(a)]
        for c in run_ranks:
            held = [r[a] for r in run_ranks[c] if a in r]
            row += [float(len(held)), sum(1.0 / x for x in held) / max(len(run_ranks[c]), 1)]
        X[i] = row
    return ids, X


@dataclass
class FeatureTable:
    """Every candidate row of a set of queries: its query, API, features and label (1: ground truth)."""

    qkeys: list[str]
    api_ids: list[str]
    X: np.ndarray
    y: np.ndarray
    names: list[str]

    @property
    def queries(self) -> list[str]:
        """The queries in row order, once each."""
        return list(dict.fromkeys(self.qkeys))

    def rows_of(self, keys: Sequence[str]) -> np.ndarray:
        """Row indices of the given queries, in table order."""
        wanted = set(keys)
        return np.array([i for i, k in enumerate(self.qkeys) if k in wanted], dtype=int)

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (``qkey, api_id, label`` + one column per feature)."""
        keys = pd.DataFrame({"qkey": self.qkeys, "api_id": self.api_ids, "label": self.y.astype(int)})
        return keys.join(pd.DataFrame(self.X, columns=self.names))


def feature_table(runs: Mapping[str, QueryRuns], spec: LtrSpec, qrels: Mapping[str, set[str]] | None = None,
                  depth: int = DEPTH) -> FeatureTable:
    """The candidate rows of every query of ``runs`` (in its order); labels from ``qrels`` (0 without)."""
    qkeys, ids, blocks, labels = [], [], [], []
    terms = Terms()
    if spec.lexical:  # every text analysed in one batch
        terms.add([q.text for q in runs.values()])
        terms.add(p for q in runs.values() for r in q.lists.values() for a, _ in r[:depth] for p in _parts(a))
    for key, q in runs.items():
        got, X = query_features(q, spec, depth, terms)
        rel = (qrels or {}).get(key) or set()
        qkeys += [key] * len(got)
        ids += got
        blocks.append(X)
        labels += [1.0 if a in rel else 0.0 for a in got]
    names = spec.feature_names
    X = np.vstack(blocks) if blocks else np.zeros((0, len(names)))
    return FeatureTable(qkeys, ids, X, np.asarray(labels), names)


def runs_from_rankings(retrieved: Mapping[str, Retrieved], keys: Sequence[str], spec: LtrSpec,
                       texts: Mapping[str, str] | None = None,
                       every_run: Mapping[str, Sequence[Retrieved]] | None = None) -> dict[str, QueryRuns]:
    """``{qkey: QueryRuns}`` from one run's ``{method: Retrieved}`` (and every run's, ``every_run``)."""
    lists: dict[str, dict[str, Ranking]] = {}
    stubs: dict[str, dict[str, list[Ranking]]] = {}
    runs: dict[str, list[dict[str, Ranking]]] = {}
    for c, method in zip(spec.components, spec.methods, strict=True):
        got = retrieved[method]
        lists[c] = rankings_by(got.final, ["qkey"])
        if c.startswith("s."):
            stubs[c.split(".", 1)[1]] = text_rankings(got)
            if spec.agreement:
                if not every_run or method not in every_run:
                    raise ValueError(f"the ranker's agreement features read every run's rankings of "
                                     f"{method!r}, and none were given")
                runs[c] = [rankings_by(r.final, ["qkey"]) for r in every_run[method]]
    texts = texts or {}
    return {key: QueryRuns({c: lists[c].get(key, []) for c in spec.components},
                           {f: s.get(key, []) for f, s in stubs.items()}, str(texts.get(key, "")),
                           {c: [r.get(key, []) for r in rs] for c, rs in runs.items()})
            for key in keys}


def study_runs(result, spec: LtrSpec, run: int = 0,
               keys: Sequence[str] | None = None) -> dict[str, QueryRuns]:
    """:func:`runs_from_rankings` of a stored study's run (all queries by default; all runs for agreement)."""
    retrieved = {}
    for method in spec.methods:
        if not (result.rankings["method"] == method).any():
            raise ValueError(f"the study has no rankings of {method!r}, which the ranker reads "
                             f"(it has {', '.join(result.methods)})")
        retrieved[method] = result.retrieved(method, run)
    every = ({m: [result.retrieved(m, r) for r in range(result.n_runs)]
              for m, c in zip(spec.methods, spec.components, strict=True) if c.startswith("s.")}
             if spec.agreement else None)
    texts = dict(zip(result.queries["qkey"], result.queries["query"], strict=True))
    return runs_from_rankings(retrieved, keys if keys is not None else result.queries["qkey"].tolist(), spec,
                              texts, every)
