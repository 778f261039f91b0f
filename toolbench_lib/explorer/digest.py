"""What the explorer's queries share, per selected method: where the ground truth sat, what only a stub found,
wrong APIs of a ground-truth API's tool, the common categories and tools, the best single architecture."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pandas as pd

from ..retrieval.ltr_features import category_of, tool_of
from ..retrieval.retrievers import ARCHITECTURES, split_method

DIGEST_COLUMNS = ["method", "found", "missed_near", "missed_beyond", "stub_only", "wrong_siblings"]
TOP_NAMES = 3


def digest(rankings: Mapping[str, Sequence[Mapping[str, list[str]]]], gts: Mapping[str, set[str]],
           keys: Sequence[str], k: int, stub_methods: set[str], rtp: Sequence[Mapping[str, list[str]]] | None,
           ) -> pd.DataFrame:
    """One row per method of ``rankings`` (``{method: [each scored run's {qkey: ranked ids}]}``) over the
    queries ``keys`` (shares; NaN where a share has nothing to count)."""
    rows = []
    for method, per_run in rankings.items():
        n = dict.fromkeys(("gt", "found", "near", "beyond", "stub_only", "wrong", "siblings"), 0)
        for i, ranking in enumerate(per_run):
            base = rtp[i] if rtp is not None and method in stub_methods else None
            for q in keys:
                ids = list(dict.fromkeys(ranking.get(q, [])))
                place = {a: p for p, a in enumerate(ids, 1)}
                gt = gts.get(q, set())
                tools = {tool_of(a) for a in gt}
                shown_by_rtp = set(list(dict.fromkeys(base.get(q, [])))[:k]) if base is not None else set()
                n["gt"] += len(gt)
                for a in gt:
                    where = place.get(a)
                    bucket = "beyond" if where is None else "found" if where <= k else "near"
                    n[bucket] += 1
                    n["stub_only"] += bucket == "found" and base is not None and a not in shown_by_rtp
                wrong = [a for a in ids[:k] if a not in gt]
                n["wrong"] += len(wrong)
                n["siblings"] += sum(tool_of(a) in tools for a in wrong)
        rows.append({"method": method, "found": _share(n, "found", "gt"),
                     "missed_near": _share(n, "near", "gt"), "missed_beyond": _share(n, "beyond", "gt"),
                     "stub_only": _share(n, "stub_only", "found")
                     if method in stub_methods and rtp is not None else float("nan"),
                     "wrong_siblings": _share(n, "siblings", "wrong")})
    return pd.DataFrame(rows, columns=DIGEST_COLUMNS)


def _share(n: Mapping[str, int], part: str, whole: str) -> float:
    return n[part] / n[whole] if n[whole] else float("nan")


def common_names(gts: Mapping[str, set[str]], keys: Sequence[str], top: int = TOP_NAMES
                 ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The ground-truth APIs' most frequent categories and tools over ``keys``, with their counts."""
    apis = [a for q in keys for a in sorted(gts.get(q, set()))]
    return (Counter(category_of(a) for a in apis).most_common(top),
            Counter(tool_of(a).split("/", 1)[-1] for a in apis).most_common(top))


def best_single(means: Mapping[str, float]) -> str | None:
    """The single architecture (RtP or PtR with any retriever family) of highest mean recall (ties: the
    first name in order), None when there is none."""
    singles = sorted(m for m in means if split_method(m)[0] in ARCHITECTURES)
    return max(singles, key=lambda m: (means[m], -singles.index(m))) if singles else None
