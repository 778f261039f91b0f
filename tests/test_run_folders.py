"""Run folders: the study key, the run record, and notebook runs that never change another run's files."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import nbformat
import pytest

from toolbench_lib import config
from toolbench_lib.data.paths import OUTPUTS_DIR
from toolbench_lib.report.kernels import interpreter_kernel
from toolbench_lib.report.reproduce import NOTEBOOKS_DIR, reproduce, run_notebook
from toolbench_lib.study.experiment import ExperimentConfig, RunConflict, get_study, stored_study_dir

ROOT = Path(__file__).resolve().parent.parent


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _parameters_cell(path: Path) -> dict:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    values: dict = {}
    exec(cell.source, {}, values)  # noqa: S102 - the notebook's own literal defaults
    return values


def test_study_key_leaves_out_analysis_parameters(real_data_dir):
    base = ExperimentConfig.build(run_name="a")
    assert ExperimentConfig.build(run_name="b", k=10, scale_seeds=1, gt="relevant").study_key() \
        == base.study_key()
    for change in ({"plan_k": 10}, {"plan_limit": 50}, {"embedder": "thenlper/gte-base"}, {"runs": 3}):
        assert ExperimentConfig.build(**change).study_key() != base.study_key(), change
    fields = base.study_fields()
    assert fields["data_fingerprint"] == base.data_fingerprint() and len(fields["data_fingerprint"]) == 16
    assert fields["prompt_versions"] == ["stubs-v1", "plan-v1", "judge-v1"]
    assert "k" not in fields and fields["plan_k"] == 5


def test_notebook_defaults_are_make_runs():
    """Opened by hand with its defaults, a notebook reads and writes what `make run` stored."""
    make = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"--embedder {config.EMBEDDER} " in make and f"--plan-limit {config.PLAN_LIMIT}" in make
    assert f"--runs {config.RUNS} " in make  # the Makefile reads toolbench_lib/config.py
    default = ExperimentConfig()
    assert (default.embedder, default.plan_limit, default.runs, default.plan_runs, default.backend) == \
        (config.EMBEDDER, config.PLAN_LIMIT, config.RUNS, config.PLAN_RUNS, "replay")
    notebooks = [p for p in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")) if not p.name.startswith("08_")]
    assert len(notebooks) >= 8
    for path in notebooks:  # 08 opens a stored run by name and has no study parameters
        params = _parameters_cell(path)
        for name, value in params.items():
            if name in ExperimentConfig.__dataclass_fields__:
                assert getattr(default, name) == value, (path.name, name, value)


def test_a_notebook_with_other_parameters_writes_to_a_derived_run(tmp_path):
    notes: list[str] = []
    first = ExperimentConfig.from_params(outputs_dir=str(tmp_path / "r"), run_name="r", gt="candidates",
                                         echo=notes.append)
    first.claim_run()
    same = ExperimentConfig.from_params(outputs_dir=str(tmp_path / "r"), run_name="r", echo=notes.append)
    assert same.out_dir == tmp_path / "r" and not notes
    other = ExperimentConfig.from_params(outputs_dir=str(tmp_path / "r"), run_name="r", k=10,
                                         gt="relevant", echo=notes.append)
    assert other.out_dir == tmp_path / "r-gtrelevant-k10" and other.base_run == "r"
    assert len(notes) == 1 and "k 5 -> 10" in notes[0] and str(tmp_path / "r-gtrelevant-k10") in notes[0]
    other.claim_run()
    record = other.read_record()
    assert record["parameters"]["k"] == 10 and record["base_run"] == "r"
    assert first.read_record()["parameters"]["k"] == 5
    again = ExperimentConfig.from_params(outputs_dir=str(tmp_path / "r"), run_name="r", k=10, gt="relevant",
                                         echo=notes.append)
    assert again.out_dir == other.out_dir
    forced = ExperimentConfig.build(outputs_dir=str(tmp_path / "r"), run_name="r", k=10)
    with pytest.raises(RunConflict, match="k 5 -> 10"):
        forced.claim_run()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    with pytest.raises(RunConflict, match="not a readable run record"):
        ExperimentConfig.from_params(outputs_dir=str(tmp_path / "broken"), run_name="broken")


def test_reproduce_refuses_a_run_made_with_other_parameters(tmp_path):
    name = f"pytest_conflict_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "ran"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('run_name = "x"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')")])
    nbformat.write(nb, tmp_path / "01_mark.ipynb")
    try:
        ExperimentConfig.build(run_name=name, runs=1).claim_run()
        before = _hashes(OUTPUTS_DIR / name)
        with pytest.raises(RunConflict, match="runs 1 -> 3"):
            reproduce(run_name=name, runs=3, notebooks_dir=tmp_path, echo=lambda *_: None)
        assert not marker.exists() and _hashes(OUTPUTS_DIR / name) == before
        argv = ["reproduce", "--run-name", name, "--runs", "3", "--notebooks-dir", str(tmp_path)]
        cli = subprocess.run([sys.executable, "-m", "toolbench_lib", *argv], capture_output=True, text=True,
                             timeout=300)
        assert cli.returncode == 1 and "runs 1 -> 3" in cli.stderr and "Traceback" not in cli.stderr
    finally:
        shutil.rmtree(OUTPUTS_DIR / name, ignore_errors=True)


def test_stored_study_dir_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="make run"):
        stored_study_dir("nothing", outputs_dir=tmp_path / "nothing")
    for key in ("aaa", "bbb"):
        (tmp_path / "two" / "runs" / key).mkdir(parents=True)
        (tmp_path / "two" / "runs" / key / "provenance.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="several studies"):
        stored_study_dir("two", outputs_dir=tmp_path / "two")
    assert stored_study_dir("two", "bbb", outputs_dir=tmp_path / "two").name == "bbb"
    (tmp_path / "two" / "run.json").write_text('{"studies": ["aaa"]}')
    assert stored_study_dir("two", outputs_dir=tmp_path / "two").name == "aaa"


def test_explore_without_a_stored_study_is_one_line():
    name = f"pytest_nothing_{uuid.uuid4().hex[:8]}"
    out = subprocess.run([sys.executable, "-m", "toolbench_lib.explorer.app", "--run-name", name],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"error: no stored study under {OUTPUTS_DIR / name / 'runs'}: "
                                               f"run `make run` (or `python -m toolbench_lib reproduce "
                                               f"--run-name {name}`) first"]
    assert not (OUTPUTS_DIR / name).exists()


@pytest.fixture(scope="module")
def smoke_run(slice_setup):
    """A smoke-sized stored run (rules backend, the 2,500-API slice), removed afterwards."""
    name = f"pytest_runs_{uuid.uuid4().hex[:8]}"
    get_study(ExperimentConfig.build(run_name=name, smoke=True), setup=slice_setup, progress=False)
    yield name
    for folder in OUTPUTS_DIR.glob(f"{name}*"):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_papermill_with_other_k_leaves_the_stored_run_unchanged(smoke_run, tmp_path):
    run_dir = OUTPUTS_DIR / smoke_run
    notebook = NOTEBOOKS_DIR / "03_k_ablation.ipynb"
    with interpreter_kernel() as kernel:
        run_notebook(notebook, tmp_path / "own.ipynb", {"run_name": smoke_run, "smoke": True}, kernel)
        assert (run_dir / "tables" / "k_ablation.csv").exists()
        # the explorer's first open writes its per-query views (every k) beside the study: open it once first
        run_notebook(NOTEBOOKS_DIR / "08_query_explorer.ipynb", tmp_path / "first.ipynb",
                     {"run_name": smoke_run}, kernel)
        before = _hashes(run_dir)
        k10 = {"run_name": smoke_run, "smoke": True, "k": 10}
        run_notebook(notebook, tmp_path / "k10.ipynb", k10, kernel)
        run_notebook(NOTEBOOKS_DIR / "08_query_explorer.ipynb", tmp_path / "explorer.ipynb",
                     {"run_name": smoke_run, "k": 10}, kernel)
    assert _hashes(run_dir) == before
    derived = OUTPUTS_DIR / f"{smoke_run}-k10"
    record = ExperimentConfig.build(run_name=f"{smoke_run}-k10").read_record()
    assert record["parameters"]["k"] == 10 and record["base_run"] == smoke_run
    assert (derived / "tables" / "k_ablation.csv").exists()
    assert (derived / "tables" / "budget_check.csv").exists()
    executed = nbformat.read(tmp_path / "k10.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert f"writes to {derived}" in printed
    shown = nbformat.read(tmp_path / "explorer.ipynb", as_version=4)
    html = "".join(o.get("data", {}).get("text/html", "") for c in shown.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert "k = 10" in html and "recall@10" in html


@pytest.mark.slow
def test_explorer_opens_a_stored_run_from_its_tables_alone(smoke_run):
    code = ("import sys\nfrom toolbench_lib.explorer.widget import QueryExplorer\n"
            f"ex = QueryExplorer.from_run({smoke_run!r})\n"
            "print(len(ex.labels), len(ex.query.options), ex.query.value)\n"
            "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()  # the last two: what the code printed (a first open may log before)
    n_labels, n_options, first = lines[-2].split()
    assert int(n_labels) > 100 and int(n_options) == 15 and first.startswith("G1_instruction:")
    assert lines[-1] == "[]", "no embedder is loaded"
