"""A study's precomputed explorer views in its ``views/`` folder: fused and learned rankings, features, recall
and hits at k = 1..20, found ground truth, each with a sha256 sidecar; stale views are computed again. The
learned rankers (``ltr``, ``ltr-nollm``) show, per run, their own cross-fit's ranking, the ones the report
averages, with the features behind their top APIs."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import DEPTH, SEED
from ..data.atomic import atomic_folder, folder_lock, read_verified, write_checksum
from ..data.queries import GT_DEFINITIONS
from ..data.tables import code_closure, code_hash
from ..eval.evaluation import evaluate, found_apis
from ..retrieval.fused import BASELINES, fused_runs, methods_over
from ..retrieval.fusion_specs import component_methods
from ..retrieval.ltr import NAMED, TOP_EXPLAINED, learned_frame
from ..study.experiment import stored_study_dir
from ..study.stored import RANKINGS_COLUMNS, TABLE_CHECKSUMS, StudyResult

VIEWS = "views"
MANIFEST = "manifest.json"
VERSION = 5  # 5: recall.parquet sorted by method, run, gt, k, qkey
MAX_K = 20
ROWS_K = np.arange(1, MAX_K + 1)[:, None]  # k of each row of a method's recall block
FILES = ("fused.parquet", "recall.parquet", "found.parquet", "learned.parquet")
EXPLORED = ("ltr", "ltr-nollm")  # ltr-4runs, every run's stubs at once, is measured by analysis.ltr_study
FEATURE_COLUMNS = ["method", "run", "qkey", "rank", "api_id", "score", "feature", "value"]
# the run names notebooks 03 and 12 store the pair as
DESIGN, VALIDATION = "-retrievers", "-validation-retrievers"
G2_INSTRUCTION = "-g2-instruction-retrievers"

log = logging.getLogger(__name__)


class ViewsFolderError(RuntimeError):
    """Where a study's ``views/`` folder belongs there is something else (a file): one line naming it."""


def check_views_place(folder: Path) -> None:
    """:class:`ViewsFolderError` when ``<folder>/views`` exists but is not a folder."""
    target = Path(folder) / VIEWS
    if (target.exists() or target.is_symlink()) and not target.is_dir():
        raise ViewsFolderError(f"explorer views: {target} is a file, not the views folder; remove it and "
                               "open the explorer again (the views are a cache, computed again from the "
                               "stored study)")


def study_fingerprint(folder: Path) -> str:
    """sha256 of the study's ``checksums.json`` and of its partner's (:func:`partner_folder`)."""
    h = hashlib.sha256((Path(folder) / TABLE_CHECKSUMS).read_bytes())
    partner = partner_folder(folder)
    if partner is not None:
        h.update((partner / TABLE_CHECKSUMS).read_bytes())
    return h.hexdigest()


def fused_methods(result: StudyResult) -> list[str]:
    """The fused methods a stored study can score from its own rankings (no setup, no new search)."""
    return [n for n in methods_over(result.methods, with_setup=False) if n not in BASELINES]


def fused_hits(result: StudyResult, depth: int = MAX_K) -> pd.DataFrame:
    """The final rankings of :func:`fused_methods` for every run, as ``rankings`` rows (each API's ``row`` the
    one the study's rankings give it)."""
    names = fused_methods(result)
    api_rows = result.api_rows()
    rows = []
    for run in range(result.n_runs):
        try:
            runs = fused_runs(result, names, depth, run)
        except (KeyError, ValueError) as exc:  # a run without the components of a method
            log.warning("fused methods of run %d not computed: %s", run, exc)
            continue
        rows += [(qkey, method, run, rank, api_rows[api], api, float(score))
                 for method, scored in runs.items() for qkey, ranking in scored.items()
                 for rank, (api, score) in enumerate(ranking.items(), start=1)]
    return pd.DataFrame(rows, columns=RANKINGS_COLUMNS).astype(dict.fromkeys(("run", "rank", "row"), "int64"))


