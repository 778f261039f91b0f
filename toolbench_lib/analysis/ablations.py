"""Ablations that name the causes of this toolkit's gaps to the paper: the decomposer, the stub text, the
divergence design and the embedder. Each returns tables and a verdict sentence built from their numbers."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import DEPTH, K
from ..data.queries import DEFAULT_GT, clusters, subset_alias
from ..data.tables import cached_tables
from ..eval.evaluation import evaluate, recall_at, score_rankings
from ..eval.stats import cluster_difference_ci, spearman
from ..retrieval.rankings import DenseSearcher, search_and_merge
from ..retrieval.retrievers import ptr_texts
from ..study.ablation_runs import embedder_studies
from .intervals import DIFF_CI, LO_HI, PTR_VS_RTP, paired_columns, with_ci
from .numbers import fmt_p
from .retrievers import ARCH_LABEL
from .scale import gt_column_sets
from .similarity import topk_columns
from .stub_analysis import stub_top1
from .style import METHOD_COLORS, OTHER_COLORS

CODE = "analysis/ablations.py"  # cached tables here are keyed by this module's code and what it imports

STUB_TEXT_VARIANTS = ("query", "query-brand", "name", "reasoning", "name+reasoning", "name+reasoning-brand")
# RtP's blue and PtR's red for the query and the stubs as run, lighter without brand words; the stub's parts
# in colours of neither an architecture nor a set.
STUB_TEXT_COLORS = dict(zip(STUB_TEXT_VARIANTS, (METHOD_COLORS["rtp"], "#9ecae1", OTHER_COLORS[0],
                                                 OTHER_COLORS[1], METHOD_COLORS["ptr"], "#f4a6a6"),
                            strict=True))
_WORD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9+&'-]|\.(?=[A-Za-z0-9]))*")


def stub_counts(result, run: int = 0) -> pd.Series:
    """Stubs per query in one run (0 for a query whose stubs fell back to the raw query)."""
    st = result.stubs[result.stubs["run"] == run]
    fell = st.groupby("qkey")["fell_back"].first()
    n = st.groupby("qkey").size()
    return n.where(~fell.reindex(n.index, fill_value=False), 0).reindex(result.queries["qkey"], fill_value=0)


def coverage(result, k: int, gt: str = DEFAULT_GT, run: int = 0) -> pd.Series:
    """Per query: share of its ground-truth APIs found by at least one of its stubs in that stub's top k."""
    own = result.scored_text_rankings("ptr", run)
    qrels = result.qrels(gt)
    keys = list(qrels)
    found = [list(dict.fromkeys(a for ranking in own.get(q, []) for a in list(ranking)[:k])) for q in keys]
    depth = max([1, *map(len, found)])
    return pd.Series(recall_at(found, [qrels[q] for q in keys], depth), index=keys)


def query_scores(result, method: str, run: int, k: int, gt: str, keys: pd.Series) -> pd.DataFrame:
    """``recall, precision`` at ``k`` of one method and run for each query of ``keys`` (0 where the study has
    none), read from the study's evaluation."""
    s = evaluate(result).scores(k, gt, methods=(method,))
    return s[s["run"] == run].set_index("qkey").reindex(keys, fill_value=0.0)


