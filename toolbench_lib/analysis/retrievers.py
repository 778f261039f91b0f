"""The study across retriever families (dense, BM25, hybrid): RtP against PtR within each family, the
crossover, k-ablation, divergence and routing per family, and BM25's scale study."""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import DEPTH, K
from ..data.atomic import atomic_path
from ..data.queries import DEFAULT_GT, subset_alias
from ..data.tables import cached_tables
from ..eval.compare import compare, significant
from ..eval.evaluation import evaluate, recall_at
from ..retrieval.bm25 import term_counts
from ..retrieval.families import FAMILIES
from ..retrieval.rankings import search_and_merge
from ..retrieval.retrievers import get_retriever, method_name, ptr_texts, split_method
from .k_ablation import k_ablation
from .numbers import join_words
from .scale import draw_subregistry
from .style import FAMILY_HATCH, FAMILY_LINESTYLE, LEGEND_SIZE, METHOD_COLORS, set_panels
from .summary import summary_table

CODE = "analysis/retrievers.py"  # cached tables here are keyed by this module's code and what it imports

ALPHA = 0.05
ARCH_LABEL = {"rtp": "RtP", "ptr": "PtR"}


def families_of(result) -> list[str]:
    """The retriever families whose RtP and PtR both have rankings in the study, in :data:`FAMILIES` order."""
    have = set(result.methods)
    return [f for f in FAMILIES if method_name("rtp", f) in have and method_name("ptr", f) in have]


