"""``reproduce``: every notebook in order under papermill, the report, failures and secrets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from papermill.translators import PythonTranslator

from toolbench_lib.analysis.references import OPTIONAL_TABLES, TABLE_SCHEMAS
from toolbench_lib.data.paths import OUTPUTS_DIR
from toolbench_lib.report.checks import check_report
from toolbench_lib.report.html import NOTEBOOK_PATTERN
from toolbench_lib.report.kernels import KERNEL_NAME, interpreter_kernel
from toolbench_lib.report.reproduce import (
    NOTEBOOKS_DIR,
    NotebookFailure,
    declared_parameters,
    longest_first,
    notebook_parameters,
    notebook_stages,
    previous_durations,
    report_verdicts,
    reproduce,
    select_notebooks,
)
from toolbench_lib.report.write import QUANTITIES_FILE
from toolbench_lib.retrieval.methods import load_methods

from .forkcli import run_cli
from .report_page import page_problems
from .test_browser import chromium  # noqa: F401 (the fixture)
from .test_evaluation import p_value_conflicts

SECRET = "sk-test-secret-123"
ANALYSIS_NOTEBOOKS = [f"{n:02d}" for n in range(1, 8)]


def _cli(*args: str, env: dict | None = None, timeout: int = 3000) -> subprocess.CompletedProcess:
    return run_cli(["reproduce", *args], env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
                   timeout=timeout)


@pytest.fixture()
def run_name():
    """A unique run name whose outputs folder is removed afterwards."""
    name = f"pytest_reproduce_{uuid.uuid4().hex[:8]}"
    yield name
    for folder in [OUTPUTS_DIR / name, *OUTPUTS_DIR.glob(f"{name}-*")]:  # and the studies run beside it
        shutil.rmtree(folder, ignore_errors=True)


def _notebook(path: Path, *sources: str) -> None:
    cells = [new_markdown_cell(f"# {path.stem}"),
             new_code_cell('run_name = "default"\nsmoke = False', metadata={"tags": ["parameters"]})]
    cells += [new_code_cell(s) for s in sources]
    nbformat.write(new_notebook(cells=cells), path)


def test_select_notebooks_in_order(tmp_path):
    for name in ("02_b", "01_a", "10_c", "notes", "1_bad"):
        _notebook(tmp_path / f"{name}.ipynb", "pass")
    assert [p.name for p in select_notebooks(tmp_path)] == ["01_a.ipynb", "02_b.ipynb", "10_c.ipynb"]
    assert [p.name for p in select_notebooks(tmp_path, ["10", "01_a"])] == ["01_a.ipynb", "10_c.ipynb"]
    with pytest.raises(ValueError, match="03"):
        select_notebooks(tmp_path, ["01", "03"])


def test_bad_input_is_one_line_before_the_run_folder_is_claimed(tmp_path, run_name):
    """--notebooks naming none, a --data-dir holding no ToolBench data and a truncated --cassette are each
    one line (exit 2) before the run folder is claimed, so the same run name runs once they are put right."""
    import gzip

    _notebook(tmp_path / "01_a.ipynb", "pass")
    (empty := tmp_path / "empty").mkdir()
    whole = gzip.compress(b'{"key": "k", "reply": "r"}\n' * 200)
    (cut := tmp_path / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    for args, said in ((["--notebooks", ","], "names no notebook"), (["--data-dir", str(empty)], str(empty)),
                       (["--cassette", str(cut)], str(cut))):
        out = _cli("--run-name", run_name, "--notebooks-dir", str(tmp_path), *args, timeout=300)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
        assert said in lines[0] and not (OUTPUTS_DIR / run_name).exists(), lines[0]


def test_parameters_leave_out_what_was_not_given():
    assert notebook_parameters(run_name="r", smoke=True, backend=None, runs=3, plan_limit=None) == \
        {"run_name": "r", "smoke": True, "runs": 3}
    with pytest.raises(ValueError):
        notebook_parameters(colour="red")


def test_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    before = os.environ.get("JUPYTER_PATH")
    with interpreter_kernel() as name:
        spec = KernelSpecManager().get_kernel_spec(name)
        assert name == KERNEL_NAME and spec.argv[0] == sys.executable
        assert spec.argv[1:3] == ["-m", "ipykernel_launcher"]
    assert os.environ.get("JUPYTER_PATH") == before


def test_failing_notebook_stops_the_run(tmp_path, run_name):
    marker = tmp_path / "third_ran"
    _notebook(tmp_path / "01_ok.ipynb", "print(run_name, smoke)")
    _notebook(tmp_path / "02_broken.ipynb", "x = 1", "y = x / 0", "z = 2")
    _notebook(tmp_path / "03_after.ipynb", f"open({str(marker)!r}, 'w').write('ran')")
    with pytest.raises(NotebookFailure) as info:
        reproduce(run_name=run_name, notebooks_dir=tmp_path, echo=lambda *_: None)
    exc = info.value
    assert exc.notebook == "02_broken.ipynb" and exc.cell_index == 3 and exc.ename == "ZeroDivisionError"
    assert "02_broken.ipynb" in str(exc) and "cell 3" in str(exc) and "y = x / 0" in str(exc)
    assert [name for name, _ in exc.completed] == ["01_ok.ipynb"]
    out = OUTPUTS_DIR / run_name
    assert not marker.exists() and not (out / "notebooks" / "03_after.ipynb").exists()
    assert not (out / "report.md").exists()
    ok = nbformat.read(out / "notebooks" / "01_ok.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in ok.cells if c.cell_type == "code" for o in c.outputs)
    assert f"{run_name} False" in printed

    cli = _cli("--run-name", run_name, "--notebooks-dir", str(tmp_path), "--notebooks", "02", timeout=600)
    assert cli.returncode == 1
    assert "02_broken.ipynb" in cli.stderr and "cell 3" in cli.stderr and "ZeroDivisionError" in cli.stderr
    assert "Traceback" not in cli.stderr


@pytest.mark.data  # a smoke run's study key reads the data folder's fingerprint
def test_a_smoke_cell_that_waits_too_long_times_out_and_its_notebook_runs_once_more(tmp_path, run_name,
                                                                                     monkeypatch):
    import toolbench_lib.report.reproduce as rp

    monkeypatch.setattr(rp, "SMOKE_CELL_TIMEOUT", 5)
    first = tmp_path / "first_try"  # the first try's cell waits past the timeout, the second's does not
    _notebook(tmp_path / "01_slow_once.ipynb",
              f"import os, time\nif not os.path.exists({str(first)!r}):\n"
              f"    open({str(first)!r}, 'w').write('x')\n    time.sleep(60)")
    said: list[str] = []
    summary = reproduce(run_name=run_name, smoke=True, notebooks_dir=tmp_path, echo=said.append)
    assert [name for name, _ in summary.notebooks] == ["01_slow_once.ipynb"]
    assert any("a cell waited over 5 s; running it again" in line for line in said)
    _notebook(tmp_path / "01_slow_once.ipynb", "import time\ntime.sleep(60)")  # slow every time: it fails
    with pytest.raises(NotebookFailure) as info:
        reproduce(run_name=run_name, smoke=True, notebooks_dir=tmp_path, echo=lambda *_: None)
    assert info.value.ename == "CellTimeoutError" and info.value.notebook == "01_slow_once.ipynb"


NOISE = re.compile(r"ERROR|Traceback|without encryption|Passed unknown parameter|KeyboardInterrupt|SIGINT")
# A kernel that reports a SIGINT on the console (a notebook's own handler, installed as the one ipykernel
# restores after each cell): jupyter_client's plain manager interrupts every kernel it shuts down.
REPORT_SIGINT = ("import signal, sys\n"
                 "def said(*_):\n"
                 "    print('kernel got SIGINT', file=sys.__stderr__, flush=True)\n"
                 "get_ipython().kernel.saved_sigint_handler = said")


def test_declared_parameters_only_are_passed(tmp_path):
    from toolbench_lib.report.reproduce import own_parameters

    nb = tmp_path / "01_a.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell(
        'run_name = "default"  # the run\nk = 5\n', metadata={"tags": ["parameters"]})]), nb)
    assert declared_parameters(nb) == {"run_name", "k"}
    assert own_parameters(nb, {"run_name": "r", "smoke": True, "plan_limit": 3}) == {"run_name": "r"}
    nbformat.write(new_notebook(cells=[new_code_cell("x = 1")]), nb)
    assert declared_parameters(nb) == set() and own_parameters(nb, {"run_name": "r"}) == {}
    nbformat.write(new_notebook(cells=[new_code_cell("k = = 5", metadata={"tags": ["parameters"]})]), nb)
    with pytest.raises(ValueError, match="01_a.ipynb: its parameters cell is not Python"):
        declared_parameters(nb)
    for path in sorted(NOTEBOOKS_DIR.glob(NOTEBOOK_PATTERN)):  # papermill's translator: the same names
        cells = nbformat.read(path, as_version=4).cells
        cell = next(c for c in cells if "parameters" in c.metadata.get("tags", []))
        assert declared_parameters(path) == {p.name for p in PythonTranslator.inspect(cell)}, path.name


def test_console_is_quiet_when_nothing_fails(tmp_path, run_name):
    """A small reproduce on the command line: no kernel transport warning, no ERROR or Traceback line, no
    unknown-parameter warning (03 declares only run_name), and no SIGINT reaches a finished kernel; the same
    SIGINT notebook under papermill's default kernel manager does report one (the check can fail)."""
    _notebook(tmp_path / "01_a.ipynb", "print(run_name, smoke)")
    sigint = tmp_path / "02_sigint.ipynb"
    _notebook(sigint, REPORT_SIGINT, "import matplotlib.pyplot as plt\nplt.plot([1, 2])")
    only = [new_code_cell('run_name = "default"', metadata={"tags": ["parameters"]}),
            new_code_cell("print(run_name)")]
    nbformat.write(new_notebook(cells=only), tmp_path / "03_only_run_name.ipynb")
    out = _cli("--run-name", run_name, "--notebooks-dir", str(tmp_path), "--smoke", timeout=600)
    console = out.stdout + out.stderr
    assert out.returncode == 0, console[-3000:]
    assert "03_only_run_name.ipynb" in out.stdout and "report:" in out.stdout
    # it ends with what the report's summary says (no tables here: no verdict) and the report's paths
    tail = out.stdout.strip().splitlines()
    assert tail[-2].startswith("report:") and tail[-1].startswith("html:")
    verdicts = report_verdicts(OUTPUTS_DIR / run_name / "report.md")
    assert all(f"  {line}" in tail for line in verdicts)
    assert ("What the study found" in out.stdout) == bool(verdicts)
    assert not NOISE.findall(console), console[-3000:]
    executed = nbformat.read(OUTPUTS_DIR / run_name / "notebooks" / "03_only_run_name.ipynb", as_version=4)
    assert executed.metadata["papermill"]["parameters"] == {"run_name": run_name}

    control = ("import papermill as pm, sys\n"
               "from toolbench_lib.report.kernels import interpreter_kernel\n"
               "with interpreter_kernel() as k:\n"
               f"    pm.execute_notebook({str(sigint)!r}, {str(tmp_path / 'c.ipynb')!r},"
               " kernel_name=k, language='python', progress_bar=False)\n")
    loud = subprocess.run([sys.executable, "-c", control], capture_output=True, text=True, timeout=300)
    assert loud.returncode == 0, loud.stderr[-2000:]
    # the SIGINT lands in the notebook's handler, or, under load, while the kernel is still busy
    assert re.search("kernel got SIGINT|KeyboardInterrupt caught", loud.stderr), loud.stderr[-2000:]
    assert "without encryption" in loud.stderr