def partner_folder(folder: Path | None) -> Path | None:
    """The other study of a retriever study's pair (``<run>-retrievers`` and ``<run>-validation-retrievers``),
    where it is stored; else None."""
    run = Path(folder).parents[1].name if folder is not None else ""
    mine = next((s for s in (VALIDATION, DESIGN) if run.endswith(s)), None)  # VALIDATION ends with DESIGN
    if mine is None:
        return None
    other = run.removesuffix(mine) + (DESIGN if mine == VALIDATION else VALIDATION)
    try:
        return stored_study_dir(other, outputs_dir=Path(folder).parents[2] / other)
    except (FileNotFoundError, ValueError, OSError):
        return None


def learned_methods(result) -> list[str]:
    """The learned rankers whose components the study holds; none in the G2_instruction study (notebook 12's,
    with no partner: the report fits the learned rankers on the retriever and validation studies)."""
    if result.folder is not None and Path(result.folder).parent.parent.name.endswith(G2_INSTRUCTION):
        return []
    return [n for n, spec in NAMED.items()
            if n in EXPLORED and set(component_methods(spec.components)) <= set(result.methods)]


def _pair(result) -> tuple:
    """``(design, validation)``: the study and its partner in the order :func:`learned_frame` takes them."""
    folder = partner_folder(result.folder)
    if folder is None:
        return result, None
    partner = StudyResult.load(folder)
    if set(learned_methods(partner)) != set(learned_methods(result)):
        return result, None
    is_validation = Path(result.folder).parents[1].name.endswith(VALIDATION)
    return (partner, result) if is_validation else (result, partner)


def learned_views(result, depth: int = DEPTH) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rankings, features)``: each learned ranker's ranking (``rankings`` rows, its out-of-fold score) in
    every run, and the features of each query's top :data:`TOP_EXPLAINED` APIs (:data:`FEATURE_COLUMNS`)."""
    hits, features = [], []
    methods = learned_methods(result)
    design, validation = _pair(result) if methods else (result, None)
    keys, api_rows = set(result.queries["qkey"]), result.api_rows()
    for name in methods:
        same_each_run = set(NAMED[name].methods) <= set(design.deterministic)  # RtP's rankings only
        for run in range(result.n_runs):
            try:  # the design study's run (the validation study has one); cached beside it by notebook 12
                frame = learned_frame(design, validation, NAMED[name], 0 if same_each_run else run, SEED,
                                      "candidates", depth)
            except (KeyError, ValueError) as exc:  # too few queries to cross-fit, a run without stubs
                log.warning("learned ranker %s not computed: %s", name, exc)
                break
            frame = frame[frame["qkey"].isin(keys)]
            row = frame["api_id"].map(api_rows).astype("int64")
            hits.append(frame.assign(method=name, run=run, row=row)[RANKINGS_COLUMNS])
            long = frame[frame["rank"] <= TOP_EXPLAINED].melt(id_vars=["qkey", "rank", "api_id", "score"],
                                                              var_name="feature", value_name="value")
            features.append(long.assign(method=name, run=run)[FEATURE_COLUMNS])
    hits_frame = pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(columns=RANKINGS_COLUMNS)
    features_frame = (pd.concat(features, ignore_index=True) if features else
                      pd.DataFrame(columns=FEATURE_COLUMNS))
    return hits_frame, features_frame.astype({"value": float, "score": float})


