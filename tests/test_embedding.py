import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from toolbench_lib.retrieval.embed_store import CorruptPackError, EmbeddingStore, read_pack, write_pack
from toolbench_lib.retrieval.embedding import (
    OFFLINE_MODEL,
    cached_complete,
    embed_cached,
    load_embedder,
    store_folder,
)

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
    from toolbench_lib.retrieval.embedding import offline_model_dir

    emb = load_embedder(str(offline_model_dir()))
    assert emb.name == "model"
    assert np.allclose(emb.encode(["weather"]), embedder.encode(["weather"]), atol=1e-5)


class Counting:
    """The real embedder, counting the texts it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.encoded = inner, 0
        self.name, self.slug, self.dim = inner.name, inner.slug, inner.dim
        self.backend, self.cache_key = inner.backend, inner.cache_key

    def encode(self, texts, batch_size=64, progress=False):
        self.encoded += len(texts)
        return self.inner.encode(texts, batch_size=batch_size)


def test_cache_hit_encodes_nothing(embedder, tmp_path):
    c = Counting(embedder)
    first = embed_cached(c, TEXTS[:50], "t", tmp_path, chunk_size=20, progress=False)
    assert c.encoded == 50
    again = embed_cached(c, TEXTS[:50], "t", tmp_path, chunk_size=20, progress=False)
    assert c.encoded == 50 and np.array_equal(first, again)
    assert cached_complete(c, TEXTS[:50], tmp_path)


def test_killed_build_resumes(embedder, tmp_path):
    """A build killed with SIGKILL mid-way leaves whole packs; the rerun embeds only the rest."""
    script = textwrap.dedent(f"""
        import sys
        from toolbench_lib.retrieval.embedding import load_embedder, embed_cached
        texts = [{KILL_TEMPLATE!r}.format(i=i) for i in range({len(KILL_TEXTS)})]
        emb = load_embedder("{OFFLINE_MODEL}")
        embed_cached(emb, texts, "t", __import__("pathlib").Path({str(tmp_path)!r}), chunk_size=8,
                     progress=False, batch_size=8)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    folder = store_folder(embedder, tmp_path)
    n_chunks = len(KILL_TEXTS) // 8
    deadline = time.time() + 120
    while time.time() < deadline and len(list(folder.glob("pack-*.npz"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(folder.glob("pack-*.npz")))
    assert 3 <= done < n_chunks, "the build should have been killed part-way"
    c = Counting(embedder)
    resumed = embed_cached(c, KILL_TEXTS, "t", tmp_path, chunk_size=8, progress=False)
    assert c.encoded == 8 * (n_chunks - done)
    sample = [0, 5, 700, 1200, len(KILL_TEXTS) - 1]
    fresh = embedder.encode([KILL_TEXTS[i] for i in sample])
    assert np.allclose(resumed[sample], fresh, atol=1e-4)


def test_content_addressed_reuse_across_lists(embedder, tmp_path):
    """Another list sharing texts (reordered, with duplicates and new texts) embeds only the new ones."""
    c = Counting(embedder)
    first = embed_cached(c, TEXTS[:100], "registry", tmp_path, chunk_size=32, progress=False)
    assert c.encoded == 100
    grown = TEXTS[150:160] + TEXTS[:100][::-1] + [TEXTS[3], TEXTS[3]]
    second = embed_cached(c, grown, "queries", tmp_path, chunk_size=32, progress=False)
    assert c.encoded == 110
    assert np.array_equal(second[10:110], first[::-1])
    assert np.array_equal(second[-1], first[3]) and np.array_equal(second[-2], first[3])
    assert np.allclose(second[:10], embedder.encode(TEXTS[150:160]), atol=1e-5)


def test_backend_and_model_key_the_store(embedder, tmp_path):
    """Vectors of one backend are never served to another: the folder is keyed by both."""
    c = Counting(embedder)
    embed_cached(c, TEXTS[:10], "t", tmp_path, progress=False)
    c.backend, c.cache_key = "int8", "int8-s256"
    embed_cached(c, TEXTS[:10], "t", tmp_path, progress=False)
    assert c.encoded == 20
    assert store_folder(embedder, tmp_path).name == f"fp32-s{embedder.max_seq_length}"
    assert store_folder(c, tmp_path).name == "int8-s256"


def _garble_in_place(path, seed=0):
    """Overwrite a file's bytes in place with same-size garbage (keeps its size)."""
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    start = len(data) // 2
    data[start:start + 256] = rng.integers(0, 256, 256, dtype=np.uint8).tobytes()
    with open(path, "r+b") as f:
        f.write(bytes(data))


def test_corrupted_pack_is_detected_and_reembedded(embedder, tmp_path, caplog):
    c = Counting(embedder)
    good = embed_cached(c, TEXTS[:64], "t", tmp_path, chunk_size=32, progress=False)
    packs = sorted(store_folder(embedder, tmp_path).glob("pack-*.npz"))
    assert len(packs) == 2
    size = packs[0].stat().st_size
    _garble_in_place(packs[0])
    assert packs[0].stat().st_size == size
    EmbeddingStore._cache.clear()  # as a new process would see it
    with caplog.at_level("WARNING"):
        again = embed_cached(c, TEXTS[:64], "t", tmp_path, chunk_size=32, progress=False)
    assert c.encoded == 64 + 32
    assert [r.levelname for r in caplog.records if packs[0].name in r.getMessage()] == ["WARNING"]
    assert np.allclose(again, good, atol=1e-5)
    for p in store_folder(embedder, tmp_path).glob("pack-*.npz"):
        read_pack(p)  # every pack left verifies


def test_pack_whose_content_does_not_match_its_checksum_is_refused(tmp_path):
    """A well-formed file whose vectors changed after the checksum was taken (not only a torn file)."""
    path = write_pack(tmp_path, [b"k" * 16, b"j" * 16], np.eye(2, 4, dtype=np.float32), {"model": "m"})
    with np.load(path) as z:
        parts = {k: z[k] for k in z.files}
    parts["vectors"][0, 0] = 0.5
    np.savez(path, **parts)
    with pytest.raises(CorruptPackError, match="checksum"):
        read_pack(path)
    store = EmbeddingStore(tmp_path, 4)
    vecs, found = store.get([b"k" * 16])
    assert not found.any() and not path.exists()


def test_extra_query_file_embeds_only_its_new_texts(mini_toolbench, tmp_path, embedder):
    """A query file whose api_list brings new APIs (and shifts registry rows) embeds only those APIs."""
    from toolbench_lib.data.dataset import load_dataset
    from toolbench_lib.retrieval.index import registry_vectors

    before = load_dataset(mini_toolbench, processed_dir=tmp_path / "processed")
    c = Counting(embedder)
    registry_vectors(before, c, cache_dir=tmp_path / "emb", progress=False)
    assert c.encoded == len(set(before.texts))
    extra = [{"query": "Convert 10 USD to EUR", "query_id": 7, "api_list": [
        {"category_name": "Finance", "tool_name": "Currency Now", "api_name": "Convert",
         "api_description": "convert an amount between currencies", "required_parameters": [],
         "optional_parameters": [], "method": "GET"}], "relevant APIs": [["Currency Now", "Convert"]]}]
    (mini_toolbench / "test_instruction" / "G2_instruction.json").write_text(json.dumps(extra))
    after = load_dataset(mini_toolbench, processed_dir=tmp_path / "processed")
    new = set(after.texts) - set(before.texts)
    assert len(after.texts) > len(before.texts) and new
    vecs = registry_vectors(after, c, cache_dir=tmp_path / "emb", progress=False)
    assert c.encoded == len(set(before.texts)) + len(new)
    assert np.allclose(vecs, embedder.encode(after.texts), atol=1e-5)
