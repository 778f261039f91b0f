"""The project's own files agree with each other: README, CI, pyproject, environment.yml, lock."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line.strip())
        if m:
            out[m[1].lower().replace("_", "-")] = m[2]
    return out


def _pyproject_pins() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = proj["dependencies"] + proj["optional-dependencies"]["test"]
    pins = _pins(deps)
    assert len(pins) == len(deps), "every pyproject dependency is pinned with =="
    return pins


def test_environment_yml_installs_exactly_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    lock = _pins((ROOT / "requirements.lock").read_text().splitlines())
    env_pins = _pins(pip)
    assert env_pins == lock, (f"environment.yml and requirements.lock differ: only in the yml "
                              f"{sorted(set(env_pins.items()) - set(lock.items()))}, only in the lock "
                              f"{sorted(set(lock.items()) - set(env_pins.items()))}")
    assert set(_pyproject_pins().items()) <= set(env_pins.items())
    assert "python=3.11" in env["dependencies"] and "-e ." in pip


def test_lock_agrees_with_pyproject():
    lock = _pins((ROOT / "requirements.lock").read_text().splitlines())
    for name, version in _pyproject_pins().items():
        assert lock.get(name) == version, f"{name}: lock {lock.get(name)} vs pyproject {version}"
    assert lock["torch"] == "2.13.0"


def test_ci_runs_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    m = re.search(r"^make test$", readme, re.M)
    assert m, "README gives `make test` as the test command"
    assert re.search(r"^make test$", ci, re.M)
    assert re.search(r"^make run$", readme, re.M)


def test_ablation_lock_agrees_with_its_extra():
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = _pins(proj["optional-dependencies"]["ablation"])
    lock = _pins((ROOT / "requirements-ablation.lock").read_text().splitlines())
    assert extra == lock and len(lock) == 5
    assert "requirements-ablation.lock" in (ROOT / "Makefile").read_text()
