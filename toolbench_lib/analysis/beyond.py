"""Beyond the paper: fused discovery methods (:mod:`toolbench_lib.retrieval.fused`), their per-query scores,
costs (recorded stub calls plus the mean plan call), evidence and figures."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import FOLDS, SEED, K
from ..data.queries import DEFAULT_GT, clusters, subset_alias
from ..data.tables import cached_tables
from ..eval.evaluation import metric_values, recall_at, relevance
from ..retrieval import fused
from .fusion_board import BASELINES, METRICS, better_reference, metric_wide
from .style import METHOD_COLORS, OTHER_COLORS, set_panels, side_legend
from .summary import method_calls

CODE = "analysis/beyond.py"  # cached tables here are keyed by this module's code and what it imports

KS = tuple(range(1, 21))
TIE_TOL = 1e-9  # recall differences at or below this are ties


def per_query_metrics(lists: Mapping[str, Sequence[str]], qrels: Mapping[str, set[str]],
                   ks: Iterable[int] = KS) -> pd.DataFrame:
    """``qkey, metric, k, value`` of every query of ``qrels`` for one method's ranked lists."""
    ks = list(ks)
    keys = list(qrels)
    flags = relevance([lists.get(key, []) for key in keys], [set(qrels[key]) for key in keys], max(ks))
    n_gt = np.array([len(qrels[key]) for key in keys])
    frames = [pd.DataFrame({"qkey": keys, "metric": m, "k": k, "value": metric_values(flags, n_gt, m, k)})
              for m in METRICS for k in ks]
    return pd.concat(frames, ignore_index=True)


def method_scores(result, names: Sequence[str], gt: str = DEFAULT_GT, ks: Iterable[int] = KS,
                  params: Mapping[str, float] | None = None, setup=None, folds: int = FOLDS,
                  seed: int = SEED, tune_k: int = K) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(scores, decisions)`` of the named methods on a stored study (``-cv`` methods tuned for
    recall@``tune_k`` unless ``params`` are given): ``qkey, subset, method, metric, k, value`` (mean over
    PtR runs), and per query, run and method the ``-cv`` parameter and whether a stub call was needed."""
    ks = list(ks)
    kmax = max(ks)
    runs = sorted(int(r) for r in result.rankings.loc[result.rankings["method"] == "ptr", "run"].unique())
    if not runs:
        raise ValueError("the study has no PtR rankings; the fused methods need a study run with PtR")
    frames, decisions = [], []
    sep = "\x1f"
    for run in runs:
        inp = fused.study_inputs(result, run, gt, names, setup)
        lists, chosen = fused.method_runs(inp, names, kmax, params=params, folds=folds, seed=seed,
                                          tune_k=tune_k)
        # One count for all methods of the run: keys "method<sep>qkey".
        joint = {f"{name}{sep}{key}": lst for name, per_q in lists.items() for key, lst in per_q.items()}
        joint_qrels = {f"{name}{sep}{key}": rel for name in lists for key, rel in inp.qrels.items()}
        pq = per_query_metrics(joint, joint_qrels, ks)
        codes, joint_keys = pd.factorize(pq["qkey"])  # split each distinct key once, not each row
        split = pd.Series(joint_keys).str.split(sep, n=1, expand=True).to_numpy()
        frames.append(pq.assign(method=split[codes, 0], qkey=split[codes, 1], run=run))
        for name in lists:
            needs = fused.stub_calls(name, inp, chosen.get(name))
            ch = chosen.get(name) or {}
            decisions.append(pd.DataFrame({
                "qkey": inp.keys, "run": run, "method": name, "stub_call": [needs[k] for k in inp.keys],
                "rtp_top1_cosine": [inp.top1(k) for k in inp.keys],
                "param": [ch.get(k, np.nan) for k in inp.keys]}))
    scores = pd.concat(frames, ignore_index=True)
    scores = scores.groupby(["qkey", "method", "metric", "k"], as_index=False, sort=False)["value"].mean()
    sub = result.queries.set_index("qkey")["subset"].map(subset_alias)
    scores.insert(1, "subset", scores["qkey"].map(sub))
    scores["cluster"] = clusters(result.queries, scores["qkey"])  # the paired tests' clusters
    dec = pd.concat(decisions, ignore_index=True)
    dec.insert(1, "subset", dec["qkey"].map(sub))
    return scores, dec


def cached_method_scores(result, names: Sequence[str], cache_dir: str | Path | None = None,
                         **kwargs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`method_scores`, kept (checksummed) under ``cache_dir`` for the same study key, arguments and
    code; without ``cache_dir`` or a study key, computed every time."""
    study = result.provenance.get("study_key")
    if cache_dir is None or not study:
        return method_scores(result, names, **kwargs)
    args = {k: v for k, v in kwargs.items() if k != "setup"}  # the setup only supplies what the study holds
    blob = json.dumps({"study": study, "n_rankings": int(len(result.rankings)), "names": list(names),
                       "args": {k: list(v) if isinstance(v, Iterable) and not isinstance(v, str | Mapping)
                                else v for k, v in sorted(args.items())}}, sort_keys=True, default=str)
    key = "scores-" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def make() -> dict[str, pd.DataFrame]:
        return dict(zip(("scores", "decisions"), method_scores(result, names, **kwargs), strict=True))

    tables = cached_tables(Path(cache_dir), key, make, code=CODE)
    return tables["scores"], tables["decisions"]


