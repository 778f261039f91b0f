"""Which G2 the paper's numbers fit, divergence read two ways (disjoint or non-identical top-k lists), and
two claims scored: PtR − RtP at every registry size, and by-subset routing against fixed policies."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import SEED, K
from ..data.queries import DEFAULT_GT, check_gt, clusters, subset_alias
from ..eval.evaluation import evaluate, per_query_runs
from ..eval.stats import holm
from ..retrieval.retrievers import method_name
from ..study.stored import StudyResult
from .intervals import DIFF_CI, LO_HI, PTR_VS_RTP, mean_ci, paired_columns, with_ci
from .references import load_references, paper_value
from .retrievers import PAPER_PATTERN, families_of, top_k_overlaps
from .scale import recall_precision, scale_draws
from .similarity import SimilarityCache

READINGS = ("disjoint", "non_identical")
# routing_claim's names of the paired test of the routed policy against another
ROUTED = {"n": "n_queries", "mean_b": "routed", "mean_a": "other", **DIFF_CI, "p": "p", "note": "note"}
GROUPS: dict[str, tuple[str, ...]] = {"G1+G2": ("G1", "G2"), "G1–G3": ("G1", "G2", "G3")}


def basis(run_name: str, n_runs: int) -> str:
    """The basis of a number: the study and which of its runs (the mean of all, or run 0)."""
    return f"{run_name}: mean of {n_runs} runs" if n_runs > 1 else f"{run_name}: run 0"


def g2_sensitivity(sources: Sequence[tuple[str, StudyResult | None, str]], ks: Sequence[int] = range(1, 21),
                   gt: str = DEFAULT_GT, n_resamples: int = 2000, seed: int = SEED) -> pd.DataFrame:
    """Recall@k of RtP and PtR (bootstrap CIs) and the paired PtR − RtP per ``(run_name, study, subset)``
    source, retriever family and ``k``; each query's recall is its mean over runs."""
    check_gt(gt)
    rows = []
    for run_name, result, subset in sources:
        ev = evaluate(result)
        if not (at := np.flatnonzero(ev.subsets == subset)).size:
            raise ValueError(f"the study holds no query of {subset!r}")
        at = at[np.argsort(ev.qkeys[at], kind="stable")]  # the set's queries by key
        cl, methods = clusters(result.queries, ev.qkeys[at]), list(ev.methods)
        for family in families_of(result):
            pair = [methods.index(method_name(arch, family)) for arch in ("rtp", "ptr")]
            for k in ks:
                x, y = ev.values("recall", k, gt)[pair][:, :, at].mean(axis=1)  # each query's mean over runs
                (rlo, rhi), (plo, phi) = mean_ci(x, cl, n_resamples, seed), mean_ci(y, cl, n_resamples, seed)
                rows.append({"subset": subset, "basis": basis(run_name, result.n_runs), "retriever": family,
                             "k": k, "n_queries": len(at), "n_runs": result.n_runs,
                             "rtp": float(x.mean()), "rtp_lo": rlo, "rtp_hi": rhi,
                             "ptr": float(y.mean()), "ptr_lo": plo, "ptr_hi": phi,
                             **paired_columns(x, y, {**PTR_VS_RTP, **LO_HI}, cl)})
    return pd.DataFrame(rows)


def g2_sets(sources: Sequence[tuple[str, StudyResult | None, str]], paper_gt: float, example_qkey: str | None,
            gt: str = DEFAULT_GT, n_resamples: int = 2000, seed: int = SEED) -> pd.DataFrame:
    """Per source set: the mean ground-truth size (bootstrap CI) against the paper's, and whether the paper's
    worked example is one of its queries."""
    rows = []
    for run_name, result, subset in sources:
        q = result.queries[result.queries["subset"] == subset]
        sizes = q[check_gt(gt)].map(len).to_numpy(float)
        lo, hi = mean_ci(sizes, clusters(q, q["qkey"]), n_resamples, seed)
        rows.append({"subset": subset, "basis": basis(run_name, result.n_runs), "n_queries": len(q),
                     "gt_size": float(sizes.mean()), "gt_size_lo": lo, "gt_size_hi": hi,
                     "paper_gt_size": paper_gt, "gt_size_gap": float(sizes.mean()) - paper_gt,
                     "example_qkey": example_qkey or "",
                     "example_in_set": bool(example_qkey) and example_qkey in set(q["qkey"])})
    return pd.DataFrame(rows)


