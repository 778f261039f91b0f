import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from toolbench_lib.embedding import OFFLINE_MODEL, cache_folder, cached_complete, embed_cached, load_embedder

TEXTS = [f"API number {i}: returns the weather forecast for city {i}" for i in range(240)]
KILL_TEMPLATE = "Endpoint {i} of a long build: looks up hotel offers, flight prices and reviews"
KILL_TEXTS = [KILL_TEMPLATE.format(i=i) for i in range(1600)]


def test_offline_fallback_is_quick_and_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.time()
    emb = load_embedder("thenlper/gte-base")
    assert time.time() - t0 < 60
    assert emb.name == OFFLINE_MODEL and emb.fallback_from == "thenlper/gte-base"
    vec = emb.encode(["hello world"])
    assert vec.shape == (1, 384)
    assert np.linalg.norm(vec[0]) == pytest.approx(1.0, abs=1e-4)


def test_local_folder_model(embedder):
    from toolbench_lib.embedding import offline_model_dir

    emb = load_embedder(str(offline_model_dir()))
    assert emb.name == "model"
    assert np.allclose(emb.encode(["weather"]), embedder.encode(["weather"]), atol=1e-5)


class Counting:
    """The real embedder, counting the texts it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.encoded = inner, 0
        self.name, self.slug, self.dim = inner.name, inner.slug, inner.dim

    def encode(self, texts, batch_size=64, progress=False):
        self.encoded += len(texts)
        return self.inner.encode(texts, batch_size=batch_size)


def test_cache_hit_encodes_nothing(embedder, tmp_path):
    c = Counting(embedder)
    first = embed_cached(c, TEXTS[:50], "t", tmp_path, chunk_size=20, progress=False)
    assert c.encoded == 50
    again = embed_cached(c, TEXTS[:50], "t", tmp_path, chunk_size=20, progress=False)
    assert c.encoded == 50 and np.array_equal(first, again)
    assert cached_complete(c, TEXTS[:50], "t", tmp_path)


def test_killed_build_resumes(embedder, tmp_path):
    """A build killed with SIGKILL mid-way leaves whole chunks; the rerun embeds only the rest."""
    script = textwrap.dedent(f"""
        import sys
        from toolbench_lib.embedding import load_embedder, embed_cached
        texts = [{KILL_TEMPLATE!r}.format(i=i) for i in range({len(KILL_TEXTS)})]
        emb = load_embedder("{OFFLINE_MODEL}")
        embed_cached(emb, texts, "t", __import__("pathlib").Path({str(tmp_path)!r}), chunk_size=8,
                     progress=False, batch_size=8)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    folder = cache_folder(embedder, KILL_TEXTS, "t", tmp_path)
    n_chunks = len(KILL_TEXTS) // 8
    deadline = time.time() + 120
    while time.time() < deadline and len(list(folder.glob("chunk_*.npy"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(folder.glob("chunk_*.npy")))
    assert 3 <= done < n_chunks, "the build should have been killed part-way"
    c = Counting(embedder)
    resumed = embed_cached(c, KILL_TEXTS, "t", tmp_path, chunk_size=8, progress=False)
    assert c.encoded == 8 * (n_chunks - done)
    sample = [0, 5, done * 8 - 1, done * 8, len(KILL_TEXTS) - 1]
    fresh = embedder.encode([KILL_TEXTS[i] for i in sample])
    assert np.allclose(resumed[sample], fresh, atol=1e-4)
