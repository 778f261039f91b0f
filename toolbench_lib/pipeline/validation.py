"""Checks of user-given values, shared by the command line and the notebooks' ExperimentConfig.

Every check fails with one line that names the option, the bad value and what is allowed.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from ..llm.base import LLMError

MAX_TEMPERATURE = 2.0


class UsageError(ValueError):
    """A bad option or parameter value."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit code 2), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# --------------------------------------------------------------------------- plain checks


def check_int(name: str, value: object, minimum: int, maximum: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as an int in ``[minimum, maximum]`` (None passes when ``allow_none``)."""
    if value is None and allow_none:
        return None
    allowed = f"an integer >= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
    if allow_none:
        allowed += " (or None)"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(f"{name}: {value!r} is not allowed; expected {allowed}")
    if value < minimum or (maximum is not None and value > maximum):
        raise UsageError(f"{name}: {value} is not allowed; expected {allowed}")
    return int(value)


def check_temperature(name: str, value: object, allow_none: bool = False) -> float | None:
    """A finite sampling temperature in ``[0, 2]``."""
    if value is None and allow_none:
        return None
    allowed = f"a number from 0 to {MAX_TEMPERATURE:g}" + (" (or None)" if allow_none else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{name}: {value!r} is not allowed; expected {allowed}")
    if not math.isfinite(value) or not 0 <= value <= MAX_TEMPERATURE:
        raise UsageError(f"{name}: {value} is not allowed; expected {allowed}")
    return float(value)


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise UsageError(f"{name}: {value!r} is not allowed; choose one of {', '.join(choices)}")
    return str(value)


def check_subsets(name: str, values: object, user_sets: Iterable[str] | None = None) -> list[str]:
    """Known query-set names or aliases, a set named twice (also through an alias) kept once.

    ``user_sets``: the user sets of the data folder, when known (else a user set's name is checked for its
    form only, and against the data when it is loaded)."""
    from ..data.queries import UnknownSubsetError, resolve_subset

    user_sets = None if user_sets is None else list(user_sets)

    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not values:
        raise UsageError(f"{name}: {values!r} is not allowed; expected a non-empty list of query sets")
    out: dict[str, str] = {}
    for value in values:
        try:
            canonical = resolve_subset(value, user_sets)
        except (UnknownSubsetError, TypeError) as exc:
            message = exc.args[0] if exc.args else repr(value)
            raise UsageError(f"{name}: {message}") from None
        out.setdefault(canonical, value)
    return list(out.values())


def check_max_apis(value: int | None, registry_size: int) -> None:
    """``--max-apis`` must not exceed the registry it samples from."""
    if value is not None and value > registry_size:
        raise UsageError(f"--max-apis: {value} is not allowed; the registry has {registry_size} APIs "
                         f"(expected 1 to {registry_size}, or leave it out for the full registry)")


def check_output_dir(name: str, value: str | os.PathLike[str]) -> Path:
    """A folder that exists or can be made (not an existing file)."""
    path = Path(value)
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{name}: {str(value)!r} is not allowed; {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK):
                raise UsageError(f"{name}: {str(value)!r} is not allowed; {parent} is not writable")
            break
    return path


# --------------------------------------------------------------------------- argparse types


def _typed(fn: Callable[[str], object], name: str) -> Callable[[str], object]:
    fn.__name__ = name  # argparse names the type in its messages
    return fn


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not allowed; expected an integer >= {minimum}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is not allowed; expected an integer >= {minimum}")
        return value

    return _typed(parse, f"integer >= {minimum}")


def temperature(negative_means_default: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite temperature from 0 to 2 (any negative number when allowed)."""

    def parse(text: str) -> float:
        extra = " (negative: same as --temperature)" if negative_means_default else ""
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and (0 <= value <= MAX_TEMPERATURE or (negative_means_default and value < 0)):
            return value
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; expected a number from 0 to {MAX_TEMPERATURE:g}{extra}")

    return _typed(parse, "temperature")


def subset_name(text: str) -> str:
    """An argparse type: a known query-set name or alias."""
    from ..data.queries import UnknownSubsetError, resolve_subset

    try:
        resolve_subset(text)
    except UnknownSubsetError as exc:
        raise argparse.ArgumentTypeError(exc.args[0]) from None
    return text


def existing_file(text: str) -> str:
    """An argparse type: a readable file."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text!r}: no such file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not readable")
    return text


def output_dir(text: str) -> str:
    """An argparse type: a folder that exists or can be made."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not allowed; name a folder")
    try:
        check_output_dir("", text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(": ")) from None
    return text


