"""The embedding estimate against the measured time, on a random slice of the registry."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from unittest.mock import patch

import numpy as np

from ..config import SEED
from ..retrieval import eta
from ..retrieval.embedding import embed_cached
from .core import BenchLine


def bench_eta(embedder, texts: Sequence[str], n: int, seed: int = SEED) -> BenchLine:
    """Embed ``n`` registry texts drawn at random (they follow the registry's lengths) into a fresh store,
    with the timed sample and the estimate a long build prints: the estimate against the seconds taken."""
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in rng.choice(len(texts), min(n, len(texts)), replace=False)]
    got: list[eta.EtaTracker] = []
    with patch.object(eta, "SAMPLE_MIN_TEXTS", 0), tempfile.TemporaryDirectory(prefix="bench-eta-") as tmp:
        embed_cached(embedder, sample, "registry", Path(tmp), progress=True, on_estimate=got.append)
    t = got[0]
    return BenchLine(f"embedding estimate, {len(sample):,} random registry texts ({embedder.name})", "s",
                     "estimated before the start", "measured", t.estimate, t.spent, better="lower",
                     details={"error_pct": round((t.estimate - t.spent) / t.spent * 100, 1)})