def test_verdicts_are_read_from_the_report_answer(tmp_path):
    report = tmp_path / "report.md"
    report.write_text("# Report\n\n**The answer.** not in the front\n\n## The question and the answer\n\n"
                      "**The question.** Which?\n\n**The verdict.** RtP's lead.\n\n**The answer.** With "
                      "dense retrieval, RtP leads on G1 (*“does not reach significance”*, `x`):\n\n- **G1:** "
                      "RtP\n- **G2:** none\n\n- not after a list\n\n**Primary endpoint:** recall\n\n| a |\n"
                      "| 1 |\n\n**Robustness** (no verdict): Holm keeps every verdict.\n\n"
                      "**Beyond the paper** (other retrievers). With BM25 retrieval, PtR leads on G2.\n\n"
                      "| b |\n\n## Main results\n\n**The answer.** not in the front\n", encoding="utf-8")
    assert report_verdicts(report) == [  # a paragraph of no answer's label (Robustness) is not printed
        "The verdict. RtP's lead.",
        "The answer. With dense retrieval, RtP leads on G1 (“does not reach significance”, x):",
        "- G1: RtP", "- G2: none",
        "Beyond the paper (other retrievers). With BM25 retrieval, PtR leads on G2."]
    report.write_text("# Report\n\n- no summary here\n", encoding="utf-8")
    assert report_verdicts(report) == [] and report_verdicts(tmp_path / "missing.md") == []


