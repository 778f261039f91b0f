"""``python -m toolbench_lib reproduce``: run every numbered notebook under papermill into
``outputs/<run>/notebooks/``, then write ``report.md`` and ``report.html`` and check the report."""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from ..data.machine import available_cpus
from ..data.paths import NOTEBOOKS_DIR
from ..explorer.app import prepare_views
from ..llm.cassettes import unique_records
from ..llm.factory import BACKENDS
from ..study.experiment import ExperimentConfig, RunConflict
from ..study.validation import UsageError, existing_dir, existing_file, int_at_least, run_name
from . import freshness
from .checks import FRONT_HEADING
from .html import NOTEBOOK_PATTERN, write_html_report
from .kernels import Terminated, environment, interpreter_kernel, quiet_kernel_manager, stop_on_signals
from .write import report_problems, write_report

log = logging.getLogger(__name__)

PASSED_PARAMETERS = ("run_name", "smoke", "data_dir", "backend", "cassette", "embedder", "runs", "plan_limit",
                     "ablations")
RUN_ONLY = ("ablations",)  # passed to the notebooks that declare it, not part of the run's configuration
SMOKE_FIXED = ("backend", "runs", "plan_limit")


class NotebookFailure(RuntimeError):
    """A notebook raised: which one, in which cell (index in the source notebook), and what."""

    def __init__(self, notebook: str, cell_index: int, ename: str, evalue: str, executed: Path,
                 source_line: str = ""):
        self.notebook, self.cell_index, self.ename, self.evalue, self.executed = (
            notebook, cell_index, ename, evalue, executed)
        self.completed: list[tuple[str, float]] = []
        first = f"; first line: {source_line}" if source_line else ""
        where = ("before any cell ran to completion (kernel or papermill error)" if cell_index < 0
                 else f"in cell {cell_index} (counting from 0 in the source notebook{first})")
        super().__init__(f"notebook {notebook} failed {where}: {ename}: {evalue}\n"
                         f"executed copy: {executed}")


class ReportCheckFailure(RuntimeError):
    """The written report fails some of its checks: ``problems`` (one line each) and the run's ``summary``."""

    def __init__(self, problems: list[str], summary: ReproduceSummary):
        self.problems = [" ".join(str(p).split()) for p in problems]
        self.summary = summary
        super().__init__(f"the report {summary.report} fails {len(self.problems)} of its checks: "
                         + "; ".join(self.problems))


@dataclass
class ReproduceSummary:
    """What a run did: notebooks with their seconds, the outputs folder and the report."""

    run_name: str
    out_dir: Path
    notebooks: list[tuple[str, float]] = field(default_factory=list)
    report: Path | None = None
    html: Path | None = None
    verdicts: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"run {self.run_name}: {len(self.notebooks)} notebook(s)"]
        lines += [f"  {name:36s} {seconds:7.1f} s" for name, seconds in self.notebooks]
        lines.append(f"outputs: {self.out_dir}")
        if self.verdicts:
            lines += ["", "What the study found (the report's summary):",
                      *(f"  {line}" for line in self.verdicts), ""]
        lines += [f"report:  {self.report}"] if self.report else []
        lines += [f"html:    {self.html}"] if self.html else []
        return "\n".join(lines)


def report_verdicts(report: Path) -> list[str]:
    """The answer in a written ``report.md``'s front (its labelled paragraphs and their lists, not its
    tables) as plain text wrapped at 100 characters; none without one."""
    try:
        text = Path(report).read_text(encoding="utf-8")
    except OSError:
        return []
    start = text.find(FRONT_HEADING)
    if start < 0:
        return []
    front = text[start + len(FRONT_HEADING):].split("\n#", 1)[0]  # its tables are skipped below
    answer, keep = [], False
    for p in front.split("\n\n"):  # the labelled paragraphs, and the list that follows one (per set)
        if p.startswith(("**The verdict.**", "**What it rests on.**", "**The answer.**", "**Beyond the")):
            answer.append(p)
            keep = True
        else:
            answer += p.splitlines() if keep and p.startswith("- ") else []
            keep = False
    return [line for p in answer for line in textwrap.wrap(re.sub(r"\*\*|__|`|\*(?=“)|(?<=”)\*", "", p), 100,
                                                           subsequent_indent="  " * p.startswith("- "))]


