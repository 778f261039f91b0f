"""The int8 ONNX Runtime path of a sentence-transformers model, exported and quantised once."""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data.atomic import file_sha256, read_verified, write_checksum
from ..data.paths import CACHE_DIR

log = logging.getLogger(__name__)

EXPORT_VERSION = 2  # 2: every exported file's sha256 in the manifest, the manifest's in its sidecar
OPSET = 17


@dataclass(frozen=True)
class QuantSettings:
    """ONNX Runtime dynamic quantisation of the linear layers' weights."""

    weights: str = "QInt8"
    per_channel: bool = True
    reduce_range: bool = True

    @property
    def tag(self) -> str:
        pc, rr = "-pc" if self.per_channel else "", "-rr" if self.reduce_range else ""
        return f"{self.weights.lower()}{pc}{rr}"


DEFAULT_QUANT = QuantSettings()


def export_folder(slug: str, quant: QuantSettings = DEFAULT_QUANT, root: Path | None = None) -> Path:
    return (root or CACHE_DIR / "models" / "onnx") / f"{slug}-{quant.tag}-v{EXPORT_VERSION}"


def _mean_pooling_model(st_model) -> tuple[object, object, int]:
    """(transformers model, tokenizer, max_seq_length) of a Transformer + mean Pooling (+ Normalize) model."""
    mods = list(st_model)
    names = [type(m).__name__ for m in mods]
    pooling = mods[1] if len(mods) > 1 else None
    mode = getattr(pooling, "pooling_mode", None) or (
        "mean" if getattr(pooling, "pooling_mode_mean_tokens", False) else None)
    if names[:2] != ["Transformer", "Pooling"] or mode != "mean" or len(mods) > 3:
        raise ValueError(f"int8 export supports Transformer + mean Pooling (+ Normalize) models, not {names}")
    transformer = mods[0]
    hf = getattr(transformer, "auto_model", None) or transformer.model
    return hf, transformer.tokenizer, int(st_model.max_seq_length)


def export_int8(st_model, folder: Path, dim: int, quant: QuantSettings = DEFAULT_QUANT) -> Path:
    """Export ``st_model`` to ONNX and quantise it into ``folder`` (built aside, then renamed in)."""
    import onnxruntime
    import torch
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    class TokenEmbeddings(torch.nn.Module):
        """The transformer called with keyword inputs, returning its last hidden state."""

        def __init__(self, hf) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, *args):
            return self.hf(**dict(zip(inputs, args, strict=True))).last_hidden_state

    hf, tokenizer, max_len = _mean_pooling_model(st_model)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        tokenizer.save_pretrained(tmp)
        sample = tokenizer(["an example text", "a second, longer example text"], padding=True,
                           return_tensors="pt")
        inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
        axes = {n: {0: "batch", 1: "tokens"} for n in [*inputs, "token_embeddings"]}
        graph = TokenEmbeddings(hf.float().cpu().eval())
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter: no onnxscript
            torch.onnx.export(graph, tuple(sample[n] for n in inputs), str(tmp / "model_fp32.onnx"),
                              input_names=inputs, output_names=["token_embeddings"], dynamic_axes=axes,
                              opset_version=OPSET, dynamo=False, do_constant_folding=True)
        quantize_dynamic(tmp / "model_fp32.onnx", tmp / "model_int8.onnx",
                         weight_type=getattr(QuantType, quant.weights), per_channel=quant.per_channel,
                         reduce_range=quant.reduce_range)
        manifest = {"export_version": EXPORT_VERSION, "quant": asdict(quant), "inputs": inputs,
                    "max_seq_length": max_len, "dim": int(dim),
                    "files": {f.name: file_sha256(f) for f in sorted(tmp.iterdir()) if f.is_file()},
                    "versions": {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__,
                                 "transformers": transformers.__version__}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        write_checksum(tmp / "manifest.json")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished the same export first
            log.info("int8 export %s already written by another process", folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


class OnnxSentenceEncoder:
    """A sentence-transformers stand-in: tokenise, ONNX transformer, mean-pool, normalise (length-sorted)."""

    def __init__(self, folder: Path, file: str = "model_int8.onnx", threads: int | None = None) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.folder, path = Path(folder), Path(folder) / file
        data = read_verified(self.folder / "manifest.json")  # then every file it lists, tokenizer included
        self.manifest = json.loads(data) if data is not None else {}
        listed = self.manifest.get("files", {})
        here = {p.name for p in self.folder.iterdir() if p.is_file() and not p.name.startswith("manifest")}
        if data is None or set(listed) != here or any(file_sha256(self.folder / f) != sha
                                                      for f, sha in listed.items()):
            raise ValueError(f"the int8 export {self.folder} does not match its recorded sha256s (or was "
                             f"made by an older version): delete {self.folder} to export it again")
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or 0
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.inputs = list(self.manifest["inputs"])
        self.max_seq_length = int(self.manifest["max_seq_length"])
        self.device = "cpu"

    @property
    def variant(self) -> str:
        """The export's quantisation tag and version, e.g. ``qint8-pc-rr-v1``."""
        return f"{QuantSettings(**self.manifest['quant']).tag}-v{self.manifest['export_version']}"

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.manifest["dim"])

    def encode(self, texts: Sequence[str], batch_size: int = 64, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        texts = [str(t).strip() for t in texts]
        out = np.zeros((len(texts), self.get_sentence_embedding_dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start:start + batch_size]
            enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                 max_length=self.max_seq_length, return_tensors="np")
            feeds = {n: enc[n].astype(np.int64) for n in self.inputs}
            tokens = self.session.run(None, feeds)[0]
            mask = enc["attention_mask"][..., None].astype(np.float32)
            pooled = (tokens * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            if normalize_embeddings:
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[idx] = pooled
        return out


def load_int8_model(embedder) -> OnnxSentenceEncoder:
    """The int8 encoder of an fp32 :class:`~.embedding.Embedder`, exported on first use."""
    folder = export_folder(embedder.slug)
    if not (folder / "manifest.json").exists():
        log.info("exporting %s to int8 ONNX (%s) in %s", embedder.name, DEFAULT_QUANT.tag, folder)
        export_int8(embedder.model, folder, embedder.dim)
    return OnnxSentenceEncoder(folder)