def test_stages_make_the_study_before_any_reader_and_the_report_last():
    names = ["01_data.ipynb", "02_main.ipynb", "03_k.ipynb", "09_report.ipynb", "10_beyond.ipynb"]
    stages = notebook_stages([Path(n) for n in names])
    assert [[p.name for p in s] for s in stages] == [
        ["01_data.ipynb", "02_main.ipynb"], ["03_k.ipynb", "10_beyond.ipynb"], ["09_report.ipynb"]]
    # --notebooks 01,02,08,09: 08 waits for 02, which makes the study it reads
    picked = [Path(n) for n in ("01_data.ipynb", "02_main.ipynb", "08_explorer.ipynb", "09_report.ipynb")]
    assert [[p.name for p in s] for s in notebook_stages(picked)] == [
        ["01_data.ipynb", "02_main.ipynb"], ["08_explorer.ipynb"], ["09_report.ipynb"]]
    assert [[p.name for p in s] for s in notebook_stages([Path("02_main.ipynb")])] == [["02_main.ipynb"]]
    # without 02 the first notebook still runs alone
    assert [[p.name for p in s] for s in notebook_stages([Path("03_k.ipynb"), Path("04_s.ipynb")])] == [
        ["03_k.ipynb"], ["04_s.ipynb"]]
    assert notebook_stages([]) == []


