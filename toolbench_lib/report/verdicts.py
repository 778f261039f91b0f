"""The generated lines under a report section's claim: the verdicts its claim tables saved, and the
sentences read from the pass-rate, judge and fidelity tables."""

from __future__ import annotations

import math
from statistics import NormalDist

import pandas as pd

from ..analysis.endpoint import run_temperatures
from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from ..analysis.references import paper_value
from ..analysis.routing import MULTI_TOOL
from ..data.queries import DEFAULT_GT, subset_alias
from ..study.experiment import ExperimentConfig
from .appendix import APPENDIX_TABLES_HEADING
from .glossary import MIN_KAPPA
from .locate import TableCache
from .lookup import judge_rows, solved_share

# Generated verdicts of the paper's claims, by report section: (table, filter column, filter value); a filter
# of None keeps every row's ``text``.
CLAIM_VERDICTS = {
    "main": (("g2_verdict", "subset", "verdict"),),
    "scale": (("scale_claim_verdict", None, None), ("divergence_verdict", "reading", "verdict")),
    "cost": (("routing_claim", None, None),),
}


def claim_verdicts(cfg: ExperimentConfig, key: str) -> list[str]:
    """The generated verdict lines a section's claim tables saved (``text`` columns); none when absent."""
    cache = TableCache(cfg.tables_dir)
    lines = []
    for name, column, value in CLAIM_VERDICTS.get(key, ()):
        if (table := cache.having(name, "text")) is None or table.empty:
            continue
        rows = table if column is None or column not in table else table[table[column] == value]
        lines += [str(t) for t in rows["text"] if isinstance(t, str) and t.strip()]
    return lines


def fidelity_lines(rows: pd.DataFrame) -> list[str]:
    """Plan fidelity under both name matchings, from the scorecard's two rows, in one sentence."""
    got = rows.set_index("id")["this_run"] if len(rows) else pd.Series(dtype=float)
    tolerant, strict = (got.get(i) for i in ("trajectory_fidelity", "trajectory_fidelity_strict"))
    if tolerant is None or strict is None or pd.isna(tolerant) or pd.isna(strict):
        return []
    return [f"Plan fidelity (the lowest set and method, the paper's claim being for all: a minimum, so "
            "biased low, its CI that cell's alone) depends on how a plan's API names are matched: "
            f"{fmt_number(tolerant)} when a tool-only or description match counts, {fmt_number(strict)} when "
            "a step must name a retrieved API exactly; the paper's definition, *“planner always names an API "
            "it was given”*, does not say which."]


def robustness_lines(cfg: ExperimentConfig, settings: dict) -> list[str]:
    """The dense primary test under each robustness check (``primary_endpoint``'s ``*_robustness``): run 0
    alone, without the dominant cluster, coarser clusters; whether each verdict holds, where power is low."""
    t = TableCache(cfg.tables_dir).having("primary_endpoint", "largest_cluster_n", "significant")
    if t is None:
        return []
    t = t[t["retriever"] == "dense"] if "retriever" in t else t
    temp, later = run_temperatures(settings)
    none = [subset_alias(s) for s, p in zip(t["subset"], t.get("p_holm_no_largest_cluster_robustness", []),
                                            strict=True) if pd.isna(p)]
    heads = {"run0": f"Run 0 alone, at temperature {temp:g} as in the paper (the later runs at {later:g})"
                     if later is not None else "",
             "no_largest_cluster": "Each set without the API sample that dominates it, the one largest "
             "holding at least a fifth of it (largest: " + ", ".join(
                 f"{subset_alias(r.subset)} {fmt_count(int(r.largest_cluster_n))} of "
                 f"{fmt_count(int(r.n_queries))} queries" for r in t.itertuples())
             + (f"; none dominates {' or '.join(none)}" if none else "") + ")",
             "tool_clusters": "Coarser clusters (queries sharing any tool in one cluster: "
             + ", ".join(f"{subset_alias(r.subset)} {fmt_count(int(r.n_groups_tool_clusters_robustness))} "
                         f"(primary {fmt_count(int(r.n_groups))})" for r in t.itertuples()) + ")"}
    lines = []
    for v, head in heads.items():
        cols = [f"{c}_{v}_robustness" for c in ("diff", "ci_low_holm", "ci_high_holm", "p_holm", "n_groups")]
        if not head or not set(cols) <= set(t):
            continue
        if (read := t[t[cols[3]].notna()]).empty:  # a set the check does not apply to is left out
            continue
        each = "; ".join(f"{subset_alias(r.subset)} {fmt_signed(d)} {fmt_ci(lo, hi)}, {fmt_p(p)}" for r, (
            d, lo, hi, p, _) in zip(read.itertuples(), read[cols].to_numpy(), strict=True))
        flips = [subset_alias(r.subset) for r, p in zip(read.itertuples(), read[cols[3]], strict=True)
                 if bool(r.significant) != (p < ALPHA)]
        few = [subset_alias(s) for s, g in zip(read["subset"], read[cols[4]], strict=True) if g < FEW]
        lines.append(f"{head}: {each}; " + (f"the verdict changes on {' and '.join(flips)}" if flips else
                                            "the same verdicts")
                     + (f"; with under {FEW} clusters on {' and '.join(few)} this check has almost no power, "
                        "so a verdict of no lead holding there says little" if few else "")
                     + f" (`primary_endpoint`: *_{v}_robustness, Holm).")
    return lines


