import pytest

from toolbench_lib.data import paths
from toolbench_lib.data.paths import DataNotFoundError, find_data_dir


def test_missing_data_names_every_place(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "DATA_ROOT", tmp_path / "data")
    monkeypatch.setattr(paths, "PROJECT_ROOT", tmp_path / "repo")
    monkeypatch.setenv("TOOLBENCH_DATA", str(tmp_path / "env_dir"))
    with pytest.raises(DataNotFoundError) as err:
        find_data_dir()
    msg = str(err.value)
    assert "TOOLBENCH_DATA" in msg and str(tmp_path / "env_dir") in msg
    assert str(tmp_path / "data" / "raw" / "toolbench") in msg
    assert str(tmp_path / "shared" / "toolbench") in msg
    assert "toolenv/tools/<Category>/<tool>.json" in msg


def test_explicit_dir_must_be_toolbench(tmp_path):
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        find_data_dir(tmp_path)


def test_resolution_order(tmp_path, monkeypatch, mini_toolbench):
    monkeypatch.setenv("TOOLBENCH_DATA", str(mini_toolbench))
    assert find_data_dir() == mini_toolbench.resolve()
    assert find_data_dir(mini_toolbench) == mini_toolbench.resolve()
