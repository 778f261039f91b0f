"""The retriever-family regression on the registry slice: ``evaluate --retriever dense,bm25`` against the
numbers stored under ``slice_families`` in ``references/regression.yaml``.

``python -m toolbench_lib.bench.regression`` runs the slice (the test suite's: 2,500 APIs sampled with seed
0, keeping the ground truth of the first 15 queries of G1, G2 and G3; all-MiniLM-L6-v2; retrieval only,
PtR's stubs from the rules backend, one run) through the command line's ``evaluate`` once per ground-truth
definition, and compares recall@5 and precision@5 of every set and method with the stored numbers (exit
status 1 when one differs by more than the tolerance). ``--write`` stores the fresh numbers instead; that
is the only way the block is made, and ``tests/test_regression.py`` checks a fresh run against it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

from .. import config

CHECKOUT = Path(__file__).resolve().parents[2]  # the files this command keeps in step live in the checkout
REFERENCE_FILE = CHECKOUT / "references" / "regression.yaml"
README = CHECKOUT / "README.md"
README_BEGIN = "<!-- regression tables: python -m toolbench_lib.bench.regression --readme -->"
README_END = "<!-- end of the regression tables -->"
KEY = "slice_families"
TOLERANCE = 2e-3
GTS = ("candidates", "relevant")
SLICE = {"max_apis": 2500, "limit": 15, "seed": 0}
ARGS = ["--method", "rtp,ptr", "--retriever", "dense,bm25", "--backend", "rules", "--plan-limit", "0",
        "--runs", "1", "--model", config.EMBEDDER, "--k", str(config.K), "--max-apis", str(SLICE["max_apis"]),
        "--limit", str(SLICE["limit"]), "--seed", str(SLICE["seed"])]
HEADER = ("# Retriever families on the slice above, written by `python -m toolbench_lib.bench.regression\n"
          "# --write` (never by hand): `command`, once per ground truth. Scores: [recall@5, precision@5]\n"
          "# per set and method (rtp@bm25, ptr@bm25: BM25 in place of the dense retriever); checked by\n"
          "# tests/test_regression.py within {tol}.\n")


def evaluate_json(gt: str, data_dir: str | None = None) -> dict:
    """The ``evaluate --json`` object of the slice under ``gt``, from the command line (a child process of
    this interpreter, so the benchmark does not import the command line that imports it)."""
    argv = ["evaluate", *ARGS, "--gt", gt, "--json"] + (["--data-dir", str(data_dir)] if data_dir else [])
    out = subprocess.run([sys.executable, "-m", "toolbench_lib", *argv], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"evaluate {' '.join(argv)} exited with {out.returncode}: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def measure(data_dir: str | None = None) -> dict:
    """The block stored under :data:`KEY`: the run's settings and, per ground truth, set and method,
    ``[recall, precision]`` rounded to six decimals."""
    scores, registry_size, n_queries = {}, None, {}
    for gt in GTS:
        got = evaluate_json(gt, data_dir)
        registry_size = got["registry_size"]
        scores[gt] = {}
        for subset, entry in got["subsets"].items():
            n_queries[subset] = entry["n_queries"]
            scores[gt][subset] = {m: [round(float(v["recall"]), 6), round(float(v["precision"]), 6)]
                                  for m, v in entry["methods"].items()}
    return {"command": " ".join(["evaluate", *ARGS]), **SLICE, "registry_size": registry_size,
            "n_queries": n_queries, "scores": scores}


def stored(path: Path = REFERENCE_FILE) -> dict:
    """The stored block (``KeyError`` naming the command when it was never written)."""
    ref = yaml.safe_load(Path(path).read_text())
    if KEY not in ref:
        raise KeyError(f"{path} has no {KEY!r}; write it with "
                       "python -m toolbench_lib.bench.regression --write")
    return ref[KEY]


def differences(fresh: dict, ref: dict, tol: float = TOLERANCE) -> list[str]:
    """One line per number of ``ref`` that ``fresh`` misses or differs from by more than ``tol`` (and per
    setting that differs); empty when the run reproduces the stored numbers."""
    settings = ("command", *SLICE, "registry_size", "n_queries")
    out = [f"{k}: stored {ref.get(k)!r}, now {fresh.get(k)!r}" for k in settings
           if fresh.get(k) != ref.get(k)]
    stored, now = ({(gt, s, m): v for gt, ps in r["scores"].items() for s, ms in ps.items()
                    for m, v in ms.items()} for r in (ref, fresh))  # {(gt, set, method): [recall, precision]}
    for (gt, subset, method), want in stored.items():
        got = now.get((gt, subset, method))
        if got is None:
            out.append(f"{gt} {subset} {method}: missing from the run")
            continue
        out += [f"{gt} {subset} {method} {name}: stored {a}, now {b}"
                for name, a, b in zip(("recall", "precision"), want, got, strict=True) if abs(a - b) > tol]
    out += [f"{gt} {s} {m}: not stored" for gt, s, m in sorted(set(now) - set(stored))]
    return out


def write(block: dict, path: Path = REFERENCE_FILE) -> None:
    """Replace (or append) the :data:`KEY` block at the end of ``path``, keeping the rest byte for byte."""
    text = Path(path).read_text()
    start = text.find("# Retriever families on the slice above")
    if start < 0:
        start = text.find(f"\n{KEY}:") + 1 if f"\n{KEY}:" in text else len(text)
    head = text[:start].rstrip("\n") + "\n"
    body = yaml.safe_dump({KEY: block}, sort_keys=False, default_flow_style=None, width=110)
    Path(path).write_text(head + HEADER.format(tol=TOLERANCE) + body)


def _pair(values: list[float] | None) -> str:
    return "" if values is None else f"{values[0]:.3f} / {values[1]:.3f}"


def readme_tables(ref: dict) -> str:
    """README's reference tables (full registry, retriever families on the slice) from the whole of
    ``references/regression.yaml``, every number recall@k / precision@k as stored."""
    full = ref["full"]["scores"]
    lines = [f"Full registry, {ref['embedder']}, k = {ref['k']}, one run (`full` in the file):", "",
             "| set | ground truth | RtP | PtR, local-model stubs (replay) | PtR, `rules` baseline |",
             "|---|---|---|---|---|"]
    for gt in full["replay"]:
        for subset, methods in full["replay"][gt].items():
            rules = full.get("rules", {}).get(gt, {}).get(subset, {})
            lines.append(f"| {subset} | {gt} | {_pair(methods['rtp'])} | {_pair(methods['ptr'])} | "
                         f"{_pair(rules.get('ptr'))} |")
    fam = ref[KEY]
    methods = list(next(iter(next(iter(fam["scores"].values())).values())))
    lines += ["", f"Retriever families on the slice ({fam['registry_size']:,} APIs, the first "
                  f"{fam['limit']} queries of each set, `{KEY}` in the file: `{fam['command']}`):", "",
              "| set | ground truth | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for gt, per_subset in fam["scores"].items():
        for subset, values in per_subset.items():
            lines.append(f"| {subset} | {gt} | " + " | ".join(_pair(values.get(m)) for m in methods) + " |")
    return "\n".join(lines) + "\n"


def write_readme(readme: Path = README, path: Path = REFERENCE_FILE) -> None:
    """Replace README's block between :data:`README_BEGIN` and :data:`README_END` by :func:`readme_tables`."""
    text = Path(readme).read_text()
    a, b = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    tables = readme_tables(yaml.safe_load(Path(path).read_text()))
    Path(readme).write_text(text[:a] + "\n" + tables + text[b:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m toolbench_lib.bench.regression", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--write", action="store_true", help=f"store the fresh numbers under {KEY!r}")
    p.add_argument("--readme", action="store_true",
                   help="only rewrite README's reference tables from the stored numbers (no run)")
    p.add_argument("--data-dir", default=None, help="ToolBench data folder (default: the usual search)")
    args = p.parse_args(argv)
    if args.readme:
        write_readme()
        print(f"wrote the reference tables of {README} from {REFERENCE_FILE}")
        return 0
    fresh = measure(args.data_dir)
    if args.write:
        write(fresh)
        write_readme()
        print(f"wrote {KEY} to {REFERENCE_FILE} and README's reference tables")
        return 0
    diff = differences(fresh, stored())
    print("\n".join(diff) if diff else f"{KEY}: every number within {TOLERANCE} of {REFERENCE_FILE}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