def family_table(result, k: int = K, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """``subset, retriever, method, n_queries, n_runs, recall_mean, recall_lo, recall_hi, precision_mean,
    llm_calls``: one row per set, family and architecture (``method`` is ``rtp`` or ``ptr``)."""
    table = summary_table(result, k, [gt], n_resamples=2000)
    table = table[table["architecture"].isin(ARCH_LABEL)]
    out = table[["subset", "retriever", "architecture", "n_queries", "n_runs", "recall_mean", "recall_ci_low",
                 "recall_ci_high", "precision_mean"]].rename(columns={
        "architecture": "method", "recall_ci_low": "recall_lo", "recall_ci_high": "recall_hi"})
    out = out.assign(llm_calls=[int(get_retriever(m).uses_stubs) for m in table["method"]])
    order = {f: i for i, f in enumerate(FAMILIES)}
    sets = [subset_alias(s) for s in dict.fromkeys(result.queries["subset"])]
    out = out.assign(_f=out["retriever"].map(order), _s=out["subset"].map(sets.index))
    return out.sort_values(["_s", "_f", "method"], ascending=[True, True, False]).drop(
        columns=["_f", "_s"]).reset_index(drop=True)


TEST_COLUMNS = ["comparison", "subset", "retriever", "n_queries", "n_groups", "n_runs", "rtp", "ptr", "diff",
                "ci_low", "ci_high", "ptr_wins", "rtp_wins", "ties", "p", "p_holm", "family", "note",
                "p_wilcoxon_robustness", "p_runs_robustness"]


def family_tests(result, k: int = K, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """PtR against RtP within each family and set (``diff`` = PtR − RtP recall@k): the rows of
    :func:`~toolbench_lib.eval.compare.compare` (the primary endpoint's test) with its robustness columns."""
    ev = evaluate(result)
    sets = list(dict.fromkeys(ev.subsets))
    frames = []
    for family in families_of(result):
        a, b = method_name("rtp", family), method_name("ptr", family)
        t = compare(ev, a, b, sets, gt, k, "recall")
        names = {"n": "n_queries", "mean_a": "rtp", "mean_b": "ptr", "wins": "ptr_wins", "losses": "rtp_wins"}
        frames.append(t.rename(columns=names).assign(retriever=family, n_runs=ev.n_runs))
    if not frames:
        return pd.DataFrame(columns=TEST_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["subset"] = out["subset"].map(subset_alias)
    return out[TEST_COLUMNS]


PAPER_PATTERN = {"G1": "RtP", "G2": "PtR", "G3": "PtR"}  # the paper's crossover, by set


def crossover(tests: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per family: the architecture ahead on each set (point estimate; significant: Holm-adjusted p below
    ``alpha``), whether the paper's pattern holds, and on how many sets significantly."""
    rows = []
    for family, g in tests.groupby("retriever", sort=False):
        g = g.set_index("subset")
        sets = [s for s in PAPER_PATTERN if s in g.index]
        point = {s: "PtR" if g.loc[s, "diff"] > 0 else "RtP" for s in sets}
        sig = {s: point[s] if significant(g.loc[s], alpha) else "neither" for s in sets}
        rows.append({"retriever": family, **{f"ahead_{s}": point[s] for s in sets},
                     **{f"significant_{s}": sig[s] for s in sets},
                     "pattern_holds": all(point[s] == PAPER_PATTERN[s] for s in sets),
                     "significant_sets": sum(sig[s] == PAPER_PATTERN[s] for s in sets), "n_sets": len(sets)})
    return pd.DataFrame(rows)


def crossover_sentence(cross: pd.DataFrame) -> str:
    """Whether the crossover depends on the retriever, in one generated paragraph."""
    if cross.empty:
        return "No retriever family was studied."
    holds = cross[cross["pattern_holds"]]["retriever"].tolist()
    fails = cross[~cross["pattern_holds"]]["retriever"].tolist()
    sets = [c.removeprefix("ahead_") for c in cross.columns if c.startswith("ahead_")]
    parts = [f"{r['retriever']}: " + ", ".join(f"{s} {r[f'ahead_{s}']}" for s in sets)
             + f" ({r['significant_sets']} of {r['n_sets']} sets significant in the paper's direction)"
             for _, r in cross.iterrows()]
    if holds and fails:
        verdict = (f"The answer depends on the retriever: the paper's crossover (RtP ahead on G1, PtR on G2 "
                   f"and G3) appears at the point estimates with {join_words(holds)} but not with "
                   f"{join_words(fails)}.")
    elif holds:
        verdict = "The paper's crossover appears at the point estimates with every retriever family studied."
    else:
        verdict = "The paper's crossover appears with none of the retriever families studied."
    return verdict + " Ahead per set: " + "; ".join(parts) + "."


def top_k_overlaps(result, k: int = K) -> pd.DataFrame:
    """``retriever, subset, qkey, shared, non_identical``: per family, PtR run and query (in that order), how
    many APIs its RtP and PtR top-k lists share and whether the two lists differ as sets."""
    q = result.queries.assign(alias=result.queries["subset"].map(subset_alias))
    rows = []
    for family in families_of(result):
        rtp = result.ranking(method_name("rtp", family), 0, k)
        for run in range(result.n_runs):
            ptr = result.ranking(method_name("ptr", family), run, k)
            for key, alias in zip(q["qkey"], q["alias"], strict=True):
                a, b = set(rtp.get(key, [])), set(ptr.get(key, []))
                rows.append((family, alias, key, len(a & b), a != b))
    return pd.DataFrame(rows, columns=["retriever", "subset", "qkey", "shared", "non_identical"])


def family_divergence(result, k: int = K) -> pd.DataFrame:
    """``subset, retriever, disjoint_share, mean_overlap``: share of queries whose RtP and PtR top-k lists
    share no API (mean over PtR's runs), and the mean number of shared APIs."""
    over = top_k_overlaps(result, k).assign(disjoint=lambda x: x["shared"] == 0)
    return pd.DataFrame([{"subset": s, "retriever": f, "disjoint_share": float(g["disjoint"].mean()),
                          "mean_overlap": float(g["shared"].mean()), "k": k}
                         for (f, s), g in over.groupby(["retriever", "subset"], sort=False)])


def routing_by_subset(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's policy per family (RtP on G1, PtR on G2 and G3) against always-RtP and always-PtR: mean
    recall over the sets' queries and the share of queries that skip the stub call."""
    rows = []
    for family, g in table.groupby("retriever", sort=False):
        g = g.set_index(["subset", "method"])
        sets = [s for s in PAPER_PATTERN if (s, "rtp") in g.index]
        n = {s: g.loc[(s, "rtp"), "n_queries"] for s in sets}
        total = sum(n.values())

        def pooled(choice, g=g, sets=sets, n=n, total=total):
            return sum(g.loc[(s, choice(s)), "recall_mean"] * n[s] for s in sets) / total

        best = sum(max(g.loc[(s, a), "recall_mean"] for a in ("rtp", "ptr")) * n[s] for s in sets)
        rows.append({"retriever": family, "always_rtp": pooled(lambda s: "rtp"),
                     "always_ptr": pooled(lambda s: "ptr"),
                     "by_subset": pooled(lambda s: "rtp" if PAPER_PATTERN[s] == "RtP" else "ptr"),
                     "oracle_per_set": best / total,
                     "stub_calls_saved": sum(n[s] for s in sets if PAPER_PATTERN[s] == "RtP") / total})
    return pd.DataFrame(rows)


def family_figure(table: pd.DataFrame, k: int = K) -> plt.Figure:
    """Recall@k per set: bars for each family and architecture, 95% CI error bars."""
    fams = list(dict.fromkeys(table["retriever"]))
    fig, panels = set_panels(table, 3.8)
    for ax, _, s in panels:
        for j, arch in enumerate(("rtp", "ptr")):
            a = s[s["method"] == arch].set_index("retriever").reindex(fams)
            x = np.arange(len(fams)) + (j - 0.5) * 0.38
            err = np.vstack([a["recall_mean"] - a["recall_lo"], a["recall_hi"] - a["recall_mean"]])
            bars = ax.bar(x, a["recall_mean"], 0.36, yerr=err, capsize=3, color=METHOD_COLORS[arch],
                          edgecolor="white", label=ARCH_LABEL[arch])
            for bar, fam in zip(bars, fams, strict=True):
                bar.set_hatch(FAMILY_HATCH.get(fam, ""))
        ax.set_xticks(np.arange(len(fams)), fams)
        ax.set_xlabel("retriever")
    first = panels[0][0]
    first.set_ylabel(f"recall@{k}")
    top = float(np.nanmax(table["recall_hi"])) if len(table) else 1.0
    first.set_ylim(0, top * 1.3)  # the panels share it; room above the bars: the legend covers none
    fig.legend(*first.get_legend_handles_labels(), loc="upper center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, 0.93))
    fig.suptitle(f"RtP and PtR with each retriever family (recall@{k}, 95% CI over API samples)")
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return fig


def family_k_figure(ktable: pd.DataFrame) -> plt.Figure:
    """Recall against k per set: one line per architecture (its colour) and family (its line style)."""
    fig, panels = set_panels(ktable)
    for ax, _, s in panels:
        for (fam, arch), g in s.groupby(["retriever", "architecture"], sort=False):
            if arch not in ARCH_LABEL:
                continue
            ax.plot(g["k"], g["recall"], color=METHOD_COLORS[arch], ls=FAMILY_LINESTYLE.get(fam, "-"),
                    label=f"{ARCH_LABEL[arch]} {fam}")
        ax.set_xlabel("k")
    panels[0][0].set_ylabel("recall@k")
    panels[-1][0].legend(fontsize=LEGEND_SIZE, loc="lower right")
    fig.suptitle("Recall against k per retriever family (colour: architecture; line style: family)")
    fig.tight_layout()
    return fig


def study_tables(result, k: int = K, gt: str = DEFAULT_GT) -> dict[str, pd.DataFrame]:
    """Every table of the retriever study, named as saved (``retriever_main``, ``retriever_tests``, ...;
    ``retriever_k`` with ``architecture`` and ``retriever``)."""
    main = family_table(result, k, gt)
    tests = family_tests(result, k, gt)
    ktable = k_ablation(result, range(1, 21), [gt])
    parts = ktable["method"].map(split_method)
    return {"retriever_main": main, "retriever_tests": tests, "retriever_crossover": crossover(tests),
            "retriever_k": ktable.assign(architecture=parts.str[0], retriever=parts.str[1]),
            "retriever_divergence": family_divergence(result, k),
            "retriever_routing": routing_by_subset(main)}


def provenance_markdown(result) -> str:
    """What each retriever family of the study is (from its provenance), as a Markdown list."""
    prov = result.provenance.get("retrievers") or {}
    if not prov:
        return "_The study's provenance does not describe its retrievers._"
    lines = []
    for family, what in prov.items():
        text = what if isinstance(what, str) else "; ".join(
            f"{k}: {v if not isinstance(v, dict) else ', '.join(f'{a} {b}' for a, b in v.items())}"
            for k, v in what.items())
        lines.append(f"- **{family}**: {text}")
    return "\n".join(lines)


def cached_search_ms(rcfg, setup, result, n: int = 200) -> dict[str, float]:
    """Milliseconds per query of each family searching the first ``n`` queries (``<family>:query``) and their
    run-0 stubs (``<family>:stubs``) after a warm-up, kept in the study's ``search_ms.json``."""
    path = rcfg.study_dir / "search_ms.json"
    try:
        stored = json.loads(path.read_text())
        if isinstance(stored.get("ms"), dict) and all(isinstance(v, float) for v in stored["ms"].values()):
            return stored["ms"]
    except (OSError, ValueError, AttributeError):
        pass
    q = result.queries.head(n)
    texts_query, stubs, ms = q["query"].tolist(), ptr_texts(q, result.stubs, 0), {}
    for f in families_of(result):
        searcher = setup.searcher(f)
        searcher.search_texts(list(texts_query[:2]), DEPTH)  # warm-up: model, index and caches loaded
        for kind, texts in (("query", [[t] for t in texts_query]), ("stubs", stubs)):
            t0 = time.perf_counter()
            search_and_merge(searcher, texts, DEPTH)
            ms[f"{f}:{kind}"] = 1000 * (time.perf_counter() - t0) / max(len(texts), 1)
    with atomic_path(path) as tmp:
        cpu = platform.processor() or platform.machine()
        tmp.write_text(json.dumps({"ms": ms, "queries": len(q), "cpu": cpu}))
    return ms


def bm25_scale_study(registry: pd.DataFrame, texts: Sequence[str], queries: pd.DataFrame, stubs: pd.DataFrame,
                     sizes: Sequence[int | None], seeds: Sequence[int], k: int = K, gt: str = DEFAULT_GT,
                     keep_gt: str = "candidates", run: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(scale, divergence)``: the scale study (:func:`~toolbench_lib.analysis.scale.scale_study`'s draws)
    with BM25, each sub-registry an index of its own; RtP searches the query, PtR run ``run``'s stubs."""
    ids = registry["api_id"].to_numpy()
    counts = term_counts(texts)  # the registry analysed once; each sub-registry's index slices its counts
    scale_rows, div_rows = [], []
    for subset in dict.fromkeys(queries["subset"]):
        sq = queries[queries["subset"] == subset]
        keep = {a for x in sq[keep_gt] for a in x}
        rel = [set(x) for x in sq[gt]]
        q_texts = [[t] for t in sq["query"]]
        s_texts = ptr_texts(sq, stubs, run)
        for size in sizes:
            for seed in seeds if size is not None and size < len(registry) else [0]:
                sub = draw_subregistry(registry, size, seed, keep)
                rows = np.sort(sub.cols)
                index = counts.index(rows)
                lists = {}
                for arch, tx in (("rtp", q_texts), ("ptr", s_texts)):
                    _, merged = search_and_merge(index, tx, k)
                    lists[arch] = [ids[m.rows].tolist() for m in merged]
                base = {"size": len(rows), "target_size": sub.target_size, "seed": seed,
                        "subset": subset_alias(subset), "retriever": "bm25", "k": k, "n_queries": len(sq),
                        "keep_gt": keep_gt, "note": sub.note}
                for arch in ("rtp", "ptr"):
                    rec = recall_at(lists[arch], rel, k)
                    scale_rows.append({**base, "method": arch, "gt": gt, "recall": float(np.mean(rec))})
                disjoint = [not set(a) & set(b) for a, b in zip(lists["rtp"], lists["ptr"], strict=True)]
                div_rows.append({**base, "no_overlap_share": float(np.mean(disjoint))})
    return pd.DataFrame(scale_rows), pd.DataFrame(div_rows)


def scale_gap(scale: pd.DataFrame) -> pd.DataFrame:
    """Per set and size: RtP's and PtR's recall (mean and std over seeds) and PtR − RtP."""
    g = scale.groupby(["subset", "size", "method"])["recall"].agg(["mean", "std"]).unstack("method")
    out = pd.DataFrame({"rtp": g[("mean", "rtp")], "ptr": g[("mean", "ptr")],
                        "rtp_std": g[("std", "rtp")].fillna(0.0), "ptr_std": g[("std", "ptr")].fillna(0.0)})
    out["ptr_minus_rtp"] = out["ptr"] - out["rtp"]
    return out.reset_index()


def scale_figure(gap: pd.DataFrame, k: int = K) -> plt.Figure:
    """BM25's RtP and PtR recall@k against sub-registry size (log x), one panel per set, ±1 std over seeds."""
    fig, panels = set_panels(gap)
    for ax, _, g in panels:
        g = g.sort_values("size")
        for arch, color in (("rtp", METHOD_COLORS["rtp"]), ("ptr", METHOD_COLORS["ptr"])):
            ax.plot(g["size"], g[arch], marker="o", color=color, label=f"{ARCH_LABEL[arch]} bm25")
            ax.fill_between(g["size"], g[arch] - g[f"{arch}_std"], g[arch] + g[f"{arch}_std"], color=color,
                            alpha=0.2)
        ax.set_xscale("log")
        ax.set_xlabel("registry size (APIs)")
    panels[0][0].set_ylabel(f"recall@{k}")
    panels[-1][0].legend(loc="upper right")
    fig.suptitle("BM25: recall against registry size (each sub-registry its own index; ±1 std over seeds)")
    fig.tight_layout()
    return fig


def cached_bm25_scale(folder, setup, result, sizes, seeds: int, k: int = K,
                      gt: str = DEFAULT_GT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(scale, gap)``: :func:`bm25_scale_study`'s recall per method with, on every row, the share of
    queries whose RtP and PtR top-k lists are disjoint, kept (checksummed) in ``folder`` under its
    parameters' key; and :func:`scale_gap` with the mean disjoint share per set and size."""
    blob = f"{list(sizes)}|{list(range(seeds))}|{k}|{gt}".encode()
    key = f"bm25-scale-{hashlib.sha256(blob).hexdigest()[:10]}"

    def make() -> dict[str, pd.DataFrame]:
        scale, div = bm25_scale_study(setup.ds.registry, setup.ds.texts, result.queries, result.stubs, sizes,
                                      range(seeds), k, gt)
        keys = ["subset", "size", "seed"]
        return {"scale": scale.merge(div[[*keys, "no_overlap_share"]], on=keys)}

    scale = cached_tables(folder, key, make, code=CODE)["scale"]
    div = scale.groupby(["subset", "size"], as_index=False)["no_overlap_share"].mean()
    return scale, scale_gap(scale).merge(div, on=["subset", "size"])