def test_longest_notebooks_start_first_by_their_last_durations(tmp_path):
    for name, seconds in (("02_a", 5.0), ("03_b", 40.0), ("04_c", None)):
        nb = new_notebook(cells=[new_code_cell("pass")])
        if seconds is not None:
            nb.metadata["papermill"] = {"duration": seconds}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    (tmp_path / "05_broken.ipynb").write_text("{not json")
    durations = previous_durations(tmp_path)
    assert durations == {"02_a.ipynb": 5.0, "03_b.ipynb": 40.0}  # no record and unreadable: left out
    stage = [Path(n) for n in ("02_a.ipynb", "03_b.ipynb", "04_c.ipynb", "06_d.ipynb")]
    # never timed first (notebook order), then the longest last time
    assert [p.name for p in longest_first(stage, durations)] == ["04_c.ipynb", "06_d.ipynb", "03_b.ipynb",
                                                                 "02_a.ipynb"]
    assert previous_durations(tmp_path / "missing") == {}


def test_notebooks_between_run_together_and_the_report_after_them(tmp_path, run_name):
    """01 then 02 (which makes the study) run first, one after the other; 03 and 04 each wait until the
    other has started (a rendezvous that one worker could never pass) and find 02's study; the report
    notebook finds both of their files."""
    d = str(tmp_path)
    wait = ("import os, time\n"
            "open(os.path.join({d!r}, {me!r}), 'w').write('started')\n"
            "assert os.path.exists(os.path.join({d!r}, 'study')), 'the study notebook has not run'\n"
            "end = time.time() + 120\n"
            "while not os.path.exists(os.path.join({d!r}, {other!r})) and time.time() < end:\n"
            "    time.sleep(0.2)\n"
            "assert os.path.exists(os.path.join({d!r}, {other!r})), 'not run at the same time'\n")
    _notebook(tmp_path / "01_first.ipynb", f"open({str(tmp_path / 'first')!r}, 'w').write('x')")
    _notebook(tmp_path / "02_study.ipynb", f"import os\nassert os.path.exists({str(tmp_path / 'first')!r})\n"
              f"open({str(tmp_path / 'study')!r}, 'w').write('x')")
    _notebook(tmp_path / "03_a.ipynb", wait.format(d=d, me="a", other="b"))
    _notebook(tmp_path / "04_b.ipynb", wait.format(d=d, me="b", other="a"))
    _notebook(tmp_path / "05_report.ipynb", f"import os\nassert os.path.exists({str(tmp_path / 'a')!r}) "
              f"and os.path.exists({str(tmp_path / 'b')!r})")
    summary = reproduce(run_name=run_name, notebooks_dir=tmp_path, workers=2, echo=lambda *_: None)
    assert [name for name, _ in summary.notebooks] == ["01_first.ipynb", "02_study.ipynb", "03_a.ipynb",
                                                       "04_b.ipynb", "05_report.ipynb"]


def test_unreadable_notebook_is_named(tmp_path, run_name):
    (tmp_path / "01_corrupt.ipynb").write_text("{not a notebook")
    with pytest.raises(NotebookFailure) as info:
        reproduce(run_name=run_name, notebooks_dir=tmp_path, echo=lambda *_: None)
    assert info.value.notebook == "01_corrupt.ipynb" and info.value.cell_index == -1
    assert "01_corrupt.ipynb" in str(info.value) and "before any cell" in str(info.value)


def _errors(nb) -> list[str]:
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, c in enumerate(nb.cells)
            if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]


