"""Checks of user-given values (command line and ExperimentConfig), each failing with one line."""

from __future__ import annotations

import argparse
import math
import numbers
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from ..data.paths import DataNotFoundError, find_data_dir
from ..data.queries import UnknownSubsetError, resolve_subset, user_set_files
from ..llm.base import LLMError
from ..llm.factory import BACKENDS
from ..retrieval.families import FAMILIES

MAX_TEMPERATURE = 2.0
MAX_DEPTH = 1000  # the most APIs scored per query (``k``) and hits kept per searched text (``depth``)
NAME_MAX_BYTES = 255  # the longest file name most file systems take (ext4, xfs, tmpfs)
TEMP_SUFFIX_BYTES = 24  # '.<name>.<pid>.tmp.d': an output's temporary copy beside it
PATH_MAX_BYTES = 4095


class UsageError(ValueError):
    """A bad option or parameter value."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit code 2), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def check_int(name: str, value: object, minimum: int, maximum: int | None = None,
              allow_none: bool = False) -> int | None:
    """``value`` as an int in ``[minimum, maximum]`` (None passes when ``allow_none``)."""
    if value is None and allow_none:
        return None
    allowed = (f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}")
    allowed += " (or None)" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(f"{name}: {shown(value)} is not allowed; expected {allowed}")
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
    """Known query-set names or aliases, each set once; ``user_sets``: the data folder's, when known."""
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


def shown(value: object, width: int = 80) -> str:
    """``repr`` of a value for a message, a long one cut with its length named."""
    text = repr(str(value) if isinstance(value, os.PathLike) else value)
    return text if len(text) <= width else f"{text[:width - 20]}...' ({len(str(value))} characters)"


def path_problem(value: str | os.PathLike[str]) -> str | None:
    """What makes ``value`` unusable as a path before the file system is asked, or None."""
    text = os.fspath(value)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return "the path is not UTF-8 text"
    if not text.strip():
        return "an empty path is not allowed; name a file or folder"
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not UTF-8 text (use a UTF-8 name)"
    if b"\x00" in encoded:
        return "the path holds a NUL character"
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > NAME_MAX_BYTES:
        return f"a name in it is {longest} bytes long (at most {NAME_MAX_BYTES})"
    if len(encoded) > PATH_MAX_BYTES:
        return f"the path is {len(encoded)} bytes long (at most {PATH_MAX_BYTES})"
    return None


def check_path(name: str, value: str | os.PathLike[str], kind: str) -> Path:
    """A path of ``kind`` (output_dir, output_file, file, dir): its form, then the file system."""
    problem = path_problem(value)
    if problem:
        raise UsageError(f"{name}: {shown(value)} is not allowed; {problem}")
    path = Path(value)
    denied = "not readable (permission denied)"
    try:
        if kind == "file":
            problem = ("no such file" if not path.exists() else "not a file" if not path.is_file()
                       else denied if not os.access(path, os.R_OK) else None)
        elif kind == "dir":
            problem = ("no such folder" if not path.is_dir()
                       else denied if not os.access(path, os.R_OK | os.X_OK) else None)
        elif kind.startswith("output") and os.path.basename(os.path.normpath(path)) in ("", ".", ".."):
            problem = "name the folder or file to write (it is written beside that name first)"
        elif kind.startswith("output") and len(path.name.encode()) > NAME_MAX_BYTES - TEMP_SUFFIX_BYTES:
            problem = (f"its name is {len(path.name.encode())} bytes long (at most "
                       f"{NAME_MAX_BYTES - TEMP_SUFFIX_BYTES}: its temporary copy adds a suffix)")
        elif kind == "output_file" and path.is_dir():
            problem = "it is a folder, not a file"
        else:
            parents = (path.parent, *path.parent.parents) if kind == "output_file" else (path, *path.parents)
            parent = next((p for p in parents if p.exists()), None)
            if parent is not None and not parent.is_dir():
                problem = f"{parent} is a file, not a folder"
            elif parent is not None and not os.access(parent, os.W_OK | os.X_OK):
                problem = f"{parent} is not writable (permission denied)"
    except OSError as exc:
        problem = exc.strerror or type(exc).__name__
    if problem:
        raise UsageError(f"{name}: {shown(value)} is not allowed; {problem}")
    return path


