"""What a cassette covers: records per model, prompt version and run."""

from __future__ import annotations

import os
import re
from collections import Counter

from .cache import read_cassette

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)


def prompt_query(prompt: str) -> str | None:
    """The query a templated prompt was rendered for (``None`` for a prompt without one)."""
    m = _QUERY.search(prompt)
    return m.group(1) if m else None


def cassette_info(path: str | os.PathLike[str]) -> dict:
    """Records per model, prompt version and run, and how many distinct queries each version covers."""
    by = Counter()
    queries: dict[str, set[str]] = {}
    tokens = Counter()
    for r in read_cassette(path):
        by[(r["backend"], r["model"], r["prompt_version"], r["run"], r["temperature"])] += 1
        queries.setdefault(r["prompt_version"], set()).add(prompt_query(r["prompt"]) or r["prompt"])
        tokens["in"] += int(r["tokens_in"])
        tokens["out"] += int(r["tokens_out"])
        tokens["latency_s"] += float(r["latency_s"])
    return {
        "cassette": str(path),
        "records": sum(by.values()),
        "groups": [{"backend": b, "model": m, "prompt_version": v, "run": run, "temperature": t, "records": n}
                   for (b, m, v, run, t), n in sorted(by.items())],
        "distinct_queries_by_prompt_version": {v: len(q) for v, q in sorted(queries.items())},
        "tokens_in": tokens["in"],
        "tokens_out": tokens["out"],
        "recorded_latency_s": round(tokens["latency_s"], 1),
    }
