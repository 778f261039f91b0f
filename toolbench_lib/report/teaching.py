"""Teaching material: the two pipelines drawn, a glossary, worked queries picked by rule, and the paper's
Table 2 examples as this run saw them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..analysis.numbers import fmt_count, fmt_number, leader
from ..analysis.references import REFERENCES_FILE, read_yaml
from ..analysis.style import METHOD_COLORS
from ..config import K
from ..data.markdown import md_code, md_text
from ..data.queries import DEFAULT_GT, check_gt, subset_alias
from ..eval.evaluation import recall_at
from ..explorer.data import api_labels, catalogue, explorer_url, query_outcomes, stored_registry
from ..study.stored import StoredStudyError, StudyResult
from .against import POSSIBLE
from .glossary import glossary_markdown

HIT = "✓"
ROLES = ("ptr_win", "rtp_win", "both_miss")
PICK_COLUMNS = ["role", "qkey", "subset", "rtp_recall", "ptr_recall", "gap", "n_gt", "rule"]

# -- the pipeline diagram ------------------------------------------------------------------------------------

FAMILY_LINES = ("dense: cosine, FAISS flat index", "BM25: word matching (bm25s)",
                "hybrid: both fused (CombSUM, RRF)")
NEUTRAL = "#555555"


def _box(ax, x: float, y: float, w: float, h: float, text: str, color: str, gid: str,
         fontsize: float = 11, fill: str | None = None, dashed: bool = False):
    """A rounded box centred on ``(x, y)`` with its text; both carry ``gid``."""
    patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.4,rounding_size=1.2",
                           linewidth=1.6, edgecolor=color, facecolor=fill or "white",
                           linestyle="--" if dashed else "-", gid=gid)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, wrap=False, gid=f"{gid}:text")
    return patch


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], color: str, gid: str,
           dashed: bool = False, label: str | None = None) -> FancyArrowPatch:
    arrow = FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.4, color=color,
                            linestyle="--" if dashed else "-", shrinkA=2, shrinkB=2, gid=gid)
    ax.add_patch(arrow)
    if label:
        ax.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 1.6, label, ha="center", va="bottom",
                fontsize=10, color=color, style="italic", gid=f"{gid}:label")
    return arrow


def pipeline_figure(k: int = K, registry_size: int | None = None, embedder: str | None = None):
    """RtP and PtR side by side with the shared registry index in the middle (the paper's Figure 1); every
    box and arrow has a ``gid`` (``rtp:embed``, ``ptr:stubs``, ``index``, ...)."""
    rtp, ptr = METHOD_COLORS["rtp"], METHOD_COLORS["ptr"]
    fig, ax = plt.subplots(figsize=(12, 7.2))
    ax.set(xlim=(0, 100), ylim=(0, 100))
    ax.axis("off")
    registry = f"{fmt_count(registry_size)} APIs" if registry_size else "the API registry"
    model = f"\n({embedder})" if embedder else ""
    xr, xm, xp = 14, 47.5, 83
    wr, wm, wp = 24, 28, 30  # box widths: RtP, the index, PtR
    for x, title, color, side in ((xr, "RtP: retrieve, then plan", rtp, "rtp"),
                                  (xp, "PtR: plan, then retrieve", ptr, "ptr")):
        ax.text(x, 98, title, ha="center", va="top", fontsize=13, fontweight="bold", color=color,
                gid=f"{side}:title")
    rows = {"query": 86, "stubs": 71, "split": 57, "search": 43, "topk": 29, "planner": 16, "plan": 4}
    h = 7

    def column(x: float, w: float, color: str, side: str, search: tuple[str, str], topk: str, fill: str,
               first: tuple[str, str]) -> None:  # the boxes from the search down, then their arrows
        for row, gid, text in (("search", *search), ("topk", "topk", topk),
                               ("planner", "planner", f"planner (LLM) sees the {k} APIs")):
            _box(ax, x, rows[row], w, h, text, color, f"{side}:{gid}")
        _box(ax, x, rows["plan"], 16, 5, "plan", color, f"{side}:plan", fill=fill)
        for i, (a, b) in enumerate((first, ("search", "topk"), ("topk", "planner"), ("planner", "plan"))):
            top = rows[b] + (h if b != "plan" else 5) / 2 + 0.8
            _arrow(ax, (x, rows[a] - h / 2 - 0.8), (x, top), color, f"{side}:arrow{i}")

    # RtP: query -> embed -> top-k -> planner -> plan
    _box(ax, xr, rows["query"], 20, h, "user query q", rtp, "rtp:query")
    ax.text(xr + 1.5, (rows["stubs"] + rows["split"]) / 2, "no LLM call\nbefore retrieval", ha="left",
            va="center", fontsize=10, color=NEUTRAL, style="italic", gid="rtp:note")
    column(xr, wr, rtp, "rtp", ("embed", f"embed q, search the index{model}"), f"top-{k} APIs by sim(q, d)",
           "#e8f0f8", ("query", "search"))
    # PtR: query -> LLM writes stubs -> each stub searched -> union re-ranked -> top-k -> planner -> plan
    _box(ax, xp, rows["query"], 20, h, "user query q", ptr, "ptr:query")
    _box(ax, xp, rows["stubs"], wp, h, "LLM writes stubs s₁ … sₘ\n(no tools shown)", ptr, "ptr:stubs")
    for i, (x, name) in enumerate(zip((xp - 10.5, xp, xp + 10.5), ("s₁", "s₂", "sₘ"), strict=True)):
        _box(ax, x, rows["split"], 7, 5, name, ptr, f"ptr:stub{i}")
        _arrow(ax, (xp, rows["stubs"] - h / 2 - 0.8), (x, rows["split"] + 3.3), ptr, f"ptr:fan{i}")
        _arrow(ax, (x, rows["split"] - 3.3), (xp + (x - xp) * 0.6, rows["search"] + h / 2 + 0.8), ptr,
               f"ptr:join{i}")
    column(xp, wp, ptr, "ptr", ("search", "each stub embedded and searched\n(its own top hits)"),
           f"union re-ranked by best similarity\nmaxₛ sim(s, d) → top-{k}", "#fbe9e9", ("query", "stubs"))
    # The shared index and the retriever family, plugged into both searches.
    _box(ax, xm, rows["search"] + 1, wm, 21,
         f"registry index\n{registry}\n\nretriever family:\n" + "\n".join(FAMILY_LINES), NEUTRAL, "index",
         fontsize=10.5, fill="#f4f4f4", dashed=True)
    _arrow(ax, (xm - wm / 2 - 0.8, rows["search"]), (xr + wr / 2 + 0.8, rows["search"]), NEUTRAL, "index:rtp",
           dashed=True, label="plugs in")
    _arrow(ax, (xm + wm / 2 + 0.8, rows["search"]), (xp - wp / 2 - 0.8, rows["search"]), NEUTRAL, "index:ptr",
           dashed=True, label="plugs in")
    ax.text(xm, rows["plan"], "same planner, same k, same index:\nonly what is searched differs", ha="center",
            va="center", fontsize=10.5, color=NEUTRAL, gid="shared:note")
    fig.tight_layout()
    return fig


# -- worked queries -----------------------------------------------------------------------------------------

RULES = {
    "ptr_win": "the query with PtR's largest recall@{k} gain over RtP",
    "rtp_win": "the query with RtP's largest recall@{k} gain over PtR",
    "both_miss": "a query where neither method finds any ground-truth API in its top {k}",
}
TITLES = {"ptr_win": "PtR's largest win", "rtp_win": "RtP's largest win", "both_miss": "Both miss everything"}
TIE_BREAK = "ties go to the larger ground truth, then to the first query key"


def pick_worked_queries(result: StudyResult, k: int = K, gt: str = DEFAULT_GT, run: int = 0) -> pd.DataFrame:
    """The three worked queries, one row per role of :data:`ROLES` (:data:`RULES`, :data:`TIE_BREAK`); a
    role no query fills has ``qkey`` None."""
    check_gt(gt)
    o = query_outcomes(result, run, k, gt)
    n_gt = result.queries.set_index("qkey")[gt].map(lambda v: 0 if v is None else len(v))
    o["n_gt"] = o["qkey"].map(n_gt).astype(int)
    o["gap"] = o["ptr_recall"] - o["rtp_recall"]
    o = o[o["n_gt"] > 0].sort_values("qkey", kind="stable")
    candidates = {"ptr_win": o[o["gap"] > 0].assign(score=o["gap"]),
                  "rtp_win": o[o["gap"] < 0].assign(score=-o["gap"]),
                  "both_miss": o[(o["rtp_recall"] == 0) & (o["ptr_recall"] == 0)].assign(score=0.0)}
    rows, none = [], {"qkey": None, "subset": None, "rtp_recall": np.nan, "ptr_recall": np.nan, "gap": np.nan,
                      "n_gt": 0}
    for role in ROLES:
        c = candidates[role]
        best = none if c.empty else c.assign(score=c["score"].round(12)).sort_values(
            ["score", "n_gt", "qkey"], ascending=[False, False, True]).iloc[0]
        rows.append({"role": role, **{col: best[col] for col in PICK_COLUMNS[1:-1]},
                     "rule": RULES[role].format(k=k)})
    out = pd.DataFrame(rows, columns=PICK_COLUMNS)
    for col in ("qkey", "subset"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


@dataclass
class WorkedQuery:
    """One query as a reader follows it: text, stubs, both top-k rankings and the ground truth."""

    qkey: str
    subset: str
    query: str
    gt: str
    ground_truth: list[str]
    rtp: list[str]
    ptr: list[str]
    stubs: list[tuple[str, str]] = field(default_factory=list)
    fell_back: bool = False
    run: int = 0
    k: int = K

    def hits(self, method: str) -> list[str]:
        """The ground-truth APIs among ``method``'s top k, in rank order."""
        truth = set(self.ground_truth)
        return [a for a in getattr(self, method) if a in truth]

    def recall(self, method: str) -> float:
        """recall@k of ``method``'s list (eval's one count); NaN without ground truth."""
        if not self.ground_truth:
            return float("nan")
        return float(recall_at([getattr(self, method)], [set(self.ground_truth)], self.k)[0])


def worked_query(result: StudyResult, qkey: str, k: int = K, gt: str = DEFAULT_GT,
                 run: int = 0) -> WorkedQuery:
    """The :class:`WorkedQuery` of ``qkey`` from a stored study (PtR's stubs and ranking of ``run``)."""
    check_gt(gt)
    q = result.queries.set_index("qkey")
    if qkey not in q.index:
        raise KeyError(f"query {qkey!r} is not in this study")
    row = q.loc[qkey]
    s = result.stubs[(result.stubs["qkey"] == qkey) & (result.stubs["run"] == run)].sort_values("stub_idx")
    return WorkedQuery(
        qkey=qkey, subset=str(row["subset"]), query=str(row["query"]), gt=gt,
        ground_truth=[str(a) for a in (row[gt] if row[gt] is not None else [])],
        rtp=result.ranking("rtp", run, k).get(qkey, []), ptr=result.ranking("ptr", run, k).get(qkey, []),
        stubs=list(zip(s["name"].astype(str), s["reasoning"].fillna("").astype(str), strict=True)),
        fell_back=bool(s["fell_back"].any()), run=run, k=k)


def _api(api_id: str, labels: Mapping[str, str], with_id: bool = True) -> str:
    """An API as shown: its label (tool / API (category)) and id; the id alone without a label."""
    if not (label := labels.get(api_id)):
        return md_code(api_id, in_table=True)
    return md_text(label, False) + (f" {md_code(api_id, in_table=True)}" if with_id else "")


def worked_query_markdown(wq: WorkedQuery, labels: Mapping[str, str] | None = None,
                          run_name: str | None = None) -> list[str]:
    """One worked query as Markdown lines: the query, its ground truth, PtR's stubs and both top-k rankings
    side by side; with ``run_name``, a link to the query in the explorer."""
    labels = labels or {}
    found = {m: set(wq.hits(m)) for m in ("rtp", "ptr")}

    def found_by(api_id: str) -> str:
        who = [name for m, name in (("rtp", "RtP"), ("ptr", "PtR")) if api_id in found[m]]
        return "found by " + " and ".join(who) if who else "missed by both"

    parts = [f"> {md_text(wq.query)}", "",
             f"*{md_text(subset_alias(wq.subset), False)}, {md_code(wq.qkey)}; ground truth "
             f"{md_code(wq.gt)}, {fmt_count(len(wq.ground_truth))} "
             f"API{'s' * (len(wq.ground_truth) != 1)}:*", ""]
    parts += [f"- {_api(a, labels)}: {found_by(a)}" for a in wq.ground_truth] + [""]
    if wq.stubs:
        n = len(wq.stubs)
        what = "fell back to the raw query" if wq.fell_back else f"{n} stub{'s' * (n != 1)}"
        parts += [f"**PtR's stubs** (run {wq.run}; {what}):", ""]
        parts += [f"{i}. {md_code(name)}" + (f": {md_text(why, False)}" if why else "")
                  for i, (name, why) in enumerate(wq.stubs, 1)] + [""]
    else:
        parts += [f"**PtR's stubs:** none stored for run {wq.run}.", ""]
    header = [f"| rank | RtP (recall@{wq.k} {fmt_number(wq.recall('rtp'))}) | "
              f"PtR (recall@{wq.k} {fmt_number(wq.recall('ptr'))}) |", "|---:|---|---|"]
    truth = set(wq.ground_truth)

    def shown(ids: Sequence[str], i: int) -> str:
        return "" if i >= len(ids) else (f"{HIT} " if ids[i] in truth else "") + _api(ids[i], labels, False)

    body = [f"| {i + 1} | {shown(wq.rtp, i)} | {shown(wq.ptr, i)} |" for i in range(wq.k)]
    parts += [*header, *body, ""]
    parts += [f"{HIT} marks a ground-truth API. RtP finds {len(wq.hits('rtp'))} and PtR "
              f"{len(wq.hits('ptr'))} of the {fmt_count(len(wq.ground_truth))}.", ""]
    if run_name:
        url = explorer_url(run_name, wq.qkey, ("rtp", "ptr"), wq.k, wq.gt, wq.run)
        parts += [f"[Open this query in the explorer]({url}) (optional: served by `make explore`; the lists "
                  "above stand without it).", ""]
    return parts


def worked_queries_markdown(result: StudyResult, k: int = K, gt: str = DEFAULT_GT, run: int = 0,
                            labels: Mapping[str, str] | None = None,
                            run_name: str | None = None) -> list[str]:
    """The three worked queries of :func:`pick_worked_queries`, each with its rule and rendering."""
    picks = pick_worked_queries(result, k, gt, run)
    parts = [f"Three queries picked by rule from this run's study (recall@{k}, ground truth `{gt}`, "
             f"PtR's run {run}); {TIE_BREAK}.", ""]
    for p in picks.itertuples():
        title = f"### {TITLES[p.role]}"
        if p.qkey is None:
            parts += [title, "", f"No query here is {p.rule}.", ""]
            continue
        parts += [title, "", f"*Rule:* {p.rule}.", ""]
        parts += worked_query_markdown(worked_query(result, p.qkey, k, gt, run), labels, run_name=run_name)
    return parts


# -- the paper's Table 2 examples ---------------------------------------------------------------------------

def possible(recall: float, n: int, k: int = K) -> bool:
    """Whether a recall@k printed to two decimals can come from a ground truth of ``n`` APIs: some count of
    hits, at most ``k`` and ``n``, divided by ``n`` rounds to it (0.33 from 1 of 3; 0.25 needs 4 or 8)."""
    return n > 0 and any(abs(c / n - recall) < 0.006 for c in range(min(n, k) + 1))


def example_block(result: StudyResult, x: Mapping, k: int = K, gt: str = DEFAULT_GT, run: int = 0,
                  labels: Mapping[str, str] | None = None,
                  run_name: str | None = None) -> tuple[list[str], dict]:
    """One Table 2 example found in ``result``: the paper's words and recalls beside this run's, the query in
    full; and its row of the examples table."""
    wq = worked_query(result, x["qkey"], k, gt, run)
    paper_leader = leader(x["rtp_recall"], x["ptr_recall"])
    ours = leader(wq.recall("rtp"), wq.recall("ptr"))
    q = result.queries.set_index("qkey").loc[x["qkey"]]
    sizes = {g: len(q[g]) if q[g] is not None else 0 for g in ("candidates", "relevant")}
    fits = [g for g, n in sizes.items() if all(possible(x[m], n, k) for m in ("rtp_recall", "ptr_recall"))]
    row = {"example": x["id"], "query": x["qkey"], "paper RtP": x["rtp_recall"], "paper PtR": x["ptr_recall"],
           f"RtP here (run {run})": wq.recall("rtp"), f"PtR here (run {run})": wq.recall("ptr"),
           "paper's leader": paper_leader, "leader here": ours,
           "match": "loose" if x.get("match") == "loose" else "same task",
           "APIs (candidates / relevant)": f"{sizes['candidates']} / {sizes['relevant']}",
           POSSIBLE: "both" if len(fits) == 2 else fits[0] if fits else "neither"}
    agree = ("the same leader as the paper" if ours == paper_leader else
             f"the paper's leader was {paper_leader}")
    about, quote = x.get("description", ""), md_text(str(x["quote"]).replace("\\to", "→"), False)
    return [f"### {md_code(x['id'])}", "", f"*The paper:* {quote}", "",
            f"*This run:* RtP {fmt_number(wq.recall('rtp'))}, PtR {fmt_number(wq.recall('ptr'))} (paper: RtP "
            f"{x['rtp_recall']:g}, PtR {x['ptr_recall']:g}); leader here: {ours}, {agree}."
            + (f" The query here: {md_text(about, False)}." if about else ""), "",
            *worked_query_markdown(wq, labels, run_name=run_name)], row


def paper_examples_markdown(result: StudyResult, k: int = K, gt: str = DEFAULT_GT, run: int = 0,
                            labels: Mapping[str, str] | None = None,
                            examples: Sequence[Mapping] | None = None, run_name: str | None = None,
                            elsewhere: Mapping[str, str] | None = None) -> tuple[list[str], pd.DataFrame]:
    """The Table 2 examples whose query is in this study with both rankings, then why each other is not
    shown (``elsewhere``: the study that holds it); and a table of the paper's recalls beside this run's."""
    elsewhere = elsewhere or {}
    examples = worked_examples(present_only=False) if examples is None else examples
    keys = set(result.queries["qkey"])
    shown = [x for x in examples if x.get("qkey") and x["qkey"] in keys]
    absent = [x for x in examples if not (x.get("qkey") and x["qkey"] in keys)]
    exact = sum(x.get("match", "exact") == "exact" for x in shown)
    loose = f", {len(shown) - exact} loosely (the same APIs, another request)" if len(shown) > exact else ""
    verb = "is" if exact == 1 else "are"
    other = sum(bool(x.get("qkey") and elsewhere.get(x["qkey"])) for x in absent)
    others = f"; {other} more from another study of the run, below" if other else ""
    parts = [f"Of the paper's {len(examples)} Table 2 examples, {exact} {verb} among this run's queries as "
             f"the same task and APIs{loose}{others} (recall@{k}, ground truth `{gt}`, PtR's run {run}).", ""]
    rows = []
    for x in shown:
        lines, row = example_block(result, x, k, gt, run, labels, run_name)
        parts += lines
        rows.append(row)
    if absent:
        sets = ", ".join(dict.fromkeys(result.queries["subset"]))

        def why(x: Mapping) -> str:
            if not x.get("qkey"):
                return f"not in the data: {' '.join(str(x.get('absent', 'no matching query')).split())}"
            other = elsewhere.get(x["qkey"])
            return (f"{md_code(x['qkey'])} is not in this study's sets ({sets})"
                    + (f"; the study {md_code(other)} holds it" if other else ""))

        parts += ["Not shown:", "", *(f"- {md_code(x['id'])}: {why(x)}." for x in absent), ""]
    return parts, pd.DataFrame(rows)


# -- for the report and notebook 09 -------------------------------------------------------------------------

@dataclass
class TeachingMaterial:
    """The Markdown of the teaching sections for one run; ``note`` says why a part is missing."""

    glossary: str
    worked: list[str]
    examples: list[str]
    picks: pd.DataFrame
    note: str = ""
    examples_table: pd.DataFrame = field(default_factory=pd.DataFrame)


def load_run_study(cfg) -> tuple[StudyResult | None, str]:
    """``(study, "")``: the run's own stored study, else the only/first one stored; ``(None, why)`` when
    there is none or it is damaged."""
    runs = Path(cfg.out_dir) / "runs"
    own = runs / cfg.study_key()
    found = sorted(p.parent for p in runs.glob("*/provenance.json"))
    folder = own if (own / "provenance.json").exists() else (found[0] if found else None)
    if folder is None:
        return None, f"no stored study under `{runs.name}/` of this run"
    try:
        result = StudyResult.load(folder)
    except StoredStudyError as exc:
        return None, str(exc).replace(str(runs.parent), "<run>")
    if missing := {"rtp", "ptr"} - set(result.methods):
        return None, f"the stored study has no {' and '.join(sorted(missing))} rankings"
    return result, ""


def teaching_material(cfg, gt: str = DEFAULT_GT, run: int = 0) -> TeachingMaterial:
    """The glossary, the worked queries and the Table 2 examples of a run's stored study (rankings cut at
    ``cfg.k``); the glossary alone, with a note, when no study is stored."""
    check_gt(gt)
    gloss = glossary_markdown(cfg.k, tables_dir=cfg.tables_dir)
    result, note = load_run_study(cfg)
    if result is None:
        return TeachingMaterial(gloss, [f"No worked queries: {note}.", ""], [f"No examples: {note}.", ""],
                                pd.DataFrame(columns=PICK_COLUMNS), note)
    labels = api_labels(stored_registry(result))
    entries, others = catalogue(cfg.run_name, cfg.out_dir.parent)
    elsewhere: dict[str, str] = {}
    for name, qs in others.items():  # the family's first study that holds a query
        for q in qs["qkey"] if name != cfg.run_name else ():
            elsewhere.setdefault(q, name)
    examples, table = paper_examples_markdown(result, cfg.k, gt, run, labels, run_name=cfg.run_name,
                                              elsewhere=elsewhere)
    folders = {e.run_name: e.folder for e in entries}
    for x in worked_examples(present_only=False):  # one held by another study of the run: shown from it
        name = elsewhere.get(x.get("qkey") or "")
        if name and x["qkey"] not in set(result.queries["qkey"]):
            try:
                other = StudyResult.load(folders[name])
            except (KeyError, StoredStudyError) as exc:
                examples += [f"`{x['id']}` cannot be shown from `{name}`: {exc}.", ""]
                continue
            examples += [f"From the study {md_code(name)}:", "", *example_block(
                other, x, cfg.k, gt, run, api_labels(stored_registry(other)), name)[0]]
    return TeachingMaterial(gloss, worked_queries_markdown(result, cfg.k, gt, run, labels, cfg.run_name),
                            examples, pick_worked_queries(result, cfg.k, gt, run), examples_table=table)


def worked_examples(path: Path = REFERENCES_FILE, present_only: bool = True) -> list[dict]:
    """The paper's Table 2 examples (``id, quote, winner, ptr_recall, rtp_recall, qkey, description``);
    by default only those whose query is in the data (the others say why under ``absent``)."""
    examples = read_yaml(path).get("worked_examples", [])
    return [dict(x) for x in examples if x.get("qkey") or not present_only]
