"""Local-model generation throughput: one sequence at a time against ``n_seq`` decoded together in one
llama.cpp context (the same greedy loop, model, stub prompts and threads)."""

from __future__ import annotations

import ctypes
import fcntl
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..llm.local import _default_threads
from ..llm.local_model import MODEL_NAME, resolve_gguf
from ..llm.prompts import STUB_PROMPT
from .core import BenchLine


class LockBusy(RuntimeError):
    """The shared lock stayed held by another process for the whole wait."""


@contextmanager
def file_lock(path: str | None, timeout_s: float = 120.0):
    """Hold an exclusive ``flock`` on ``path`` (shared with the ``flock`` command) while the block runs;
    :class:`LockBusy` when another process holds it for ``timeout_s``."""
    if not path:
        yield
        return
    with open(path, "a+") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockBusy(f"{path} held by another process for {timeout_s:.0f} s") from None
                time.sleep(1.0)
        yield  # closing the file releases the lock


def chat_prompt(system: str, user: str) -> str:
    """Qwen2.5's chat format (ChatML), as its GGUF chat template renders it."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


class BatchedGreedy:
    """Greedy decoding of up to ``n_seq`` sequences at once in one llama.cpp context."""

    def __init__(self, llama, n_seq: int, n_ctx: int, n_threads: int) -> None:
        import llama_cpp

        self.lc = llama_cpp
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = 512
        params.n_seq_max = n_seq
        params.n_threads = params.n_threads_batch = n_threads
        params.kv_unified = True
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(llama._model.model, params)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self.vocab = llama_cpp.llama_model_get_vocab(llama._model.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)

    def close(self) -> None:
        self.lc.llama_batch_free(self.batch)
        self.lc.llama_free(self.ctx)

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """Decode ``(token, pos, seq, want_logits)`` items in batches of at most 512."""
        for start in range(0, len(items), 512):
            part = items[start:start + 512]
            b = self.batch
            b.n_tokens = len(part)
            for i, (tok, pos, seq, logits) in enumerate(part):
                b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
                b.seq_id[i][0] = seq
                b.logits[i] = 1 if logits else 0
            if self.lc.llama_decode(self.ctx, b) != 0:
                raise RuntimeError("llama_decode failed")

    def _argmax(self, i: int) -> int:
        ptr = self.lc.llama_get_logits_ith(self.ctx, i)
        return int(np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                         shape=(self.n_vocab,)).argmax())

    def generate(self, prompts: list[list[int]], max_new: int) -> tuple[int, float]:
        """Generate up to ``max_new`` tokens for each prompt; returns (tokens generated, decode seconds)."""
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        self._decode([(t, p, s, False) for s, toks in enumerate(prompts) for p, t in enumerate(toks[:-1])])
        self._decode([(toks[-1], len(toks) - 1, s, True) for s, toks in enumerate(prompts)])
        nxt = [self._argmax(i) for i in range(len(prompts))]
        pos = [len(t) for t in prompts]
        active = list(range(len(prompts)))
        made = 0
        t0 = time.perf_counter()
        for _ in range(max_new):
            active = [s for s in active if not self.lc.llama_vocab_is_eog(self.vocab, nxt[s])]
            if not active:
                break
            self._decode([(nxt[s], pos[s], s, True) for s in active])
            made += len(active)
            for i, s in enumerate(active):
                pos[s] += 1
                nxt[s] = self._argmax(i)
        return made, time.perf_counter() - t0


def _timed(gen, prompts: list[list[int]], n_seq: int, max_new: int) -> tuple[int, float, float]:
    """``(tokens generated, decode seconds, wall seconds)`` of the prompts, ``n_seq`` at a time."""
    t0, made, decode = time.perf_counter(), 0, 0.0
    for start in range(0, len(prompts), n_seq):
        m, d = gen.generate(prompts[start:start + n_seq], max_new)
        made, decode = made + m, decode + d
    return made, decode, time.perf_counter() - t0


def bench_local_llm(n_seq: int = 4, max_new: int = 48, n_prompts: int = 4, lock: str | None = None,
                    queries: list[str] | None = None, lock_timeout_s: float = 120.0) -> BenchLine:
    """Generated tokens/s (prompt evaluation included) of 1 sequence at a time against ``n_seq`` together."""
    import llama_cpp

    path = Path(resolve_gguf(None))
    threads = _default_threads()
    queries = (queries or [])[:n_prompts]
    if len(queries) < n_prompts:
        raise ValueError(f"need {n_prompts} queries")
    with file_lock(lock, lock_timeout_s):
        llama = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_threads=threads, verbose=False)
        try:
            prompts = [llama.tokenize(chat_prompt(STUB_PROMPT.system, STUB_PROMPT.render(query=q)).encode(),
                                      add_bos=False, special=True) for q in queries]
            n_ctx = sum(len(p) for p in prompts) + n_prompts * max_new + 64
            single = BatchedGreedy(llama, 1, max(len(p) for p in prompts) + max_new + 64, threads)
            multi = BatchedGreedy(llama, n_seq, n_ctx, threads)
            try:
                single.generate(prompts[:1], 4)  # warm-up
                (made_1, dec_1, wall_1), (made_n, dec_n, wall_n) = (
                    _timed(gen, prompts, n, max_new) for gen, n in ((single, 1), (multi, n_seq)))
            finally:
                single.close()
                multi.close()
        finally:
            llama.close()
    details = {"model": MODEL_NAME, "threads": threads, "prompts": n_prompts, "max_new_tokens": max_new,
               "prompt_tokens_mean": round(float(np.mean([len(p) for p in prompts])), 1),
               "decode_only_tokens_per_s": f"{made_1 / dec_1:.1f} vs {made_n / dec_n:.1f}",
               "tokens": f"{made_1} vs {made_n}"}
    return BenchLine("local LLM generated tokens/s (greedy, stub prompts)", "tok/s", "1 sequence",
                     f"{n_seq} sequences batched", made_1 / wall_1, made_n / wall_n, target=1.5,
                     details=details)
