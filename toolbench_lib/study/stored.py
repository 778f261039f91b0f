"""A study's stored tables (``StudyResult``): their checksummed save and load, and the format-1 converter."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import PLAN_K
from ..data.atomic import atomic_folder, file_sha256, folder_lock
from ..data.queries import DEFAULT_GT, check_gt
from ..retrieval.fusion_specs import rankings_by, text_rankings
from ..retrieval.rankings import Retrieved

FORMAT_VERSION = 2  # the stored layout: rankings and text_rankings (format 1, one hits table, is refused)
RANKINGS_COLUMNS = ["qkey", "method", "run", "rank", "row", "api_id", "score"]
TEXT_RANKINGS_COLUMNS = ["qkey", "method", "run", "text_idx", "rank", "row", "api_id", "score"]
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

    def shown(self) -> pd.DataFrame:
        """The rankings' rows each plan's prompt listed (the study's plan k), best first."""
        k = int(self.provenance.get("settings", {}).get("k", PLAN_K))
        return self.rankings[self.rankings["rank"] <= k].sort_values("rank")

    def stored_rankings_sha256(self) -> str | None:
        """The sha256 of the stored ``rankings`` table while it is the table saved or loaded, else None."""
        stored = self.__dict__.get("_rankings_sha256")
        return stored[1] if stored is not None and stored[0] is self.rankings else None

    def save(self, folder: Path) -> Path:
        """Write every table and their sha256 checksums, then ``provenance.json`` last."""
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
        """The stored study of ``folder``, checked under its shared lock (:class:`StoredStudyError`)."""
        folder = Path(folder)
        try:
            with folder_lock(folder, shared=True):
                sums = json.loads((folder / TABLE_CHECKSUMS).read_bytes())
                provenance = json.loads(checked_bytes(folder, PROVENANCE, sums))
                check_format(provenance, folder)
                tables = {name: pd.read_parquet(io.BytesIO(checked_bytes(folder, f"{name}.parquet", sums)))
                          for name in cls.TABLES}
        except StoredStudyError:
            raise
        except (OSError, ValueError, AttributeError) as exc:  # missing, unreadable or not JSON / parquet
            raise StoredStudyError(f"stored study {folder} is incomplete or damaged ({type(exc).__name__}: "
                                   f"{exc}); delete the folder to run the study again") from None
        result = cls(**tables, provenance=provenance, folder=folder)
        result.__dict__["_rankings_sha256"] = (result.rankings, sums["rankings.parquet"])
        return result

    @property
    def n_runs(self) -> int:
        return int(self.provenance.get("settings", {}).get("runs", 1))

    @property
    def methods(self) -> list[str]:
        """The study's methods in the order of its settings (one that found nothing stays)."""
        listed = self.provenance.get("settings", {}).get("methods")
        return list(listed or dict.fromkeys(self.rankings["method"]))

    @property
    def deterministic(self) -> list[str]:
        """The methods whose retrieval is the same in every run."""
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
        """``method``'s rankings of ``run`` as its retriever returned them."""
        return Retrieved(self._of(self.rankings, method, run).drop(columns="run"),
                         self._of(self.text_rankings, method, run).drop(columns="run"))

    def api_rows(self) -> dict[str, int]:
        """``{api_id: registry row}`` of every API the study's rankings hold."""
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
        keys = np.asarray(final["qkey"], dtype=object)  # (a split by position: no per-group pandas call)
        if not len(keys):
            return {}
        ids = np.asarray(final["api_id"], dtype=object).tolist()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
        return {keys[s]: ids[s:e] for s, e in zip(starts, [*starts[1:], len(keys)], strict=True)}

    def scored_ranking(self, method: str, run: int = 0) -> dict[str, dict[str, float]]:
        """``{qkey: {api_id: cosine}}`` of the final ranking (the scores the retriever ranked by)."""
        return {q: dict(r) for q, r in rankings_by(self._of(self.rankings, method, run), ["qkey"]).items()}

    def scored_text_rankings(self, method: str, run: int = 0) -> dict[str, list[dict[str, float]]]:
        """``{qkey: [{api_id: cosine}, ...]}``: every searched text's own ranking, in text order."""
        return {q: [dict(r) for r in rs] for q, rs in text_rankings(self.retrieved(method, run)).items()}

    def qrels(self, gt: str = DEFAULT_GT) -> dict[str, set[str]]:
        """``{qkey: {api_id, ...}}`` under one ground-truth definition."""
        check_gt(gt)
        return {key: set(ids) for key, ids in zip(self.queries["qkey"], self.queries[gt], strict=True)}


def checked_bytes(folder: Path, name: str, sums: dict) -> bytes:
    """The bytes of a stored study's file ``name`` when they match ``sums``, else a StoredStudyError."""
    data = (Path(folder) / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != sums.get(name):
        raise StoredStudyError(f"stored study {folder}: {name} does not match its checksum (or "
                               f"{TABLE_CHECKSUMS} lists none); delete the folder to run the study again")
    return data


def check_format(provenance: dict, folder: Path) -> None:
    """A :class:`StoredStudyError` when a stored study is not of this code's format (1 when unnamed)."""
    version = provenance.get("format_version", 1)
    if isinstance(version, int) and not isinstance(version, bool) and version == FORMAT_VERSION:
        return
    why = (f"newer than this toolkit reads ({FORMAT_VERSION}); update toolbench_lib to read it"
           if isinstance(version, int) and version > FORMAT_VERSION
           else f"not the one this toolkit reads ({FORMAT_VERSION}); run the study again")
    raise StoredStudyError(f"stored study {folder} has format version {version!r}, {why}")
