"""One configuration shared by every notebook: its study, stored once, and a run folder recording its
parameters (``run.json``), which other parameters leave for a derived run (``outputs/<run_name>-k10/``)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

from .. import config
from ..data.atomic import compute_once, file_sha256, save_text
from ..data.dataset import load_dataset, sources_fingerprint
from ..data.markdown import md_table
from ..data.paths import OUTPUTS_DIR, find_data_dir
from ..data.queries import resolve_subset
from ..data.tables import code_hash
from ..llm.factory import DEFAULT_CASSETTE, default_workers, make_backend
from ..llm.prompts import JUDGE_PROMPT, PLAN_PROMPT, STUB_PROMPT
from ..retrieval.embedding import DEFAULT_BACKEND, DEFAULT_MODEL, load_embedder, resolve_backend
from ..retrieval.retrievers import ARCHITECTURES, method_name
from ..retrieval.setup import prepare
from .lazy_setup import LazySetup, setup_model
from .result import METHODS, StudySettings, run_study
from .stored import StoredStudyError, StudyResult
from .stub_recording import recorded_limit
from .validation import validate_config

log = logging.getLogger(__name__)

SMOKE = {"max_apis": 2500, "limit": 15, "runs": 2, "plan_limit": 5, "backend": "rules",
         "scale_sizes": [1500, 2000, 2500], "scale_seeds": 2}
STUDY_FIELDS = ("subsets", "backend", "cassette", "llm_model", "plan_k", "depth", "runs", "temperature",
                "run_temperature", "plan_limit", "max_apis", "limit", "seed")
RUN_RECORD = "run.json"
STUDY_CODE = ("config.py", "data", "llm", "retrieval", "study/result.py", "study/stored.py")  # in the key
PLACE_FIELDS = ("run_name", "outputs_dir", "base_run")


class RunConflict(RuntimeError):
    """A run folder was made with other parameters than the ones given."""


def _plain(value):
    """A JSON round trip, so that tuples and lists (or ints and floats) compare as stored."""
    return json.loads(json.dumps(value, default=str))


@functools.cache
def _file_sha256(path: str) -> str:
    """sha256 of a file (a missing one: ``missing``), read once per process."""
    try:
        return file_sha256(path)
    except OSError:
        return "missing"


def _slug(value) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return re.sub(r"[^A-Za-z0-9.,_]+", "_", text).strip("_") or "none"


@dataclass
class ExperimentConfig:
    """Everything a study run and its analyses depend on (recorded with every output)."""

    run_name: str = "default"
    data_dir: str | None = None
    subsets: list[str] = field(default_factory=lambda: list(config.SUBSETS))
    backend: str = "replay"
    cassette: str | None = None
    llm_model: str | None = None
    embedder: str | None = config.EMBEDDER  # `make run`'s: the replay cassette was recorded with it
    k: int = config.K
    plan_k: int = config.PLAN_K
    depth: int = config.DEPTH
    runs: int = config.RUNS
    # The first runs that get plans and verdicts (None: every run); the cassette holds plans of run 0 only.
    plan_runs: int | None = config.PLAN_RUNS
    temperature: float = config.TEMPERATURE
    run_temperature: float | None = config.RUN_TEMPERATURE
    plan_limit: int | None = config.PLAN_LIMIT
    max_apis: int | None = None
    limit: int | None = None
    seed: int = config.SEED
    scale_sizes: list[int | None] = field(default_factory=lambda: list(config.SCALE_SIZES))
    scale_seeds: int = config.SCALE_SEEDS
    # Retriever families of the retriever study (notebook 12); the main study is dense, as the paper's.
    retrievers: list[str] = field(default_factory=lambda: list(config.STUDY_FAMILIES))
    # Methods of the study (None: RtP and PtR); set by the retriever study, part of its study key.
    study_methods: list[str] | None = None
    smoke: bool = False
    outputs_dir: str | None = None
    # A notebook's own parameters (e.g. notebook 04's ``gt``): recorded with the run, not in the study key.
    extra: dict = field(default_factory=dict)
    # Set when the outputs were redirected from a run made with other parameters.
    base_run: str | None = None

    def __post_init__(self) -> None:
        validate_config(self)  # a bad field is a UsageError naming it, the value and what is allowed

    @classmethod
    def build(cls, **params) -> ExperimentConfig:
        """The configuration of these parameters, checked (unknown names go to ``extra``)."""
        known = {k: v for k, v in params.items() if k in cls.__dataclass_fields__}
        extra = {k: v for k, v in params.items() if k not in cls.__dataclass_fields__}
        cfg = cls(**known)
        cfg.extra = {**cfg.extra, **extra}
        if cfg.smoke:
            for key, value in SMOKE.items():
                setattr(cfg, key, value)
        return cfg

    @classmethod
    def from_params(cls, echo=print, **params) -> ExperimentConfig:
        """Build from notebook parameters, redirected to a derived run when the run folder differs."""
        return cls.build(**params).redirected(echo)

    def data_fingerprint(self) -> str:
        """Fingerprint of the ToolBench sources (their paths and contents; read once)."""
        if getattr(self, "_fingerprint", None) is None:
            self._fingerprint = sources_fingerprint(find_data_dir(self.data_dir))
        return self._fingerprint

    def study_fields(self) -> dict:
        """Everything the study tables depend on, as hashed by :meth:`study_key`."""
        fields = {k: getattr(self, k) for k in STUDY_FIELDS}
        if self.study_methods is not None:  # the default keeps the keys of studies stored before
            fields["methods"] = list(self.study_methods)
        if self.planned_runs() < self.runs and self.plan_limit != 0:  # keys of studies planning every run
            fields["plan_runs"] = self.planned_runs()  # stay as they were
        embedder = self.embedder or os.environ.get("TOOLBENCH_EMBEDDER") or DEFAULT_MODEL
        fields.update(embedder=embedder, data_fingerprint=self.data_fingerprint(),
                      prompt_versions=[STUB_PROMPT.version, PLAN_PROMPT.version, JUDGE_PROMPT.version])
        if resolve_backend() != DEFAULT_BACKEND:  # the default keeps the keys of studies stored before
            fields["embedder_backend"] = resolve_backend()
        fields["code"] = code_hash(*STUDY_CODE)
        if self.backend == "replay":
            fields["cassette_sha256"] = _file_sha256(str(self.cassette or DEFAULT_CASSETTE))
        return _plain(fields)

    def planned_runs(self) -> int:
        """How many runs (the first ones) get plans."""
        return self.runs if self.plan_runs is None else min(self.plan_runs, self.runs)

    def study_key(self) -> str:
        """Hash of the fields the study tables depend on (analysis-only parameters such as k left out)."""
        blob = json.dumps(self.study_fields(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def study_dir(self) -> Path:
        """This run's folder of the study tables."""
        return self.out_dir / "runs" / self.study_key()

    @property
    def out_dir(self) -> Path:
        return Path(self.outputs_dir) if self.outputs_dir else OUTPUTS_DIR / self.run_name

    def parameters(self) -> dict:
        """What the run's outputs depend on: every field except where they go, with ``extra`` flattened."""
        d = {k: v for k, v in asdict(self).items() if k not in PLACE_FIELDS and k != "extra"}
        return _plain({**d, **{f"extra.{k}": v for k, v in self.extra.items()}})

    def read_record(self) -> dict | None:
        """The run record of this run's folder, or None when there is none."""
        path = self.out_dir / RUN_RECORD
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError as exc:
            raise RunConflict(f"{path} is not a readable run record ({exc}); remove it or choose another "
                              f"run_name") from exc

    def differences(self, record: dict | None) -> dict[str, tuple]:
        """``{name: (recorded, given)}`` for every parameter both the record and this config have."""
        recorded, given = (record or {}).get("parameters", {}), self.parameters()
        return {k: (recorded[k], v) for k, v in given.items() if k in recorded and recorded[k] != v}

    def derived_run_name(self, diff: dict[str, tuple]) -> str:
        """``<run>-<name><value>...`` for the changed parameters (a hash when that gets long)."""
        parts = [f"{k.removeprefix('extra.')}{_slug(v)}" for k, (_, v) in sorted(diff.items())]
        name = f"{self.run_name}-{'-'.join(parts)}"
        if len(name) > 80:
            blob = json.dumps(self.parameters(), sort_keys=True).encode()
            name = f"{self.run_name}-{hashlib.sha256(blob).hexdigest()[:8]}"
        return name

    def redirected(self, echo=print) -> ExperimentConfig:
        """Itself, or moved to a derived run when its run folder was made with other parameters."""
        diff = self.differences(self.read_record())
        if not diff:
            return self
        base_dir = self.out_dir
        changes = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in sorted(diff.items()))
        self.base_run, self.run_name = self.base_run or self.run_name, self.derived_run_name(diff)
        if self.outputs_dir:
            self.outputs_dir = str(base_dir.parent / self.run_name)
        if self.differences(self.read_record()):
            raise RunConflict(f"{base_dir} was made with other parameters ({changes}) and so was "
                              f"{self.out_dir}; pass another run_name")
        echo(f"note: {base_dir} was made with other parameters ({changes}); this notebook writes to "
             f"{self.out_dir} instead and leaves that run as it is")
        return self

    def claim_run(self, study: str | None = None) -> Path:
        """Write (or extend) the run record; :class:`RunConflict` when it holds other parameters."""
        record = self.read_record()
        diff = self.differences(record)
        if diff:
            changes = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in sorted(diff.items()))
            raise RunConflict(f"{self.out_dir} was made with other parameters ({changes}); choose another "
                              f"run name or remove that folder")
        record = record or {"run_name": self.run_name, "base_run": self.base_run, "parameters": {}}
        merged = {**self.parameters(), **record["parameters"]}
        studies = record.get("studies", [])
        studies = [*studies, study] if study and study not in studies else studies
        path = self.out_dir / RUN_RECORD
        if merged != record["parameters"] or studies != record.get("studies", []):
            record.update(parameters=merged, studies=studies)
            save_text(path, json.dumps(record, indent=1, sort_keys=True))
        return path

    @property
    def figures_dir(self) -> Path:
        return self.out_dir / "figures"

    @property
    def tables_dir(self) -> Path:
        return self.out_dir / "tables"


