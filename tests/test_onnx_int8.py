"""The int8 ONNX Runtime embedder: exported locally from the packaged weights, checked against fp32."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from toolbench_lib.retrieval.embedding import load_embedder
from toolbench_lib.retrieval.onnx_int8 import OnnxSentenceEncoder, export_folder, load_int8_model

TEXTS = [
    "Weather Forecast (Weather): five-day forecast for any city | Get Forecast: daily highs and lows",
    "Hotels (Travel): search hotel offers | Search Hotels: parameters: city, checkin, checkout",
    "Crypto Prices (Finance): live quotes | Get Coin Price: price of a coin in a fiat currency",
    "a",
    "Translate (Text): translate text between 100 languages | Translate: parameters: text, target " * 12,
]


@pytest.fixture(scope="module")
def int8(embedder):
    return load_int8_model(embedder)


def test_fp32_onnx_graph_matches_torch(embedder, int8):
    """The exported graph plus our tokenise / mean-pool / normalise path reproduces sentence-transformers."""
    onnx32 = OnnxSentenceEncoder(int8.folder, "model_fp32.onnx")
    assert np.allclose(onnx32.encode(TEXTS, batch_size=2), embedder.encode(TEXTS), atol=1e-4)


def test_int8_is_close_to_fp32_and_unit_norm(embedder, int8):
    q, f = int8.encode(TEXTS), embedder.encode(TEXTS)
    assert q.shape == f.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    cos = np.sum(q * f, axis=1)
    assert cos.min() > 0.97, cos
    assert not np.allclose(q, f, atol=1e-4)  # it is a different (quantised) model


def test_length_sorted_batches_keep_the_input_order(int8):
    """Batches are cut from the texts sorted by length, so the input order does not change them."""
    assert np.array_equal(int8.encode(TEXTS[::-1], batch_size=2)[::-1], int8.encode(TEXTS, batch_size=2))
    # activations are quantised per batch, so a batch's other texts move a vector only slightly
    one_by_one = np.concatenate([int8.encode([t]) for t in TEXTS])
    assert np.sum(one_by_one * int8.encode(TEXTS, batch_size=2), axis=1).min() > 0.99


def test_manifest_records_quantisation_and_versions(int8):
    m = int8.manifest
    assert m["quant"] == {"weights": "QInt8", "per_channel": True, "reduce_range": True}
    assert int8.variant == "qint8-pc-rr-v2"
    assert m["max_seq_length"] == 256 and m["dim"] == 384
    assert {"onnxruntime", "torch", "transformers"} <= set(m["versions"])
    assert export_folder("all-MiniLM-L6-v2") == int8.folder


@pytest.mark.parametrize("name", ["model_int8.onnx", "tokenizer.json", "manifest.json"])
def test_a_tampered_export_file_is_refused(int8, tmp_path, name):
    """One flipped byte in any file of the export (the model, the tokenizer, the manifest) is refused."""
    copy = tmp_path / "export"
    shutil.copytree(int8.folder, copy)
    path = copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="delete"):
        OnnxSentenceEncoder(copy)
    assert "tokenizer.json" in int8.manifest["files"]


def test_load_embedder_int8_backend(embedder):
    emb = load_embedder("all-MiniLM-L6-v2", backend="int8")
    assert (emb.name, emb.backend, emb.cache_key) == ("all-MiniLM-L6-v2", "int8", "int8-qint8-pc-rr-v2-s256")
    assert emb.dim == 384
    with pytest.raises(ValueError, match="embedding backend"):
        load_embedder("all-MiniLM-L6-v2", backend="fp16")