def query_evidence(scores: pd.DataFrame, queries: pd.DataFrame, method: str, k: int = K,
                   n: int = 5) -> pd.DataFrame:
    """Per set, the ``n`` queries where ``method`` loses most recall@k against the better architecture."""
    wide = metric_wide(scores, k)
    text = queries.set_index("qkey")["query"]
    rows = []
    for _, part in wide.groupby("subset", sort=False):
        best = better_reference(part)
        d = part.assign(reference=best, diff=part[method] - part[best],
                        query=part["qkey"].map(text).str.slice(0, 140))
        rows.append(d.nsmallest(n, "diff")[["subset", "qkey", "reference", "rtp", "ptr", method, "diff",
                                            "query"]])
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


LOSS_COLUMNS = ["subset", "method", "reference", "n_queries", "wins", "losses", "ties", "gained", "lost",
                "diff", "losses_ptr_zero", "lost_ptr_zero"]


def loss_breakdown(scores: pd.DataFrame, method: str, k: int = K) -> pd.DataFrame:
    """Per set, where ``method``'s recall@k gap to the better architecture comes from: ``gained``/``lost``
    per query of the set (``diff = gained - lost``); ``losses_ptr_zero``: losses where PtR's own list holds
    no ground-truth API, ``lost_ptr_zero`` their share of ``lost``."""
    wide = metric_wide(scores, k)
    rows = []
    for subset, part in wide.groupby("subset", sort=False):
        ref = better_reference(part)
        d = part[method] - part[ref]
        lose = d < -TIE_TOL
        zero = lose & (part["ptr"] <= TIE_TOL)
        lost = float(-d[lose].sum())
        rows.append({"subset": subset, "method": method, "reference": ref, "n_queries": int(len(part)),
                     "wins": int((d > TIE_TOL).sum()), "losses": int(lose.sum()),
                     "ties": int((d.abs() <= TIE_TOL).sum()),
                     "gained": float(d[d > TIE_TOL].sum()) / len(part),
                     "lost": lost / len(part), "diff": float(d.mean()), "losses_ptr_zero": int(zero.sum()),
                     "lost_ptr_zero": max(0.0, float(-d[zero].sum()) / lost) if lost > 0 else 0.0})
    return pd.DataFrame(rows, columns=LOSS_COLUMNS)


