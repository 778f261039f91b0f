"""The written report: ``outputs/<run>/report.md`` from the scorecard (:mod:`.scorecard`), the saved
tables and figures, and the teaching material."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..data.markdown import md_table
from ..pipeline.experiment import ExperimentConfig
from .numbers import fmt_ci, fmt_count, fmt_number, fmt_p, fmt_signed
from .scorecard import (
    DIFFERS,
    REFERENCES_FILE,
    TableCache,
    compare_entries,
    load_references,
    paper_bounds,
    status_counts,
)
from .teaching import teaching_material

# -- the written report -------------------------------------------------------------------------------------

def run_provenance(cfg: ExperimentConfig) -> list[dict]:
    """Provenance of the studies stored for this run; the configuration's own study first."""
    files = sorted((cfg.out_dir / "runs").glob("*/provenance.json"))
    own = cfg.out_dir / "runs" / cfg.study_key() / "provenance.json"
    files.sort(key=lambda p: p != own)
    out = []
    for path in files:
        prov = json.loads(path.read_text())
        prov["study_folder"] = str(path.parent.relative_to(cfg.out_dir))
        out.append(prov)
    return out


def provenance_markdown(prov: Mapping) -> str:
    """A study's model, backend, data and parameters as a Markdown list."""
    s = prov.get("settings", {})
    requested = prov.get("model_requested")
    embedder = prov.get("model") if requested in (None, prov.get("model")) else \
        f"{prov.get('model')} (requested {requested})"
    lines = [
        f"- embedder: {embedder}",
        f"- backend: {prov.get('backend')} (model {prov.get('llm_model')}); pass rate: "
        f"{prov.get('pass_rate_kind', 'n/a')}",
        f"- data: fingerprint {prov.get('data_fingerprint')}, registry {prov.get('registry_size')} of "
        f"{prov.get('registry_full_size')} APIs (sub-registry seed {prov.get('sub_registry_seed')})",
        f"- parameters: k={s.get('k')}, depth={s.get('depth')}, runs={s.get('runs')}, "
        f"plan_limit={s.get('plan_limit')}, temperature={s.get('temperature')}, "
        f"run_temperature={s.get('run_temperature')}, queries={prov.get('n_queries')} "
        f"({prov.get('n_planned_queries')} planned)",
        f"- prompts: {', '.join(prov.get('prompt_versions', [])) or 'n/a'}",
        f"- stored in: `{prov.get('study_folder')}`",
    ]
    return "\n".join(lines)


# The report's sections in the paper's order: (key, heading, the paper.yaml section prefixes it holds).
SECTIONS = (("setup", "Setup and data (§3)", ("§3",)),
            ("main", "Main results (§4.1, Figure 2)", ("§4.1 Main",)),
            ("budget", "Retrieval budget (Table 1)", ("§4.1 Table 1", "§4.2 Budget")),
            ("scale", "Registry scale (§4.2, Figure 3)", ("§4.2 Registry",)),
            ("trajectory", "Trajectories (§4.3, Figure 4)", ("§4.3",)),
            ("stubs", "Stubs (§4.4, Table 4)", ("§4.4", "§5 Discussion (Intent")),
            ("cost", "Cost and routing (§5)", ("§5 Discussion (cost", "§5 Discussion (routing")))
# Figures by name (exact, or prefix ending in "_"): (section key, caption).
FIGURES = {
    "pipeline": ("setup", "The two pipelines drawn by the toolkit (the paper's Figure 1): RtP searches with "
                          "the query; PtR has the planner write stubs first (no tools shown), searches with "
                          "each and keeps the best similarity per API. The retriever family (dense, BM25, "
                          "hybrid) is where a searched text meets the registry index."),
    "data_categories": ("setup", "APIs per category in this run's registry."),
    "data_doc_lengths": ("setup", "Length of the API documents that are embedded."),
    "figure2": ("main", "The paper's Figure 2 for this run: recall, precision and pass rate per set and "
                        "method (bars with 95% CIs, the paper's values as markers) and per-query wins."),
    "headline": ("main", "Recall@k per set and method, error bars the std over runs."),
    "runs_recall": ("main", "PtR's recall in each run against RtP's, per set (the paper's test over runs)."),
    "k_ablation": ("budget", "Recall against the retrieval budget k, per set and method (candidate ground "
                             "truth)."),
    "k_ablation_relevant": ("budget", "Recall against k with the relevant-API ground truth."),
    "scale_recall": ("scale", "Recall on sub-registries of growing size (mean over seeds)."),
    "scale_divergence": ("scale", "Share of queries whose RtP and PtR top-k lists share no API, by registry "
                                  "size."),
    "figure4": ("trajectory", "The paper's Figure 4 for this run: plan fidelity, overlap, used share, steps "
                              "and APIs named, with the paper's values as markers."),
    "routing_recall_vs_share": ("cost", "Recall against the share of queries routed to PtR, for each routing "
                                        "policy."),
    "retriever_": ("retriever", "Retriever families: recall per set, retriever and method."),
    "ablation_": ("ablations", "An ablation behind a named cause (notebook 11)."),
    "beyond_": ("beyond", "Beyond the paper (notebook 10)."),
}