def select_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR, only: list[str] | None = None) -> list[Path]:
    """The numbered notebooks in order; ``only`` keeps those whose number or stem is listed."""
    found = sorted(Path(notebooks_dir).glob(NOTEBOOK_PATTERN))
    if not only:
        return found
    wanted = {w.strip().removesuffix(".ipynb") for w in only if w.strip()}
    chosen = [p for p in found if p.stem in wanted or p.stem[:2] in wanted]
    if unknown := sorted(wanted - {p.stem for p in chosen} - {p.stem[:2] for p in chosen}):
        names = ", ".join(p.name for p in found) or "none"
        raise ValueError(f"no notebook matches {unknown} in {notebooks_dir} (found: {names})")
    return chosen


def notebook_parameters(**given) -> dict:
    """The parameters passed to every notebook: the known names that were given (not None)."""
    if unknown := set(given) - set(PASSED_PARAMETERS):
        raise ValueError(f"unknown notebook parameter(s) {sorted(unknown)}")
    return {k: v for k, v in given.items() if v is not None}


def _source_cell_index(executed: Path, cell_index: int) -> tuple[int, str]:
    """Index of a failing cell in the source notebook (papermill inserts cells) and its first line."""
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):
        return cell_index, ""
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])]
    if cell_index >= len(cells):
        return cell_index, ""
    injected = sum("injected-parameters" in c.get("metadata", {}).get("tags", []) for c in cells[:cell_index])
    first = next((ln for ln in cells[cell_index].source.splitlines() if ln.strip()), "")
    return cell_index - injected, first.strip()[:80]