def build_setup(cfg: ExperimentConfig):
    """Dataset, embedder, (sub-)registry index and queries of a configuration."""
    return prepare(load_dataset(cfg.data_dir), load_embedder(cfg.embedder), cfg.subsets, cfg.max_apis,
                   cfg.limit, cfg.seed)


def _stored_study(folder: Path, model: str, embed_backend: str = "fp32"):
    """The study stored in ``folder`` when it is complete and made with ``model``; else None."""
    if not (folder / "provenance.json").exists():
        return None
    try:
        result = StudyResult.load(folder)
    except StoredStudyError as exc:
        log.warning("%s: running it again", exc)
        return None
    made = (result.provenance.get("model"), result.provenance.get("embedder_backend", "fp32"))
    if made != (model, embed_backend):
        log.warning("study in %s was made with embedder %s (%s), not %s (%s): not used", folder, *made,
                    model, embed_backend)
        return None
    return result


def get_study(cfg: ExperimentConfig, setup=None, progress: bool = True):
    """``(setup, StudyResult)``: the stored study (a base run's copied), else run and saved."""
    setup = setup or LazySetup(cfg)
    if not isinstance(setup, LazySetup):
        cfg._fingerprint = setup.provenance.get("data_fingerprint") or cfg.data_fingerprint()
    model, embed_backend = setup_model(setup)
    key, folder = cfg.study_key(), cfg.study_dir
    places = [folder] + ([cfg.out_dir.parent / cfg.base_run / "runs" / key] if cfg.base_run else [])

    def computed():
        llm = make_backend(cfg.backend, cassette=cfg.cassette, model=cfg.llm_model)
        methods = tuple(cfg.study_methods) if cfg.study_methods else METHODS
        settings = StudySettings(k=cfg.plan_k, depth=cfg.depth, runs=cfg.runs, temperature=cfg.temperature,
                                 run_temperature=cfg.run_temperature, plan_limit=cfg.plan_limit,
                                 plan_runs=cfg.planned_runs(), methods=methods, plan_methods=METHODS,
                                 workers=default_workers(cfg.backend))
        result = run_study(setup, llm, settings, progress=progress)
        result.provenance.update(config=_plain(asdict(cfg)), study_key=key, study_fields=cfg.study_fields())
        cfg.claim_run(study=key)
        result.save(folder)
        return result

    # one computes a study another asks for meanwhile; that one waits, then reads it
    return setup, compute_once(folder, lambda: _stored_copy(cfg, key, places, model, embed_backend), computed)