def loss_sentences(breakdown: pd.DataFrame) -> list[str]:
    """One sentence per set of :func:`loss_breakdown`, its numbers written out."""
    out = []
    for r in breakdown.itertuples():
        ref = "RtP" if r.reference == "rtp" else "PtR"
        out.append(
            f"{r.subset}: `{r.method}` against {ref} (the better architecture here) wins {r.wins} and loses "
            f"{r.losses} of {r.n_queries} queries; the wins add {r.gained:.3f} of recall@k per query, the "
            f"losses cost {r.lost:.3f} (net {r.diff:+.3f}). "
            + (f"In {r.losses_ptr_zero} of the losses PtR's own list holds no ground-truth API: every stub "
               f"hit the fusion kept was wrong and pushed a right hit out of the top k "
               f"({abs(r.lost_ptr_zero):.0%} of what the losses cost)." if r.losses_ptr_zero else
               "None of the losses is on a query where PtR's own list holds no ground-truth API."))
    return out


def cost_table(result, decisions: pd.DataFrame) -> pd.DataFrame:
    """Per set and method: LLM calls and tokens per query before planning, and with the plan call."""
    c = method_calls(result)  # empty without calls
    stub_tok = c[c["stage"] == "stubs"].groupby(["qkey", "run"])["tokens"].sum()
    plan_tok = float(c.loc[c["stage"] == "plan", "tokens"].mean())
    tokens = stub_tok.reindex(pd.MultiIndex.from_arrays([decisions["qkey"], decisions["run"]]))
    d = decisions.assign(stub_tokens=np.where(decisions["stub_call"], tokens.to_numpy(dtype=float), 0.0))
    g = d.groupby(["subset", "method"], sort=False)
    out = g.agg(stub_calls_per_query=("stub_call", "mean"), stub_tokens_per_query=("stub_tokens", "mean"))
    out["llm_calls_per_query"] = out["stub_calls_per_query"] + 1.0
    out["plan_tokens_mean"] = plan_tok  # NaN when the study planned nothing (plan_limit 0)
    out["tokens_per_query"] = out["stub_tokens_per_query"] + (0.0 if np.isnan(plan_tok) else plan_tok)
    return out.reset_index()


def recall_vs_k(scores: pd.DataFrame, methods: Sequence[str], metric: str = "recall") -> plt.Figure:
    """A metric against k (1..20), one panel per set, one line per method."""
    s = scores[(scores["metric"] == metric) & scores["method"].isin(methods)]
    mean = s.groupby(["subset", "method", "k"], as_index=False)["value"].mean()
    fig, panels = set_panels(mean)
    others = iter(OTHER_COLORS * len(methods))
    colors = {m: METHOD_COLORS.get(m) or next(others) for m in methods}
    for ax, _, part in panels:
        for method in methods:
            m = part[part["method"] == method]
            ax.plot(m["k"], m["value"], label=method, color=colors[method],
                    lw=2.2 if method in BASELINES else 1.3, ls="-" if method in BASELINES else "--")
        ax.set_xlabel("k")
        ax.set_ylabel(f"{metric}@k")
    side_legend(fig, panels[0][0])
    fig.tight_layout()
    return fig