def declared_parameters(path: Path) -> set[str]:
    """Names the notebook's first ``parameters`` cell assigns, none without one; read from its JSON with
    ``ast`` (papermill's translator finds the same names, and importing papermill takes seconds)."""
    cells = json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return set()
    try:
        body = ast.parse("".join(cell.get("source", ""))).body
    except SyntaxError as exc:
        raise ValueError(f"{Path(path).name}: its parameters cell is not Python ({exc.msg}, line "
                         f"{exc.lineno})") from None
    targets = [t for n in body if isinstance(n, ast.Assign | ast.AnnAssign)
               for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def own_parameters(path: Path, parameters: dict) -> dict:
    """The shared parameters the notebook declares: papermill warns about any other one it is passed."""
    declared = declared_parameters(path)
    return {k: v for k, v in parameters.items() if k in declared}


def run_notebook(path: Path, executed: Path, parameters: dict, kernel_name: str,
                 cwd: Path | None = None, cell_timeout: int | None = None) -> float:
    """Run one notebook with the ``parameters`` it declares (each cell within ``cell_timeout`` seconds, if
    given); seconds taken, or :class:`NotebookFailure`."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    executed.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        pm.execute_notebook(str(path), str(executed), parameters=own_parameters(path, parameters),
                            kernel_name=kernel_name, language="python", cwd=str(cwd or path.parent),
                            progress_bar=False, log_output=False, execution_timeout=cell_timeout,
                            kernel_manager_class=quiet_kernel_manager())
    except PapermillExecutionError as exc:
        index, line = _source_cell_index(executed, exc.cell_index)
        raise NotebookFailure(path.name, index, exc.ename, exc.evalue, executed, line) from exc
    except Exception as exc:  # a dead kernel, a timeout, an unreadable notebook: still name the notebook
        raise NotebookFailure(path.name, -1, type(exc).__name__, str(exc), executed) from exc
    return time.time() - t0


STUDY_NOTEBOOK = "02"  # makes the stored study every later notebook reads
# A smoke run's cells take seconds to a few minutes: one waiting 20 minutes has lost its kernel's reply (seen
# under load with notebooks run in threads), so it times out and its notebook runs once more.
SMOKE_CELL_TIMEOUT = 1200


def notebook_stages(paths: list[Path]) -> list[list[Path]]:
    """The notebooks in stages: those up to :data:`STUDY_NOTEBOOK` (else the first alone), those between,
    then the report notebooks; so no notebook starts while the study it reads is being made."""
    first = [p for p in paths if p.stem[:2] <= STUDY_NOTEBOOK] or paths[:1]
    rest = [p for p in paths if p not in first]
    last = [p for p in rest if "report" in p.stem]
    middle = [p for p in rest if p not in last]
    return [stage for stage in (first, middle, last) if stage]


def previous_durations(executed_dir: Path) -> dict[str, float]:
    """Seconds each notebook took when it last ran into ``executed_dir`` (papermill's record), if readable."""
    out = {}
    for path in sorted(Path(executed_dir).glob(NOTEBOOK_PATTERN)):
        try:
            seconds = json.loads(path.read_text(encoding="utf-8"))["metadata"]["papermill"]["duration"]
            out[path.name] = float(seconds)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def longest_first(stage: list[Path], durations: dict[str, float]) -> list[Path]:
    """The stage's notebooks, never timed first, then the longest last time; ties keep notebook order."""
    return sorted(stage, key=lambda p: -durations.get(p.name, float("inf")))


def _run_stage(stage: list[Path], paths: list[Path], out_dir: Path, params: dict, kernel: str, workers: int,
               done: dict[str, float], echo, durations: dict[str, float], current: set[str],
               then: Callable[[], None] | None) -> NotebookFailure | None:
    """Run a stage's notebooks, ``workers`` at a time (longest first), keeping those in ``current``; ``then``
    runs once all have started, unless one failed. The first failure in notebook order, or None."""
    failed = threading.Event()

    def one(path: Path) -> NotebookFailure | None:
        if failed.is_set():  # a notebook failed: none starts after it
            return None
        i = paths.index(path) + 1
        if path.name in current:
            done[path.name] = 0.0
            echo(f"[{i}/{len(paths)}] {path.name} unchanged (study, parameters and code): outputs kept")
            return None
        echo(f"[{i}/{len(paths)}] {path.name} ...")
        timeout = SMOKE_CELL_TIMEOUT if params.get("smoke") else None
        for attempt in (1, 2):
            try:
                done[path.name] = run_notebook(path, out_dir / path.name, params, kernel, None, timeout)
                break
            except NotebookFailure as exc:
                if attempt == 1 and exc.ename == "CellTimeoutError":
                    echo(f"[{i}/{len(paths)}] {path.name}: a cell waited over {timeout} s; running it again")
                    continue
                failed.set()
                return exc
        echo(f"[{i}/{len(paths)}] {path.name} done in {done[path.name]:.1f} s")
        return None

    if workers <= 1 or len(stage) == 1 or all(p.name in current for p in stage):
        return next((failure for path in stage if (failure := one(path)) is not None), None)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        order = longest_first(stage, durations)
        futures = [pool.submit(one, p) for p in order]
        if then is not None:
            pool.submit(lambda: None if failed.is_set() else then())
        failures = {p: f.result() for p, f in zip(order, futures, strict=True)}
    return next((failures[p] for p in stage if failures[p] is not None), None)


def _quiet(*args, **kwargs) -> None:
    return None


def early_views(run_name: str) -> None:
    """The explorer views of the studies stored so far, in a process of their own, while the last notebooks
    run (a failure is left to the views written after the report)."""
    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
            pool.submit(prepare_views, run_name, _quiet).result()
    except Exception:  # noqa: BLE001 - prepare_views runs again after the report and raises there
        log.debug("early explorer views failed; computed after the report", exc_info=True)


def stage_threads(at_once: int) -> dict[str, str]:
    """The kernels' torch threads while ``at_once`` notebooks run together: the CPUs shared among them
    (nothing when ``TOOLBENCH_TORCH_THREADS`` is set already)."""
    if os.environ.get("TOOLBENCH_TORCH_THREADS", "").strip():
        return {}
    return {"TOOLBENCH_TORCH_THREADS": str(max(1, available_cpus() // max(1, at_once)))}


def absolute_paths(*paths: str | None) -> tuple[str | None, ...]:
    """Each given path made absolute from this working folder (the notebooks run in their own folder)."""
    return tuple(str(Path(p).expanduser().resolve()) if p else p for p in paths)


class CheckoutMismatch(RuntimeError):
    """The notebooks' kernel would import ``toolbench_lib`` from another checkout than this one."""


def check_notebook_imports(notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    """The package a kernel started in ``notebooks_dir`` imports, which must be this checkout's; returns its
    folder."""
    code = "import toolbench_lib, pathlib; print(pathlib.Path(toolbench_lib.__file__).resolve().parent)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(notebooks_dir), env=env, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckoutMismatch(f"a notebook kernel cannot import toolbench_lib ({tail})")
    here, there = Path(__file__).resolve().parent.parent, Path(done.stdout.strip())
    if there != here:
        raise CheckoutMismatch(f"the notebooks would import toolbench_lib from {there}, not from this "
                               f"checkout ({here}): reinstall it here (pip install -e .) or run from there")
    return there


def reproduce(run_name: str | None = None, smoke: bool = False, backend: str | None = None,
              embedder: str | None = None, cassette: str | None = None, runs: int | None = None,
              plan_limit: int | None = None, data_dir: str | None = None, notebooks: list[str] | None = None,
              notebooks_dir: Path = NOTEBOOKS_DIR, workers: int = 1, echo=print,
              ablations: bool = False) -> ReproduceSummary:
    """Run the numbered notebooks with shared parameters (:func:`notebook_stages`), then write the report;
    ``ablations`` runs notebook 11's heavy ablations. :class:`ReportCheckFailure` when a check fails."""
    logging.getLogger("papermill").setLevel(logging.WARNING)
    check_notebook_imports(notebooks_dir)
    run_name = run_name or ("smoke" if smoke else "default")
    data_dir, cassette = absolute_paths(data_dir, cassette)
    params = notebook_parameters(run_name=run_name, smoke=smoke, data_dir=data_dir, backend=backend,
                                 cassette=cassette, embedder=embedder, runs=runs, plan_limit=plan_limit,
                                 ablations=ablations or None)
    cfg = ExperimentConfig.build(**{k: v for k, v in params.items() if k not in RUN_ONLY})
    if not (paths := select_notebooks(notebooks_dir, notebooks)):
        raise FileNotFoundError(f"no notebooks matching {NOTEBOOK_PATTERN} in {notebooks_dir}")
    if smoke and (fixed := [k for k in SMOKE_FIXED if params.get(k) is not None]):
        echo(f"note: --smoke fixes {', '.join(fixed)} to the smoke settings; the given value is not used")
    if cassette:  # read before the run folder is claimed: a damaged one is a line, not a failed notebook
        unique_records(cassette)
    try:
        cfg.claim_run()
    except RunConflict as exc:
        raise RunConflict(f"{exc} (reproduce never mixes two configurations in one run folder)") from None
    summary = ReproduceSummary(run_name, cfg.out_dir)
    done: dict[str, float] = {}
    durations = previous_durations(cfg.out_dir / "notebooks")  # read before this run writes over them
    code = freshness.code_fingerprint()
    keys = {}
    for p in paths:
        try:
            keys[p.name] = freshness.notebook_key(p, own_parameters(p, params), cfg.study_key(), code)
        except (OSError, ValueError):  # unreadable: never current; running it names the failure
            continue
    current = freshness.current_notebooks(cfg.out_dir, keys)
    # Progress bars would only add frozen widgets to the executed copies.
    with stop_on_signals(), interpreter_kernel() as kernel, environment(TQDM_DISABLE="1"):
        for i, stage in enumerate(notebook_stages(paths)):
            at_once = 1 if i == 0 else workers
            with environment(**stage_threads(at_once)):
                failure = _run_stage(stage, paths, cfg.out_dir / "notebooks", params, kernel, at_once, done,
                                     echo, durations, current,
                                     then=(lambda: early_views(run_name)) if i == 1 else None)
            if failure is not None:
                failure.completed = [(p.name, done[p.name]) for p in paths if p.name in done]
                raise failure
            if any(p.name not in current for p in stage):  # a later stage reads what this one wrote
                current = set()
    summary.notebooks = [(p.name, done[p.name]) for p in paths]
    reports = [cfg.out_dir / name for name in freshness.REPORT_FILES]
    if current >= {p.name for p in paths} and all(p.is_file() for p in reports):  # nothing ran
        summary.report, summary.html = reports
    else:
        summary.report, summary.html = write_report(cfg), write_html_report(cfg.out_dir)
    prepare_views(run_name, echo=_quiet, workers=workers)  # every study's explorer views
    freshness.write_manifest(cfg.out_dir, keys)
    summary.verdicts = report_verdicts(summary.report)
    if problems := report_problems(cfg):
        raise ReportCheckFailure(problems, summary)
    return summary


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``reproduce`` subcommand."""
    rep = sub.add_parser("reproduce", parents=[common],
                         help="run every numbered notebook under papermill, then write the report")
    rep.add_argument("--smoke", action="store_true", help="CI-sized slice with the rules backend")
    rep.add_argument("--backend", choices=BACKENDS, default=None, help="LLM backend (default: replay)")
    rep.add_argument("--embedder", default=None, help="embedding model")
    rep.add_argument("--run-name", default=None, type=run_name,
                     help="outputs/<run-name>/ (default: smoke or default)")
    rep.add_argument("--cassette", default=None, type=existing_file, help="cassette for --backend replay")
    rep.add_argument("--runs", type=int_at_least(1), default=None, help="independent runs")
    rep.add_argument("--plan-limit", type=int_at_least(0), default=None,
                     help="plan the first N queries of each set")
    rep.add_argument("--notebooks", default=None, help="comma-separated numbers or names, e.g. 01,02")
    rep.add_argument("--notebooks-dir", default=None, type=existing_dir,
                     help="folder of the notebooks (default notebooks/)")
    rep.add_argument("--ablations", action="store_true",
                     help="also run the heavy ablations (notebook 11's second embedder); `make ablations`")
    rep.add_argument("--workers", type=int_at_least(1), default=max(1, min(2, available_cpus())),
                     help="notebooks run at once between the first and the report (default: the CPUs, at "
                          "most 2)")


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run ``reproduce`` from parsed arguments; 1 when a notebook or a check of the report fails."""
    only = None if args.notebooks is None else [n for n in args.notebooks.split(",") if n.strip()]
    if only == []:
        raise UsageError(f"--notebooks: {args.notebooks!r} names no notebook (numbers or names, commas "
                         "between them); leave it out to run them all")
    try:
        summary = reproduce(run_name=args.run_name, smoke=args.smoke, backend=args.backend,
                            embedder=args.embedder, cassette=args.cassette, runs=args.runs,
                            plan_limit=args.plan_limit, data_dir=args.data_dir, notebooks=only,
                            notebooks_dir=Path(args.notebooks_dir) if args.notebooks_dir else NOTEBOOKS_DIR,
                            workers=args.workers, ablations=args.ablations)
    except (RunConflict, CheckoutMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except NotebookFailure as exc:
        done = ", ".join(f"{name} ({seconds:.1f} s)" for name, seconds in exc.completed) or "none"
        print(f"notebooks completed before the failure: {done}", file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Terminated:
        print("error: terminated (SIGTERM): the notebooks' kernels were stopped and their temporary files "
              "removed", file=sys.stderr)
        return 143
    except ReportCheckFailure as exc:
        print(exc.summary.text())
        for problem in exc.problems:
            print(f"error: report check failed: {problem}", file=sys.stderr)
        print(f"error: {exc.summary.report} fails {len(exc.problems)} check(s) of the report "
              "(toolbench_lib.report.checks)", file=sys.stderr)
        return 1
    print(summary.text())
    return 0
