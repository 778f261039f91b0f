"""TREC run and qrels files of a stored study, with a manifest."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..data.atomic import clean_stale_temps, save_text
from ..data.queries import GT_DEFINITIONS, check_gt, subset_alias

MANIFEST = "manifest.json"
_SPACE = re.compile(r"\s")
# What a reader needs to know of the study the files come from.
PROVENANCE_KEYS = ("model", "model_requested", "embedder_backend", "registry_size", "data_fingerprint",
                   "sub_registry_seed", "backend", "llm_model", "prompt_versions", "settings", "study_key")


def _check_id(kind: str, value: str) -> str:
    if not value or _SPACE.search(value):
        raise ValueError(f"cannot write TREC files: the {kind} {value!r} is empty or holds whitespace")
    return value


def trec_run_lines(ranking: Mapping[str, Mapping[str, float]], tag: str) -> tuple[list[str], int]:
    """``(lines, separated ties)`` of ``{qid: {docid: score}}``, a tie lowered to the next float below."""
    _check_id("run tag", tag)
    lines, ties = [], 0
    for qid, scored in ranking.items():
        _check_id("query id", qid)
        prev = math.inf
        for pos, (doc, score) in enumerate(scored.items()):
            score = float(score)
            if score >= prev:
                score, ties = math.nextafter(prev, -math.inf), ties + 1
            prev = score
            lines.append(f"{qid} Q0 {_check_id('document id', doc)} {pos + 1} {score!r} {tag}")
    return lines, ties


def trec_qrels_lines(qrels: Mapping[str, Iterable[str]]) -> list[str]:
    """``qid 0 docid 1`` lines of ``{qid: relevant docids}`` (a query without any has no line)."""
    return [f"{_check_id('query id', qid)} 0 {_check_id('document id', doc)} 1"
            for qid, docs in qrels.items() for doc in sorted(docs)]


def _write(path: Path, lines: list[str]) -> None:
    try:
        save_text(path, "".join(f"{line}\n" for line in lines), encoding="utf-8")
    except OSError as exc:  # a full disk names no file, a failed open the temporary one: name this one
        exc.filename = str(path)
        raise


class ExportWriteError(OSError):
    """A file of the export could not be written: the message names it and ``--out``, left as it was."""


class ExportFolderError(ValueError):
    """``--out`` holds something other than an earlier export of this command."""


def _check_own_folder(out: Path) -> None:
    """Refuse a non-empty ``out`` that is not an earlier export (a folder with this command's manifest)."""
    if out.exists() and not out.is_dir():
        raise ExportFolderError(f"--out {out} is a file, not a folder")
    if not out.exists() or not any(out.iterdir()):
        return
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        own = isinstance(manifest, dict) and manifest.get("format", {}).get("run", "").startswith("qid Q0")
    except (OSError, ValueError, AttributeError):
        own = False
    if not own:
        raise ExportFolderError(f"--out {out} is not empty and is not an earlier TREC export (no {MANIFEST} "
                                "of this command): choose a new or empty folder")


def export_trec(result, out_dir: str | Path, gts: Sequence[str] = GT_DEFINITIONS,
                source: str | None = None) -> dict:
    """Write the study's TREC files as the folder ``out_dir`` (an earlier export replaced); the manifest."""
    final = Path(out_dir)
    _check_own_folder(final)
    gts = [check_gt(g) for g in gts]
    final.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(final.parent)
    out = final.with_name(f".{final.name}.{os.getpid()}.tmp.d")
    shutil.rmtree(out, ignore_errors=True)
    try:
        manifest = _export_into(result, out, gts, source)
        old = final.with_name(f".{final.name}.{os.getpid()}.tmp.old")
        if final.exists():
            os.replace(final, old)
        os.replace(out, final)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:  # one line naming the file (as it would be under --out) and --out
        reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
        try:
            where = final / Path(str(exc.filename)).relative_to(out)
        except ValueError:
            where = Path(str(exc.filename)) if exc.filename else final
        error = ExportWriteError(f"could not write {where} ({reason}); --out {final} is left as it was")
        error.errno = exc.errno
        raise error from None
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return manifest


def _export_into(result, out: Path, gts: Sequence[str], source: str | None) -> dict:
    """The files of :func:`export_trec`, written under ``out``."""
    queries = result.queries
    qrels = {gt: result.qrels(gt) for gt in gts}
    files = []
    for subset in dict.fromkeys(queries["subset"]):
        name = subset_alias(subset)
        keys = list(queries.loc[queries["subset"] == subset, "qkey"])
        for gt in gts:
            path = out / "qrels" / f"{name}.{gt}.qrels"
            _write(path, trec_qrels_lines({k: qrels[gt][k] for k in keys}))
            files.append({"kind": "qrels", "path": str(path.relative_to(out)), "subset": subset, "gt": gt,
                          "n_queries": len(keys),
                          "queries_without_gt": sum(not qrels[gt][k] for k in keys)})
        for method in result.methods:
            for run in range(result.n_runs):
                ranking = result.scored_ranking(method, run)
                mine = {k: ranking[k] for k in keys if ranking.get(k)}
                path = out / "runs" / f"{name}.{method}.run{run}.trec"
                lines, ties = trec_run_lines(mine, f"{method}.run{run}")
                _write(path, lines)
                files.append({"kind": "run", "path": str(path.relative_to(out)), "subset": subset,
                              "method": method, "run": run, "n_queries": len(mine),
                              "queries_without_hits": len(keys) - len(mine), "separated_ties": ties})
    prov = {k: result.provenance[k] for k in PROVENANCE_KEYS if k in result.provenance}
    manifest = {"source": source, "provenance": prov,
                "format": {"run": "qid Q0 docid rank score tag (score = the retriever's; a tie lowered to "
                                  "the next float below the score before it, counted in separated_ties)",
                           "qrels": "qid 0 docid 1"},
                "files": files}
    _write(out / MANIFEST, json.dumps(manifest, indent=2, default=str).splitlines())
    return manifest