@pytest.mark.slow
def test_smoke_run_of_every_notebook(run_name, chromium):  # noqa: F811 (the fixture)
    """The end-to-end run: all numbered notebooks in smoke mode, then the report; no secret leaks."""
    notebooks = select_notebooks(NOTEBOOKS_DIR)
    assert notebooks, "notebooks/ holds numbered notebooks"
    t0 = time.time()
    out = _cli("--smoke", "--run-name", run_name, env={"GEMINI_API_KEY": SECRET})
    seconds = time.time() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    run_dir = OUTPUTS_DIR / run_name
    assert str(run_dir) in out.stdout
    noise = [ln for ln in (out.stdout + out.stderr).splitlines() if NOISE.search(ln)]
    assert not noise, noise[:10]  # a quiet console: nothing failed
    verdicts = report_verdicts(run_dir / "report.md")
    assert verdicts and all(line in out.stdout for line in verdicts)  # the summary's verdicts, then the paths
    assert out.stdout.strip().splitlines()[-1].startswith("html:")

    for path in notebooks:
        assert path.name in out.stdout
        executed = nbformat.read(run_dir / "notebooks" / path.name, as_version=4)
        assert not _errors(executed), (path.name, _errors(executed))
        params = executed.metadata["papermill"]["parameters"]
        declared = declared_parameters(path)
        assert params["run_name"] == run_name and set(params) <= declared  # only its own parameters
        assert params.get("smoke") is ("smoke" in declared or None)
        assert "backend" not in params  # not given: the notebook's default (smoke: rules) applies

    produced = {name: run_dir / "tables" / f"{name}.csv" for name in TABLE_SCHEMAS}
    produced = {name: path for name, path in produced.items() if path.exists()}
    for name, path in produced.items():
        table = pd.read_csv(path)
        assert len(table) > 0, f"{name}.csv is empty"
        missing = set(TABLE_SCHEMAS[name]) - set(table.columns)
        assert not missing, f"{name}.csv lacks {missing}"
    stems = {p.stem[:2] for p in notebooks}
    if set(ANALYSIS_NOTEBOOKS) <= stems:
        expected = set(TABLE_SCHEMAS) - OPTIONAL_TABLES  # the embedder ablation runs with `make ablations`
        assert set(produced) >= expected, f"not written: {expected - set(produced)}"

    every_csv = {p.stem: pd.read_csv(p) for p in (run_dir / "tables").glob("*.csv")}
    assert p_value_conflicts(every_csv) == []  # one comparison, one p-value, in every table
    assert sum("comparison" in t for t in every_csv.values()) >= 3  # the answer, the paired and family tests

    report = (run_dir / "report.md").read_text()
    assert "backend: rules (model rules-v1)" in report and "all-MiniLM-L6-v2" in report
    html = (run_dir / "report.html").read_text()
    assert "Limits of this reproduction" in html and ".000000" not in html
    assert "from toolbench_lib" not in html and "data:image/png;base64" in html
    report_csv = pd.read_csv(run_dir / "tables" / "scorecard.csv")
    quantities = json.loads((run_dir / QUANTITIES_FILE).read_text())
    assert quantities and check_report(report, quantities, report_csv.to_dict("records"),
                                       list(load_methods())) == []
    problems, facts = page_problems(run_dir / "report.html", chromium)
    assert not problems, problems
    print(f"report.html in Chromium at 1,280 px: {facts}")
    found = report_csv["this_run"].notna().sum()
    assert found == (report_csv["status"].isin(["consistent", "differs", "inconclusive", "not scored"])).sum()

    leaks = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()
             and SECRET.encode() in p.read_bytes()]
    assert not leaks, f"the API key appears in {leaks}"
    print(f"smoke reproduce of {len(notebooks)} notebooks: {seconds:.0f} s; "
          f"{found} of {len(report_csv)} reference numbers found")


def test_the_kernels_share_the_cpus_among_the_notebooks_run_at_once(monkeypatch):
    from toolbench_lib.data.machine import available_cpus
    from toolbench_lib.report.reproduce import stage_threads
    from toolbench_lib.retrieval.embedding import torch_threads

    monkeypatch.delenv("TOOLBENCH_TORCH_THREADS", raising=False)
    cpus = available_cpus()
    assert stage_threads(1) == {"TOOLBENCH_TORCH_THREADS": str(cpus)}
    assert stage_threads(2) == {"TOOLBENCH_TORCH_THREADS": str(max(1, cpus // 2))}
    assert stage_threads(10_000) == {"TOOLBENCH_TORCH_THREADS": "1"}
    assert torch_threads() is None
    monkeypatch.setenv("TOOLBENCH_TORCH_THREADS", "3")
    assert stage_threads(2) == {} and torch_threads() == 3  # the user's choice stands
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("TOOLBENCH_TORCH_THREADS", bad)
        with pytest.raises(ValueError, match="TOOLBENCH_TORCH_THREADS"):
            torch_threads()
