"""Every numbered notebook is paired with its py:percent script (jupytext) and the two agree."""

from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
FIX = "run `make sync-notebooks` (or `.venv/bin/jupytext --sync notebooks/[0-9][0-9]_*.ipynb`)"


def _cells(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.cell_type, c.source.strip(), tuple(sorted(c.get("metadata", {}).get("tags", []))))
            for c in nb.cells]


def test_every_notebook_has_a_script_and_back():
    notebooks = {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    scripts = {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")}
    assert notebooks, "notebooks/ holds numbered notebooks"
    assert notebooks == scripts, f"unpaired: {sorted(notebooks ^ scripts)}; {FIX}"
    config = (NOTEBOOKS / "jupytext.toml").read_text()
    assert 'formats = "ipynb,py:percent"' in config


@pytest.mark.parametrize("name", sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
def test_notebook_and_script_agree(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert (NOTEBOOKS / f"{name}.py").exists(), f"{name}.ipynb has no paired {name}.py; {FIX}"
    script = jupytext.read(NOTEBOOKS / f"{name}.py")
    mine, theirs = _cells(nb), _cells(script)
    for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        assert a == b, f"{name}: cell {i} differs between .ipynb and .py; {FIX}"
    assert len(mine) == len(theirs), f"{name}: {len(mine)} cells in .ipynb, {len(theirs)} in .py; {FIX}"


def test_a_drift_is_detected(tmp_path):
    """The check above fails on a script edited without syncing (it is not a test that cannot fail)."""
    nb = nbformat.read(NOTEBOOKS / "08_query_explorer.ipynb", as_version=4)
    text = jupytext.writes(nb, fmt="py:percent").replace("k = config.K", "k = 10", 1)
    assert _cells(jupytext.reads(text, fmt="py:percent")) != _cells(nb)
