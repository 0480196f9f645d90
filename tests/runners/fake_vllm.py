"""An in-process stand-in for the parts of ``vllm`` the adapter uses, with vLLM's signatures.

Mirrors vLLM 0.32.0 as installed by ``make setup-vllm`` (``vllm/entrypoints/llm.py``,
``vllm/sampling_params.py``, ``vllm/engine/arg_utils.py``, ``vllm/v1/engine/input_processor.py``;
the adapter's docstring says what it relies on).  tests/runners/test_vllm_real.py compares these
signatures with the installed vLLM's, and checks each behaviour below on the real engine:

* ``LLM.__init__`` has the real keyword parameters; its ``**kwargs`` go to ``EngineArgs``,
  so a name that is neither is a TypeError, as in vLLM.  ``data_parallel_size > 1`` raises
  ValueError (vLLM refuses it for single-process use).  ``disable_log_stats`` defaults to
  True unless given, as in vLLM.
* ``LLM.chat`` has the real parameter list and no ``**kwargs``.
* ``SamplingParams`` takes only its real fields (TypeError otherwise), validates ranges
  (``VLLMValidationError``, which is not a ValueError), and turns greedy requests
  (temperature < 1e-5) into top_p=1, top_k=0, min_p=0.

Behaviour: the tokenizer counts one token per whitespace-separated word of each message
plus 4 per message.  Replies are ``"answer to: <last user message>"`` (``REPLY`` can be
replaced); a sampled reply (temperature > 0) ends with a tag drawn from its seed.  Models
whose name contains ``Qwen3`` think by default (``enable_thinking`` turns it off) and write
``<think>pondering ...</think>`` first.  Stop strings are applied to the whole output,
thinking included, exactly where vLLM applies them.  A prompt of max_model_len tokens or
more makes ``chat`` raise ``VLLMValidationError``, as in vLLM; a user message containing
``EXPLODE`` makes ``chat`` raise.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable

__version__ = "0.32.0"

INSTANCES: list["LLM"] = []
HF_CONFIGS: dict[str, dict] = {}   # model id -> config.json contents (a local folder's file wins)
GENERATION_CONFIG = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05, "max_tokens": 999}


def default_reply(conv: list[dict], thinking: bool) -> tuple[str, str]:
    last = [m["content"] for m in conv if m["role"] == "user"][-1]
    return f"pondering {last}", f"answer to: {last}"


REPLY: Callable[[list[dict], bool], tuple[str, str]] = default_reply  # (thinking text, answer)

# EngineArgs fields that LLM.__init__ does not name itself (a subset of the real list, every
# name the adapter or its tests pass among them)
ENGINE_ARGS = frozenset({
    "served_model_name", "download_dir", "load_format", "config_format", "kv_cache_dtype", "max_model_len",
    "distributed_executor_backend", "pipeline_parallel_size", "data_parallel_size", "data_parallel_rank",
    "data_parallel_size_local", "data_parallel_address", "data_parallel_rpc_port", "data_parallel_backend",
    "enable_expert_parallel", "enable_eplb", "max_parallel_loading_workers", "block_size",
    "enable_prefix_caching", "prefix_caching_hash_algo", "disable_sliding_window", "disable_cascade_attn",
    "max_num_batched_tokens", "max_num_seqs", "max_logprobs", "logprobs_mode", "disable_log_stats",
    "code_revision", "limit_mm_per_prompt", "enable_lora", "max_loras", "max_lora_rank", "fully_sharded_loras",
    "max_cpu_loras", "lora_dtype", "num_gpu_blocks_override", "model_loader_extra_config", "ignore_patterns",
    "enable_chunked_prefill", "reasoning_parser", "speculative_config", "scheduling_policy", "worker_cls",
    "worker_extension_cls", "kv_transfer_config", "kv_events_config", "generation_config",
    "enable_sleep_mode", "override_generation_config", "model_impl", "async_scheduling",
    "stream_interval", "use_tqdm_on_load", "additional_config",
})


class VLLMValidationError(Exception):
    """vllm.exceptions.VLLMValidationError: a request vLLM refuses (a VLLMClientError, not a ValueError)."""


@dataclass(kw_only=True)
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    watermarking: bool | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    prompt_logprob_start: int | None = None
    logprob_token_ids: list[int] | None = None
    flat_logprobs: bool = False
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    output_kind: Any = None
    stream_interval: int | None = None
    skip_clone: bool = False
    output_text_buffer_length: int = 0
    structured_outputs: Any = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    extra_args: dict[str, Any] | None = None
    bad_words: list[str] | None = None
    skip_reading_prefix_cache: bool | None = None
    thinking_token_budget: int | None = None
    repetition_detection: Any = None
    routed_experts_prompt_start: int = 0
    trace_decode_token_ids: list[int] | None = None
    prompt_logprob_token_ids: list[int] | None = None

    def __post_init__(self) -> None:
        self.stop = [] if self.stop is None else [self.stop] if isinstance(self.stop, str) else list(self.stop)
        if not 0.0 <= self.temperature <= 2.0:
            raise VLLMValidationError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise VLLMValidationError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise VLLMValidationError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if not 0.0 <= self.min_p <= 1.0:
            raise VLLMValidationError(f"min_p must be in [0, 1], got {self.min_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise VLLMValidationError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.temperature < 1e-5:  # greedy
            self.top_p, self.top_k, self.min_p = 1.0, 0, 0.0

    @classmethod
    def from_optional(cls, **kwargs: Any) -> "SamplingParams":
        return cls(**{k: v for k, v in kwargs.items() if v is not None})


QWEN3_TEMPLATE = ("{%- if enable_thinking is defined and enable_thinking is false %}"
                  "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}")


class FakeTokenizer:
    def __init__(self, chat_template: str) -> None:
        self.chat_template = chat_template

    def apply_chat_template(self, messages: list[dict], tokenize: bool = True, add_generation_prompt: bool = True,
                            **kwargs: Any) -> Any:
        n = sum(len(m["content"].split()) + 4 for m in messages) + (3 if add_generation_prompt else 0)
        ids = list(range(n))
        return {"input_ids": ids} if kwargs.get("return_dict") else ids


@dataclass
class ModelConfig:
    max_model_len: int
    hf_config: dict
    diff: dict = field(default_factory=dict)

    def get_diff_sampling_param(self) -> dict[str, Any]:
        return dict(self.diff)


class _Engine:
    def __init__(self, mc: ModelConfig) -> None:
        self.model_config = mc


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int]
    finish_reason: str | None


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    num_cached_tokens: int = 0


@dataclass
class Counter:
    name: str
    value: int


def _hf_config(model: str) -> dict:
    path = os.path.join(model, "config.json")
    if os.path.isfile(path):
        with open(path) as fh:
            return json.load(fh)
    return dict(HF_CONFIGS.get(model, {}))


class LLM:
    def __init__(self, model: str, *, runner: str = "auto", convert: str = "auto", tokenizer: str | None = None,
                 tokenizer_mode: str = "auto", skip_tokenizer_init: bool = False, trust_remote_code: bool = False,
                 allowed_local_media_path: str = "", allowed_media_domains: list[str] | None = None,
                 tensor_parallel_size: int = 1, dtype: str = "auto", quantization: str | None = None,
                 revision: str | None = None, tokenizer_revision: str | None = None, chat_template: Any = None,
                 seed: int = 0, gpu_memory_utilization: float = 0.92, cpu_offload_gb: float = 0,
                 offload_group_size: int = 0, offload_num_in_group: int = 1, offload_prefetch_step: int = 1,
                 offload_params: set[str] | None = None, enforce_eager: bool = False,
                 enable_return_routed_experts: bool = False, return_sampling_mask: bool = False,
                 disable_custom_all_reduce: bool = False, hf_token: bool | str | None = None,
                 hf_overrides: Any = None, mm_processor_kwargs: dict[str, Any] | None = None,
                 pooler_config: Any = None, structured_outputs_config: Any = None, profiler_config: Any = None,
                 attention_config: Any = None, kv_cache_memory_bytes: int | None = None,
                 compilation_config: Any = None, quantization_config: Any = None,
                 logits_processors: list | None = None, spec_method: str | None = None, spec_model: str | None = None,
                 spec_tokens: int | None = None, **kwargs: Any) -> None:
        if "disable_log_stats" not in kwargs:
            kwargs["disable_log_stats"] = True
        dp = int(kwargs.get("data_parallel_size", 1))
        if dp > 1 and kwargs.get("distributed_executor_backend") != "external_launcher":
            raise ValueError(f"LLM(data_parallel_size={dp}) is not supported for single-process usage and may "
                             "hang. Please use the explicit multi-process data-parallel example at "
                             "'examples/offline_inference/data_parallel.py'.")
        for name in kwargs:
            if name not in ENGINE_ARGS:
                raise TypeError(f"EngineArgs.__init__() got an unexpected keyword argument '{name}'")
        self.model = model
        self.kwargs = dict(kwargs, tensor_parallel_size=tensor_parallel_size, dtype=dtype, seed=seed,
                           gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                           quantization=quantization, trust_remote_code=trust_remote_code, revision=revision)
        self.chat_calls: list[dict[str, Any]] = []
        self.thinks_by_default = "qwen3" in model.lower()
        self.tokenizer = FakeTokenizer(QWEN3_TEMPLATE if self.thinks_by_default else "{{ messages }}")
        self.visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.model_config = ModelConfig(kwargs.get("max_model_len") or 4096, _hf_config(model), GENERATION_CONFIG)
        self.llm_engine = _Engine(self.model_config)
        self._seen_prefixes: set[tuple] = set()
        self._counters = {"vllm:prefix_cache_queries": 0, "vllm:prefix_cache_hits": 0,
                          "vllm:prompt_tokens": 0, "vllm:generation_tokens": 0}
        INSTANCES.append(self)

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tokenizer

    def get_default_sampling_params(self) -> SamplingParams:
        return SamplingParams.from_optional(**self.model_config.get_diff_sampling_param())

    def chat(self, messages: Any, sampling_params: Any = None, use_tqdm: Any = True, lora_request: Any = None,
             priority: Any = None, chat_template: str | None = None, chat_template_content_format: str = "auto",
             add_generation_prompt: bool = True, continue_final_message: bool = False,
             tools: list[dict[str, Any]] | None = None, chat_template_kwargs: dict[str, Any] | None = None,
             tokenization_kwargs: dict[str, Any] | None = None,
             mm_processor_kwargs: dict[str, Any] | None = None) -> list[RequestOutput]:
        if messages and isinstance(messages[0], dict):
            messages = [messages]
        if sampling_params is None:
            sampling_params = self.get_default_sampling_params()
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(messages)
        if len(params) != len(messages):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        self.chat_calls.append({"messages": messages, "params": params, "use_tqdm": use_tqdm,
                                "chat_template_kwargs": chat_template_kwargs})
        ctk = chat_template_kwargs or {}
        thinking = bool(ctk.get("enable_thinking", self.thinks_by_default))
        mml = self.model_config.max_model_len
        outs = []
        for conv, p in zip(messages, params):
            ids = self.tokenizer.apply_chat_template(conv, tokenize=True, add_generation_prompt=True, **ctk)
            if len(ids) > mml:  # vLLM's renderer
                raise VLLMValidationError(f"This model's maximum context length is {mml} tokens. However, your "
                                          f"prompt contains {len(ids)} input tokens, which exceeds this limit "
                                          "even without any output tokens.")
            if len(ids) == mml:  # vLLM's input processor: no room for one output token
                raise VLLMValidationError(f"The decoder prompt (length {len(ids)}) plus the number of requested "
                                          f"output tokens (at least 1) is longer than the maximum model length "
                                          f"of {mml}.")
            if any("EXPLODE" in m["content"] for m in conv if m["role"] == "user"):
                raise RuntimeError("engine exploded on this prompt")
            think, answer = REPLY(conv, thinking)
            if self.visible_devices is not None:
                answer += f" [gpu {self.visible_devices}]"
            if p.temperature > 0:
                answer += f" ~{random.Random(p.seed).randrange(10 ** 6)}"
            text = f"<think>{think}</think>\n\n{answer}" if thinking else answer
            finish = "stop"
            hits = [j for j in (text.find(s) for s in p.stop) if j >= 0]
            if hits:
                text = text[:min(hits)]
            words = text.split(" ")
            if len(words) > p.max_tokens:
                words, finish = words[: p.max_tokens], "length"
            pairs = tuple((m["role"], m["content"]) for m in conv)
            cached = len(ids) // 2 if any(pairs[:k] in self._seen_prefixes for k in range(1, len(pairs))) else 0
            self._seen_prefixes.add(pairs)
            self._counters["vllm:prefix_cache_queries"] += len(ids)
            self._counters["vllm:prefix_cache_hits"] += cached
            self._counters["vllm:prompt_tokens"] += len(ids)
            self._counters["vllm:generation_tokens"] += len(words)
            outs.append(RequestOutput(prompt_token_ids=ids,
                                      outputs=[CompletionOutput(" ".join(words), list(range(len(words))), finish)],
                                      num_cached_tokens=cached))
        return outs

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self._seen_prefixes.clear()
        return True

    def get_metrics(self) -> list[Counter]:
        return [Counter(k, v) for k, v in self._counters.items()]