def cost_frontier(board: pd.DataFrame, costs: pd.DataFrame, k: int = K) -> plt.Figure:
    """Recall@k against LLM tokens per query, one panel per set: RtP, PtR and the best method of each cost
    with their 95% CIs and names (names at one cost stacked); every other method a small grey dot."""
    r = board[board["metric"] == "recall"].merge(costs, on=["subset", "method"])
    fig, panels = set_panels(r, sharey=False)
    for ax, _, p in panels:
        best = set(p.loc[p.groupby(p["tokens_per_query"].round(1))["mean"].idxmax(), "method"])
        named: dict[float, int] = {}  # names already written at each cost
        for _, row in p.sort_values("mean").iterrows():
            base = row["method"] in BASELINES
            if not base and row["method"] not in best:
                ax.plot(row["tokens_per_query"], row["mean"], ".", color="0.75", ms=5, zorder=1)
                continue
            ax.errorbar(row["tokens_per_query"], row["mean"], yerr=[[row["mean"] - row["ci_lo"]],
                        [row["ci_hi"] - row["mean"]]], fmt="o" if base else "s", ms=7 if base else 4,
                        color=METHOD_COLORS.get(row["method"], "0.4"), alpha=0.9, capsize=2)
            n = named.setdefault(round(float(row["tokens_per_query"]), 1), 0)
            named[round(float(row["tokens_per_query"]), 1)] = n + 1
            ax.annotate(row["method"], (row["tokens_per_query"], row["mean"]), fontsize=9,
                        xytext=(4, -12 + 13 * n), textcoords="offset points")
        plans = "" if r["plan_tokens_mean"].notna().any() else "; no plan calls in this study"
        ax.set_xlabel(f"LLM tokens per query (stubs + mean plan{plans})")
        ax.set_ylabel(f"recall@{k} (95% CI)")
    fig.tight_layout()
    return fig


def decision_regions(scores: pd.DataFrame, decisions: pd.DataFrame, threshold: float, k: int = K,
                     fused: str = "rrf") -> plt.Figure:
    """Per query: RtP's top-1 cosine against the recall@k the fused list gains over RtP, and the cut."""
    wide = metric_wide(scores[scores["method"].isin(["rtp", fused])], k)
    wide["cos"] = wide["qkey"].map(decisions.drop_duplicates("qkey").set_index("qkey")["rtp_top1_cosine"])
    wide["gain"] = wide[fused] - wide["rtp"]
    fig, panels = set_panels(wide)
    rng = np.random.default_rng(0)
    for ax, _, p in panels:
        jitter = rng.uniform(-0.02, 0.02, len(p))
        for label, part, color in ((f"{fused} finds more", p["gain"] > 0, OTHER_COLORS[0]),
                                   ("RtP finds more", p["gain"] < 0, METHOD_COLORS["rtp"]),
                                   ("equal", p["gain"] == 0, "0.6")):
            ax.scatter(p.loc[part, "cos"], p.loc[part, "gain"] + jitter[part.to_numpy()], c=color, s=12,
                       alpha=0.7, label=label)
        if np.isfinite(threshold):
            ax.axvline(threshold, color="k", ls="--", lw=1)
            right = max(p["cos"].max(), threshold) + 0.01
            ax.axvspan(threshold, right, color=METHOD_COLORS["rtp"], alpha=0.07)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xlabel("RtP top-1 cosine")
        ax.set_ylabel(f"recall@{k}: {fused} minus RtP")
    side_legend(fig, panels[0][0])
    fig.suptitle("route-then-fuse: right of the line RtP's list is used (no stub call), left the fused list")
    fig.tight_layout()
    return fig


def transfer_table(result, k: int = K, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Per ``-cv`` method and set: recall@k with the parameter fitted on the other sets beside the 5-fold
    one, and the parameter each way."""
    rows = []
    inp = fused.study_inputs(result, 0, gt, fused.CV)
    sub = {key: subset_alias(s) for key, s in inp.subsets.items()}
    for name in fused.CV:
        folds, chosen_f = fused.FUSED[name].tune(inp, k)
        loso, chosen_l = fused.FUSED[name].leave_one_set_out(inp, k)
        for subset in dict.fromkeys(sub.values()):
            keys = [key for key in inp.keys if sub[key] == subset]

            def recall(lists: Mapping[str, Sequence[str]], keys: list[str] = keys) -> float:
                return float(np.mean(recall_at([lists[q] for q in keys], [inp.qrels[q] for q in keys], k)))

            rows.append({"method": name, "subset": subset, "k": k, "recall_5fold": recall(folds),
                         "recall_other_sets": recall(loso), "param_other_sets": chosen_l[keys[0]],
                         "params_5fold": sorted({round(chosen_f[q], 4) for q in keys})})
    return pd.DataFrame(rows)