def _stored_copy(cfg: ExperimentConfig, key: str, places: list[Path], model: str, embed_backend: str):
    """The first study of ``places`` stored with this embedder (copied to ``places[0]`` if elsewhere)."""
    for place in places:
        if (result := _stored_study(place, model, embed_backend)) is not None:
            log.info("study tables from %s", place)
            cfg.claim_run(study=key)
            if place != places[0]:
                result.save(places[0])
            return result
    return None


def runs_limit(cfg: ExperimentConfig, queries: pd.DataFrame, runs: int) -> int | None:
    """Queries per set a study of ``runs`` runs can use (replay: those whose stubs the cassette holds)."""
    if cfg.backend != "replay":
        return cfg.limit
    temps = StudySettings(temperature=cfg.temperature, run_temperature=cfg.run_temperature)
    n = recorded_limit(cfg.cassette or DEFAULT_CASSETTE, queries, [resolve_subset(s) for s in cfg.subsets],
                       [(r, temps.temperature_of(r)) for r in range(runs)])
    return n if cfg.limit is None else min(n, cfg.limit)


def get_runs_study(cfg: ExperimentConfig, runs: int, queries: pd.DataFrame, progress: bool = True):
    """``(config, setup, StudyResult)`` of a retrieval-only RtP and PtR study of ``runs`` runs."""
    if cfg.runs == runs:
        return (cfg, *get_study(cfg, progress=progress))
    return _retrieval_study(cfg, runs, queries, progress, f"runs{runs}")


