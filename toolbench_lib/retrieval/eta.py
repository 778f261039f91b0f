"""How long embedding takes: each text's cost in tokens, a timed sample, and the progress bar's weights.

The registry is embedded longest text first, so a bar counting documents starts slow and speeds up (on a
2-core CPU the per-document rate rises about fourfold) and its first estimates are far too long. Here each
text weighs what it costs: the tokens the encoder computes for it (its batch's longest token count, since a
batch pads to it, cut at the model's sequence length) plus a per-text overhead in token-equivalents. The
overhead and the seconds per token come from a short timed sample: a few batches of neighbouring texts (in
the run's own longest-first order) at spread-out positions, fitted by non-negative least squares
(seconds = per_text * texts + per_token * padded tokens). A bar over these weights reads a near-constant
rate from the start, so its remaining time holds from the first minute.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE_MIN_TEXTS = 10000  # fewer texts: no timed sample (it would be a noticeable share of a short run)
SAMPLE_BATCH = 32
SAMPLE_POSITIONS = (0.02, 0.35, 0.65, 0.98)  # quantiles of the longest-first order
CHARS_PER_TOKEN = 4.0  # only for a model without a tokenizer
TOKENIZE_CHUNK = 4096


def token_lengths(embedder, texts: Sequence[str]) -> np.ndarray:
    """Tokens each text is embedded with: special tokens included, cut at the model's sequence length (an
    encoder without a tokenizer: characters / 4, cut the same way)."""
    cap = embedder.max_seq_length or None
    tokenizer = getattr(embedder.model, "tokenizer", None)
    if tokenizer is None:
        est = np.ceil(np.array([len(t) for t in texts], dtype=np.float64) / CHARS_PER_TOKEN) + 2
        return np.minimum(est, cap) if cap else est
    out = np.empty(len(texts), dtype=np.float64)
    for i in range(0, len(texts), TOKENIZE_CHUNK):
        part = list(texts[i:i + TOKENIZE_CHUNK])
        enc = tokenizer(part, add_special_tokens=True, truncation=cap is not None, max_length=cap)
        out[i:i + len(part)] = [len(x) for x in enc["input_ids"]]
    return out


def padded_lengths(lengths: np.ndarray, chunks: Sequence[Sequence[int]], batch_size: int) -> np.ndarray:
    """Tokens computed per text: each chunk (positions in the encoder's order: the encoders sort by length,
    longest first, as the chunks already are) is cut into batches of ``batch_size`` and every text of a
    batch costs the batch's longest."""
    lengths = np.asarray(lengths, dtype=np.float64)
    out = lengths.copy()
    for chunk in chunks:
        chunk = np.asarray(chunk, dtype=np.int64)
        for i in range(0, len(chunk), batch_size):
            batch = chunk[i:i + batch_size]
            out[batch] = lengths[batch].max()
    return out


@dataclass(frozen=True)
class CostModel:
    """Seconds to embed a text of ``n`` tokens: ``per_text + per_token * n``."""

    per_text: float
    per_token: float

    @property
    def overhead_tokens(self) -> float:
        """The per-text cost in token-equivalents."""
        return self.per_text / self.per_token if self.per_token > 0 else 0.0

    def seconds(self, lengths: np.ndarray) -> float:
        return float(self.per_text * len(lengths) + self.per_token * np.sum(lengths))

    def weights(self, lengths: np.ndarray) -> np.ndarray:
        """Each text's cost in token-equivalents (what the progress bar counts)."""
        return np.asarray(lengths, dtype=np.float64) + self.overhead_tokens


def fit_cost(texts: Sequence[int], tokens: Sequence[float], seconds: Sequence[float]) -> CostModel:
    """Per-text and per-token seconds from timed batches (texts, tokens and seconds of each), by
    non-negative least squares; when the batches cannot tell the two apart, all cost goes per token."""
    from scipy.optimize import nnls

    a = np.column_stack([np.asarray(texts, dtype=np.float64), np.asarray(tokens, dtype=np.float64)])
    y = np.asarray(seconds, dtype=np.float64)
    if len(y) >= 2 and np.linalg.matrix_rank(a) == 2:
        (per_text, per_token), _ = nnls(a, y)
        if per_token > 0:
            return CostModel(float(per_text), float(per_token))
    return CostModel(0.0, float(y.sum() / max(a[:, 1].sum(), 1.0)))


def sample_batches(order: Sequence[int], batch: int | None = None,
                   positions: Sequence[float] = SAMPLE_POSITIONS) -> list[list[int]]:
    """Batches of ``batch`` (default :data:`SAMPLE_BATCH`) neighbouring positions of ``order`` around each
    quantile in ``positions`` (disjoint; fewer when ``order`` is short)."""
    batch = batch or SAMPLE_BATCH
    n = len(order)
    out, taken = [], set()
    for q in positions:
        start = min(max(int(q * n) - batch // 2, 0), max(n - batch, 0))
        chunk = [int(order[i]) for i in range(start, min(start + batch, n)) if i not in taken]
        taken.update(range(start, min(start + batch, n)))
        if chunk:
            out.append(chunk)
    return out


def timed_sample(embedder, texts: Sequence[str], lengths: np.ndarray, order: Sequence[int],
                 batch_size: int = 64, clock=time.perf_counter) -> tuple[CostModel, int]:
    """The cost model of ``embedder`` on this machine, from encoding a few batches of ``texts`` (positions
    in ``order``, the run's embedding order; ``lengths`` their token counts); the vectors are discarded.
    Returns the model and the texts timed."""
    batches = sample_batches(order)
    embedder.encode([texts[batches[0][-1]]], batch_size=1)  # first call: thread pools, allocations
    n, tok, sec = [], [], []
    for chunk in batches:
        t0 = clock()
        embedder.encode([texts[i] for i in chunk], batch_size=batch_size)
        sec.append(clock() - t0)
        n.append(len(chunk))
        tok.append(float(padded_lengths(lengths, [chunk], batch_size)[chunk].sum()))
    return fit_cost(n, tok, sec), sum(n)


def remaining_seconds(done_weight: float, total_weight: float, elapsed: float) -> float:
    """Time left at the rate so far, in weight units per second (what the bar shows)."""
    if done_weight <= 0:
        return float("nan")
    return elapsed * (total_weight - done_weight) / done_weight


def minutes_text(seconds: float) -> str:
    """``about N min`` (``under a minute`` below 60 s)."""
    if seconds < 60:
        return "under a minute"
    return f"about {max(1, round(seconds / 60))} min"


def estimate_line(kind: str, padded: np.ndarray, model: CostModel, sampled: int) -> str:
    """The one line printed before a long embedding starts (``padded``: the tokens computed per text)."""
    return (f"embedding {len(padded):,} {kind} texts ({int(np.sum(padded)):,} tokens with padding): "
            f"{minutes_text(model.seconds(padded))} on this CPU (from a timed sample of {sampled} texts)")