def data_dir(text: str) -> str:
    """An argparse type: an existing, readable folder (its layout is checked when the data is loaded)."""
    path = Path(text)
    if not text.strip() or not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a ToolBench data folder: no such folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not a ToolBench data folder: not readable")
    return text


def run_indices(text: str) -> str:
    """An argparse type: comma-separated run indices (integers >= 0), returned as given."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; expected comma-separated run indices (integers >= 0), e.g. 0,1,2")
    return text


def run_name(text: str) -> str:
    """An argparse type: a run name (one folder name under ``outputs/``)."""
    try:
        return check_run_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("run_name: ")) from None


def existing_dir(text: str) -> str:
    """An argparse type: an existing folder."""
    if not text.strip() or not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: no such folder")
    return text


# --------------------------------------------------------------------------- the top-level guard

# Errors of the input (options, data files, caches, a replay miss): exit code 2. Anything else: 1.
INPUT_ERRORS: tuple[type[BaseException], ...] = (ValueError, LookupError, OSError, EOFError, sqlite3.Error,
                                                 LLMError)


def error_line(exc: BaseException) -> str:
    """One line for the user: the message of an expected error, or the type and message of another."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    else:
        message = str(exc) or type(exc).__name__
    message = " ".join(message.split())
    if isinstance(exc, INPUT_ERRORS) or type(exc).__name__ == "NotebookFailure":
        return f"error: {message}"
    return f"error: {type(exc).__name__}: {message} (rerun with -v to see where)"


def exit_code(exc: BaseException) -> int:
    return 2 if isinstance(exc, INPUT_ERRORS) else 1


def report(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr; returns the exit code."""
    print(error_line(exc), file=sys.stderr)
    return exit_code(exc)


# --------------------------------------------------------------------------- the notebooks' configuration


def check_run_name(value: object) -> str:
    """A run name is one folder name under ``outputs/``."""
    if (not isinstance(value, str) or not value.strip() or value in (".", "..")
            or any(c in value for c in "/\\\x00")):
        raise UsageError(f"run_name: {value!r} is not allowed; expected a folder name (no '/', not '..')")
    return value


def validate_config(cfg) -> None:
    """Check every field of a configuration (subsets deduplicated).

    ``cfg`` is an :class:`~toolbench_lib.pipeline.experiment.ExperimentConfig`; a bad field is a
    :class:`UsageError` naming it, its value and what is allowed.
    """
    from ..llm.factory import BACKENDS

    check_run_name(cfg.run_name)
    cfg.subsets = check_subsets("subsets", cfg.subsets)
    check_choice("backend", cfg.backend, BACKENDS)
    for name in ("k", "plan_k", "depth", "runs", "scale_seeds"):
        if hasattr(cfg, name):
            check_int(name, getattr(cfg, name), 1)
    check_int("seed", cfg.seed, 0)
    check_int("plan_limit", cfg.plan_limit, 0, allow_none=True)
    check_int("max_apis", cfg.max_apis, 1, allow_none=True)
    check_int("limit", cfg.limit, 1, allow_none=True)
    check_temperature("temperature", cfg.temperature)
    check_temperature("run_temperature", cfg.run_temperature, allow_none=True)
    if not isinstance(cfg.scale_sizes, (list, tuple)) or not cfg.scale_sizes:
        raise UsageError(f"scale_sizes: {cfg.scale_sizes!r} is not allowed; expected a non-empty list of "
                         "sizes (None: the full registry)")
    for size in cfg.scale_sizes:
        check_int("scale_sizes", size, 1, allow_none=True)
    if not isinstance(cfg.smoke, bool):
        raise UsageError(f"smoke: {cfg.smoke!r} is not allowed; expected True or False")
    if cfg.data_dir is not None and not Path(cfg.data_dir).is_dir():
        raise UsageError(f"data_dir: {str(cfg.data_dir)!r} is not allowed; no such folder")
    if cfg.cassette is not None and not Path(cfg.cassette).is_file():
        raise UsageError(f"cassette: {str(cfg.cassette)!r} is not allowed; no such file")
    if cfg.outputs_dir is not None:
        check_output_dir("outputs_dir", cfg.outputs_dir)


def check_dataset(ds, max_apis: int | None, subsets: Iterable[str]) -> None:
    """What can only be checked once the data is loaded: the sub-registry size and non-empty query sets."""
    check_max_apis(max_apis, len(ds.registry))
    for name in subsets:
        ds.subset_queries(name)  # raises, naming the file, when the set has no queries