def figure_section(stem: str) -> tuple[str, str]:
    """``(section key, caption)`` of a saved figure; ``("other", ...)`` for a figure no section claims."""
    if stem in FIGURES:
        return FIGURES[stem]
    for prefix, (key, caption) in FIGURES.items():
        if prefix.endswith("_") and stem.startswith(prefix):
            return key, f"{caption[:-1]}: {stem[len(prefix):].replace('_', ' ')}."
    return "other", f"Figure {stem.replace('_', ' ')} (saved by a notebook; no section of the paper)."


def figure_files(cfg: ExperimentConfig) -> list[Path]:
    folder = cfg.figures_dir
    if not folder.is_dir():
        return []
    return sorted(p for ext in ("png", "svg", "jpg") for p in folder.glob(f"*.{ext}"))


def figure_links(cfg: ExperimentConfig) -> list[str]:
    """Markdown image links, relative to the run folder, of every figure saved for this run."""
    return [f"![{p.stem}]({p.relative_to(cfg.out_dir).as_posix()})" for p in figure_files(cfg)]


def figures_markdown(cfg: ExperimentConfig, key: str) -> list[str]:
    """The figures of one section, each with its caption."""
    parts = []
    for p in figure_files(cfg):
        section, caption = figure_section(p.stem)
        if section == key:
            parts += [f"![{p.stem}]({p.relative_to(cfg.out_dir).as_posix()})", "",
                      f"*Figure `{p.stem}`.* {caption}", ""]
    return parts


def _shown(report: pd.DataFrame, full: bool = False) -> pd.DataFrame:
    """Report rows with every number formatted once (3 decimals, counts with separators, no nan)."""
    out = pd.DataFrame({
        "id": report["id"], "subset": report["subset"], "paper": report["paper"],
        "this run": [fmt_count(v) if m in ("count", "wins") else fmt_number(v)
                     for v, m in zip(report["this_run"], report["metric"], strict=True)],
        "95% CI": [fmt_ci(lo, hi) for lo, hi in zip(report["ci_low"], report["ci_high"], strict=True)],
        "status": [s + (f" ({d})" if d else "") for s, d in zip(report["status"], report["direction"],
                                                                  strict=True)],
        "basis": report["basis"]})
    if report["objective"].notna().any():
        out["objective pass rate"] = report["objective"].map(fmt_number)
    if full:
        out["cause"] = report["cause"].fillna("")
        out["description"] = report["description"]
    return out


def _report_table(report: pd.DataFrame, full: bool = True) -> str:
    return md_table(_shown(report, full)) if len(report) else "No reference number here."


def section_rows(report: pd.DataFrame, prefixes) -> pd.DataFrame:
    return report[report["section"].astype(str).str.startswith(tuple(prefixes))]


def section_sentence(rows: pd.DataFrame) -> str:
    """A generated sentence on a section's rows: how many are consistent, which differ and why."""
    c = status_counts(rows)
    found = c["consistent"] + c["differs"]
    parts = [f"{c['consistent']} of {found} numbers found are consistent with the paper"]
    differs = rows[rows["status"] == DIFFERS]
    if len(differs):
        parts.append("differs: " + ", ".join(
            f"{r.id} ({r.direction}, {r.cause.split(':')[0] if r.cause else 'unexplained'})"
            for r in differs.itertuples()))
    if c["not scored"]:
        parts.append(f"{c['not scored']} not scored")
    if c["not found"]:
        parts.append(f"{c['not found']} not found in this run's tables")
    return "; ".join(parts) + "."