FEW = 10  # clusters under which a clustered test (t with at most G − 1 df) has almost no power


def pass_ceiling_lines(cfg: ExperimentConfig) -> list[str]:
    """The objective pass rate's ceiling (``judge_validity``): a plan names almost only APIs its prompt
    listed, so it can pass almost only where the prompt listed every ground-truth API."""
    cache = TableCache(cfg.tables_dir)
    t, traj = cache.having("judge_validity", "ceiling"), cache.having("trajectory", "fidelity")
    fidelity = (f" (fidelity at least {fmt_number(traj['fidelity'].min())}, tool-only and description "
                "matches counting)" if traj is not None and traj["fidelity"].notna().any() else "")
    if (t := judge_rows(t)) is None:
        return []
    sets = list(dict.fromkeys(t.index.get_level_values("subset")))
    each = ", ".join(f"{s} {fmt_number(t.at[(s, 'rtp'), 'ceiling'])} (RtP) and "
                     f"{fmt_number(t.at[(s, 'ptr'), 'ceiling'])} (PtR)" for s in sets)
    obj = t.loc[sets, "objective_pass_rate"]
    multi = [s for s in sets if s != "G1"]  # the multi-tool sets
    most = fmt_number(t.loc[multi, "ceiling"].max()) if multi else ""
    return [f"The objective pass rate has a near ceiling: a plan names almost only APIs its prompt listed"
            f"{fidelity}, and the "
            f"prompt listed every ground-truth (`{t['gt'].iloc[0]}`) API for a share of plans of {each}. The "
            f"objective rates ({fmt_number(obj.min())}–{fmt_number(obj.max())}) sit under it"
            + (f"; on {' and '.join(multi)} no more than {most} of plans could pass" if multi else "")
            + " (`judge_validity`: ceiling)."] + judge_lines(t)


def judge_lines(t: pd.DataFrame) -> list[str]:
    """The judge's "Solved" share of the plans that name no ground-truth API and of those that name every
    one, pooled over ``judge_validity``'s rows, and its kappa against the objective pass."""
    cols = ["solved_rate_none", "solved_rate_all", "evidence_none", "evidence_all", "kappa"]
    if not set(cols) <= set(t) or not t["evidence_none"].sum():
        return []

    (none, n_none), (every, n_all) = solved_share(t, "none"), solved_share(t, "all")
    k = t["kappa"].dropna()
    kappa, cap = _span(k), "kappa_max" in t and t["kappa_max"].notna().any()
    return [f"The judge, this run's own small LLM, calls {fmt_number(none)} of the {fmt_count(n_none)} plans "
            "that name no ground-truth "
            "API \"Solved\"" + (f", and {fmt_number(every)} of the {fmt_count(n_all)} that name every one"
                                  if n_all else "")
            + f"; its kappa against the objective pass is {kappa}"
            + (f", where the two pass rates allow at most {_span(t['kappa_max'].dropna())}" if cap else "")
            + (", so the paper's pass rates cannot be checked with this judge; its rates stand only in "
               f"{APPENDIX_TABLES_HEADING.split(':')[0]}"
               if k.max() < MIN_KAPPA else "")
            + f" (`judge_validity`: solved_rate_*, evidence_*, kappa{', kappa_max' if cap else ''})."]