@dataclass
class StudyViews:
    """The precomputed views of one study, indexed for the explorer's look-ups."""

    methods: list[str]
    fused: pd.DataFrame | None  # None once :func:`with_fused` has added it to the study
    recall: pd.DataFrame
    found: pd.DataFrame
    learned: pd.DataFrame = field(default_factory=pd.DataFrame)
    _recall: dict = field(default_factory=dict, repr=False)  # (method, run, gt) -> (qkeys, recall, hits)
    _found: dict = field(default_factory=dict, repr=False)
    _learned: dict = field(default_factory=dict, repr=False)
    learned_methods: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.recall, self.found, self.learned = (compact(t) for t in (self.recall, self.found, self.learned))
        r = self.recall  # sorted by method, run, gt, k, qkey (as written): each block a slice, k-major
        block = [r[c].factorize()[0] for c in ("method", "run", "gt")]
        changed = np.any([c[1:] != c[:-1] for c in block], axis=0) if len(r) else np.zeros(0, bool)
        bounds = (np.flatnonzero(changed) + 1).tolist()
        values, hits, ks = r["recall"].to_numpy(), r["hits"].to_numpy(), r["k"].to_numpy()
        for start, end in zip([0, *bounds], [*bounds, len(r)] if len(r) else [], strict=False):
            n = (end - start) // MAX_K
            if n * MAX_K != end - start or (ks[start:end].reshape(MAX_K, n) != ROWS_K).any():
                raise ValueError(f"explorer views: recall rows of {r['method'].iat[start]} are not k-major")
            key = (r["method"].iat[start], int(r["run"].iat[start]), r["gt"].iat[start])
            self._recall[key] = (np.asarray(r["qkey"].iloc[start:start + n], dtype=object),
                                 values[start:end].reshape(MAX_K, n), hits[start:end].reshape(MAX_K, n))
        for (method, run, gt), g in self.found.groupby(["method", "run", "gt"], sort=False):
            self._found[(method, int(run), gt)] = g[["qkey", "api_id", "rank"]].reset_index(drop=True)
        if not self.learned.empty:  # indexed once: a look-up per change never scans the whole table
            self._learned = self.learned.groupby(["method", "run", "qkey", "rank"], sort=False).indices
        self.learned_methods = {key[0] for key in self._learned}
        self.recall = self.found = pd.DataFrame()  # indexed above: the tables themselves are not kept

    def scores(self, method: str, run: int, gt: str, k: int, order: pd.Series) -> pd.DataFrame:
        """``recall, hits`` at ``k`` of one method and run, in the order of the query keys ``order``."""
        keys, recall, hits = self._recall[(method, run, gt)]
        pos = pd.Series(np.arange(len(keys)), index=keys).reindex(order.to_numpy()).to_numpy()
        ok = ~np.isnan(pos)
        idx = np.where(ok, pos, 0).astype(int)
        return pd.DataFrame({"recall": np.where(ok, recall[k - 1][idx], 0.0),
                             "hits": np.where(ok, hits[k - 1][idx], 0).astype(int)})

    def features(self, method: str, run: int, qkey: str, rank: int = 1) -> pd.DataFrame:
        """``api_id, score, feature, value`` behind a learned method's API at ``rank`` for one query."""
        rows = self._learned.get((method, run, qkey, rank))
        if rows is None:
            return pd.DataFrame({c: [] for c in ("api_id", "score", "feature", "value")})
        return self.learned.iloc[rows][["api_id", "score", "feature", "value"]].reset_index(drop=True)

    def found_at(self, method: str, run: int, gt: str, k: int) -> pd.DataFrame:
        """``qkey, api_id, rank``: the ground-truth APIs the method's top ``k`` holds."""
        f = self._found.get((method, run, gt))
        if f is None:
            return pd.DataFrame({"qkey": [], "api_id": [], "rank": []})
        return f[f["rank"].to_numpy() <= k]


def compute_views(result: StudyResult, depth: int = MAX_K) -> tuple[pd.DataFrame, ...]:
    """``(fused, recall, found, learned)`` of a study (see the module docstring)."""
    learned_hits, learned = learned_views(result, depth)
    fused = pd.concat([fused_hits(result, depth), learned_hits], ignore_index=True)
    settings = {**result.provenance.get("settings", {}),
                "methods": [*result.methods, *dict.fromkeys(fused["method"])]}
    both = replace(result, rankings=pd.concat([result.rankings, fused], ignore_index=True), folder=None,
                   provenance={**result.provenance, "settings": settings})
    ev = evaluate(both)
    recall_parts = [ev.scores(k, gt, ("recall",)).assign(k=k, gt=gt)[["qkey", "k", "method", "run", "gt",
                                                                       "recall", "hits"]]
                    for gt in GT_DEFINITIONS for k in range(1, MAX_K + 1)]
    recall = pd.concat(recall_parts, ignore_index=True).sort_values(  # the order StudyViews slices by
        ["method", "run", "gt", "k", "qkey"], ignore_index=True)
    return fused, recall, found_apis(both, ev).reset_index(drop=True), learned


