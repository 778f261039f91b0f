"""The embedding ETA: cost weights, the fitted cost model and the estimate printed before a long run."""

from __future__ import annotations

import logging
import re
import warnings

import numpy as np
import pytest
from tqdm import TqdmWarning

from toolbench_lib.retrieval import eta
from toolbench_lib.retrieval.eta import (
    CostModel,
    EtaTracker,
    fit_cost,
    minutes_text,
    padded_lengths,
    sample_batches,
    timed_sample,
)


def remaining_seconds(done_weight: float, total_weight: float, elapsed: float) -> float:
    """Time left at the rate so far, in weight units per second (what the bar shows)."""
    return elapsed * (total_weight - done_weight) / done_weight


PER_TEXT, PER_TOKEN = 0.004, 0.0003  # seconds: a 256-token text costs 0.0808 s, a 20-token one 0.010 s


class SimulatedEncoder:
    """An encoder whose batches take the time a known cost model gives (padded to the batch's longest text),
    on a clock of its own: what the estimator sees of a real CPU, without the noise."""

    def __init__(self, lengths: dict[str, float], per_text: float = PER_TEXT, per_token: float = PER_TOKEN,
                 jitter: float = 0.0, seed: int = 0):
        self.lengths, self.per_text, self.per_token = lengths, per_text, per_token
        self.now, self.jitter, self.rng = 0.0, jitter, np.random.default_rng(seed)

    def clock(self) -> float:
        return self.now

    def batch_seconds(self, texts: list[str], batch_size: int) -> float:
        order = sorted(texts, key=len, reverse=True)
        total = 0.0
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            total += len(batch) * (self.per_text + self.per_token * max(self.lengths[t] for t in batch))
        return total * (1 + self.jitter * self.rng.uniform(-1, 1))

    def encode(self, texts, batch_size: int = 64):
        self.now += self.batch_seconds(list(texts), batch_size)
        return np.zeros((len(texts), 4), dtype=np.float32)


