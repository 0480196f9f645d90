"""The part of the vLLM engine that owns a ``vllm.LLM``: it runs in the main process, or in a replica.

:class:`VllmCore` creates one ``LLM``, checks the installed vLLM against what the adapter relies
on (runners/vllm_engine.py says what that is, read from vLLM 0.32.0), and serves batches:
``generate(items)`` takes ``(messages, Sampling.to_dict())`` pairs and returns ChatResult dicts,
so it is the same call in-process and across a replica's pipe (runners/vllm_replicas.py).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import time
from typing import Any, Sequence

from .engine import EngineError
from .thinking import split_reply, template_thinks
from .types import ChatResult, Sampling
from .vllm_config import (MIN_VLLM, TESTED_VLLM, experts_in_config, generation_defaults, merge_sampling,
                          model_config_of, token_ids, version_tuple)


def _import_vllm(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"the vllm engine needs the '{module_name}' package: on a GPU node pip install "
                          f"-e '.[vllm]'; on a CPU-only machine make setup-vllm, then run CAPA from "
                          f".venv-vllm ({exc})") from exc


CPU_KV_CACHE_BYTES = 1 << 30
_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_bf16(cpuinfo: str | None = None) -> bool | None:
    """Whether this x86 CPU computes in bfloat16 natively (None: cannot tell, e.g. not Linux)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            return None
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), None)
    return None if flags is None else any(f in flags for f in _BF16_FLAGS)