def write_views(folder: Path, result: StudyResult | None = None) -> Path:
    """Compute and write a study's ``views/`` folder atomically (files, their sidecars, the manifest last)."""
    folder = Path(folder)
    result = result if result is not None else StudyResult.load(folder)
    frames = compute_views(result)
    target = folder / VIEWS
    with atomic_folder(target, last=(MANIFEST, MANIFEST + ".sha256")) as out:
        for name, frame in zip(FILES, frames, strict=True):
            frame.to_parquet(out.path(name), index=False)
            write_checksum(out.path(name))
        manifest = {"version": VERSION, "study": study_fingerprint(folder), "code": views_code(),
                    "max_k": MAX_K, "methods": [*result.methods, *dict.fromkeys(frames[0]["method"])],
                    "files": list(FILES)}
        out.path(MANIFEST).write_text(json.dumps(manifest, indent=2))
        write_checksum(out.path(MANIFEST))
    return target


def views_code() -> str:
    """The hash views are keyed by: this module's code and every package module it imports."""
    return code_hash(*code_closure("explorer/views.py"))


def view_problem(folder: Path) -> str | None:
    """None when ``views/`` is present, complete and computed from this study's tables; else why not."""
    target = Path(folder) / VIEWS
    data = read_verified(target / MANIFEST)
    if data is None:
        return "no views (or a damaged manifest)"
    manifest = json.loads(data)
    if manifest.get("version") != VERSION:
        return f"views of version {manifest.get('version')}, not {VERSION}"
    if manifest.get("study") != study_fingerprint(folder):
        return "views of another study (stale)"
    if manifest.get("code") != views_code():
        return "views computed by other code (stale)"
    return None


def load_views(folder: Path, say: bool = True) -> StudyViews | None:
    """The verified views of a study folder; None when missing, stale (logged, if ``say``) or damaged."""
    target = Path(folder) / VIEWS
    if not target.exists():
        return None
    with folder_lock(target, shared=True):
        problem = view_problem(folder)
        if problem:
            if say:
                log.warning("explorer views of %s not used: %s", folder, problem)
            return None
        manifest = json.loads(read_verified(target / MANIFEST))
        frames = []
        for name in FILES:
            data = read_verified(target / name)
            if data is None:
                log.warning("explorer views of %s not used: %s does not match its checksum", folder, name)
                return None
            frames.append(read_compact(data))
    return StudyViews(list(manifest["methods"]), *frames)


def study_views(folder: Path, result: StudyResult | None = None, say: bool = True) -> StudyViews:
    """The views of a study folder, computed and written first when missing, stale (logged, if ``say``) or
    damaged (:class:`ViewsFolderError` when a file stands where their folder belongs)."""
    check_views_place(folder)
    views = load_views(folder, say)
    if views is None:
        write_views(folder, result)
        views = load_views(folder)
        if views is None:
            raise RuntimeError(f"explorer views of {folder} could not be read back after writing them")
    return views


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` as the explorer holds it: repeated strings (methods, query keys, API ids) as categories and
    integers in the smallest type that holds them; values and their order unchanged."""
    out = {}
    for name, column in table.items():
        if column.dtype.kind in "iu" and len(column):
            column = pd.to_numeric(column, downcast="integer" if column.min() < 0 else "unsigned")
        elif isinstance(column.dtype, pd.CategoricalDtype):  # a file's dictionary order: sorted, as below
            column = column.cat.set_categories(sorted(column.cat.categories))
        elif pd.api.types.is_string_dtype(column.dtype) and column.nunique() < len(column) // 2:
            column = column.astype("category")
        out[name] = column
    return pd.DataFrame(out, index=table.index)


def read_compact(data: bytes) -> pd.DataFrame:
    """A parquet file as the explorer holds it: its strings read as dictionaries (categories, never a string
    per row), then :func:`compact`."""
    strings = [f.name for f in pq.read_schema(pa.BufferReader(data))
               if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    return compact(pq.read_table(pa.BufferReader(data), read_dictionary=strings).to_pandas())


def with_fused(result: StudyResult, views: StudyViews) -> StudyResult:
    """The study with the views' fused rankings added (and named in its methods), its rankings
    :func:`compact`; the views let their copy go."""
    if views.fused is None:
        raise ValueError("these views' fused rankings were already added to a study: read the views again")
    rankings, provenance = result.rankings, result.provenance
    fused, views.fused = views.fused, None
    if not fused.empty:
        rankings = pd.concat([rankings, fused], ignore_index=True)
        settings = {**provenance.get("settings", {}), "methods": list(views.methods)}
        provenance = {**provenance, "settings": settings}
    return replace(result, rankings=compact(rankings), text_rankings=compact(result.text_rankings),
                   provenance=provenance, folder=None)