def _span(values: pd.Series) -> str:
    lo, hi = values.min(), values.max()
    return fmt_number(lo) if lo == hi else f"{fmt_number(lo)} to {fmt_number(hi)}"


POWER, ALPHA = 0.8, 0.05
Z_CI = NormalDist().inv_cdf(0.975)  # the saved CIs are 95% ones: their width is 2 × 1.96 standard errors


def detectable(t: pd.DataFrame | None, power: float = POWER, alpha: float = ALPHA) -> pd.DataFrame | None:
    """``primary_endpoint``'s rows with ``mde`` (the smallest PtR − RtP its test detects with ``power`` at
    ``alpha``, from the CI's width) and ``paper_diff``; None without the columns."""
    if t is None or not {"ci_low", "ci_high", "paper_rtp", "paper_ptr"} <= set(t):
        return None
    scale = (NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)) / (2 * Z_CI)  # width to mde
    return t.assign(mde=(t["ci_high"] - t["ci_low"]) * scale, paper_diff=t["paper_ptr"] - t["paper_rtp"])


def power_at(diff: float, low: float, high: float, alpha: float = ALPHA) -> float:
    """The power at ``alpha`` of a two-sided test whose 95% CI is ``[low, high]`` to detect a true
    difference ``diff`` (normal approximation, both tails)."""
    se, z = (high - low) / (2 * Z_CI), NormalDist().inv_cdf(1 - alpha / 2)
    if not se > 0:
        return math.nan
    return NormalDist().cdf(abs(diff) / se - z) + NormalDist().cdf(-abs(diff) / se - z)


def power_table(c: TableCache, power: float = POWER, alpha: float = ALPHA) -> pd.DataFrame | None:
    """Per dense primary comparison (then G2_instruction's): the ``mde`` at ``alpha`` and at Holm's strictest
    level, and the power to detect the paper's difference at each; None without the table."""
    if (t := detectable(c.get("primary_endpoint"), power, alpha)) is None:
        return None
    strict = detectable(c.get("primary_endpoint"), power, alpha / len(t))
    both = [t.assign(mde_holm=strict["mde"], alpha_holm=alpha / len(t))]
    g2i = detectable(c.get("primary_endpoint_g2_instruction"), power, alpha)
    if g2i is not None and "retriever" in g2i:  # the file the paper's G2 fits: read beside, unadjusted
        both.append(g2i[g2i["retriever"] == "dense"])
    out = pd.concat(both, ignore_index=True)
    cis = list(zip(out["paper_diff"], out["ci_low"], out["ci_high"], out["alpha_holm"], strict=True))
    return out[["subset", "ci_low", "ci_high", "paper_diff", "mde", "mde_holm"]].assign(
        power_at_paper=[power_at(d, lo, hi, alpha) for d, lo, hi, _ in cis],
        power_at_paper_holm=[power_at(d, lo, hi, a) if pd.notna(a) else math.nan for d, lo, hi, a in cis],
        alpha=alpha, alpha_holm=out["alpha_holm"], power=power)