def decomposition_ablation(llm_result, rules_result, k: int = K, gt: str = DEFAULT_GT,
                           run: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """``(table, by_stubs, verdict)``: PtR with the LLM's and the rules' stubs against RtP, per set, with the
    paired comparison (``ptr_minus_rtp``, CI, p, wins); ``by_stubs``: both recalls by stubs (1, 2, 3, 4+)."""
    q = llm_result.queries
    rtp = query_scores(llm_result, "rtp", 0, k, gt, q["qkey"])
    rows, by_stub_rows = [], []
    for name, res in (("llm", llm_result), ("rules", rules_result)):
        ptr = query_scores(res, "ptr", run, k, gt, q["qkey"])
        n_stubs = stub_counts(res, run)
        cov = coverage(res, k, gt, run)
        frame = pd.DataFrame({"qkey": q["qkey"], "subset": q["subset"].map(subset_alias),
                              "ptr": ptr["recall"].to_numpy(), "rtp": rtp["recall"].to_numpy(),
                              "n_stubs": n_stubs.to_numpy(), "coverage": cov.reindex(q["qkey"]).to_numpy()})
        for subset, g in frame.groupby("subset", sort=False):
            cl = clusters(q, g["qkey"])
            row = {"subset": subset, "decomposer": name, "ptr_recall": g["ptr"].mean(),
                   "rtp_recall": g["rtp"].mean(), "stubs_per_query": g["n_stubs"].mean(),
                   "coverage": g["coverage"].mean(), "n_queries": len(g),
                   **paired_columns(g["rtp"], g["ptr"], {**PTR_VS_RTP, "diff": "ptr_minus_rtp"}, cl)}
            rows.append(with_ci(with_ci(row, "ptr_recall", g["ptr"], cl), "rtp_recall", g["rtp"], cl))
        frame["stubs_bucket"] = np.where(frame["n_stubs"] >= 4, "4+", frame["n_stubs"].astype(str))
        for (subset, bucket), g in frame.groupby(["subset", "stubs_bucket"], sort=True):
            by_stub_rows.append({"subset": subset, "decomposer": name, "n_stubs": bucket, "n_queries": len(g),
                                 "ptr_recall": g["ptr"].mean(), "rtp_recall": g["rtp"].mean()})
    table = pd.DataFrame(rows)
    return table, pd.DataFrame(by_stub_rows), decomposition_verdict(table)


def decomposition_verdict(table: pd.DataFrame) -> str:
    """One sentence per set: with which decomposer PtR and RtP differ by the paired 95% CI (run 0, each
    comparison unadjusted), with the numbers."""
    parts = []
    for subset, g in table.groupby("subset", sort=False):
        g = g.set_index("decomposer")
        rtp = g["rtp_recall"].iloc[0]
        ahead = [d for d in g.index if g.loc[d, "ci_low"] > 0]
        behind = [d for d in g.index if g.loc[d, "ci_high"] < 0]
        nums = ", ".join(f"PtR-{d} {g.loc[d, 'ptr_recall']:.3f} ({g.loc[d, 'stubs_per_query']:.1f} stubs, "
                         f"coverage {g.loc[d, 'coverage']:.2f}; vs RtP {g.loc[d, 'ptr_minus_rtp']:+.3f} "
                         f"[{g.loc[d, 'ci_low']:+.3f}, {g.loc[d, 'ci_high']:+.3f}], "
                         f"{fmt_p(g.loc[d, 'p'])})" for d in g.index)
        def named(ds: list[str]) -> str:
            return f"the {' and '.join(ds)} decomposer{'s' * (len(ds) > 1)}"

        leads = [f"PtR beats RtP ({rtp:.3f}) with {named(ahead)}"] if ahead else []
        leads += [f"RtP ({rtp:.3f}) beats PtR with {named(behind)}"] if behind else []
        lead = "; ".join(leads) or f"no decomposer separates PtR from RtP ({rtp:.3f}; every 95% CI holds 0)"
        parts.append(f"{subset}: {lead}: {nums}")
    return "Run 0, each comparison a paired t-test, unadjusted. " + "; ".join(parts) + "."


def brand_words(query: str) -> set[str]:
    """The query's proper names: capitalised words not opening a sentence, and words with digits or inner
    capitals (``YouTube``, ``Web3``), lower-cased."""
    words = set()
    for sentence in re.split(r"(?<=[.!?])\s+", query):
        tokens = _WORD.findall(sentence)
        for i, w in enumerate(tokens):
            inner = any(c.isupper() for c in w[1:]) or any(c.isdigit() for c in w)
            if (i > 0 and w[0].isupper() and w.lower() not in {"i", "i'm", "i'd"}) or inner:
                words.add(w.lower())
    return words


def remove_words(text: str, words: set[str]) -> str:
    """``text`` without any of ``words`` (case-insensitive, whole words); the raw text if nothing is left."""
    kept = [w for w in text.split() if w.strip(".,;:!?()\"'").lower() not in words]
    return " ".join(kept) if kept else text


def stub_text_variants(queries: pd.DataFrame, stubs: pd.DataFrame,
                       run: int = 0) -> dict[str, list[list[str]]]:
    """The texts each variant searches per query (a query without stubs searches itself)."""
    st = stubs[stubs["run"] == run].sort_values(["qkey", "stub_idx"])
    by_q = {q: g for q, g in st.groupby("qkey", sort=False)}
    out: dict[str, list[list[str]]] = {v: [] for v in STUB_TEXT_VARIANTS}
    full = ptr_texts(queries, stubs, run)
    for (qkey, query), texts in zip(zip(queries["qkey"], queries["query"], strict=True), full, strict=True):
        g = by_q.get(qkey)
        names = g["name"].astype(str).tolist() if g is not None else []
        reasons = g["reasoning"].astype(str).tolist() if g is not None else []
        brands = brand_words(query)
        out["query"].append([query])
        out["query-brand"].append([remove_words(query, brands)])
        out["name+reasoning"].append(texts)
        out["name+reasoning-brand"].append([remove_words(t, brands) for t in texts])
        out["name"].append([n or query for n in names] or [query])  # a query without stubs: itself
        out["reasoning"].append([r or n or query for n, r in zip(names, reasons, strict=True)] or [query])
    return out


def stub_text_ablation(setup, result, k: int = K, gt: str = DEFAULT_GT, run: int = 0,
                       depth: int = DEPTH) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """``(table, coupling, verdict)``: recall@k per set of each stub-text variant (``subset, variant,
    recall, precision, n_queries``, the recall's bootstrap 95% CI); ``coupling``: :func:`query_coupling`."""
    q, ids = result.queries, setup.api_ids
    searcher = DenseSearcher(setup.index, setup.encode)  # each text searched, merged by best cosine
    rows, per_query = [], {}
    for variant, texts in stub_text_variants(q, result.stubs, run).items():
        _, merged = search_and_merge(searcher, texts, depth)
        ranking = {qk: [ids[r] for r in m.rows.tolist()] for qk, m in zip(q["qkey"], merged, strict=True)}
        pq = per_query[variant] = score_rankings(ranking, q, gt, k)
        for subset, g in pq.groupby(q["subset"].map(subset_alias).to_numpy(), sort=False):
            row = {"subset": subset, "variant": variant, "recall": g["recall"].mean(),
                   "precision": g["precision"].mean(), "n_queries": len(g)}
            rows.append(with_ci(row, "recall", g["recall"], clusters(q, g["qkey"])))
    table, parts = pd.DataFrame(rows), []
    for subset, g in table.groupby("subset", sort=False):
        r = g.set_index("variant")["recall"]
        best = r.drop(["query", "query-brand"]).idxmax()
        parts.append(f"{subset}: best stub text is {best} ({r[best]:.3f}; query {r['query']:.3f}, name "
                     f"{r['name']:.3f}, reasoning {r['reasoning']:.3f}, brand words removed "
                     f"{r['name+reasoning-brand']:.3f} vs {r['name+reasoning']:.3f})")
    return table, query_coupling(q, per_query), "; ".join(parts) + "."


def query_coupling(q: pd.DataFrame, per_query: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per set: the share of queries with a brand word, PtR − RtP as run (``diff``) and with the query's
    brand words removed from both (``diff_nobrand``), each a paired test clustered by API sample, and the
    change (``change``: ``diff_nobrand − diff``). The paper's coupling predicts RtP's G1 lead shrinks."""
    r = {v: per_query[v]["recall"].to_numpy() for v in per_query}
    rtp, rtp_nb, ptr, ptr_nb = (r[v] for v in ("query", "query-brand", "name+reasoning",
                                               "name+reasoning-brand"))
    has_brand = np.array([bool(brand_words(t)) for t in q["query"]])
    rows = []
    for subset, idx in pd.Series(range(len(q))).groupby(q["subset"].map(subset_alias).to_numpy(), sort=False):
        i, cl = idx.to_numpy(), clusters(q, q["qkey"].iloc[idx])
        row = {"subset": subset, "n_queries": len(i), "brand_share": has_brand[i].mean(),
               "rtp": rtp[i].mean(),
               "rtp_nobrand": rtp_nb[i].mean(), "ptr": ptr[i].mean(), "ptr_nobrand": ptr_nb[i].mean(),
               **paired_columns(rtp[i], ptr[i], {**DIFF_CI, "p": "p"}, cl)}
        for name, a, b in (("diff_nobrand", rtp_nb[i], ptr_nb[i]),
                           ("change", ptr[i] - rtp[i], ptr_nb[i] - rtp_nb[i])):
            row |= paired_columns(a, b, {"diff": name, "ci_low": f"{name}_lo", "ci_high": f"{name}_hi",
                                         "p": f"p_{name.removeprefix('diff_')}"}, cl)
        rows.append(row)
    return pd.DataFrame(rows)


def bars_with_ci(ax, levels: pd.DataFrame, low: pd.DataFrame, high: pd.DataFrame, colors=None) -> None:
    """Grouped bars of ``levels`` (a group a row, a bar a column), each with its own 95% CI."""
    err = np.stack([[levels[c] - low[c], high[c] - levels[c]] for c in levels.columns])  # (bars, 2, groups)
    levels.plot.bar(ax=ax, rot=0, yerr=err, capsize=2, color=colors, error_kw={"lw": 0.8, "ecolor": "0.3"})


DIVERGENCE_DESIGNS = ("set_gt", "own_gt", "no_gt")


def _topk_sets(matrix_rows: np.ndarray, cols: np.ndarray, k: int) -> list[set[int]]:
    return [set(top.tolist()) for top in topk_columns(matrix_rows, cols, k)[0]]


def _sub_columns(n: int, kept: set[int], size: int, seed: list[int]) -> np.ndarray:
    """A sub-registry's columns: ``kept`` and a seeded draw of the other columns up to ``size``."""
    rng = np.random.default_rng(seed)
    kept_arr = np.fromiter(kept, dtype=np.int64, count=len(kept))
    others = np.ones(n, dtype=bool)
    others[kept_arr] = False  # np.setdiff1d's sorted result, without its sort of n ids
    extra = rng.choice(np.flatnonzero(others), size=max(size - len(kept_arr), 0), replace=False)
    return np.concatenate([kept_arr, extra])


def divergence_ablation(cache, queries: pd.DataFrame, size: int = 1000, seeds: Sequence[int] = (0, 1, 2),
                        k: int = K, gt: str = DEFAULT_GT, keep: str = "candidates",
                        run: int = 0) -> tuple[pd.DataFrame, str]:
    """``(table, verdict)``: share of queries whose RtP and PtR top-k share no API, per set and design
    (sub-registries keeping the set's ground truth, ``set_gt``; the query's, ``own_gt``; none, ``no_gt``;
    ``full``: the whole index), with the share kept for ground truth and both recalls."""
    n = cache.n_columns
    lookup = {a: i for i, a in enumerate(cache.api_ids)}
    rows = []
    for subset, sq in queries.groupby("subset", sort=False):
        pos = cache.query_positions(sq["qkey"].tolist())
        rtp, ptr = cache.rtp[pos], cache.ptr[run][pos]
        keep_sets = [{lookup[a] for a in ids if a in lookup} for ids in sq[keep]]
        gt_sets = gt_column_sets(cache, sq, gt)  # an id outside the index counts in recall's denominator
        set_keep = set().union(*keep_sets) if keep_sets else set()
        designs = [("full", 0)] + [(d, s) for d in DIVERGENCE_DESIGNS for s in seeds]
        for design, seed in designs:
            if design == "own_gt":  # one sub-registry per query
                subs = [_sub_columns(n, keep_sets[i], size, [int(seed), i]) for i in range(len(sq))]
                tops = [(_topk_sets(rtp[i:i + 1], c, k)[0], _topk_sets(ptr[i:i + 1], c, k)[0])
                        for i, c in enumerate(subs)]
                gt_share = [len(keep_sets[i]) / len(c) for i, c in enumerate(subs)]
            else:  # one sub-registry (or the full index) for every query of the set: searched at once
                kept = set_keep if design == "set_gt" else set()
                cols = np.arange(n) if design == "full" else _sub_columns(n, kept, size, [int(seed), 0])
                tops = list(zip(_topk_sets(rtp, cols, k), _topk_sets(ptr, cols, k), strict=True))
                gt_share = [] if design == "full" else [len(kept) / len(cols)] * len(sq)
            disjoint = [not (a & b) for a, b in tops]
            rec_r = recall_at([sorted(a) for a, _ in tops], gt_sets[:len(tops)], k)
            rec_p = recall_at([sorted(b) for _, b in tops], gt_sets[:len(tops)], k)
            rows.append({"subset": subset_alias(subset), "design": design, "seed": seed,
                         "size": n if design == "full" else size,
                         "no_overlap_share": float(np.mean(disjoint)),
                         "gt_share": float(np.mean(gt_share)) if gt_share else float("nan"),
                         "rtp_recall": float(np.mean(rec_r)), "ptr_recall": float(np.mean(rec_p)),
                         "n_queries": len(sq)})
    table = (pd.DataFrame(rows).groupby(["subset", "design", "size"], sort=False)
             .agg(**{c: (c, "mean") for c in ("no_overlap_share", "gt_share", "rtp_recall", "ptr_recall")},
                  n_seeds=("seed", "count"), n_queries=("n_queries", "first")).reset_index())
    return table, divergence_verdict(table)


def divergence_verdict(table: pd.DataFrame) -> str:
    t = table.groupby("design", sort=False)[["no_overlap_share", "gt_share"]].mean()
    def kept(x: float) -> str:  # by design: the ground truth kept in; more may be drawn by chance
        return (f" (ground truth kept in: {x:.0%} of the sub-registry)" if x > 0 else
                " (no ground truth kept in; some is drawn by chance)")

    parts = [f"{d}: {t.loc[d, 'no_overlap_share']:.0%} of queries with disjoint top-5"
             + (kept(t.loc[d, "gt_share"]) if not np.isnan(t.loc[d, "gt_share"]) else "") for d in t.index]
    return "Averaged over sets (each weighing the same, not pooled by query), " + "; ".join(parts) + "."


def stub_echo(setup, result, run: int = 0) -> pd.DataFrame:
    """Per query: mean and max cosine between its stubs' texts and the query itself (``subset, qkey,
    mean_cos, max_cos, n_stubs``); high values mean the stubs restate the query."""
    q = result.queries
    texts = ptr_texts(q, result.stubs, run)
    qv = setup.encode(q["query"].tolist())
    sv = setup.encode([t for ts in texts for t in ts])
    rows, pos = [], 0
    for i, (qkey, ts) in enumerate(zip(q["qkey"], texts, strict=True)):
        cos = sv[pos:pos + len(ts)] @ qv[i]
        pos += len(ts)
        rows.append({"subset": subset_alias(q["subset"].iloc[i]), "qkey": qkey, "mean_cos": float(cos.mean()),
                     "max_cos": float(cos.max()), "n_stubs": len(ts)})
    return pd.DataFrame(rows)


def echo_divergence(echo: pd.DataFrame, result, k: int = K, run: int = 0) -> tuple[pd.DataFrame, str]:
    """``(table, verdict)``: per set and over all queries, Spearman's rho of a query's stub echo (best stub
    cosine to the query) against disjoint RtP/PtR top-k lists (descriptive: no p), and the disjoint share in
    the lowest and highest thirds of echo with the CI of their difference, resampling API samples whole."""
    rtp, ptr = result.ranking("rtp", run, k=k), result.ranking("ptr", run, k=k)
    e = echo.assign(disjoint=[not (set(rtp.get(q, [])) & set(ptr.get(q, []))) for q in echo["qkey"]])
    rows = []
    for subset, g in [*e.groupby("subset", sort=False), ("all", e)]:
        rho, _ = spearman(g["max_cos"], g["disjoint"])
        third = pd.qcut(g["max_cos"].rank(method="first"), 3, labels=["low", "mid", "high"])
        by = g.groupby(third, observed=True)["disjoint"].mean()
        sizes = g.groupby(third, observed=True)["disjoint"].size()
        ends = third.isin(["low", "high"]).to_numpy()
        lo, hi = cluster_difference_ci(g["disjoint"].to_numpy(float)[ends], (third == "low").to_numpy()[ends],
                                       clusters(result.queries, g["qkey"].to_numpy()[ends]))
        rows.append({"subset": subset, "mean_cos": g["mean_cos"].mean(), "max_cos": g["max_cos"].mean(),
                     "n_stubs": g["n_stubs"].mean(), "disjoint_share": g["disjoint"].mean(),
                     "rho_disjoint_vs_echo": rho, "low_minus_high_ci_low": lo, "low_minus_high_ci_high": hi,
                     "disjoint_low_echo": by.get("low", float("nan")),
                     "disjoint_high_echo": by.get("high", float("nan")), "n_queries": len(g),
                     "n_low_echo": int(sizes.get("low", 0)), "n_high_echo": int(sizes.get("high", 0))})
    table = pd.DataFrame(rows)
    a = table.set_index("subset").loc["all"]
    low, high = a["disjoint_low_echo"], a["disjoint_high_echo"]
    verdict = (f"Stubs restate their query (best stub cosine {a['max_cos']:.2f} on average); the closer "
               f"they are, the more RtP and PtR agree: {low:.0%} of the least-echoing third of queries have "
               f"disjoint top-{k} lists against {high:.0%} of the most-echoing third"
               + (f" (difference {low - high:+.2f} [{a['low_minus_high_ci_low']:+.2f}, "
                  f"{a['low_minus_high_ci_high']:+.2f}], API samples resampled"
                  + (f"; Spearman rho {rho:+.2f}" if pd.notna(rho := a["rho_disjoint_vs_echo"]) else "")
                  + ")." if pd.notna(a["low_minus_high_ci_low"]) else "."))
    return table, verdict


def embedder_ablation(studies: dict[str, object], k: int = K,
                      gt: str = DEFAULT_GT) -> tuple[pd.DataFrame, str]:
    """``(table, verdict)`` of ``{embedder name: StudyResult}``: recall and precision per set, embedder and
    method; PtR's stub-to-top-1 cosines when right / wrong (``cos_correct``, ``cos_incorrect``, with CIs);
    each later embedder's recall minus the first's with its paired CI (``recall_diff``, ``diff_lo/hi``)."""
    rows, per_query = [], {}
    for name, res in studies.items():
        q = res.queries
        top1 = stub_top1(res, gt) if res.stubs is not None and len(res.stubs) else None
        if top1 is not None:
            top1 = top1[top1["api_id"].notna()].assign(subset=lambda t: t["subset"].map(subset_alias))
        for method in res.methods:
            pq = evaluate(res).scores(k, gt, methods=(method,))
            pq["subset"] = pq["subset"].map(subset_alias)
            for subset, g in pq.groupby("subset", sort=False):
                per_query[(name, method, subset)] = g.groupby("qkey")["recall"].mean()
                rows.append({"subset": subset, "embedder": name, "method": method,
                             "recall": g["recall"].mean(),
                             "precision": g["precision"].mean(), "registry_size":
                             res.provenance.get("registry_size"), "n_queries": g["qkey"].nunique()})
                if method == "ptr" and top1 is not None:
                    t = top1[top1["subset"] == subset]
                    for col, part in (("cos_correct", t[t["correct"]]), ("cos_incorrect", t[~t["correct"]])):
                        rows[-1][col] = float(part["score"].mean()) if len(part) else float("nan")
                        with_ci(rows[-1], col, part["score"].to_numpy(dtype=float), clusters(q, part["qkey"]))
    first = next(iter(studies), None)
    for row in rows:
        base = per_query.get((first, row["method"], row["subset"]))
        if row["embedder"] == first or base is None:
            continue
        mine = per_query[(row["embedder"], row["method"], row["subset"])]
        both = pd.concat([base, mine], axis=1, join="inner")
        cl = clusters(studies[first].queries, both.index)
        names = {**DIFF_CI, **LO_HI, "diff": "recall_diff"}
        row.update(paired_columns(both.iloc[:, 0], both.iloc[:, 1], names, cl))
    table = pd.DataFrame(rows)
    if table["embedder"].nunique() < 2:
        return table, f"Only {', '.join(studies)} could be run: no comparison between embedders."
    parts = []
    for subset, g in table.groupby("subset", sort=False):
        w = g.pivot(index="embedder", columns="method", values="recall")
        desc = ", ".join(f"{e}: RtP {w.loc[e, 'rtp']:.3f} / PtR {w.loc[e, 'ptr']:.3f}" for e in w.index)
        same = len({w.loc[e, "ptr"] > w.loc[e, "rtp"] for e in w.index}) == 1  # one winner for every embedder
        parts.append(f"{subset}: {desc} ({'same' if same else 'another'} winner by point estimates across "
                     "embedders)")
    return table, "; ".join(parts) + "."


NOT_RUN = "not run; `make ablations` runs it"


def embedder_ablation_tables(cfg, n_apis: int, names: list[str], per_set: int | None,
                             run: bool) -> tuple[dict | None, str]:
    """``({"ablation_embedder": table, "verdict": table} or None, note)``, stored beside the study under its
    settings' key; computed only when ``run`` (``make ablations``), else None and :data:`NOT_RUN` when
    nothing is stored; None and why when an embedder could not be run."""
    blob = json.dumps({"study": cfg.study_key(), "apis": n_apis, "names": list(names), "per_set": per_set},
                      sort_keys=True)
    key = f"embedder-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"
    stored = cached_tables(cfg.study_dir, key, None, code=CODE)
    if stored is not None:
        return stored, str(stored["verdict"]["note"].iloc[0])
    if not run:
        return None, NOT_RUN
    studies, note = embedder_studies(cfg, n_apis, names, per_set)
    if len(studies) < len(names):  # a model is not installed: nothing is kept
        return None, note
    table, verdict = embedder_ablation(studies, k=cfg.k)
    tables = {"ablation_embedder": table, "verdict": pd.DataFrame({"verdict": [verdict], "note": [note]})}
    return cached_tables(cfg.study_dir, key, lambda: tables, code=CODE), note


def embedder_figure(table: pd.DataFrame, k: int = K):
    """RtP's and PtR's recall per set under each embedder (``ablation_embedder``), in the methods' colours;
    the later embedders' bars hatched, with the 95% CI of their change from the first embedder."""
    sets, embedders = list(dict.fromkeys(table["subset"])), list(dict.fromkeys(table["embedder"]))
    by = table.set_index(["method", "embedder", "subset"]).sort_index()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / (2 * len(embedders))
    for j, (method, emb) in enumerate((m, e) for m in ("rtp", "ptr") for e in embedders):
        rows = by.loc[(method, emb)].reindex(sets)
        later = emb != embedders[0]
        err = (np.vstack([rows["recall_diff"] - rows["diff_lo"], rows["diff_hi"] - rows["recall_diff"]])
               if later else None)
        ax.bar(np.arange(len(sets)) + (j + 0.5) * width - 0.4, rows["recall"], width, yerr=err, capsize=2,
               color=METHOD_COLORS[method], hatch="//" if later else None, edgecolor="white",
               label=f"{ARCH_LABEL[method]} · {emb}")
    ax.set_xticks(range(len(sets)), sets)
    ax.set_ylabel(f"recall@{k}")
    ax.set_title("RtP and PtR under two embedders (same stubs, same sub-registry)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    return fig