def _inside(value: float | None, lo: float, hi: float) -> bool | None:
    return None if value is None else bool(lo <= value <= hi)


def g2_verdict(sets: pd.DataFrame, sens: pd.DataFrame, paper_diffs: Mapping[int, float],
               retriever: str = "dense", example: str = "the worked example") -> pd.DataFrame:
    """One row per G2 set and a ``verdict`` row: whether its ground-truth size rounds to the paper's, holds
    the worked example (named by ``example``), and at how many of ``paper_diffs`` (``{k: PtR − RtP}``) the
    paper lies in its CI."""
    rows = []
    for _, s in sets.iterrows():
        part = sens[(sens["subset"] == s["subset"]) & (sens["retriever"] == retriever)].set_index("k")
        inside = [_inside(v, part.loc[k, "diff_lo"], part.loc[k, "diff_hi"]) for k, v in paper_diffs.items()
                  if k in part.index]
        gt_fits = round(s["gt_size"], 1) == round(s["paper_gt_size"], 1)
        n_in = sum(bool(i) for i in inside)
        text = (f"{s['subset']}: {s['gt_size']:.2f} ground-truth APIs per query against the paper's "
                f"{s['paper_gt_size']:.1f} ({'fits' if gt_fits else 'does not fit'}); the paper's worked "
                f"example {'is' if s['example_in_set'] else 'is not'} in it; the paper's PtR − RtP lies in "
                f"its {retriever} CI at {n_in} of {len(inside)} stated k.")
        rows.append({"subset": s["subset"], "gt_size": s["gt_size"], "paper_gt_size": s["paper_gt_size"],
                     "gt_fits": gt_fits, "example_in_set": bool(s["example_in_set"]),
                     "paper_diffs_in_ci": n_in,
                     "n_paper_diffs": len(inside), "identity_score": int(gt_fits) + int(s["example_in_set"]),
                     "text": text})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    best = out.sort_values(["identity_score", "paper_diffs_in_ci"], ascending=False)
    top = best.iloc[0]
    tied = best[(best["identity_score"] == top["identity_score"])
                & (best["paper_diffs_in_ci"] == top["paper_diffs_in_ci"])]
    if top["identity_score"] == 0 or len(tied) > 1:
        text = "Neither G2 set is singled out by the paper's ground-truth size and worked example."
        fit = ""
    else:
        fit = str(top["subset"])
        why = [w for w, ok in (("its mean ground-truth size rounds to the paper's", top["gt_fits"]),
                               (f"it holds {example}", top["example_in_set"])) if ok]
        text = f"The paper's G2 numbers fit {fit}, a hypothesis about its data: {'; '.join(why)}."
    verdict = {"subset": "verdict", "gt_size": np.nan, "paper_gt_size": np.nan, "gt_fits": None,
               "example_in_set": None, "paper_diffs_in_ci": np.nan, "n_paper_diffs": np.nan,
               "identity_score": np.nan, "text": text, "fits": fit}
    return pd.concat([out.assign(fits=""), pd.DataFrame([verdict])], ignore_index=True)


def study_divergence(result: StudyResult, k: int = K) -> pd.DataFrame:
    """Per family and query: its shares of PtR's runs whose top-k list is disjoint from RtP's and not
    identical to it, with its set and cluster; ``size`` is the registry's (0 when unknown)."""
    size = int(result.provenance.get("registry_size") or 0)
    f = top_k_overlaps(result, k).assign(disjoint=lambda x: x["shared"] == 0)
    per_q = (f.groupby(["retriever", "subset", "qkey"], sort=False)[["disjoint", "non_identical"]].mean()
             .reset_index().rename(columns={"disjoint": "disjoint_share",
                                            "non_identical": "non_identical_share"}))
    return per_q.assign(size=size, n_runs=result.n_runs, cluster=clusters(result.queries, per_q["qkey"]))


