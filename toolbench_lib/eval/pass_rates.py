"""The objective pass rate and the judge's agreement with it (Cohen's kappa)."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from ..data.normalize import norm_name
from ..data.queries import check_gt

EVIDENCE = ("all", "some", "none")
PASS_RATE_COLUMNS = ["subset", "method", "run", "judged_pass_rate", "objective_pass_rate", "kappa", "n_plans"]
_VERSION_SEGMENT = re.compile(r"/v\d+(?=/)", re.IGNORECASE)
_TRAILING_GROUP = re.compile(r"\s*\([^()]*\)\s*$")


def equivalence_keys(registry: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """``{api_id: (category, tool, api)}``: normalised names without version / deprecation markers."""
    keys = {}
    for api_id, cat, tool, api in zip(registry["api_id"], registry["category"], registry["tool_name"],
                                      registry["api_name"], strict=True):
        bare = _VERSION_SEGMENT.sub("", str(api or ""))
        while (m := _TRAILING_GROUP.search(bare)) and m.start() > 0:
            bare = bare[: m.start()]
        keys[api_id] = (norm_name(cat), norm_name(tool), norm_name(bare))
    return keys


def _covered(gt_ids: Sequence[str], named: set[str], keys: dict | None) -> int:
    """How many of ``gt_ids`` the named APIs cover (the API itself, or an equivalent with ``keys``)."""
    if keys is None:
        return sum(g in named for g in gt_ids)
    named_keys = {keys.get(n, n) for n in named}
    return sum(g in named or keys.get(g, g) in named_keys for g in gt_ids)


def _shown(result) -> dict[tuple, set[str]]:
    """``{(qkey, method, run): ids}``: the APIs each plan's prompt listed (its method's top k in its run)."""
    if result.rankings.empty:
        return {}
    return result.shown().groupby(["qkey", "method", "run"])["api_id"].apply(set).to_dict()


def plan_evidence(result, gt: str = "relevant", registry: pd.DataFrame | None = None,
                  verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per plan: verdict, ground-truth evidence, objective pass and ``n_shown``."""
    check_gt(gt)
    cols = ["qkey", "subset", "method", "run", "refusal", "verdict", "judge_version", "n_gt", "n_named",
            "n_covered", "n_shown", "evidence", "objective_pass", "gt"]
    if result.plans.empty:
        return pd.DataFrame(columns=cols)
    p = result.plans.copy()
    if "judge_version" not in p:
        p["judge_version"] = result.provenance.get("prompt_versions", [None] * 3)[-1]
    if verdicts is not None:
        v = verdicts[[c for c in ("qkey", "method", "run", "verdict", "judge_version") if c in verdicts]]
        p = p.drop(columns=[c for c in ("verdict", "judge_version") if c in v]).merge(
            v, on=["qkey", "method", "run"], how="inner")
    p = p.merge(result.queries[["qkey", "subset", gt]], on="qkey")
    keys = equivalence_keys(registry) if registry is not None else None
    named = [set(x) if x is not None else set() for x in p["named_ids"]]
    gts = [list(x) for x in p[gt]]
    n_cov = [0 if r else _covered(g, n, keys) for g, n, r in zip(gts, named, p["refusal"], strict=True)]
    shown = _shown(result)
    plan_keys = p[["qkey", "method", "run"]].itertuples(index=False, name=None)
    n_shown = [math.nan if (s := shown.get(key)) is None else _covered(g, s, keys)
               for key, g in zip(plan_keys, gts, strict=True)]
    out = p.assign(n_gt=[len(g) for g in gts], n_named=[len(n) for n in named], n_covered=n_cov,
                   n_shown=n_shown, gt=gt)
    out["evidence"] = ["all" if n and c == n else "some" if c else "none"
                       for c, n in zip(out["n_covered"], out["n_gt"], strict=True)]
    out["objective_pass"] = (out["evidence"] == "all") & ~out["refusal"].astype(bool)
    return out[cols].reset_index(drop=True)


def kappa(verdicts: pd.Series, objective: pd.Series) -> float:
    """Cohen's kappa of "Solved" against the objective pass over judged plans (NaN when undefined)."""
    judged = verdicts.notna()
    a = (verdicts[judged] == "Solved").astype(int).to_numpy()
    b = objective[judged].astype(int).to_numpy()
    if len(a) < 2 or (len(set(a)) == 1 and len(set(b)) == 1):
        return float("nan")
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        return float(cohen_kappa_score(a, b))


def kappa_max(a: float, b: float) -> float:
    """The largest Cohen's kappa of raters passing shares ``a`` and ``b`` (NaN if both 0 or 1)."""
    chance = a * b + (1 - a) * (1 - b)
    most = min(a, b) + min(1 - a, 1 - b)
    return (most - chance) / (1 - chance) if chance < 1 else float("nan")


def validity_row(g: pd.DataFrame) -> dict:
    judged = g[g["verdict"].notna()]
    solved = judged["verdict"] == "Solved"
    ev = judged["evidence"]
    return {"n_plans": int(len(g)), "n_judged": int(len(judged)),
            "judged_pass_rate": float(solved.mean()) if len(judged) else float("nan"),
            "objective_pass_rate": float(g["objective_pass"].mean()) if len(g) else float("nan"),
            **{f"evidence_{e}": int((g["evidence"] == e).sum()) for e in EVIDENCE},
            "kappa": kappa(g["verdict"], g["objective_pass"]),
            "kappa_any": kappa(g["verdict"], g["evidence"] != "none"),
            "kappa_max": kappa_max(float(solved.mean()), float(judged["objective_pass"].mean()))
            if len(judged) else float("nan"),
            "coverage": float((g["n_covered"] / g["n_gt"].clip(lower=1)).mean()) if len(g) else float("nan"),
            "ceiling": float((g["n_shown"] >= g["n_gt"].clip(lower=1)).mean())
            if len(g) and g["n_shown"].notna().all() else float("nan"),
            **{f"solved_rate_{e}": float(solved[ev == e].mean()) if (ev == e).any() else float("nan")
               for e in ("none", "some", "all")}}


def pass_rate_table(result, gt: str = "relevant", registry: pd.DataFrame | None = None,
                    verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per subset, method and run: judged and objective pass rates, kappa, plans and ``judge_version``."""
    ev = plan_evidence(result, gt, registry, verdicts)
    rows = []
    for (subset, method, run), g in ev.groupby(["subset", "method", "run"], sort=False):
        r = validity_row(g)
        rows.append({"subset": subset, "method": method, "run": int(run),
                     **{c: r[c] for c in ("judged_pass_rate", "objective_pass_rate", "kappa", "n_plans")},
                     "gt": gt,
                     "judge_version": ",".join(sorted({str(v) for v in g["judge_version"].dropna()}))})
    return pd.DataFrame(rows, columns=[*PASS_RATE_COLUMNS, "gt", "judge_version"])