def power_lines(cfg: ExperimentConfig, power: float = POWER, alpha: float = ALPHA) -> list[str]:
    """The smallest PtR − RtP the dense test detects with ``power`` at ``alpha``, against the paper's
    differences; saves :func:`power_table` as ``primary_power``."""
    if (saved := power_table(TableCache(cfg.tables_dir), power, alpha)) is None:
        return []
    saved.to_csv(cfg.tables_dir / "primary_power.csv", index=False)  # every number of this line, recomputable
    t = saved[saved["mde_holm"].notna()]
    each = ", ".join(f"{subset_alias(r.subset)} {fmt_number(r.mde)}" for r in t.itertuples())
    paper = ", ".join(f"{subset_alias(r.subset)} {fmt_signed(r.paper_diff)}" for r in t.itertuples()
                      if pd.notna(r.paper_diff))
    below = [subset_alias(r.subset) for r in t.itertuples() if abs(r.paper_diff) < r.mde]
    above = [subset_alias(r.subset) for r in t.itertuples() if abs(r.paper_diff) >= r.mde]
    said = [f"on {' and '.join(above)} one of the paper's size would likely be detected here"] * bool(above) \
        + [f"on {' and '.join(below)} one would likely go undetected"] * bool(below)
    holm = ", ".join(f"{subset_alias(r.subset)} {fmt_number(r.mde_holm)}" for r in t.itertuples())
    return [f"Power: with this run's spread, the dense clustered paired test detects a PtR − RtP difference "
            f"of about {each} with {power:.0%} power (p < {alpha:g}, unadjusted; at Holm's strictest level, "
            f"{alpha / len(t):.3g}: {holm}; from each CI's width by the normal approximation, which the t "
            f"quantiles of few clusters raise slightly; `primary_power`). The paper's differences are {paper}"
            + (f", so {'; '.join(said)}" if said else "") + "."]


def routing_mix_lines(cfg: ExperimentConfig) -> list[str]:
    """Routing by set against never calling the LLM (``routing_overall``), and the share of PtR's extra tokens
    it saves against G1's share of them (``routing``): under routing by set the two are one number."""
    c, need = TableCache(cfg.tables_dir), ("policy", "recall", "tokens_per_query", "n_queries")
    pooled, per_set = c.having("routing_overall", *need), c.having("routing", *need, "subset")
    if pooled is None or per_set is None:
        return []
    p = pooled.set_index("policy")
    if not {"always_rtp", "always_ptr", "by_subset"} <= set(p.index):
        return []
    per_set = per_set.assign(subset=per_set["subset"].astype(str).map(subset_alias))
    s = per_set.assign(n=per_set["tokens_per_query"] * per_set["n_queries"]).pivot_table(
        index="subset", columns="policy", values="n", aggfunc="sum")
    extra = s["always_ptr"] - s["always_rtp"]
    g1 = extra.get("G1", float("nan")) / extra.sum()
    rtp, routed = p.loc["always_rtp"], p.loc["by_subset"]
    r = per_set.pivot_table(index="subset", columns="policy", values="recall")
    more = list(r.index[r["always_ptr"] > r["always_rtp"]])
    return [f"Always RtP, which calls no LLM, is not shown to find less than routing by set "
            f"({fmt_number(rtp.recall)} against {fmt_number(routed.recall)}, pooled; the CI above) with "
            f"fewer tokens per query ({fmt_count(round(rtp.tokens_per_query))} against "
            f"{fmt_count(round(routed.tokens_per_query))}); routing pays only where PtR finds more: here "
            + (f"on {' and '.join(more)}, by point estimate" if more else "on no set")
            + (f". The share of PtR's extra tokens routing by set saves is G1's share of them ({g1:.1%}, "
               "`routing`): set by the query mix, not by either architecture"
               if g1 == g1 else "") + "." + _cosine_router(p)]


def _cosine_router(p: pd.DataFrame) -> str:
    """The paper's proposal, a threshold on RtP's top-1 cosine (tuned out of fold), pooled: its share sent to
    PtR, recall and tokens beside always PtR's and always RtP's (``routing_overall``, by policy)."""
    if "router_top1_cosine" not in p.index or "share_routed_ptr" not in p:
        return ""
    r, rtp, ptr = p.loc["router_top1_cosine"], p.loc["always_rtp"], p.loc["always_ptr"]
    return (f" The paper's proposal, a threshold on RtP's top-1 cosine (tuned out of fold), sends "
            f"{r.share_routed_ptr:.0%} of queries to PtR and finds {fmt_number(r.recall)} with "
            f"{fmt_count(round(r.tokens_per_query))} tokens per query, "
            f"{1 - r.tokens_per_query / ptr.tokens_per_query:.1%} fewer than always PtR (always RtP: "
            f"{fmt_number(rtp.recall)} with {fmt_count(round(rtp.tokens_per_query))}).")


