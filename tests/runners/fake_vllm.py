"""An in-process stand-in for the parts of ``vllm`` the adapter uses.

Installed as ``sys.modules["vllm"]`` (or imported by name in DP worker processes).  The
fake tokenizer counts one token per whitespace-separated word of each message plus 4 per
message; the fake LLM replies ``"<think>...</think>answer to: <last user message>"`` when
thinking is on, and raises (like vLLM) when any prompt is longer than max_model_len.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__version__ = "0.0-fake"

INSTANCES: list["LLM"] = []


class SamplingParams:
    _defaults = dict(n=1, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0,
                     presence_penalty=0.0, frequency_penalty=0.0, seed=None, stop=None, max_tokens=16)

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(self._defaults)
        if unknown:
            raise TypeError(f"unexpected SamplingParams fields {sorted(unknown)}")
        for k, v in self._defaults.items():
            setattr(self, k, kwargs.get(k, v))
        self.explicit = dict(kwargs)

    @classmethod
    def from_optional(cls, **kwargs: Any) -> "SamplingParams":
        return cls(**{k: v for k, v in kwargs.items() if v is not None})


class FakeTokenizer:
    def apply_chat_template(self, messages: list[dict], tokenize: bool = True, add_generation_prompt: bool = True,
                            **kwargs: Any) -> Any:
        n = sum(len(m["content"].split()) + 4 for m in messages) + (3 if add_generation_prompt else 0)
        ids = list(range(n))
        return {"input_ids": ids} if kwargs.get("return_dict") else ids


class ModelConfig:
    def __init__(self, max_model_len: int, diff: dict[str, Any]) -> None:
        self.max_model_len = max_model_len
        self._diff = diff

    def get_diff_sampling_param(self) -> dict[str, Any]:
        return dict(self._diff)


class _Engine:
    def __init__(self, mc: ModelConfig) -> None:
        self._mc = mc

    def get_model_config(self) -> ModelConfig:
        return self._mc


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


GENERATION_CONFIG = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05, "max_tokens": 999}


class LLM:
    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model = model
        self.kwargs = kwargs
        self.chat_calls: list[dict[str, Any]] = []
        self.tokenizer = FakeTokenizer()
        self.visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        mml = kwargs.get("max_model_len") or 4096
        self.llm_engine = _Engine(ModelConfig(mml, GENERATION_CONFIG))
        self._seen_prefixes: set[tuple] = set()
        INSTANCES.append(self)

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tokenizer

    def get_default_sampling_params(self) -> SamplingParams:
        return SamplingParams.from_optional(**GENERATION_CONFIG)

    def chat(self, messages: list[list[dict]], sampling_params: Any = None, use_tqdm: bool = True,
             lora_request: Any = None, chat_template: Any = None, add_generation_prompt: bool = True,
             chat_template_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> list[RequestOutput]:
        if messages and isinstance(messages[0], dict):
            messages = [messages]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(messages)
        assert len(params) == len(messages)
        self.chat_calls.append({"messages": messages, "params": params, "use_tqdm": use_tqdm,
                                "chat_template_kwargs": chat_template_kwargs})
        ctk = chat_template_kwargs or {}
        mml = self.llm_engine.get_model_config().max_model_len
        outs = []
        for conv, p in zip(messages, params):
            ids = self.tokenizer.apply_chat_template(conv, tokenize=True, add_generation_prompt=True, **ctk)
            if len(ids) > mml:
                raise ValueError(f"The decoder prompt (length {len(ids)}) is longer than the maximum model "
                                 f"length of {mml}")
            last = [m["content"] for m in conv if m["role"] == "user"][-1]
            if "EXPLODE" in last:
                raise RuntimeError("engine exploded on this prompt")
            answer = f"answer to: {last}"
            if self.visible_devices is not None:
                answer += f" [gpu {self.visible_devices}]"
            text = (f"<think>pondering {last}</think>\n\n{answer}" if ctk.get("enable_thinking") else answer)
            words = text.split(" ")
            finish = "stop"
            if len(words) > p.max_tokens:
                words = words[: p.max_tokens]
                finish = "length"
            pairs = tuple((m["role"], m["content"]) for m in conv)
            cached = len(ids) // 2 if any(pairs[:k] in self._seen_prefixes for k in range(1, len(pairs))) else 0
            self._seen_prefixes.add(tuple((m["role"], m["content"]) for m in conv))
            outs.append(RequestOutput(prompt_token_ids=ids,
                                      outputs=[CompletionOutput(" ".join(words), list(range(len(words))), finish)],
                                      num_cached_tokens=cached))
        return outs

    def get_metrics(self) -> list[Any]:
        @dataclass
        class Counter:
            name: str
            value: int

        return [Counter("vllm:prefix_cache_queries", 10), Counter("vllm:prefix_cache_hits", 4)]
