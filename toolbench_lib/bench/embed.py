"""Embedding benches: fp32 (PyTorch) against int8 (ONNX Runtime) docs/s of the same model on a fixed
registry sample, and the embedding estimate against the measured time."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from unittest.mock import patch

import numpy as np

from ..config import SEED
from ..retrieval import eta
from ..retrieval.embedding import embed_cached
from .core import BenchLine, timed

SAMPLE_SEED = 0


def fixed_sample(texts: list[str], n: int, seed: int = SAMPLE_SEED) -> list[str]:
    """``n`` registry texts chosen by a fixed seed, in registry order (the same sample every run)."""
    rows = np.sort(np.random.default_rng(seed).choice(len(texts), min(n, len(texts)), replace=False))
    return [texts[int(r)] for r in rows]


def token_stats(tokenizer, texts: list[str]) -> dict:
    """Token counts of ``texts`` (no truncation): mean, median, share over 128 and over 256 tokens."""
    lengths = np.array([len(ids) for ids in tokenizer(texts, truncation=False)["input_ids"]])
    return {"tokens_mean": round(float(lengths.mean()), 1), "tokens_median": int(np.median(lengths)),
            "share_over_128": round(float((lengths > 128).mean()), 3),
            "share_over_256": round(float((lengths > 256).mean()), 3)}


def bench_embedding(fp32, int8, texts: list[str], batch_size: int = 64, target: float = 2.5) -> BenchLine:
    """docs/s of both embedders on ``texts`` in ABBA order (fp32, int8, int8, fp32 over two halves)."""
    half = len(texts) // 2
    a, b = texts[:half], texts[half:]
    for emb in (fp32, int8):
        emb.encode(texts[:8], batch_size=8)  # warm-up: first-call allocations and thread pools
    f1, tf1 = timed(fp32.encode, a, batch_size=batch_size)
    i1, ti1 = timed(int8.encode, a, batch_size=batch_size)
    i2, ti2 = timed(int8.encode, b, batch_size=batch_size)
    f2, tf2 = timed(fp32.encode, b, batch_size=batch_size)
    f, i = np.concatenate([f1, f2]), np.concatenate([i1, i2])
    cos = np.sum(f * i, axis=1)
    details = {"model": fp32.name, "docs": len(texts), "batch_size": batch_size,
               "int8_vs_fp32_cosine_mean": round(float(cos.mean()), 4),
               "int8_vs_fp32_cosine_min": round(float(cos.min()), 4),
               "max_seq_length": fp32.max_seq_length}
    tokenizer = getattr(fp32.model, "tokenizer", None)
    if tokenizer is not None:
        details.update(token_stats(tokenizer, texts))
    return BenchLine("embedding docs/s (registry sample)", "docs/s", "fp32 torch", "int8 onnxruntime",
                     len(texts) / (tf1 + tf2), len(texts) / (ti1 + ti2), target=target, details=details)


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