def imputed_token_lines(cfg: ExperimentConfig) -> list[str]:
    """How many queries' plan tokens the routing costs impute (``routing_overall``: queries without a plan
    call get their set's mean); none when no query's are imputed."""
    t = TableCache(cfg.tables_dir).having("routing_overall", "plan_tokens_imputed_share")
    if t is None or not t["plan_tokens_imputed_share"].max() > 0:
        return []
    share = float(t["plan_tokens_imputed_share"].max())
    return [f"Token costs: {share:.0%} of the queries have no plan in this run (plans are made for a sample "
            "of each set), so their plan tokens are their set's mean (`routing_overall`: "
            "plan_tokens_imputed_share); the routing savings rest on that."]


def budget_lines(cfg: ExperimentConfig, gt: str = "candidates") -> list[str]:
    """How each set's PtR − RtP recall moves from the smallest to the largest k (``k_ablation``)."""
    t = TableCache(cfg.tables_dir).having("k_ablation", "subset", "method", "gt", "k", "recall_gain")
    t = t[(t["gt"] == gt) & (t["method"] == "ptr")] if t is not None else None
    if t is None or t.empty:
        return []
    lo, hi = int(t["k"].min()), int(t["k"].max())

    def moved(e: pd.DataFrame) -> str:
        a, b = e.at[lo, "recall_gain"], e.at[hi, "recall_gain"]
        lead = "PtR" if b > 0 else "RtP"
        said = (f"{lead}'s lead {'widens' if abs(b) > abs(a) else 'narrows'}" if a * b > 0 else
                "the estimate changes sign")
        change = ("recall_gain_vs_k1", "recall_gain_vs_k1_ci_low", "recall_gain_vs_k1_ci_high")
        if set(change) <= set(e) and lo == 1:  # the change the table saved, with its CI
            d, c_lo, c_hi = (e.at[hi, col] for col in change)
            said += f"; the change {fmt_signed(d)} {fmt_ci(c_lo, c_hi)}, " + _scanned(
                c_lo > 0 or c_hi < 0, e.at[hi, "recall_gain_vs_k1_p_holm"] if "recall_gain_vs_k1_p_holm" in e
                else float("nan"))
        return said

    ends = {s: g.set_index("k") for s, g in t.groupby("subset", sort=False)}
    each = "; ".join(f"{s} {fmt_signed(e.at[lo, 'recall_gain'])} → {fmt_signed(e.at[hi, 'recall_gain'])} "
                     f"({moved(e)})" for s, e in ends.items())
    return [f"PtR − RtP recall from k = {lo} to k = {hi} (`k_ablation`: recall_gain, recall_gain_vs_k1, "
            f"{gt}; the change's CI clustered as the primary test's): {each}."]