def divergence_readings(per_query: pd.DataFrame, by: Sequence[str] = (),
                        groups: Mapping[str, Sequence[str]] = GROUPS) -> pd.DataFrame:
    """Both readings per set and pooled over each of ``groups``: each query's share (rows of ``per_query``
    with the same ``by``, set and query, the seeds of a sub-registry size, averaged first), their mean over
    the queries with a 95% interval that resamples whole API samples (``cluster``), as every paired test."""
    by = list(by)
    cols = ["disjoint_share", "non_identical_share"]
    q = per_query.groupby([*by, "subset", "qkey", "cluster"], sort=False)[cols].mean().reset_index()
    rows = []
    for key, g in (q.groupby(by, sort=False) if by else [((), q)]):
        key = key if isinstance(key, tuple) else (key,)
        sets = list(dict.fromkeys(g["subset"]))
        units = [(s, (s,)) for s in sets] + [(name, tuple(m)) for name, m in groups.items()
                                             if set(m) <= set(sets)]
        for name, members in units:
            part = g[g["subset"].isin(members)]
            for reading in READINGS:
                x = part[f"{reading}_share"].to_numpy(dtype=float)
                low, high = with_ci({}, "share", x, part["cluster"].to_numpy()).values()
                rows.append({**dict(zip(by, key, strict=True)), "group": name, "sets": ", ".join(members),
                             "reading": reading, "share": float(x.mean()) if len(x) else float("nan"),
                             "n_queries": len(x), "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows)


def divergence_verdict(readings: pd.DataFrame, paper: Mapping[str, float | None], group: str = "G1+G2"
                       ) -> pd.DataFrame:
    """Per reading: whether the paper's figures (``{"smallest": share, "full": share}``, at the smallest
    and largest ``size``) lie in this run's Wilson interval for ``group``; and one ``verdict`` row."""
    r = readings[readings["group"] == group]
    ends = {e: size for e, size in (("smallest", r["size"].min()), ("full", r["size"].max()))
            if paper.get(e) is not None}
    rows, parts, fitting = [], [], []
    for reading in READINGS:
        row = {"group": group, "reading": reading}
        for end, size in ends.items():
            x = r[(r["reading"] == reading) & (r["size"] == size)].iloc[0]
            row |= {f"{end}_size": int(size), f"{end}_share": x["share"], f"{end}_lo": x["ci_low"],
                    f"{end}_hi": x["ci_high"], f"paper_{end}": paper.get(end),
                    f"fits_{end}": _inside(paper.get(end), x["ci_low"], x["ci_high"])}
        rows.append(row)
        if all(row[f"fits_{e}"] for e in ends):
            fitting.append(reading)
        at = [f"{row[f'{e}_share']:.1%} [{row[f'{e}_lo']:.1%}, {row[f'{e}_hi']:.1%}] at {int(ends[e])} APIs"
              for e in ends]
        parts.append(f"{reading.replace('_', '-')}: " + " and ".join(at))
    paper_txt = " and ".join(f"{paper[e]:.0%}" for e in ends)
    fit_word = "fits" if len(ends) == 1 else "fit"
    if fitting:
        names = " and the ".join(f.replace("_", "-") for f in fitting)
        head = f"The paper's {paper_txt} {fit_word} the {names} reading"
    else:
        full = [row["reading"].replace("_", "-") for row in rows if row.get("fits_full")]
        head = (f"The paper's {paper_txt} {fit_word} neither reading"
                + (" at both sizes" if len(ends) > 1 else "")
                + (f"; its full-registry figure fits the {' and the '.join(full)} reading"
                   if full and len(ends) > 1 else ""))
    text = f"{head} ({group}; " + "; ".join(parts) + ")."
    rows.append({"group": group, "reading": "verdict", "text": text})
    return pd.DataFrame(rows)


def scale_claim(cache: SimilarityCache, queries: pd.DataFrame, registry: pd.DataFrame,
                sizes: Sequence[int | None], seeds: Sequence[int], k: int = K, gt: str = DEFAULT_GT,
                keep_gt: str = "candidates") -> pd.DataFrame:
    """Per set and registry size (drawn as the scale study draws): RtP and PtR recall@k and PtR − RtP with a
    paired CI over queries (each averaged over seeds and runs); ``expected`` is the paper's leader,
    ``gt_share`` the sub-registry's share of ground truth, ``keeps_all_gt`` whether every draw kept it."""
    check_gt(gt)
    acc: dict[tuple, dict] = {}  # per set and size, over seeds (and runs)
    draws = scale_draws(cache, queries, registry, sizes, seeds, k, gt, keep_gt, cache.runs)
    for subset, sq, sub, keep, rtp_top, ptr_tops, gt_sets in draws:
        a = acc.setdefault((subset, sub.target_size), {"sq": sq, "rtp": [], "ptr": [], "shares": [],
                                                       "held": []})
        held = np.isin(keep, sub.cols)
        a["held"].append(bool(held.all()))
        a["shares"].append(held.sum() / len(sub.cols))
        a["size"] = len(sub.cols)
        a["rtp"].append(recall_precision(rtp_top, gt_sets, k)[0])
        a["ptr"] += [recall_precision(top, gt_sets, k)[0] for top in ptr_tops]
    order = list(dict.fromkeys(queries["subset"]))
    rows, smallest = [], {}  # each set's per-query PtR − RtP at its smallest size, for the change over sizes
    for (subset, target), a in sorted(acc.items(), key=lambda it: (order.index(it[0][0]), it[1]["size"])):
        x, y = np.mean(a["rtp"], axis=0), np.mean(a["ptr"], axis=0)
        alias, cl = subset_alias(subset), clusters(queries, a["sq"]["qkey"])
        first = smallest.setdefault(subset, y - x)
        rows.append({"subset": alias, "size": a["size"], "target_size": target, "n_seeds": len(a["rtp"]),
                     "n_runs": len(cache.runs), "n_queries": len(a["sq"]), "rtp": float(x.mean()),
                     "ptr": float(y.mean()), **paired_columns(x, y, DIFF_CI, cl),
                     **paired_columns(first, y - x, {"diff": "change", **CHANGE_CI, "p": "change_p"}, cl),
                     "expected": PAPER_PATTERN.get(alias, ""),
                     "gt_share": float(np.mean(a["shares"])), "keeps_all_gt": all(a["held"])})
    out = pd.DataFrame(rows)  # a change scanned over every set: Holm over the sets at each size
    return out.assign(change_p_holm=out.groupby("target_size")["change_p"].transform(holm)) if len(out) \
        else out


CHANGE_CI = {"ci_low": "change_ci_low", "ci_high": "change_ci_high"}  # PtR − RtP here minus at the smallest


SCALE_SETS = ("G1", "G2")  # the paper's scale claim (its Figure 3) covers these sets only


def scale_claim_verdict(claim: pd.DataFrame) -> pd.DataFrame:
    """Per set with a leader in the paper: whether the paper claims its lead at every size (G1, G2), at how
    many sizes it is ahead (and significantly), the std of PtR − RtP over sizes, whether it is ahead at every
    size, and a generated sentence."""
    rows = []
    for subset, g in claim.groupby("subset", sort=False):
        lead = g["expected"].iloc[0]
        if lead not in ("RtP", "PtR"):
            continue
        sign = 1 if lead == "PtR" else -1
        ahead = (sign * g["diff"]).round(3) > 0  # ahead as shown: a lead below 0.0005 is a tie
        point = int(ahead.sum())
        sig = int(((g["ci_low"] > 0) if sign > 0 else (g["ci_high"] < 0)).sum())
        g = g.sort_values("size")
        refuted = [r for _, r in g.iterrows() if (r["ci_high"] < 0 if sign > 0 else r["ci_low"] > 0)]
        unsure = [r for _, r in g.iterrows()  # neither ahead nor behind significantly: the CI holds 0
                  if r["ci_low"] <= 0 <= r["ci_high"]]

        def at(rows: list) -> str:  # more than two sizes: their names only (the table has their CIs)
            if len(rows) > 2:
                return ", ".join(str(int(r["size"])) for r in rows)
            return ", ".join(f"{int(r['size'])} ({r['diff']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}])"
                             for r in rows)

        holds = point == len(g)
        where = "every size" if len(unsure) == len(g) else at(unsure)
        said = ("holds, significantly at every size" if sig == len(g) else
                f"holds at the point estimates, not significantly at {where}" if holds else
                f"fails at {at(refuted)} (the CI excludes 0)" if refuted else
                f"is inconclusive at {where} (the CI holding 0)")
        if refuted and unsure:
            said += f"; inconclusive at {where}"
        claim = (f"the claim that {lead} keeps its advantage at every size"
                 if subset_alias(subset) in SCALE_SETS
                 else f"{lead} ahead at every size (the paper claims an every-size lead for G1, RtP's, and "
                      "G2, PtR's, only)")
        ties = int((sign * g["diff"]).round(3).eq(0).sum())
        tie = f"; {ties} tied, differing by under 0.0005" if ties else ""
        change = (f" (change {g['change'].iloc[-1]:+.3f} [{g['change_ci_low'].iloc[-1]:+.3f}, "
                  f"{g['change_ci_high'].iloc[-1]:+.3f}], paired over queries, clustered by API sample, "
                  "given the sub-registries drawn)" if "change" in g else "")
        text = (f"{subset}: {lead} ahead at {point} of {len(g)} sizes ({sig} significantly{tie}); PtR − RtP "
                f"{g['diff'].iloc[0]:+.3f} at {int(g['size'].iloc[0])} APIs, {g['diff'].iloc[-1]:+.3f} at "
                f"{int(g['size'].iloc[-1])}{change}; {claim} "
                + said + f"; {g['gt_share'].iloc[0]:.0%} of the smallest sub-registry is ground truth.")
        rows.append({"subset": subset, "leader": lead, "paper_claims": subset_alias(subset) in SCALE_SETS,
                     "n_sizes": len(g), "sizes_ahead": point,
                     "sizes_ahead_significant": sig, "gap_std": float(g["diff"].std(ddof=1)) if len(g) > 1
                     else 0.0, "holds": holds, "keeps_all_gt": bool(g["keeps_all_gt"].all()),
                     "smallest_gt_share": float(g["gt_share"].iloc[0]), "text": text})
    return pd.DataFrame(rows)


def routing_claim(result: StudyResult, run_name: str, k: int = K, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Per family, the paper's by-subset routing against each fixed policy: ``diff`` = routed − other, paired
    over queries (each its mean over runs); ``loss``: none, gain, not significant or significant."""
    pq = per_query_runs(result, k, gt, ("recall",))
    pq = pq.assign(subset=pq["subset"].map(subset_alias))
    mean = pq.groupby(["subset", "qkey", "method"], as_index=False, sort=False)["recall"].mean()
    rows = []
    for family in families_of(result):
        a, b = method_name("rtp", family), method_name("ptr", family)
        wide = mean[mean["method"].isin([a, b])].pivot(index=["subset", "qkey"], columns="method",
                                                       values="recall").reset_index()
        wide = wide[wide["subset"].isin(PAPER_PATTERN)]
        by_set = wide.groupby("subset")[[a, b]].mean()
        pick = {"routed": {s: b if PAPER_PATTERN[s] == "PtR" else a for s in by_set.index},
                "always_rtp": dict.fromkeys(by_set.index, a), "always_ptr": dict.fromkeys(by_set.index, b),
                "best_per_subset": {s: b if by_set.loc[s, b] > by_set.loc[s, a] else a for s in by_set.index}}
        score = {p: np.array([r[c[r["subset"]]] for _, r in wide.iterrows()], dtype=float)
                 for p, c in pick.items()}
        cl = clusters(result.queries, wide["qkey"])
        for other in ("best_per_subset", "always_rtp", "always_ptr"):
            t = paired_columns(score[other], score["routed"], ROUTED, cl)
            same = bool(np.allclose(score[other], score["routed"]))
            loss = ("none" if same else "significant" if t["ci_high"] < 0
                    else "gain" if t["ci_low"] > 0 else "not significant")
            text = (f"{family}: routed {t['routed']:.3f} against {other.replace('_', ' ')} {t['other']:.3f}, "
                    f"difference {t['diff']:+.3f} [95% CI {t['ci_low']:+.3f}, {t['ci_high']:+.3f}], "
                    f"{t['n_queries']} queries of {wide['subset'].nunique()} sets pooled, clustered by API "
                    "sample: " + {"none": "identical choices, no loss",
                                             "not significant": "no significant loss, though the CI "
                                                                f"allows one up to {-t['ci_low']:.3f}",
                                             "gain": "no loss, a significant gain",
                                             "significant": "a significant loss"}[loss] + ".")
            rows.append({"retriever": family, "basis": basis(run_name, result.n_runs), "against": other, **t,
                         "loss": loss, "choice": ", ".join(f"{s} {c}" for s, c in pick[other].items()),
                         "text": text})
    return pd.DataFrame(rows)


def paper_g2_diffs() -> dict[int, float]:
    """The paper's G2 PtR − RtP recall differences by k (1 and 20 from Table 1, 5 from the main results)."""
    five = [paper_value("g2_ptr_recall"), paper_value("g2_rtp_recall")]
    out = {1: paper_value("g2_ptr_gain_k1"), 5: five[0] - five[1] if None not in five else None,
           20: paper_value("g2_ptr_gain_k20")}
    return {k: round(v, 6) for k, v in out.items() if v is not None}


def _worked_example(example_id: str) -> dict:
    """One of the paper's worked examples (``references/paper.yaml``); empty when the references lack it."""
    return next((e for e in load_references().get("worked_examples", []) if e["id"] == example_id), {})


def worked_example_qkey(example_id: str) -> str | None:
    """The query key of one of the paper's worked examples, if it has one."""
    return _worked_example(example_id).get("qkey")


def worked_example_name(example_id: str) -> str:
    """One of the paper's worked examples as a reader finds it in the paper: its table, the request it
    quotes first and its query key here ("the worked example" when the references lack it)."""
    found = _worked_example(example_id)
    quoted = re.search(r"“([^”]+)”", str(found.get("quote", "")))
    if not quoted:
        return "the worked example"
    loose = (", loosely: the same APIs in another request, so weak evidence" if found.get("match") == "loose"
             else "")
    return (f"the paper's Table {found.get('table', 2)} example “{quoted.group(1)}” "
            f"({found.get('qkey', 'not in this data')}{loose})")


def g2_tables(sources: Sequence[tuple[str, StudyResult | None, str]], ks: Sequence[int], gt: str = DEFAULT_GT,
              example_id: str = "greece_energy_news") -> dict[str, pd.DataFrame]:
    """``g2_sensitivity``, ``g2_sets`` and ``g2_verdict`` of the sources whose study exists."""
    sources = [s for s in sources if s[1] is not None and (s[1].queries["subset"] == s[2]).any()]
    sens = g2_sensitivity(sources, ks, gt)
    sets = g2_sets(sources, paper_value("g2_gt_size"), worked_example_qkey(example_id), gt)
    return {"g2_sensitivity": sens, "g2_sets": sets,
            "g2_verdict": g2_verdict(sets, sens, paper_g2_diffs(), example=worked_example_name(example_id))}


def scale_tables(cache: SimilarityCache, queries: pd.DataFrame, registry: pd.DataFrame,
                 divergence_queries: pd.DataFrame, sizes: Sequence[int | None], seeds: Sequence[int],
                 k: int = K, gt: str = DEFAULT_GT, keep_gt: str = "candidates", run_name: str = "this run"
                 ) -> dict[str, pd.DataFrame]:
    """``scale_claim``, ``scale_claim_verdict``, ``divergence_readings`` (of ``divergence_queries``, at the
    target sizes) and ``divergence_verdict`` against the paper's two figures."""
    where = basis(run_name, len(cache.runs)) + f", {len(seeds)} seeds below the full registry"
    claim = scale_claim(cache, queries, registry, sizes, seeds, k, gt, keep_gt).assign(basis=where)
    per_query = divergence_queries
    if "target_size" in per_query:  # sets pooled at one size even where a set's ground truth raised its own
        per_query = per_query.assign(size=per_query["target_size"])
    readings = divergence_readings(per_query, ["size"]).assign(basis=where)
    paper = {"smallest": paper_value("divergence_smallest"), "full": paper_value("divergence_full")}
    return {"scale_claim": claim, "scale_claim_verdict": scale_claim_verdict(claim),
            "divergence_readings": readings, "divergence_verdict": divergence_verdict(readings, paper)}


def full_divergence_tables(result: StudyResult, run_name: str = "this run", k: int = K,
                           retriever: str = "dense") -> dict[str, pd.DataFrame]:
    """``divergence_full`` (both readings per family, set and group on the study's registry) and
    ``divergence_full_verdict`` (``retriever``'s against the paper's full-registry figure)."""
    readings = divergence_readings(study_divergence(result, k), ["retriever", "size"])
    readings = readings.assign(basis=basis(run_name, result.n_runs))
    mine = readings[readings["retriever"] == retriever]
    return {"divergence_full": readings,
            "divergence_full_verdict": divergence_verdict(mine, {"full": paper_value("divergence_full")})}