def summary_verdicts(cfg: ExperimentConfig, report_refs: dict, alpha: float = 0.05) -> list[dict]:
    """One verdict per set on recall@k, from the saved ``main_results`` and ``paired_tests`` tables and the
    same :func:`~toolbench_lib.analysis.findings.recall_verdict` notebook 02's findings use."""
    from .findings import recall_verdict

    tables = TableCache(cfg.tables_dir)
    main, paired = tables.get("main_results"), tables.get("paired_tests")
    if main is None or paired is None or main.empty or paired.empty:
        return []
    by_id = {e["id"]: paper_bounds(e["paper"]).get("value") for e in report_refs["entries"]}
    m = main[main["gt"] == "candidates"].set_index(["subset", "method"])
    p = paired[(paired["gt"] == "candidates") & (paired["metric"] == "recall")].set_index("subset")
    out = []
    for subset in dict.fromkeys(main["subset"]):
        if (subset, "rtp") not in m.index or (subset, "ptr") not in m.index or subset not in p.index:
            continue
        t = p.loc[subset]
        paper = {k: v for k in ("rtp", "ptr") if (v := by_id.get(f"{subset.lower()}_{k}_recall")) is not None}
        v = recall_verdict(m.loc[(subset, "rtp"), "recall_mean"], m.loc[(subset, "ptr"), "recall_mean"],
                           t["p_wilcoxon_holm"], paper, alpha)
        out.append({"subset": subset, "n": int(m.loc[(subset, "rtp"), "n_queries"]),
                    "rtp": m.loc[(subset, "rtp"), "recall_mean"],
                    "ptr": m.loc[(subset, "ptr"), "recall_mean"],
                    "diff": t["diff"], "ci_low": t["ci_low"], "ci_high": t["ci_high"],
                    "p": t["p_wilcoxon_holm"], "paper": paper, **v})
    return out


def setup_differences(cfg: ExperimentConfig, provenance: list[dict], refs: dict) -> list[str]:
    """The box "what differs from the paper's setup": embedder, LLM, runs, query counts and sets."""
    from ..data.queries import DEFAULT_SUBSETS

    prov = provenance[0] if provenance else {}
    settings = prov.get("settings", {})
    main = TableCache(cfg.tables_dir).get("main_results")
    counts = {}
    if main is not None and not main.empty:
        rows = main[(main["method"] == "rtp") & (main["gt"] == "candidates")]
        counts = dict(zip(rows["subset"], rows["n_queries"], strict=True))
    paper_n = {e["subset"]: paper_bounds(e["paper"])["value"] for e in refs["entries"]
               if e["id"].endswith("_query_count")}
    rows = [("embedder", "GTE-base (thenlper/gte-base)", str(prov.get("model", "n/a"))),
            ("LLM (stubs, plans)", "Gemini 2.5 Flash",
             f"{prov.get('backend', 'n/a')} ({prov.get('llm_model', 'n/a')})"),
            ("runs", "4", fmt_count(settings.get("runs"))),
            ("registry", fmt_count(46984), fmt_count(prov.get("registry_size")))]
    for subset in cfg.subsets:
        rows.append((f"{subset} queries", fmt_count(paper_n.get(subset)), f"{fmt_count(counts.get(subset))} "
                     f"({DEFAULT_SUBSETS.get(subset, subset)})"))
    table = md_table(pd.DataFrame(rows, columns=["", "paper", "this run"]))
    return ["> **What differs from the paper's setup**", ">",
            *[f"> {line}" for line in table.splitlines()], ""]


def summary_markdown(cfg: ExperimentConfig, report: pd.DataFrame, refs: dict,
                     provenance: list[dict]) -> list[str]:
    """The one-page summary: the question, one verdict per set, the setup box, the status counts."""
    parts = ["## Summary", "",
             "**The question.** Does retrieving tools with the raw query (RtP) or with stubs the planner "
             "writes first (PtR) find more of a query's ground-truth APIs, and does the answer flip between "
             "single-tool (G1) and multi-tool (G2, G3) queries?", ""]
    verdicts = summary_verdicts(cfg, refs)
    if verdicts:
        parts.append("**Verdicts on recall@k** (PtR − RtP, bootstrap 95% CI over queries, Holm-corrected "
                     "Wilcoxon test):")
        parts.append("")
        for v in verdicts:
            paper = (f"paper: {v['paper_leader']} ahead (RtP {fmt_number(v['paper']['rtp'])}, PtR "
                     f"{fmt_number(v['paper']['ptr'])})" if v["paper_leader"] else "no paper pair")
            parts.append(f"- **{v['subset']}** ({fmt_count(v['n'])} queries): RtP {fmt_number(v['rtp'])}, "
                         f"PtR {fmt_number(v['ptr'])}; PtR − RtP {fmt_signed(v['diff'])} "
                         f"{fmt_ci(v['ci_low'], v['ci_high'])}, {fmt_p(v['p'])}; {paper}: "
                         f"**{v['verdict']}**.")
        parts.append("")
    else:
        parts += ["No verdict: this run saved no `main_results` and `paired_tests` tables.", ""]
    retr = TableCache(cfg.tables_dir).get("retriever_verdicts")
    if retr is not None and not retr.empty and {"subset", "retriever", "text"} <= set(retr.columns):
        overall = retr[retr["subset"] == "all"]["text"].tolist()
        fused = TableCache(cfg.tables_dir).get("retriever_fusion_verdicts")
        fused = fused["text"].tolist() if fused is not None and "text" in fused else []
        parts += ["**With which retriever?** " + " ".join(overall) + " Per set and family: the section "
                  "Retriever families below.", ""]
        parts += [f"- {t}" for t in fused] + ([""] if fused else [])
    parts += setup_differences(cfg, provenance, refs)
    c = status_counts(report)
    parts += [f"**Against the paper's {fmt_count(len(report))} reference numbers:** {c['consistent']} "
              f"consistent, {c['differs']} differ ({c['explained']} explained by a tested cause, "
              f"{c['unexplained']} "
              f"unexplained), {c['not scored']} not scored (judged with a judge of kappa below 0.4 or not "
              f"measured), {c['not found']} not found in this run's tables. The scorecard at the end lists "
              "each.", ""]
    return parts