def divergence_caveat_lines(cfg: ExperimentConfig) -> list[str]:
    """Why the divergence reading rests on this run's stubs (``ablation_stub_echo``): lists agree more where
    stubs restate their query, so another stub writer could move the disjoint share."""
    cache = TableCache(cfg.tables_dir)
    t, d = cache.get("ablation_stub_echo"), cache.having("ablation_divergence", "design", "no_overlap_share")
    if t is None or "all" not in set(t["subset"]):
        return []
    r = t.set_index("subset").loc["all"]
    kept = (d[d["design"] != "full"].groupby("design")["no_overlap_share"].mean() if d is not None else
            pd.Series(dtype=float))
    each = ", ".join(f"{DESIGNS[k]} {kept[k]:.0%}" for k in DESIGNS if k in kept.index)
    still = len(kept) and kept.max() - kept.min() < 0.1  # ten points: "hardly moves"
    small = "" if not len(kept) else (
        "; the smallest sub-registries' disjoint share " + ("hardly moves" if still else "moves")
        + f" with the ground truth they keep ({each}; `ablation_divergence`)"
        + (", so it does not explain their overlap" if still else ""))
    return [f"That fit rests on this run's stubs (the LLM untested): where they restate the query the lists "
            f"agree more (disjoint top-{cfg.k} lists for {r['disjoint_low_echo']:.0%} of the least-echoing "
            f"third of queries, {r['disjoint_high_echo']:.0%} of the most-echoing; `ablation_stub_echo`), so "
            f"a stub writer that abstracts more could raise the disjoint share{small}. The paper's text "
            "alone argues for the same reading (its plan overlap; [Where the paper disagrees with itself]"
            "(#where-the-paper-disagrees-with-itself))."]


DESIGNS = {"set_gt": "the set's", "own_gt": "each query's own", "no_gt": "none"}  # ablation_divergence


def _scanned(significant: bool, p_holm: float) -> str:
    """Whether a change scanned over every set is significant, unadjusted and under Holm over the sets."""
    if not significant:
        return "not significant"
    if pd.isna(p_holm):
        return "significant (unadjusted)"
    return ("significant, also under Holm over the sets" if p_holm < ALPHA else
            f"significant unadjusted only (Holm over the sets: {fmt_p(p_holm)})")


def subregistry_lines(cfg: ExperimentConfig) -> list[str]:
    """How the sub-registries are drawn (``scale_claim``): each set's own, keeping its ground truth, so the
    smallest are mostly ground truth where a set's is large."""
    t = TableCache(cfg.tables_dir).having("scale_claim", "size", "gt_share", "keeps_all_gt", "n_seeds")
    if t is None or not t["keeps_all_gt"].all():
        return []
    small = t[t["size"] == t["size"].min()]
    share = ", ".join(f"{subset_alias(r.subset)} {r.gt_share:.0%}" for r in small.itertuples())
    return [f"Each set is searched in sub-registries of its own: every ground-truth API of the set plus a "
            f"proportional draw of the rest ({fmt_count(int(small['n_seeds'].max()))} seeds per size); "
            f"ground truth's share of the smallest ({fmt_count(int(small['size'].iloc[0]))} APIs), {share}, "
            "raises recall there where it is large."]


def scale_trend_lines(cfg: ExperimentConfig) -> list[str]:
    """Where PtR − RtP changes significantly from the smallest registry to the full one (``scale_claim``:
    change and its CI at the largest size), which a spread over sizes, the paper's stability test, misses."""
    t = TableCache(cfg.tables_dir).having("scale_claim", "change", "change_ci_low", "change_ci_high")
    if t is None:
        return []
    last = t.sort_values("size").groupby("subset", sort=False).tail(1)
    moved = last[(last["change_ci_low"] > 0) | (last["change_ci_high"] < 0)]
    if moved.empty:
        return []
    each = "; ".join(f"{r.subset} {fmt_signed(r.change)} {fmt_ci(r.change_ci_low, r.change_ci_high)}, "
                     + _scanned(True, getattr(r, "change_p_holm", float("nan"))) for r in moved.itertuples())
    first = t.sort_values("size").groupby("subset", sort=False).head(1).set_index("subset")
    kept = first.loc[moved["subset"]] if {"gt_share", "keeps_all_gt"} <= set(first) else pd.DataFrame()
    kept = kept[kept["keeps_all_gt"].astype(bool)] if len(kept) else kept
    caveat = ("; but every sub-registry here keeps all ground truth, "
              + ", ".join(f"{x:.0%} of the smallest one on {s}" for s, x in kept["gt_share"].items())
              + f" ({fmt_count(int(kept['size'].min()))} APIs), so the change starts from a regime this "
              "construction makes") if len(kept) else ""
    return [f"The paper's stability claim is scored by the spread of PtR − RtP over sizes (`scale_gap_std`); "
            f"yet from the smallest registry to the full one the gap moves on {each} "
            f"(`scale_claim`: change): a spread over sizes cannot see a trend{caveat}."]


