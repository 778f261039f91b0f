"""One experiment configuration shared by every notebook: load or run the study once, save outputs.

A notebook's ``parameters`` cell sets the fields of :class:`ExperimentConfig`; ``smoke=True`` shrinks
everything to a CI-sized slice. The study tables of a configuration are stored once under
``outputs/<run_name>/runs/<config hash>/`` and every later notebook reads them instead of recomputing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from .paths import OUTPUTS_DIR

log = logging.getLogger(__name__)

SMOKE = {"max_apis": 2500, "limit": 15, "runs": 2, "plan_limit": 5, "backend": "rules",
         "scale_sizes": [1500, 2000, 2500], "scale_seeds": 2}
FULL_SCALE_SIZES = [1000, 2000, 5000, 10000, 20000, None]


@dataclass
class ExperimentConfig:
    """Everything a study run and its analyses depend on (recorded with every output)."""

    run_name: str = "default"
    data_dir: str | None = None
    subsets: list[str] = field(default_factory=lambda: ["G1", "G2", "G3"])
    backend: str = "replay"
    cassette: str | None = None
    llm_model: str | None = None
    embedder: str | None = None
    k: int = 5
    depth: int = 20
    runs: int = 1
    temperature: float = 0.0
    run_temperature: float | None = 0.3
    plan_limit: int | None = 50
    max_apis: int | None = None
    limit: int | None = None
    seed: int = 0
    scale_sizes: list[int | None] = field(default_factory=lambda: list(FULL_SCALE_SIZES))
    scale_seeds: int = 5
    smoke: bool = False
    outputs_dir: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> ExperimentConfig:
        """Check every field: a bad one is a ``UsageError`` naming it, the value and what is allowed."""
        from .validation import validate_config

        validate_config(self)
        return self

    @classmethod
    def from_params(cls, **params) -> ExperimentConfig:
        """Build from notebook parameters; ``smoke=True`` overrides sizes with the CI slice."""
        known = {k: v for k, v in params.items() if k in cls.__dataclass_fields__}
        cfg = cls(**known)
        if cfg.smoke:
            for key, value in SMOKE.items():
                setattr(cfg, key, value)
        return cfg

    def study_key(self) -> str:
        """Hash of the fields the study tables depend on."""
        keys = ["data_dir", "subsets", "backend", "cassette", "llm_model", "embedder", "depth", "runs",
                "temperature", "run_temperature", "plan_limit", "max_apis", "limit", "seed", "k"]
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def out_dir(self) -> Path:
        return Path(self.outputs_dir) if self.outputs_dir else OUTPUTS_DIR / self.run_name

    @property
    def figures_dir(self) -> Path:
        return self.out_dir / "figures"

    @property
    def tables_dir(self) -> Path:
        return self.out_dir / "tables"

    def to_dict(self) -> dict:
        return asdict(self)


def build_setup(cfg: ExperimentConfig):
    """Dataset, embedder, (sub-)registry index and queries of a configuration."""
    from .dataset import load_dataset
    from .embedding import load_embedder
    from .evaluate import prepare

    ds = load_dataset(cfg.data_dir)
    emb = load_embedder(cfg.embedder)
    return prepare(ds, emb, cfg.subsets, cfg.max_apis, cfg.limit, cfg.seed)


def get_study(cfg: ExperimentConfig, setup=None, progress: bool = True):
    """``(setup, StudyResult)``: the stored study of this configuration, run and saved when missing."""
    from .llm.factory import default_workers, make_backend
    from .study import StudyResult, StudySettings, run_study

    setup = setup or build_setup(cfg)
    folder = cfg.out_dir / "runs" / cfg.study_key()
    if (folder / "provenance.json").exists():
        log.info("study tables from %s", folder)
        return setup, StudyResult.load(folder)
    llm = make_backend(cfg.backend, cassette=cfg.cassette, model=cfg.llm_model)
    settings = StudySettings(k=cfg.k, depth=cfg.depth, runs=cfg.runs, temperature=cfg.temperature,
                             run_temperature=cfg.run_temperature, plan_limit=cfg.plan_limit,
                             workers=default_workers(cfg.backend))
    result = run_study(setup, llm, settings, progress=progress)
    result.provenance["config"] = cfg.to_dict()
    result.save(folder)
    return setup, result


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
    cfg.tables_dir.mkdir(parents=True, exist_ok=True)
    csv = cfg.tables_dir / f"{name}.csv"
    df.to_csv(csv, index=False)
    md = df.to_markdown(index=False) if len(df) else "(empty)"
    if provenance:
        md += f"\n\n_{provenance}_\n"
    (cfg.tables_dir / f"{name}.md").write_text(md + "\n")
    return csv


def save_figure(fig, name: str, cfg: ExperimentConfig) -> Path:
    """Save a matplotlib figure as PNG under ``outputs/<run>/figures/``."""
    cfg.figures_dir.mkdir(parents=True, exist_ok=True)
    path = cfg.figures_dir / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path
