"""The learned ranker's measurement on a stored retriever study, in one command.

``python -m toolbench_lib.analysis.ltr_study`` writes its tables under ``--out`` (default: the design study's
``ltr/``) and stores the models, checksummed, in the design study's ``ltr/`` folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from ..config import SEED, K
from ..data.paths import OUTPUTS_DIR
from ..data.queries import GT_DEFINITIONS
from ..data.tables import code_hash
from ..retrieval.ltr import NAMED, save_model
from ..study.experiment import stored_study_dir
from ..study.stored import StudyResult
from . import ltr as L
from .fusion_board import unseen_keys


def study_folder(path: str | Path) -> Path:
    """A study folder itself, or the one stored study of a run folder (a clear error otherwise)."""
    p = Path(path)
    return p if (p / "provenance.json").exists() else stored_study_dir(p.name, outputs_dir=p)


def measure(design_dir: Path, validation_dir: Path | None, out: Path, k: int = K, seed: int = SEED,
            runs: list[int] | None = None) -> dict[str, pd.DataFrame]:
    """Every table of the measurement, written as CSV and Markdown under ``out``; the models stored."""
    design = StudyResult.load(design_dir)
    validation = StudyResult.load(validation_dir) if validation_dir is not None else None
    unseen = unseen_keys(validation, design)[0] if validation is not None else set()
    scores, models = L.ranker_scores(design, validation, unseen, NAMED, k, GT_DEFINITIONS, runs, seed)
    linear = L.linear_fusion_scores(design, validation, unseen, k, GT_DEFINITIONS, seed)
    scores = pd.concat([scores, linear], ignore_index=True)
    cmp = L.comparison(scores, (*dict.fromkeys(linear["method"]), *NAMED))
    tables = {"ltr_scores": scores, "ltr_comparison": cmp, "ltr_goal": L.goal_check(cmp)}
    for gt in GT_DEFINITIONS:
        tables[f"ltr_table_{gt}"] = L.issue_table(cmp, gt)
    tables["ltr_ablations"] = L.ablations(design, validation, unseen, k, GT_DEFINITIONS, (0,), seed)
    tables["ltr_importance"] = pd.concat([L.importance(m).assign(method=n) for n, m in models.items()],
                                         ignore_index=True)
    tables["ltr_costs"] = L.costs(design, models)
    out.mkdir(parents=True, exist_ok=True)
    (out / CODE_FILE).write_text(json.dumps({"code": measured_code()}) + "\n")
    for name, model in models.items():
        save_model(model, design_dir / "ltr", name,
                   {"study": str(design_dir), "study_key": design.provenance.get("study_key"), "run": 0})
    for name, table in tables.items():
        table.to_csv(out / f"{name}.csv", index=False)
        if name != "ltr_scores":  # per query keys (from the data files) stay out of rendered Markdown
            (out / f"{name}.md").write_text(table.to_markdown(index=False) + "\n")
    fig = L.importance_figure(tables["ltr_importance"][tables["ltr_importance"]["method"] == "ltr"])
    fig.savefig(out / "ltr_importance.png", dpi=120, bbox_inches="tight")
    return tables


CODE_FILE = "code.json"  # the code a measurement ran, beside its tables


def measured_code() -> str:
    """The hash of the code a measurement runs (the study's retrieval, its evaluation, the ranker)."""
    return code_hash("config.py", "data", "retrieval", "eval", "study", "analysis/ltr.py",
                     "analysis/ltr_study.py", "analysis/fusion_board.py")


def summary_tables(folder: Path, gt: str = "candidates") -> dict[str, pd.DataFrame] | None:
    """The report's two tables of a measurement written under ``folder`` (empty when it was not run; None
    when it ran other code than this one): the ablations as one row per variant and one column per set
    (recall@k minus the full ``ltr``, ``*`` where the paired 95% CI excludes 0), and the costs."""
    if not (folder / "ltr_ablations.csv").exists() and not (folder / "ltr_costs.csv").exists():
        return {}
    try:
        if json.loads((folder / CODE_FILE).read_text())["code"] != measured_code():
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    out = {}
    path = folder / "ltr_ablations.csv"
    if path.exists():
        a = pd.read_csv(path)
        a = a[(a["gt"] == gt) & (a["method"] != a["reference"])].sort_values("part", kind="stable")
        a = a.assign(cell=[f"{round(d, 3) + 0.0:+.3f}" + ("*" if lo > 0 or hi < 0 else "")  # never -0.000
                           for d, lo, hi in zip(a["diff"], a["ci_low"], a["ci_high"], strict=True)])
        wide = a.pivot(index="method", columns="subset", values="cell")
        out["ablations"] = wide.reindex(index=list(dict.fromkeys(a["method"])),
                                        columns=list(dict.fromkeys(a["subset"]))).reset_index()
    path = folder / "ltr_costs.csv"
    if path.exists():
        c = pd.read_csv(path)
        out["costs"] = pd.DataFrame({"method": c["method"], "training s": c["train_s"].round(2),
                                     "ms per query": c["infer_ms_per_query"].round(2),
                                     "model KB": (c["model_bytes"] / 1000).round(0).astype(int),
                                     "LLM calls": c["llm_calls"]})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolbench_lib.analysis.ltr_study", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--design", default=str(OUTPUTS_DIR / "default-retrievers"),
                   help="the design study (G1-G3): a study folder or its run folder")
    p.add_argument("--validation", default=str(OUTPUTS_DIR / "default-validation-retrievers"),
                   help="the validation study (unseen sets): a study folder or its run folder; "
                        "'none' to skip")
    p.add_argument("--out", default=None, help="folder for the tables (default: <design study>/ltr)")
    p.add_argument("--k", type=int, default=K)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--runs", default=None, help="design runs to average over, comma-separated (default all)")
    args = p.parse_args(argv)
    try:
        design = study_folder(args.design)
        validation = None if args.validation == "none" else study_folder(args.validation)
        runs = [int(r) for r in args.runs.split(",")] if args.runs else None
        out = Path(args.out) if args.out else design / "ltr"
        tables = measure(design, validation, out, args.k, args.seed, runs)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for gt in GT_DEFINITIONS:
        print(f"\nrecall@{args.k}, gt={gt} (difference to the best single architecture, paired 95% CI)\n")
        print(tables[f"ltr_table_{gt}"].to_markdown(index=False))
    print("\n" + tables["ltr_goal"].to_markdown(index=False))
    print("\n" + tables["ltr_costs"].to_markdown(index=False))
    print(json.dumps({"out": str(out), "models": str(design / "ltr")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
