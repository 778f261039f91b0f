"""The learned rankers (``ltr``, ``ltr-nollm``) of a stored study as explorer methods, with the features
behind their top APIs; each run shows its own cross-fit's ranking, the ones the report averages."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..config import DEPTH, SEED
from ..retrieval.fusion_specs import component_methods
from ..retrieval.ltr import NAMED, TOP_EXPLAINED, learned_frame
from ..study.experiment import stored_study_dir
from ..study.stored import RANKINGS_COLUMNS, StudyResult

EXPLORED = ("ltr", "ltr-nollm")  # ltr-4runs, every run's stubs at once, is measured by analysis.ltr_study
FEATURE_COLUMNS = ["method", "run", "qkey", "rank", "api_id", "score", "feature", "value"]
# the run names notebooks 03 and 12 store the pair as
DESIGN, VALIDATION = "-retrievers", "-validation-retrievers"
G2_INSTRUCTION = "-g2-instruction-retrievers"

log = logging.getLogger(__name__)


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
    have = set(result.methods)
    return [n for n, spec in NAMED.items()
            if n in EXPLORED and set(component_methods(spec.components)) <= have]


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


def learned_views(result, depth: int = DEPTH, seed: int = SEED,
                  label_gt: str = "candidates") -> tuple[pd.DataFrame, pd.DataFrame]:
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
                frame = learned_frame(design, validation, NAMED[name], 0 if same_each_run else run, seed,
                                      label_gt, depth)
            except (KeyError, ValueError) as exc:  # too few queries to cross-fit, a run without stubs
                log.warning("learned ranker %s not computed: %s", name, exc)
                break
            frame = frame[frame["qkey"].isin(keys)]
            row = frame["api_id"].map(api_rows).astype("int64")
            hits.append(frame.assign(method=name, run=run, row=row)[RANKINGS_COLUMNS])
            top = frame[frame["rank"] <= TOP_EXPLAINED]
            long = top.melt(id_vars=["qkey", "rank", "api_id", "score"], var_name="feature",
                            value_name="value")
            features.append(long.assign(method=name, run=run)[FEATURE_COLUMNS])
    hits_frame = pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(columns=RANKINGS_COLUMNS)
    features_frame = (pd.concat(features, ignore_index=True) if features else
                      pd.DataFrame(columns=FEATURE_COLUMNS))
    return hits_frame, features_frame.astype({"value": float, "score": float})