def retriever_section(cfg: ExperimentConfig) -> list[str]:
    """The retriever families' table and figures, when the run saved them; nothing otherwise."""
    table = TableCache(cfg.tables_dir).get("retriever_main")
    figs = figures_markdown(cfg, "retriever")
    if (table is None or table.empty) and not figs:
        return []
    parts = ["## Retriever families", ""]
    if table is not None and not table.empty:
        shown = table.copy()
        for col in shown.columns:
            if col == "n_queries":
                shown[col] = shown[col].map(fmt_count)
            elif pd.api.types.is_float_dtype(shown[col]):
                shown[col] = shown[col].map(fmt_number)
        parts += [md_table(shown), ""]
    cache = TableCache(cfg.tables_dir)
    verdicts = cache.get("retriever_verdicts")
    if verdicts is not None and "text" in verdicts:
        parts += ["### Does PtR beat RtP, with each retriever?", "",
                  *[f"- {t}" for t in verdicts["text"]], ""]
    parts += table_section(cfg, "", RETRIEVER_TABLES)[2:]
    fused = cache.get("retriever_fusion_verdicts")
    if fused is not None and "text" in fused:
        parts += ["### Fused methods against the better dense architecture", "",
                  *[f"- {t}" for t in fused["text"]], ""]
    return parts + figs


RETRIEVER_TABLES = (("retriever_tests", "PtR against RtP per set and family (per query and over runs, Holm)"),
                    ("retriever_crossover", "The paper's crossover per family"),
                    ("retriever_routing", "Routing by subset per family"),
                    ("retriever_divergence", "Disjoint top-k lists per family"),
                    ("retriever_scale_gap", "BM25 against registry size"),
                    ("retriever_fusion_choice", "Fused methods chosen on G1-G3 (out-of-fold recall)"),
                    ("retriever_fusion_design", "Fused methods and families on the design sets"),
                    ("retriever_fusion_unseen", "The same, unchanged, on the unseen sets"),
                    ("retriever_costs", "Cost per query"))


BEYOND_TABLES = (("beyond_leaderboard", "Discovery methods on the design sets (notebook 10)"),
                 ("beyond_goal", "Recall margin over the better architecture per set"),
                 ("beyond_validation", "The same methods on sets not used for design"),
                 ("beyond_validation_pooled", "Validation sets pooled: recall minus each set's better one"),
                 ("beyond_validation_losses", "Where the validation gap comes from"))


def table_section(cfg: ExperimentConfig, heading: str, tables) -> list[str]:
    """A report section of saved Markdown tables (``(name, title)`` pairs); nothing when none was saved."""
    parts = []
    for name, title in tables:
        path = cfg.tables_dir / f"{name}.md"
        if path.exists():
            parts += [f"### {title}", "", path.read_text(encoding="utf-8").strip(), ""]
    return [f"## {heading}", "", *parts] if parts else []


def beyond_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 10's leaderboards, as saved under ``tables/``; nothing when that notebook did not run."""
    return table_section(cfg, "Beyond the paper", BEYOND_TABLES)


ABLATION_TABLES = (("ablation_verdicts", "What the ablations found (notebook 11)"),
                   ("ablation_decomposition", "Decomposition against architecture"),
                   ("ablation_stub_echo", "Stub echo against divergence"))


