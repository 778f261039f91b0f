"""How long embedding takes: a cost model fitted on a timed sample, refreshed as chunks finish."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE_MIN_TEXTS = 10000  # fewer texts: no timed sample (it would be a noticeable share of a short run)
SAMPLE_BATCH = 32
SAMPLE_BATCHES = 8
SAMPLE_POSITIONS = tuple((i + 0.5) / SAMPLE_BATCHES for i in range(SAMPLE_BATCHES))
CHARS_PER_TOKEN = 4.0  # only for a model without a tokenizer
TOKENIZE_CHUNK = 4096


def token_lengths(embedder, texts: Sequence[str]) -> np.ndarray:
    """Tokens each text is embedded with, special tokens included, cut at the sequence length."""
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
    """Tokens computed per text: every text of a batch of a chunk costs the batch's longest."""
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
    """Seconds to embed a text of ``n`` padded tokens: ``per_text + per_token * n + per_square * n**2``."""

    per_text: float
    per_token: float
    per_square: float = 0.0

    @property
    def overhead_tokens(self) -> float:
        """The per-text cost in token-equivalents."""
        return self.per_text / self.per_token if self.per_token > 0 else 0.0

    def seconds(self, lengths: np.ndarray) -> float:
        n = np.asarray(lengths, dtype=np.float64)
        return float(self.per_text * len(n) + self.per_token * n.sum() + self.per_square * np.square(n).sum())

    def weights(self, lengths: np.ndarray) -> np.ndarray:
        """Each text's cost in token-equivalents (what the progress bar counts)."""
        n = np.asarray(lengths, dtype=np.float64)
        if self.per_token <= 0:
            return n
        return n + self.overhead_tokens + self.per_square / self.per_token * np.square(n)


def fit_cost(texts: Sequence[int], tokens: Sequence[float], seconds: Sequence[float],
             squares: Sequence[float] | None = None) -> CostModel:
    """The cost model of timed batches by non-negative least squares (inseparable terms dropped)."""
    from scipy.optimize import nnls

    cols = [np.asarray(c, dtype=np.float64) for c in (texts, tokens, squares) if c is not None]
    y = np.asarray(seconds, dtype=np.float64)
    for width in range(len(cols), 1, -1):
        a = np.column_stack(cols[:width])
        if len(y) >= width and np.linalg.matrix_rank(a) == width:
            coef, _ = nnls(a / a.max(axis=0), y)  # columns scaled alike: nnls is then well conditioned
            coef = coef / a.max(axis=0)
            if coef[1] > 0:
                return CostModel(float(coef[0]), float(coef[1]), float(coef[2]) if width == 3 else 0.0)
    return CostModel(0.0, float(y.sum() / max(cols[1].sum(), 1.0)))


def sample_batches(order: Sequence[int], batch: int = SAMPLE_BATCH,
                   positions: Sequence[float] = SAMPLE_POSITIONS) -> list[list[int]]:
    """Disjoint batches of ``batch`` neighbouring positions of ``order`` around each quantile."""
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
    """``(cost model, texts timed)`` of ``embedder`` from encoding a few batches of ``texts``."""
    # untimed warm-up on a batch of typical length
    embedder.encode([texts[i] for i in sample_batches(order, batch_size, (0.5,))[0]], batch_size=batch_size)
    n, tok, sq, sec = [], [], [], []
    for chunk in sample_batches(order, batch_size):
        t0 = clock()
        embedder.encode([texts[i] for i in chunk], batch_size=batch_size)
        sec.append(clock() - t0)
        n.append(len(chunk))
        padded = padded_lengths(lengths, [chunk], batch_size)[chunk]
        tok.append(float(padded.sum()))
        sq.append(float(np.square(padded).sum()))
    return fit_cost(n, tok, sec, sq), sum(n)


def minutes_text(seconds: float) -> str:
    """``about N min`` (``under a minute`` below 60 s)."""
    return "under a minute" if seconds < 60 else f"about {max(1, round(seconds / 60))} min"


class EtaTracker:
    """The time spent plus the model's seconds for what is left, scaled by the chunks done so far."""

    def __init__(self, model: CostModel, padded: np.ndarray, clock=time.perf_counter):
        self.model, self.clock = model, clock
        self.estimate = self.predicted_left = model.seconds(padded)
        self.spent, self.predicted_done = 0.0, 0.0
        self.started = clock()

    def finished(self, padded: np.ndarray) -> float:
        """Record a chunk (padded lengths) finished now; returns the whole run's refreshed estimate."""
        predicted = self.model.seconds(padded)
        self.predicted_done += predicted
        self.predicted_left = max(self.predicted_left - predicted, 0.0)
        self.spent = self.clock() - self.started
        ratio = self.spent / self.predicted_done if self.predicted_done > 0 else 1.0
        return self.spent + self.predicted_left * ratio

    def final_line(self, kind: str) -> str:
        """``took`` beside ``estimated`` (before the start) and the estimate's error."""
        error = (self.estimate - self.spent) / self.spent * 100 if self.spent > 0 else 0.0
        return (f"embedding the {kind} texts took {self.spent / 60:.1f} min; estimated "
                f"{self.estimate / 60:.1f} before the start ({error:+.0f}%)")


def estimate_line(kind: str, padded: np.ndarray, model: CostModel, sampled: int) -> str:
    """The one line printed before a long embedding starts (``padded``: the tokens computed per text)."""
    return (f"embedding {len(padded):,} {kind} texts ({int(np.sum(padded)):,} tokens with padding): "
            f"{minutes_text(model.seconds(padded))} on this CPU (from a timed sample of {sampled} texts)")