def seed_spread_lines(cfg: ExperimentConfig) -> list[str]:
    """The other reading of the paper's "recall std": the spread of each architecture's recall over the
    seeds of one size (``scale``: recall by size and seed), the largest of G1's and G2's."""
    t = TableCache(cfg.tables_dir).having("scale", "size", "seed", "subset", "method", "recall", "gt")
    if t is None:
        return []
    t = t[(t["gt"] == DEFAULT_GT) & t["subset"].astype(str).map(subset_alias).isin(("G1", "G2"))]
    sd = t.groupby(["size", "subset", "method"])["recall"].std().dropna()
    if sd.empty:
        return []
    (size, subset, method), top = sd.idxmax(), sd.max()
    if (bound := paper_value("scale_gap_std", "max")) is None:
        return []
    return [f"Read as the spread over seeds instead, the paper's “recall std” is here at most "
            f"{fmt_number(top)} over G1 and G2 ({subset_alias(subset)} {method}, {fmt_count(int(size))} "
            "APIs; "
            f"`scale`: recall's std over the {fmt_count(t['seed'].nunique())} seeds of a size), "
            + ("also under" if top < bound else "above") + f" its bound, {bound:g}."]


def _sign_word(lo: float, hi: float, below: str, above: str, neither: str) -> str:
    return below if hi < 0 else above if lo > 0 else neither


def coupling_lines(cfg: ExperimentConfig) -> list[str]:
    """The paper's coupling explanation tested on G1 (``ablation_query_coupling``): PtR − RtP without brand
    words, and RtP's top-1 cosine as a predictor of the winner (``routing_signal``)."""
    cache = TableCache(cfg.tables_dir)
    t, sig = cache.get("ablation_query_coupling"), cache.having("routing_signal", "signal")
    if t is None or "G1" not in set(t["subset"]):
        return []
    g = t.set_index("subset").loc["G1"]
    kept = _sign_word(g["diff_nobrand_lo"], g["diff_nobrand_hi"], "RtP's lead stays", "PtR leads",
                      "neither leads significantly")
    bound = (f"the gap does not move measurably, though the CI allows a move toward PtR of up to "
             f"{fmt_number(g['change_hi'])} of its {fmt_number(abs(g['diff']))}: brand words carry much of "
             "both recalls, and this test cannot rule out that they carry part of RtP's lead")
    moved = _sign_word(g["change_lo"], g["change_hi"], "the gap moves toward RtP, against the coupling",
                       "the gap moves toward PtR, as the paper's coupling predicts", bound)
    share = t.set_index("subset")["brand_share"].drop("G1")
    other = (f"; {', '.join(f'{s} {v:.0%}' for s, v in share.items())}, so this crude proxy (any "
             "capitalised name counts, places included, and longer requests hold more) "
             + ("does not show G1's requests naming a brand more often; whether a request names its own API "
                "it cannot tell" if (share >= g["brand_share"]).all() else
                "shows G1's requests naming a brand more often, as coupling expects, though whether a "
                "request names its own API it cannot tell")
             if len(share) else "")
    lines = [f"Coupling, tested on the query (no LLM call; run 0's stubs): {g['brand_share']:.0%} of G1 "
             f"queries hold a brand word (a capitalised name, a word with digits or inner capitals){other}. "
             f"Removed from query and stubs alike, they take RtP from {fmt_number(g['rtp'])} to "
             f"{fmt_number(g['rtp_nobrand'])} and PtR from {fmt_number(g['ptr'])} to "
             f"{fmt_number(g['ptr_nobrand'])}: PtR − RtP {fmt_signed(g['diff'])} with them (run 0), "
             f"{fmt_signed(g['diff_nobrand'])} {fmt_ci(g['diff_nobrand_lo'], g['diff_nobrand_hi'])} without "
             f"them ({kept}; change {fmt_signed(g['change'])} {fmt_ci(g['change_lo'], g['change_hi'])}, "
             f"`ablation_query_coupling`): {moved}. This run's stubs keep the query's brand words (without "
             f"them PtR loses {1 - g['ptr_nobrand'] / g['ptr']:.0%} of its G1 recall), so this tests brand "
             "words both arms share; the paper's mechanism, a stub writer that abstracts them away, stays "
             "untested."]
    top1 = sig[sig["signal"].astype(str).str.contains("top1")] if sig is not None else \
        pd.DataFrame(columns=["subset"])
    kinds = top1[top1["subset"].astype(str) == MULTI_TOOL]
    top1 = top1[top1["subset"].astype(str) != MULTI_TOOL]
    if len(top1):
        chance = ((top1["auroc_ci_low"] <= 0.5) & (top1["auroc_ci_high"] >= 0.5)).all()
        each = ", ".join(f"{r.subset} {fmt_number(r.auroc)} {fmt_ci(r.auroc_ci_low, r.auroc_ci_high)}"
                         for r in top1.itertuples())
        lines.append("If coupling decided the winner, a query close to one API (a high RtP top-1 cosine) "
                     f"would be one RtP wins; as a predictor of the winner that cosine has AUROC {each} "
                     "(`routing_signal`)" + (": not shown to predict it (every CI holds chance, 0.5, and "
                                             f"reaches up to {fmt_number(top1['auroc_ci_high'].max())})."
                                             if chance else "."))
    for r in kinds.itertuples():  # the paper's own reading: the cosine marks a query's kind, not its winner
        told = "tells" if r.auroc_ci_low > 0.5 else "does not tell" if r.auroc_ci_high < 0.5 else \
            "is not shown to tell"
        lines.append(f"Read as the paper reads it, a low top-1 cosine marking a G2 or G3 query rather than a "
                     f"G1 one, the cosine {told} them apart: AUROC {fmt_number(r.auroc)} "
                     f"{fmt_ci(r.auroc_ci_low, r.auroc_ci_high)} (`routing_signal`, {r.subset}).")
    return lines


