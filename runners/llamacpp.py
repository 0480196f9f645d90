"""Embedded CPU engine on llama-cpp-python.

The prompt is rendered with the chat template stored in the GGUF (ChatML when the file
has none), tokenized once, checked against ``n_ctx`` (an over-long conversation ends as a
``length`` result), and completed with ``Llama.create_completion`` on the token list.
llama-cpp-python keeps the previous prompt's KV cache and re-evaluates only the suffix
after the longest common prefix, so requests are served in prefix order (conversations
sharing a system prompt / earlier turns run back to back).  On top of that, a small
KV-state cache (``state_cache_mb``, default 1024; 0 turns it off) saves the sequence's KV
state after each reply (~12 KB per token for the 0.5B model, a few ms to save or restore)
and restores the saved state with the longest common prefix before the next request, so a
conversation's next turn, or a branch of it, continues from where it was instead of
recomputing its history after other conversations ran in between.  (llama-cpp-python's own
``LlamaRAMCache`` is not used: its saved states also copy a logits buffer of up to
``n_batch x n_vocab`` floats, ~300 MB each for Qwen's vocabulary.)

Greedy requests (temperature 0) are decoded with prompt-lookup drafts
(:mod:`runners.lookup_decoding`; ``lookup_draft`` tokens per step at most, default 16, 0 turns it
off): the reply is still the greedy one, in fewer, batched steps when it repeats its context, as a
revised submission does.  Other requests go through ``create_completion``.

Sampling: temperature, top_p, top_k, min_p and the per-request seed go to llama.cpp
(``create_completion(seed=...)`` reseeds its sampler, so distinct seeds give independent
samples); a field left None is off (top_p 1, top_k 0, min_p 0), temperature None is
llama.cpp's 0.8; the repeat penalty is off.  Stop strings go to llama.cpp and are applied
again to the visible text; a ``<think>`` block, should a model write one, is stripped.

Greedy decoding is deterministic for a given sequence of requests; reusing a cached prefix
evaluates fewer tokens in a batch, which can flip near-tie tokens compared with evaluating
the whole prompt at once, so the same prompt may get a slightly different reply depending
on what ran before it.  Reruns reproduce replies through the completion cache.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from .llamacpp_build import build_info, cpu_from_cpuinfo  # noqa: F401  (re-exported)
from .lookup_decoding import DEFAULT_N_DRAFT, LookupStats, common_prefix, greedy_lookup_decode
from .model_assets import ASSETS, ensure_model, find_asset
from .cpus import usable_cores
from .thinking import cut_after_fence, split_reply
from .types import ChatRequest, ChatResult

DEFAULT_TEMPERATURE = 0.8  # llama.cpp's own default, used when Sampling.temperature is None

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class _KVStateCache:
    """LRU map from token sequences to saved KV states of llama.cpp sequence 0."""

    def __init__(self, llm: Any, capacity_bytes: int) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.llm = llm
        self.capacity = capacity_bytes
        self.entries: OrderedDict[int, tuple[np.ndarray, bytes]] = OrderedDict()
        self.size = 0
        self._next = 0
        self.restores = 0
        self.saves = 0

    @staticmethod
    def supported() -> bool:
        try:
            import llama_cpp
        except ImportError:  # pragma: no cover
            return False
        return all(hasattr(llama_cpp, f) for f in ("llama_state_seq_get_size", "llama_state_seq_get_data",
                                                  "llama_state_seq_set_data", "llama_get_memory",
                                                  "llama_memory_seq_rm"))

    def best(self, tokens: np.ndarray) -> tuple[int | None, int]:
        best_key, best_len = None, 0
        for key, (ids, _) in self.entries.items():
            n = common_prefix(ids, tokens)
            if n > best_len:
                best_key, best_len = key, n
        return best_key, best_len

    def save(self) -> None:
        llm, lib = self.llm, self._lib
        n_tokens = int(llm.n_tokens)
        if n_tokens == 0:
            return
        size = int(lib.llama_state_seq_get_size(llm.ctx, 0))
        if size <= 0 or size > self.capacity:
            return
        buf = (ctypes.c_uint8 * size)()
        written = int(lib.llama_state_seq_get_data(llm.ctx, buf, size, 0))
        if written <= 0:
            return
        ids = np.array(llm.input_ids[:n_tokens], dtype=np.intc)
        # a saved state covers every prefix of its tokens: drop entries it extends
        for key in [k for k, (old, _) in self.entries.items()
                    if len(old) <= n_tokens and common_prefix(old, ids) == len(old)]:
            self.size -= len(self.entries.pop(key)[1])
        data = bytes(buf[:written])
        self.entries[self._next] = (ids, data)
        self._next += 1
        self.size += len(data)
        self.saves += 1
        while self.size > self.capacity and self.entries:
            _, (_, old) = self.entries.popitem(last=False)
            self.size -= len(old)

    def restore(self, key: int) -> bool:
        llm, lib = self.llm, self._lib
        ids, data = self.entries[key]
        self.entries.move_to_end(key)
        mem = lib.llama_get_memory(llm.ctx)
        if mem is not None:
            lib.llama_memory_seq_rm(mem, 0, -1, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(lib.llama_state_seq_set_data(llm.ctx, buf, len(data), 0)) != len(data):
            llm.reset()
            return False
        llm.input_ids[: len(ids)] = ids
        llm.n_tokens = len(ids)
        llm._requires_eval = True  # logits are stale: generate() re-evaluates at least one token
        self.restores += 1
        return True


class LlamaCppEngine:
    name = "llamacpp"

    def __init__(
        self,
        model: str | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_batch: int = 512,
        seed: int = 0,
        state_cache_mb: int = 1024,
        lookup_draft: int = DEFAULT_N_DRAFT,
        chat_template: str | None = None,
        verbose: bool = False,
        llama_factory: Any = None,
        **llama_kwargs: Any,
    ) -> None:
        if int(lookup_draft) < 0:
            raise ValueError(f"lookup_draft must be >= 0 (0 turns prompt-lookup drafts off), got {lookup_draft!r}")
        self.model_spec = model or "default"
        self.model_path = ensure_model(model)
        asset = find_asset(self.model_spec)
        self.model = asset.key if asset is not None else os.path.basename(str(self.model_path))
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or usable_cores())
        self.state_cache_mb = int(state_cache_mb)
        self.lookup_draft = int(lookup_draft)
        self.lookup_stats = LookupStats()
        if llama_factory is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise ImportError("the llamacpp engine needs llama-cpp-python: "
                                  "pip install llama-cpp-python==0.3.36") from exc
            llama_factory = Llama
        self.llm = llama_factory(
            model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
            n_threads_batch=self.n_threads, n_batch=n_batch, seed=seed, verbose=verbose,
            **llama_kwargs,
        )
        self._states: _KVStateCache | None = None
        if self.state_cache_mb > 0 and llama_factory_is_real(self.llm) and _KVStateCache.supported():
            self._states = _KVStateCache(self.llm, self.state_cache_mb << 20)
        self._setup_template(chat_template)

    # -- prompt formatting ---------------------------------------------------------------
    def _setup_template(self, chat_template: str | None) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        meta = getattr(self.llm, "metadata", {}) or {}
        template = chat_template or meta.get("tokenizer.chat_template")
        self.template_source = "argument" if chat_template else ("gguf" if template else "chatml")
        template = template or CHATML_TEMPLATE

        def tok_text(tid: int) -> str:
            if tid is None or tid < 0:
                return ""
            return self.llm._model.token_get_text(tid)

        eos_id = self.llm.token_eos()
        bos_id = self.llm.token_bos()
        self.eos_token = tok_text(eos_id)
        self.bos_token = tok_text(bos_id)
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=self.eos_token,
                                              bos_token=self.bos_token, add_generation_prompt=True)

    def render(self, request: ChatRequest) -> str:
        return self._formatter(messages=request.message_dicts()).prompt

    def prompt_tokens(self, request: ChatRequest) -> list[int]:
        prompt = self.render(request)
        # the template writes BOS itself when the model wants one (added_special)
        return self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    # -- engine interface ----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name, "model": self.model, "model_path": str(self.model_path),
            "n_ctx": self.n_ctx, "n_threads": self.n_threads, "chat_template": self.template_source,
            "state_cache_mb": self.state_cache_mb if self._states is not None else 0,
            "lookup_draft": self._lookup_n(),
            "sampler": {"unset": "temperature 0.8, top_p/top_k/min_p off", "repeat_penalty": 1.0},
            "build": build_info(),
        }

    def cache_identity(self) -> dict[str, Any]:
        asset = find_asset(self.model_spec)
        # replies depend on the build's kernels: a cache made by another build must not answer
        ident: dict[str, Any] = {"n_ctx": self.n_ctx, "kernels": build_info()["system_info"]}
        if self._lookup_n():  # batched verification may resolve a near-tie the other way
            ident["lookup_draft"] = self._lookup_n()
        if asset is not None and asset.sha256:
            ident["sha256"] = asset.sha256
        else:  # a local file: tell apart different files that share a name
            try:
                ident["size"] = os.path.getsize(self.model_path)
            except OSError:
                pass
        return ident

    def _one(self, request: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        try:
            tokens = self.prompt_tokens(request)
        except Exception as exc:
            return ChatResult.failure(f"prompt formatting failed: {type(exc).__name__}: {exc}",
                                      latency_s=time.perf_counter() - t0)
        n_prompt = len(tokens)
        if n_prompt >= self.n_ctx:
            return ChatResult(text="", finish_reason="length", prompt_tokens=n_prompt, completion_tokens=0,
                              cached_tokens=0, latency_s=time.perf_counter() - t0)
        arr = np.asarray(tokens, dtype=np.intc)
        cached = 0
        if llama_factory_is_real(self.llm):
            cached = common_prefix(np.asarray(self.llm.input_ids[: self.llm.n_tokens]), arr)
        if self._states is not None:
            key, n = self._states.best(arr)
            if key is not None and n > cached + 8 and self._states.restore(key):
                cached = n
        cached = min(cached, max(0, n_prompt - 1))
        s = request.sampling
        stop = [self.eos_token] if self.eos_token else []
        stop += [x for x in s.stop if x not in stop]
        if s.temperature == 0 and self._lookup_n():
            return self._greedy(tokens, s, stop, cached, t0)
        try:
            out = self.llm.create_completion(
                prompt=tokens,
                max_tokens=min(s.max_tokens, self.n_ctx - n_prompt),
                temperature=DEFAULT_TEMPERATURE if s.temperature is None else s.temperature,
                top_p=1.0 if s.top_p is None else s.top_p,
                top_k=s.top_k or 0,
                min_p=s.min_p or 0.0,
                repeat_penalty=1.0,
                seed=s.seed,
                stop=stop,
                **self._fence_stop(n_prompt, s.stop_after_fence),
            )
        except Exception as exc:
            return ChatResult.failure(f"llama.cpp generation failed: {type(exc).__name__}: {exc}",
                                      prompt_tokens=n_prompt, latency_s=time.perf_counter() - t0)
        if self._states is not None:
            self._states.save()
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        rep = split_reply(choice.get("text") or "", "length" if choice.get("finish_reason") == "length" else "stop",
                          stop=s.stop, stop_after_fence=s.stop_after_fence)
        return ChatResult(
            text=rep.text,
            finish_reason=rep.finish_reason,
            cut_in_thinking=rep.cut_in_thinking,
            prompt_tokens=int(usage.get("prompt_tokens", n_prompt)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cached_tokens=cached,
            latency_s=time.perf_counter() - t0,
        )

    def _lookup_n(self) -> int:
        """Draft tokens per step for greedy requests; 0 when off, when the model is not llama.cpp's,
        or when its memory cannot drop rejected tokens (recurrent and hybrid models)."""
        llm = self.llm
        if not llama_factory_is_real(llm) or getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False):
            return 0
        return self.lookup_draft

    def _greedy(self, tokens: list[int], s: Any, stop: list[str], cached: int, t0: float) -> ChatResult:
        """A greedy request, decoded with prompt-lookup drafts (:mod:`runners.lookup_decoding`)."""
        n_prompt = len(tokens)
        needle = s.stop_after_fence
        try:
            dec = greedy_lookup_decode(
                self.llm, tokens, max_tokens=min(s.max_tokens, self.n_ctx - n_prompt), stop=stop,
                done=(lambda text: cut_after_fence(text, needle) is not None) if needle else None,
                n_draft=self.lookup_draft, stats=self.lookup_stats)
        except Exception as exc:
            self.llm.reset()
            return ChatResult.failure(f"llama.cpp generation failed: {type(exc).__name__}: {exc}",
                                      prompt_tokens=n_prompt, latency_s=time.perf_counter() - t0)
        if self._states is not None:
            self._states.save()
        rep = split_reply(dec.text, dec.finish_reason, stop=s.stop, stop_after_fence=needle)
        return ChatResult(text=rep.text, finish_reason=rep.finish_reason, cut_in_thinking=rep.cut_in_thinking,
                          prompt_tokens=n_prompt, completion_tokens=len(dec.tokens), cached_tokens=cached,
                          latency_s=time.perf_counter() - t0)

    def _fence_stop(self, n_prompt: int, needle: str | None) -> dict[str, Any]:
        """Stop decoding once a code block holding ``needle`` has closed (``stop_after_fence``):
        the tokens after it would be cut anyway. Checked only when the newest token has a backtick."""
        if not needle or not hasattr(self.llm, "detokenize"):
            return {}
        from llama_cpp import StoppingCriteriaList

        llm = self.llm

        def closed(ids, _logits) -> bool:
            if len(ids) <= n_prompt or b"`" not in llm.detokenize([int(ids[-1])]):
                return False
            text = llm.detokenize([int(t) for t in ids[n_prompt:]]).decode("utf-8", "replace")
            return cut_after_fence(text, needle) is not None

        return {"stopping_criteria": StoppingCriteriaList([closed])}

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        # serve in prefix order so the KV cache's common prefix is reused; answer in input order
        order = sorted(range(len(requests)), key=lambda i: requests[i].messages)
        results: list[ChatResult | None] = [None] * len(requests)
        for i in order:
            results[i] = self._one(requests[i])
        return results  # type: ignore[return-value]

    def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if callable(close):
            close()


def llama_factory_is_real(llm: Any) -> bool:
    return hasattr(llm, "ctx") and hasattr(llm, "input_ids")


__all__ = ["LlamaCppEngine", "ASSETS"]