def get_retrievers_study(cfg: ExperimentConfig, runs: int, queries: pd.DataFrame, progress: bool = True):
    """``(config, setup, StudyResult)`` of RtP and PtR with each of ``cfg.retrievers``."""
    methods = [method_name(a, f) for f in cfg.retrievers for a in ARCHITECTURES]
    return _retrieval_study(cfg, runs, queries, progress, "retrievers", study_methods=methods)


def get_g2_instruction_study(cfg: ExperimentConfig, runs: int, queries: pd.DataFrame, validation,
                             progress: bool = True):
    """G2_instruction's own retriever study when the cassette holds the stubs of every G2_instruction
    query of the ``validation`` study, else ``validation``."""
    if validation is None or "G2_instruction" not in set(validation[2].queries["subset"]):
        return validation
    g2i = replace(cfg, run_name=f"{cfg.run_name}-g2-instruction", subsets=["G2_instruction"])
    got = get_retrievers_study(g2i, runs, queries, progress)
    wanted = int((validation[2].queries["subset"] == "G2_instruction").sum())
    return got if got is not None and len(got[2].queries) >= wanted else validation


def _retrieval_study(cfg: ExperimentConfig, runs: int, queries: pd.DataFrame, progress: bool, suffix: str,
                     **fields):
    """A retrieval-only study of the first :func:`runs_limit` queries in ``<run_name>-<suffix>`` (None: 0)."""
    n = runs_limit(cfg, queries, runs)
    if n == 0:
        return None
    rcfg = replace(cfg, run_name=f"{cfg.run_name}-{suffix}", runs=runs, plan_limit=0, limit=n,
                   base_run=None, extra={}, **fields).redirected(echo=log.info)
    return (rcfg, *get_study(rcfg, progress=progress))


def stored_study_dir(run_name: str = "default", study: str | None = None,
                     outputs_dir: str | Path | None = None) -> Path:
    """The folder of a run's stored study: ``study``, else the one its run record names, else the only one."""
    out = Path(outputs_dir) if outputs_dir else OUTPUTS_DIR / run_name
    runs = out / "runs"
    found = sorted(p.parent.name for p in runs.glob("*/provenance.json"))
    if study:
        if study not in found:
            raise FileNotFoundError(f"no stored study {study!r} under {runs} (stored: {found or 'none'})")
        return runs / study
    if not found:
        raise FileNotFoundError(f"no stored study under {runs}: run `make run` (or `python -m toolbench_lib "
                                f"reproduce --run-name {run_name}`) first")
    record_path = out / RUN_RECORD
    if record_path.exists():
        named = [s for s in json.loads(record_path.read_text()).get("studies", []) if s in found]
        if named:
            return runs / named[-1]
    if len(found) == 1:
        return runs / found[0]
    raise FileNotFoundError(f"{runs} holds several studies ({', '.join(found)}) and no run record names "
                            f"one: pass study=<one of them>")


def provenance_line(result) -> str:
    """One line naming model, backend, data and parameters, for captions and table footers."""
    p = result.provenance
    s = p.get("settings", {})
    return (f"embedder {p.get('model')} (requested {p.get('model_requested')}), "
            f"registry {p.get('registry_size')} APIs, data {p.get('data_fingerprint')}, "
            f"backend {p.get('backend')} ({p.get('llm_model')}), "
            f"k={s.get('k')}, runs={s.get('runs')}, plan_limit={s.get('plan_limit')}")


def save_table(df: pd.DataFrame, name: str, cfg: ExperimentConfig, provenance: str | None = None) -> Path:
    """Write a table as CSV and Markdown under ``outputs/<run>/tables/``; returns the CSV path."""
    cfg.claim_run()
    cfg.tables_dir.mkdir(parents=True, exist_ok=True)
    csv = cfg.tables_dir / f"{name}.csv"
    df.to_csv(csv, index=False)
    md = md_table(df) if len(df) else "(empty)"  # n/a where the CSV has NaN; text cells escaped
    if provenance:
        md += f"\n\n_{provenance}_\n"
    (cfg.tables_dir / f"{name}.md").write_text(md + "\n")
    return csv


def save_tables(tables: dict[str, pd.DataFrame], cfg: ExperimentConfig,
                provenance: str | None = None) -> list[Path]:
    """:func:`save_table` for each ``{name: table}``."""
    return [save_table(df, name, cfg, provenance) for name, df in tables.items()]


def save_figure(fig, name: str, cfg: ExperimentConfig) -> Path:
    """Save a matplotlib figure as PNG under ``outputs/<run>/figures/``."""
    cfg.claim_run()
    cfg.figures_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.figures_dir / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path
