"""Name and text normalisation shared across the toolkit."""

from __future__ import annotations

import re

_VERSION_SUFFIX = re.compile(r"_v\d+$", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^a-z0-9]")


def strip_version(name: str) -> str:
    """Remove ToolBench's ``_vN`` disambiguation suffix (``Yahoo Finance_v2`` -> ``Yahoo Finance``)."""
    return _VERSION_SUFFIX.sub("", name.strip())


def norm_name(name: str | None) -> str:
    """Normalised key of a tool or API name: lower case, alphanumerics only, ``_vN`` removed."""
    return _NON_ALNUM.sub("", strip_version(str(name)).lower()) if name else ""


def norm_text(text: str) -> str:
    """A text as compared across sets or stubs: case-folded, whitespace collapsed."""
    return " ".join(str(text).lower().split())
