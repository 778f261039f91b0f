"""Studies the ablations need beyond a configuration's own: the same queries under other embedders."""

from __future__ import annotations

from ..data.dataset import load_dataset
from ..llm.factory import make_backend
from ..retrieval.embedding import load_embedder
from ..retrieval.models import MPNET_NAME, ModelNotInstalled, mpnet_folder
from ..retrieval.setup import prepare
from .experiment import ExperimentConfig
from .result import StudySettings, run_study


def embedder_studies(cfg: ExperimentConfig, n_apis: int, names: list[str],
                     per_set: int | None = None) -> tuple[dict, str]:
    """Retrieval-only studies of the configuration's queries, one per installed embedder; (studies, note)."""
    paths, missing = {}, []
    for name in names:
        try:
            paths[name] = str(mpnet_folder()) if name == MPNET_NAME else name  # mpnet: its assembled folder
        except ModelNotInstalled as err:
            missing.append(str(err))
    ds = load_dataset(cfg.data_dir)
    llm = make_backend(cfg.backend, cassette=cfg.cassette, model=cfg.llm_model)
    settings = StudySettings(k=cfg.k, depth=cfg.depth, runs=1, plan_limit=0, methods=("rtp", "ptr"))
    size = min(n_apis, cfg.max_apis or n_apis)
    limit = min((n for n in (per_set, cfg.limit) if n), default=None)
    out = {}
    for name, path in paths.items():
        setup = prepare(ds, load_embedder(path), cfg.subsets, size, limit, cfg.seed, progress=False)
        result = run_study(setup, llm, settings, progress=False)
        result.provenance["model"] = name
        out[name] = result
    which = f"first {limit} queries of each set" if limit else "every query"
    note = f"{size}-API sub-registry (seed {cfg.seed}), {which}"
    return out, "; not run: ".join([note, *missing])