def platform_defaults(vllm_module: str, llm_kwargs: dict[str, Any], cpuinfo: str | None = None) -> dict[str, Any]:
    """LLM() options this machine needs that the caller left unset (``dtype="auto"`` counts as unset).

    vLLM's CPU build:

    * ``enforce_eager=True``: compiling the model with torch.compile (vLLM's default) takes
      minutes on a few cores and needs a C++ toolchain at run time;
    * 1 GiB of KV cache (``kv_cache_memory_bytes``) unless ``VLLM_CPU_KVCACHE_SPACE`` sets it:
      otherwise the worker asks for ``gpu_memory_utilization`` of the machine's RAM and refuses
      to start when other processes hold part of it.  Enough for a 0.5B model's 4096-token
      contexts at CAPA's batch sizes; give more for bigger models;
    * ``dtype="float32"`` on an x86 CPU without bfloat16 instructions (AVX2 only): there
      bfloat16 weights are converted on every matmul, and the embedded model prefilled and
      decoded 3-4x slower in bfloat16 than in float32 on a 2-core AVX2 machine.
    """
    try:
        platform = importlib.import_module(f"{vllm_module}.platforms").current_platform
        on_cpu = bool(platform.is_cpu())
    except Exception:  # no platform module (a stand-in), or it cannot tell
        on_cpu = False
    if not on_cpu:
        return {}
    out: dict[str, Any] = {}
    if "enforce_eager" not in llm_kwargs:
        out["enforce_eager"] = True
    if "kv_cache_memory_bytes" not in llm_kwargs and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        out["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    if llm_kwargs.get("dtype", "auto") == "auto" and cpu_has_bf16(cpuinfo) is False:
        out["dtype"] = "float32"
    return out


class VllmCore:
    """Runs inside the process that owns the GPU(s): the main one, or a DP worker."""

    def __init__(self, model: str, llm_kwargs: dict[str, Any], chat_template_kwargs: dict[str, Any],
                 enable_thinking: bool | None, strip: bool, keep_thinking: bool, use_tqdm: bool,
                 vllm_module: str = "vllm", llm_factory: Any = None) -> None:
        vllm = _import_vllm(vllm_module)
        self.vllm = vllm
        self.version = getattr(vllm, "__version__", None)
        vt = version_tuple(self.version)
        if vt is not None and vt < MIN_VLLM:
            raise EngineError(f"vllm {self.version} is too old for this adapter (needs >= "
                              f"{'.'.join(map(str, MIN_VLLM))}); upgrade vllm: pip install -U vllm")
        self.tested = vt is not None and vt[:2] == version_tuple(TESTED_VLLM)
        if not self.tested:
            print(f"vllm engine: vllm {self.version} is installed; the adapter was checked against vllm "
                  f"{TESTED_VLLM} (runners/vllm_engine.py)", file=sys.stderr)
        self.SamplingParams = vllm.SamplingParams
        try:
            self.SamplingParams(temperature=0.5, top_p=0.9, top_k=-1, min_p=0.0, seed=0, stop=["x"], max_tokens=1)
        except TypeError as exc:
            raise EngineError(f"this vLLM's SamplingParams lacks a field the adapter uses ({exc}); upgrade vllm")
        self.platform_defaults = platform_defaults(vllm_module, llm_kwargs)
        llm_kwargs = {**llm_kwargs, **self.platform_defaults}
        try:
            self.llm = (llm_factory or vllm.LLM)(model=model, **llm_kwargs)
        except TypeError as exc:
            raise EngineError(f"vllm.LLM refused an option ({exc}); check the engine options / llm_kwargs "
                              f"against vllm {self.version}") from exc
        self.chat_template_kwargs = dict(chat_template_kwargs)
        self.strip = strip
        self.keep_thinking = keep_thinking
        self.use_tqdm = use_tqdm
        self.tokenizer = self.llm.get_tokenizer()
        self.thinking_on = enable_thinking is True or (
            enable_thinking is None and template_thinks(getattr(self.tokenizer, "chat_template", None)))
        # a reply without any think marker counts as cut inside the thinking only when the user
        # said thinking is on (templates that open <think> themselves); a template that merely
        # mentions <think> may belong to a model that answers directly
        self.expect_thinking = enable_thinking is True
        self.model_config = model_config_of(self.llm)
        mml = llm_kwargs.get("max_model_len") or getattr(self.model_config, "max_model_len", None)
        self.max_model_len = int(mml) if mml else None
        self.defaults = generation_defaults(self.llm, self.model_config, self.SamplingParams)
        hf = getattr(self.model_config, "hf_config", None)
        self.n_experts = experts_in_config(hf.to_dict() if hasattr(hf, "to_dict") else hf)
        try:
            params = inspect.signature(self.llm.chat).parameters
            accepts = "chat_template_kwargs" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        except (TypeError, ValueError):
            accepts = True
        if self.chat_template_kwargs and not accepts:
            raise EngineError(f"this vLLM's LLM.chat() (vllm {self.version}) takes no chat_template_kwargs "
                              "(needed for enable_thinking / date_string); upgrade vllm: pip install -U vllm")

    def prompt_len(self, messages: list[dict[str, str]]) -> int | None:
        try:
            enc = self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                                     **self.chat_template_kwargs)
            return len(token_ids(enc))
        except Exception:
            return None  # unknown: let vLLM check it (a failure then falls back to one-by-one)

    def info(self) -> dict[str, Any]:
        return {"max_model_len": self.max_model_len, "generation_config_defaults": dict(self.defaults),
                "vllm_version": self.version, "vllm_tested": TESTED_VLLM, "thinking_on": self.thinking_on,
                "n_experts": self.n_experts, "platform_defaults": dict(self.platform_defaults)}

    def _chat(self, convs: list[list[dict[str, str]]], params: list[Any]) -> list[Any]:
        kwargs: dict[str, Any] = {"sampling_params": params, "use_tqdm": self.use_tqdm}
        if self.chat_template_kwargs:
            kwargs["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        outs = self.llm.chat(convs, **kwargs)
        if len(outs) != len(convs):
            raise EngineError(f"vLLM returned {len(outs)} outputs for {len(convs)} conversations")
        return list(outs)

    def _parse(self, out: Any, s: Sampling, n_prompt: int | None, latency: float) -> dict[str, Any]:
        comp = out.outputs[0]
        reason = getattr(comp, "finish_reason", None)
        out_ids = getattr(comp, "token_ids", None)
        prompt_ids = getattr(out, "prompt_token_ids", None)
        n_prompt = len(prompt_ids) if prompt_ids is not None else int(n_prompt or 0)
        finish = {"stop": "stop", "length": "length"}.get(str(reason))
        if finish is None:
            return ChatResult.failure(f"vLLM finished with reason {reason!r}", prompt_tokens=n_prompt,
                                      latency_s=latency).to_dict()
        rep = split_reply(getattr(comp, "text", "") or "", finish, stop=s.stop, strip=self.strip,
                          stop_after_fence=s.stop_after_fence,
                          expect_thinking=self.expect_thinking)
        return ChatResult(text=rep.text, finish_reason=rep.finish_reason, prompt_tokens=n_prompt,
                          completion_tokens=len(out_ids) if out_ids is not None else 0,
                          cached_tokens=int(getattr(out, "num_cached_tokens", None) or 0), latency_s=latency,
                          cut_in_thinking=rep.cut_in_thinking,
                          thinking=rep.thinking if self.keep_thinking and rep.thinking else None).to_dict()

    def generate(self, items: Sequence[tuple[list[dict[str, str]], dict[str, Any]]]) -> list[dict[str, Any]]:
        """``items``: (messages, Sampling as dict) pairs -> ChatResult dicts, in order."""
        t0 = time.perf_counter()
        results: list[dict[str, Any] | None] = [None] * len(items)
        send: list[int] = []
        alone: list[int] = []  # prompts that do not fit: vLLM refuses them, and would fail the batch
        params: dict[int, Any] = {}
        lens: list[int | None] = []
        samplings = [Sampling.from_dict(sdict) for _, sdict in items]
        for i, ((msgs, _), s) in enumerate(zip(items, samplings)):
            n = self.prompt_len(msgs)
            lens.append(n)
            too_long = n is not None and self.max_model_len is not None and n >= self.max_model_len
            room = self.max_model_len - n if (self.max_model_len and n is not None and not too_long) else None
            try:
                params[i] = self.SamplingParams(**merge_sampling(self.defaults, s, room=room,
                                                                 send_stop=not self.thinking_on))
            except Exception as exc:
                results[i] = ChatResult.failure(f"invalid sampling parameters: {exc}").to_dict()
                continue
            (alone if too_long else send).append(i)
        if send:
            try:
                outs = self._chat([items[i][0] for i in send], [params[i] for i in send])
                latency = time.perf_counter() - t0
                for i, out in zip(send, outs):
                    results[i] = self._parse(out, samplings[i], lens[i], latency)
            except Exception:
                alone = send + alone  # one bad request must not sink the batch: retry one at a time
        for i in alone:
            t1 = time.perf_counter()
            try:
                out = self._chat([items[i][0]], [params[i]])[0]
                results[i] = self._parse(out, samplings[i], lens[i], time.perf_counter() - t1)
            except Exception as exc:
                results[i] = ChatResult.failure(f"vLLM refused this request: {type(exc).__name__}: {exc}",
                                                prompt_tokens=lens[i] or 0,
                                                latency_s=time.perf_counter() - t1).to_dict()
        return results  # type: ignore[return-value]

    def metrics(self) -> dict[str, Any]:
        """vLLM's counters summed by name (e.g. ``vllm:prefix_cache_queries`` / ``_hits``, in tokens)."""
        getter = getattr(self.llm, "get_metrics", None)
        if not callable(getter):
            return {}
        try:
            out: dict[str, Any] = {}
            for m in getter():
                name, value = getattr(m, "name", None), getattr(m, "value", None)
                if name is not None and isinstance(value, (int, float)):
                    out[name] = out.get(name, 0) + value
            return out
        except Exception:
            return {}