def _argtype(check: Callable[[str], object], kind: str, note: str = "",
             problem: str = " is not allowed; ") -> Callable[[str], object]:
    """An argparse type of a check: its :class:`UsageError` as argparse's one line, without the name."""

    def parse(text: str) -> object:
        try:
            return check(text)
        except UsageError as exc:
            message = str(exc).split(": ", 1)[-1].replace(" is not allowed; ", problem)
            raise argparse.ArgumentTypeError(message + note) from None

    parse.__name__ = kind  # argparse names the type in its messages
    return parse


def _parsed(convert: Callable[[str], object], text: str) -> object:
    """``convert(text)``, or the text itself when it does not convert (the check then names it)."""
    try:
        return convert(text)
    except ValueError:
        return text


def int_in_range(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``minimum`` (to ``maximum`` when given)."""
    kind = f"integer >= {minimum}" if maximum is None else f"integer from {minimum} to {maximum}"
    return _argtype(lambda text: check_int("-", _parsed(int, text), minimum, maximum), kind)


int_at_least = int_in_range  # an argparse type: an integer >= ``minimum``


def temperature(negative_means_default: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite temperature from 0 to 2 (any negative number when allowed)."""

    def check(text: str) -> float:
        value = _parsed(float, text)
        if negative_means_default and isinstance(value, float) and -math.inf < value < 0:
            return value
        return check_temperature("-", value)

    note = " (negative: same as --temperature)" if negative_means_default else ""
    return _argtype(check, "temperature", note)


def subset_name(text: str) -> str:
    """An argparse type: a known query-set name or alias."""
    try:
        resolve_subset(text)
    except UnknownSubsetError as exc:
        raise argparse.ArgumentTypeError(exc.args[0]) from None
    return text


def _path_type(kind: str, what: str, problem: str = " is not allowed; ") -> Callable[[str], str]:
    """An argparse type: a path that :func:`check_path` accepts as ``kind``, returned as given."""
    return _argtype(lambda text: check_path("-", text, kind) and text, what, problem=problem)


existing_file = _path_type("file", "existing file")  # a readable file
existing_dir = _path_type("dir", "existing folder")  # an existing, readable folder
output_dir = _path_type("output_dir", "output folder")  # a folder that exists or can be made
output_file = _path_type("output_file", "output file")  # a file that can be written (its folder too)
# an existing, readable folder; its layout is checked when the data is loaded
data_dir = _path_type("dir", "data_dir", " is not a ToolBench data folder: ")


def run_indices(text: str) -> str:
    """An argparse type: comma-separated run indices (integers >= 0), returned as given."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed; expected comma-separated run indices (integers >= 0), e.g. 0,1,2")
    return text


run_name = _argtype(lambda text: check_run_name(text), "run_name")  # a folder name under ``outputs/``


# Errors of the input (options, data files, caches, a replay miss): exit code 2. Anything else: 1.
INPUT_ERRORS: tuple[type[BaseException], ...] = (ValueError, LookupError, OSError, EOFError, sqlite3.Error,
                                                 LLMError)


def report(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr; the exit code (2: an input error, else 1)."""
    single_key = isinstance(exc, KeyError) and len(exc.args) == 1
    message = " ".join((str(exc.args[0]) if single_key else str(exc) or type(exc).__name__).split())
    if isinstance(exc, INPUT_ERRORS) or type(exc).__name__ == "NotebookFailure":
        print(f"error: {message}", file=sys.stderr)
    else:
        print(f"error: {type(exc).__name__}: {message} (rerun with -v to see where)", file=sys.stderr)
    return 2 if isinstance(exc, INPUT_ERRORS) else 1


def list_from_text(value: object) -> object:
    """A YAML flow list given as text (as ``papermill -p`` passes it) as a list; else the value."""
    if not isinstance(value, str) or not value.strip().startswith("["):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return parsed if isinstance(parsed, list) else value


def check_run_name(value: object) -> str:
    """A run name is one folder name under ``outputs/``."""
    if (not isinstance(value, str) or not value.strip() or value in (".", "..")
            or any(c in value for c in "/\\\x00")):
        raise UsageError(f"run_name: {value!r} is not allowed; expected a folder name (no '/', not '..')")
    return value


def validate_config(cfg) -> None:
    """Check every field of an ``ExperimentConfig`` (subsets deduplicated, lists read from text)."""
    check_run_name(cfg.run_name)
    for name, kind in (("data_dir", "dir"), ("cassette", "file"), ("outputs_dir", "output_dir")):
        value = getattr(cfg, name)
        if value is not None:
            if not isinstance(value, (str, os.PathLike)):
                raise UsageError(f"{name}: {value!r} is not allowed; expected a path (or None)")
            check_path(name, value, kind)
    try:  # the data folder's user sets (None when no data folder is found)
        user_sets = list(user_set_files(find_data_dir(cfg.data_dir)))
    except (DataNotFoundError, OSError) as exc:
        if cfg.data_dir is not None:  # a folder given that holds no ToolBench data: said now
            raise UsageError(" ".join(str(exc).split())) from None
        user_sets = None
    # a list given as text (``papermill -p subsets '["G1"]'``) is read as the list ``-y`` would give
    cfg.subsets = check_subsets("subsets", list_from_text(cfg.subsets), user_sets)
    cfg.scale_sizes = list_from_text(cfg.scale_sizes)
    check_choice("backend", cfg.backend, BACKENDS)
    for name in ("k", "plan_k", "depth"):
        check_int(name, getattr(cfg, name), 1, MAX_DEPTH)
    for name in ("runs", "scale_seeds"):
        check_int(name, getattr(cfg, name), 1)
    check_int("seed", cfg.seed, 0)
    for name, minimum in (("plan_limit", 0), ("plan_runs", 1), ("max_apis", 1), ("limit", 1)):
        check_int(name, getattr(cfg, name), minimum, allow_none=True)
    check_temperature("temperature", cfg.temperature)
    check_temperature("run_temperature", cfg.run_temperature, allow_none=True)
    if not isinstance(cfg.scale_sizes, (list, tuple)) or not cfg.scale_sizes:
        raise UsageError(f"scale_sizes: {cfg.scale_sizes!r} is not allowed; expected a non-empty list of "
                         "sizes (None: the full registry)")
    for size in cfg.scale_sizes:
        check_int("scale_sizes", size, 1, allow_none=True)
    cfg.retrievers = list_from_text(cfg.retrievers)
    if not isinstance(cfg.retrievers, (list, tuple)) or not cfg.retrievers:
        raise UsageError(f"retrievers: {cfg.retrievers!r} is not allowed; expected a non-empty list of "
                         f"retriever families ({', '.join(FAMILIES)})")
    for family in cfg.retrievers:
        check_choice("retrievers", family, FAMILIES)
    if not isinstance(cfg.smoke, bool):
        raise UsageError(f"smoke: {cfg.smoke!r} is not allowed; expected True or False")


def check_depth(name: str, value: int | None, registry_size: int) -> None:
    """``k`` or ``depth`` must not exceed the registry searched (nor :data:`MAX_DEPTH`)."""
    top = min(MAX_DEPTH, registry_size)
    if value is not None and value > top:
        raise UsageError(f"{name}: {value} is not allowed; the registry searched has {registry_size} APIs "
                         f"(expected 1 to {top})")


def check_dataset(ds, max_apis: int | None, subsets: Iterable[str], k: int | None = None,
                  depth: int | None = None) -> None:
    """Checks that need the data: sub-registry size, ``k`` and ``depth``, non-empty sets."""
    check_max_apis(max_apis, len(ds.registry))
    check_depth("--k", k, max_apis or len(ds.registry))
    check_depth("--depth", depth, max_apis or len(ds.registry))
    for name in subsets:
        ds.subset_queries(name)  # raises, naming the file, when the set has no queries