def ablation_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 11's verdicts and key tables, behind the report's named causes."""
    return table_section(cfg, "Ablations behind the named causes", ABLATION_TABLES)


JUDGE_TABLES = (("judge_findings", "What the judge analysis found (notebook 02)"),
                ("pass_rate_judged_objective", "Judged against objective pass rates, with the judge's kappa"),
                ("pass_rate_ordering", "The paper's pass-rate ordering under each pass rate"))


RUNS_TABLES = (("paired_tests", "Paired per-query tests of PtR against RtP, one run (notebook 02)"),
               ("runs_tests", "The paper's test over runs, on the queries recorded in every run"))


def runs_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 02's statistics: the paired per-query tests and the test over several runs."""
    return table_section(cfg, "Statistics", RUNS_TABLES)


def judge_section(cfg: ExperimentConfig) -> list[str]:
    """Notebook 02's judge validity tables, as saved under ``tables/``; nothing when they are absent."""
    return table_section(cfg, "The pass rate: judged and objective", JUDGE_TABLES)


def glossary_section(material) -> list[str]:
    """The glossary, after the summary: the terms the report uses, each with where the toolkit computes it."""
    return ["## Glossary", "", "The terms this report uses; the figure `pipeline` (in the setup section) "
            "draws both architectures.", "", material.glossary, ""]


def teaching_sections(material) -> dict[str, list[str]]:
    """``{section key: lines}``: the worked queries after the main results, the paper's Table 2 examples
    after the stubs (where the paper sets them)."""
    return {"main": ["## Worked queries", "", *material.worked],
            "stubs": ["## The paper's Table 2 examples in this run", "", *material.examples]}


def report_markdown(cfg: ExperimentConfig, report: pd.DataFrame, references: dict,
                    provenance: list[dict], material=None) -> str:
    """The whole ``report.md``: the summary, the glossary, the paper's sections with their numbers and
    figures (the worked queries and Table 2 examples among them), this toolkit's own sections, the
    scorecard last. ``material`` is the run's :class:`~toolbench_lib.analysis.teaching.TeachingMaterial`
    (read from its stored study when not given)."""
    material = teaching_material(cfg) if material is None else material
    after = teaching_sections(material)
    parts = [f"# Reproduction report: {cfg.run_name}", "",
             f"Reference numbers: {references['source']} (`references/paper.yaml`, version "
             f"{references['version']}, every number quoted from the paper's text).", "",
             *summary_markdown(cfg, report, references, provenance), *glossary_section(material)]
    for key, heading, prefixes in SECTIONS:
        rows = section_rows(report, prefixes)
        parts += [f"## {heading}", "", section_sentence(rows) if len(rows) else "", "",
                  _report_table(rows, full=False), "", *figures_markdown(cfg, key), *after.get(key, [])]
    parts += [*retriever_section(cfg), *runs_section(cfg), *ablation_section(cfg)]
    parts += figures_markdown(cfg, "ablations")
    parts += [*judge_section(cfg), *beyond_section(cfg), *figures_markdown(cfg, "beyond")]
    other = figures_markdown(cfg, "other")
    if other:
        parts += ["## Other figures", "", *other]
    if not figure_files(cfg):
        parts += ["No figures were saved for this run.", ""]
    parts += ["## This run", ""]
    if provenance:
        parts.append(provenance_markdown(provenance[0]))
        if len(provenance) > 1:
            others = ", ".join(f"`{p['study_folder']}`" for p in provenance[1:])
            parts += ["", f"Other studies stored for this run: {others}."]
    else:
        parts.append(f"No stored study found under `{cfg.out_dir / 'runs'}`.")
    parts += ["", f"Run settings: smoke={cfg.smoke}, subsets={', '.join(cfg.subsets)}.", "",
              "## Scorecard", "",
              "`status` is *consistent* when the paper's value lies in this run's 95% CI (or, without one, "
              "within the stated tolerance, the paper's range or its last decimal), *differs* (with the "
              "direction of this run against the paper) otherwise, *not scored* for a pass rate judged by a "
              "judge of kappa below 0.4. `cause` is the first listed cause that predicts this metric and "
              "direction and whose ablation check holds (`references/causes.yaml`).", "",
              _report_table(report, full=True), ""]
    return "\n".join(parts).rstrip() + "\n"


def write_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE, material=None) -> Path:
    """Write ``outputs/<run>/report.md`` and ``report.csv``; returns the Markdown path. ``material``: the
    teaching material already built for this run (built from its stored study when not given)."""
    refs = load_references(references)
    report = compare_entries(refs["entries"], cfg.tables_dir)
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    report.to_csv(cfg.out_dir / "report.csv", index=False)
    path = cfg.out_dir / "report.md"
    path.write_text(report_markdown(cfg, report, refs, run_provenance(cfg), material), encoding="utf-8")
    return path