def _registry_like(n: int = 20000, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Texts whose token counts follow the registry's skew (median ~60, 5% cut at 256), as the build orders
    them: longest first (a text's length in characters is 4 per token here)."""
    rng = np.random.default_rng(seed)
    tokens = np.minimum(np.round(rng.lognormal(np.log(60), 0.75, n)) + 2, 256)
    texts = [f"{i:06d}" + "x" * (4 * int(t) - 6) for i, t in enumerate(tokens)]
    return texts, tokens


def test_padded_lengths_by_hand():
    lengths = np.array([5, 3, 7, 2, 4])
    # chunk [2, 0, 4] in batches of 2: {2, 0} pads to 7, {4} is alone; chunk [1, 3] pads to 3
    assert padded_lengths(lengths, [[2, 0, 4], [1, 3]], 2).tolist() == [7, 3, 7, 3, 4]
    assert padded_lengths(lengths, [[2, 0, 4, 1, 3]], 64).tolist() == [7] * 5


def test_fit_cost_recovers_a_known_model():
    n = [32, 32, 32, 20]
    tokens = [32 * 256, 32 * 90, 32 * 40, 20 * 12]
    seconds = [PER_TEXT * a + PER_TOKEN * b for a, b in zip(n, tokens, strict=True)]
    model = fit_cost(n, tokens, seconds)
    assert model.per_text == pytest.approx(PER_TEXT, rel=1e-9)
    assert model.per_token == pytest.approx(PER_TOKEN, rel=1e-9)
    assert model.overhead_tokens == pytest.approx(PER_TEXT / PER_TOKEN)  # 13.33 tokens per text
    # batches of one length cannot separate the two costs: all of it goes per token (5 s / 3,000 tokens)
    flat = fit_cost([10, 20], [1000, 2000], [2.0, 3.0])
    assert flat == CostModel(0.0, pytest.approx(5.0 / 3000))


def test_fit_cost_recovers_an_attention_term():
    """Batches whose time grows with the square of their padded length: the three costs come back, and the
    weights rank a long text above what the linear terms alone would give it."""
    n = [32, 32, 32, 32, 20]
    lengths = [256, 160, 90, 40, 12]
    tokens = [a * n_ for a, n_ in zip(n, lengths, strict=True)]
    squares = [a * n_ ** 2 for a, n_ in zip(n, lengths, strict=True)]
    per_square = 2e-6
    seconds = [PER_TEXT * a + PER_TOKEN * b + per_square * c
               for a, b, c in zip(n, tokens, squares, strict=True)]
    model = fit_cost(n, tokens, seconds, squares)
    got = (model.per_text, model.per_token, model.per_square)
    assert got == pytest.approx((PER_TEXT, PER_TOKEN, per_square), rel=1e-6)
    one = PER_TEXT + PER_TOKEN * 256 + per_square * 256 ** 2
    assert model.seconds(np.array([256.0])) == pytest.approx(one)
    w = model.weights(np.array([256.0, 12.0]))
    assert w[0] / w[1] == pytest.approx(model.seconds(np.array([256.0])) / model.seconds(np.array([12.0])))


def test_tracker_refreshes_when_the_cpu_slows_down():
    """The sample was timed on a quiet CPU; halfway through the run the CPU gets twice as slow. The estimate
    made before the start is then short, the refreshed one after the next chunk holds the truth within 10%,
    and the closing line prints the measured time beside the first estimate."""
    model = CostModel(0.004, 0.0003)
    padded = np.full(8000, 100.0)
    now = [0.0]
    tracker = EtaTracker(model, padded, clock=lambda: now[0])
    chunks = np.array_split(np.arange(8000), 16)
    per_chunk = model.seconds(padded[chunks[0]])
    actual = 8 * per_chunk + 8 * 2 * per_chunk
    totals = []
    for i, chunk in enumerate(chunks):
        now[0] += per_chunk * (1 if i < 8 else 2)
        totals.append(tracker.finished(padded[chunk]))
    assert tracker.estimate == pytest.approx(16 * per_chunk)  # before the start: the quiet CPU's time
    assert totals[7] == pytest.approx(tracker.estimate)  # no change seen yet
    assert abs(totals[12] - actual) / actual < 0.10  # refreshed: the slower half is seen
    assert totals[-1] == pytest.approx(actual)
    line = tracker.final_line("registry")
    assert f"took {actual / 60:.1f} min; estimated {16 * per_chunk / 60:.1f}" in line
    assert f"({(16 * per_chunk - actual) / actual * 100:+.0f}%)" in line


def test_sample_batches_spread_over_the_order():
    order = list(range(1000, 0, -1))
    batches = sample_batches(order, batch=4, positions=(0.0, 0.5, 1.0))
    assert batches == [[1000, 999, 998, 997], [502, 501, 500, 499], [4, 3, 2, 1]]
    assert sample_batches([7, 8], batch=4, positions=(0.0, 1.0)) == [[7, 8]]  # no position twice


def test_eta_from_cost_weights_holds_from_the_start():
    """A run of 20,000 registry-like texts, longest first, on a CPU that follows the cost model (with 10%
    noise on the timed sample): the estimate before the start and the bar's total at 5% of the time are
    within 25% of the actual time (exact without noise), where counting documents is off by more than half."""
    texts, tokens = _registry_like()
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chunks = [order[i:i + 1024] for i in range(0, len(order), 1024)]
    padded = padded_lengths(tokens, chunks, 64)

    for jitter, tolerance in ((0.0, 1e-9), (0.10, 0.25)):
        cpu = SimulatedEncoder(dict(zip(texts, tokens, strict=True)), jitter=jitter)
        model, sampled = timed_sample(cpu, texts, tokens, order, batch_size=64, clock=cpu.clock)
        assert sampled == len(eta.SAMPLE_POSITIONS) * 64  # batches of the run's own batch size
        weights = model.weights(padded)
        exact = SimulatedEncoder(cpu.lengths)
        steps, elapsed, done_w, done_n = [], 0.0, 0.0, 0
        for chunk in chunks:
            elapsed += exact.batch_seconds([texts[i] for i in chunk], 64)
            done_w, done_n = done_w + weights[chunk].sum(), done_n + len(chunk)
            steps.append((elapsed, done_w, done_n))
        actual = steps[-1][0]
        assert model.seconds(padded) == pytest.approx(actual, rel=tolerance)  # the line before the start
        at, w, d = next(s for s in steps if s[0] >= 0.05 * actual)
        assert at + remaining_seconds(w, weights.sum(), at) == pytest.approx(actual, rel=tolerance)
        by_documents = at + remaining_seconds(d, len(texts), at)
        assert by_documents > 1.5 * actual  # the old bar: the first texts are the slowest


def test_minutes_text():
    assert minutes_text(59) == "under a minute"
    assert minutes_text(90) == "about 2 min"
    assert minutes_text(26 * 60 + 10) == "about 26 min"


def test_real_embedding_logs_its_estimate_and_keeps_its_vectors(ds, embedder, tmp_path, monkeypatch, caplog):
    """On 120 short registry texts (sampling from 100 texts on, 8 batches of 8): one estimate line before the
    embedding, and the same vectors as an embedding without progress (the timed sample changes nothing)."""
    from toolbench_lib.retrieval.embedding import embed_cached

    monkeypatch.setattr(eta, "SAMPLE_MIN_TEXTS", 100)
    rng = np.random.default_rng(3)
    short = [t for t in ds.texts[:5000] if len(t) < 300]
    texts = [short[i] for i in rng.choice(len(short), 120, replace=False)]
    with caplog.at_level(logging.INFO, logger="toolbench_lib.retrieval.embedding"):
        shown = embed_cached(embedder, texts, "registry", tmp_path / "a", progress=True, batch_size=8)
    lines = [r.getMessage() for r in caplog.records if "on this CPU" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("embedding 120 registry texts (")
    assert "from a timed sample of 64 texts" in lines[0]  # 8 batches of 8, spread over the lengths
    final = [r.getMessage() for r in caplog.records if " took " in r.getMessage()]
    assert len(final) == 1 and "estimated" in final[0] and "before the start" in final[0]
    quiet = embed_cached(embedder, texts, "registry", tmp_path / "b", progress=False, batch_size=8)
    assert np.array_equal(shown, quiet)


ETA_SLICE = 600


def test_estimate_on_a_registry_slice_against_its_real_time(ds, embedder, tmp_path, monkeypatch, caplog):
    """600 registry texts drawn at random (so they follow the registry's lengths), embedded for real with
    the timed sample first: the log ends with the time taken beside the estimate printed before the start,
    and the error is printed. A timing on a shared machine is a measurement (``bench --only eta``), not a
    pass mark: only an estimate off by more than a factor of four fails."""
    from toolbench_lib.retrieval.embedding import embed_cached

    monkeypatch.setattr(eta, "SAMPLE_MIN_TEXTS", 500)  # its timed sample: 8 batches of 32 texts
    rng = np.random.default_rng(0)
    texts = [ds.texts[i] for i in rng.choice(len(ds.texts), ETA_SLICE, replace=False)]
    with caplog.at_level(logging.INFO, logger="toolbench_lib.retrieval.embedding"), warnings.catch_warnings():
        warnings.simplefilter("error", TqdmWarning)  # a bar summed past its total warns on the console
        embed_cached(embedder, texts, "registry", tmp_path, progress=True)
    final = next(r.getMessage() for r in caplog.records if " took " in r.getMessage())
    error = float(re.findall(r"\(([+-][0-9]+)%\)$", final)[0])
    print(f"embedding estimate on {ETA_SLICE} registry texts: {final}")
    assert -75 < error < 300, final