def latency_lines(cfg: ExperimentConfig) -> list[str]:
    """PtR's discovery call as the round trip before retrieval the paper names (``token_overhead``: the stub
    call's seconds per query, and each architecture's whole), as the LLM's calls were timed."""
    t = TableCache(cfg.tables_dir).having("token_overhead", "ptr_stub_latency_s", "rtp_latency_s",
                                          "ptr_latency_s")
    if t is None or t["ptr_stub_latency_s"].isna().all():
        return []
    t = t.dropna(subset=["ptr_stub_latency_s"])
    each = ", ".join(f"{subset_alias(r.subset)} {r.ptr_stub_latency_s:.1f} s" for r in t.itertuples())
    whole = "; ".join(f"{subset_alias(r.subset)} {r.ptr_latency_s:.1f} s against {r.rtp_latency_s:.1f} s"
                      for r in t.itertuples())
    return [f"Latency: PtR's stub call is one more LLM round trip before retrieval, as the paper says: "
            f"{each} per query; PtR's calls in all against RtP's plan call: {whole} (`token_overhead`; as "
            "the local model's calls were timed when recorded, on another machine than the paper's)."]


def section_verdicts(cfg: ExperimentConfig, key: str, rows: pd.DataFrame) -> list[str]:
    """Every generated line of the section ``key``, whose scorecard rows are ``rows``."""
    extra = {"trajectory": lambda: fidelity_lines(rows),
             "cost": lambda: [*routing_mix_lines(cfg), *latency_lines(cfg), *imputed_token_lines(cfg)],
             "main": lambda: pass_ceiling_lines(cfg) + power_lines(cfg),
             "budget": lambda: budget_lines(cfg),
             "scale": lambda: [*subregistry_lines(cfg), *scale_trend_lines(cfg), *seed_spread_lines(cfg),
                               *divergence_caveat_lines(cfg)],
             "stubs": lambda: coupling_lines(cfg)}
    return claim_verdicts(cfg, key) + extra.get(key, list)()
