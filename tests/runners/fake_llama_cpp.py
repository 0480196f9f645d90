"""A stand-in for llama-cpp-python where it cannot run: `FakeLlama` has the signatures of
`llama_cpp.Llama` 0.3.36 for every method the engine calls (a keyword the real one would refuse
is refused here too; tests/runners/test_runners_llamacpp.py compares them where llama_cpp is
installed), and `stand_in_module()` gives the two other names the engine imports, the
chat-template formatter and the stopping-criteria list, for a machine without llama_cpp.

It tokenizes to one token per byte and replies with the prompt's length.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Optional, Union

EOS, BOS = 1, 2


class FakeVocab:
    """`llama_cpp._internals.LlamaModel`'s token text lookup."""

    def token_get_text(self, token: int) -> str:
        return {EOS: "<|im_end|>", BOS: "<|endoftext|>"}.get(token, "")


class FakeLlama:
    def __init__(self, model_path: str, *, seed: int = 4294967295, n_ctx: int = 512, n_batch: int = 512,
                 n_threads: Optional[int] = None, n_threads_batch: Optional[int] = None, verbose: bool = True,
                 **kwargs):
        self.model_path = model_path
        self.kwargs = {"seed": seed, "n_ctx": n_ctx, "n_batch": n_batch, "n_threads": n_threads,
                       "n_threads_batch": n_threads_batch, "verbose": verbose, **kwargs}
        self.metadata: Dict[str, str] = {}
        self._model = FakeVocab()
        self.calls: list[tuple[list[int], dict]] = []
        self.resets = 0
        self.closed = False

    def token_eos(self) -> int:
        return EOS

    def token_bos(self) -> int:
        return BOS

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        if not isinstance(text, bytes):
            raise TypeError(f"tokenize() takes bytes, got {type(text).__name__}")
        return ([BOS] if add_bos else []) + list(text)

    def detokenize(self, tokens: List[int], prev_tokens: Optional[List[int]] = None, special: bool = False) -> bytes:
        return bytes(t for t in tokens if t > BOS)

    def create_completion(self, prompt: Union[str, List[int]], suffix: Optional[str] = None,
                          max_tokens: Optional[int] = 16, temperature: float = 0.8, top_p: float = 0.95,
                          min_p: float = 0.05, typical_p: float = 1.0, logprobs: Optional[int] = None,
                          echo: bool = False, stop: Optional[Union[str, List[str]]] = [],  # noqa: B006 (the real default)
                          frequency_penalty: float = 0.0, presence_penalty: float = 0.0, repeat_penalty: float = 1.0,
                          top_k: int = 40, stream: bool = False, seed: Optional[int] = None, tfs_z: float = 1.0,
                          mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                          model: Optional[str] = None, stopping_criteria: Any = None, logits_processor: Any = None,
                          grammar: Any = None, logit_bias: Optional[Dict[int, float]] = None) -> dict:
        used = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "min_p": min_p,
                "stop": stop, "repeat_penalty": repeat_penalty, "top_k": top_k, "seed": seed,
                "stopping_criteria": stopping_criteria}
        self.calls.append((prompt, used))
        if b"CRASH" in bytes(t for t in prompt if t > BOS):
            raise RuntimeError("llama_decode failed")
        return {"choices": [{"text": f"len {len(prompt)}", "finish_reason": "stop", "index": 0, "logprobs": None}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": 2, "total_tokens": len(prompt) + 2}}

    def reset(self):
        self.resets += 1

    def close(self) -> None:
        self.closed = True


# -- the module's other names, for a machine without llama_cpp ----------------------------------

@dataclass
class ChatFormatterResponse:
    prompt: str
    stop: Optional[Union[str, List[str]]] = None


class Jinja2ChatFormatter:
    """A chat template rendered as llama_cpp's formatter renders it: a sandboxed jinja2
    environment with trim_blocks and lstrip_blocks, `raise_exception` and `strftime_now`."""

    def __init__(self, template: str, eos_token: str, bos_token: str, add_generation_prompt: bool = True,
                 stop_token_ids: Optional[List[int]] = None):
        from jinja2 import BaseLoader
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(loader=BaseLoader(), trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
        self.eos_token, self.bos_token, self.add_generation_prompt = eos_token, bos_token, add_generation_prompt
        self._template = env.from_string(template)

    def __call__(self, *, messages: list, functions=None, function_call=None, tools=None, tool_choice=None,
                 **kwargs: Any) -> ChatFormatterResponse:
        def raise_exception(message: str):
            raise ValueError(message)

        prompt = self._template.render(messages=messages, eos_token=self.eos_token, bos_token=self.bos_token,
                                       raise_exception=raise_exception, add_generation_prompt=self.add_generation_prompt,
                                       functions=functions, function_call=function_call, tools=tools,
                                       tool_choice=tool_choice, strftime_now=lambda f: datetime.now().strftime(f))
        return ChatFormatterResponse(prompt=prompt, stop=[self.eos_token])


class StoppingCriteriaList(list):
    def __call__(self, input_ids, logits) -> bool:
        return any(criterion(input_ids, logits) for criterion in self)


def real_llama_cpp_installed() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return getattr(sys.modules["llama_cpp"], "Llama", None) is not FakeLlama


def stand_in_modules() -> dict[str, types.ModuleType]:
    """`llama_cpp` and `llama_cpp.llama_chat_format` as the engine imports them (no model)."""
    root = types.ModuleType("llama_cpp")
    root.__version__ = None
    root.Llama = FakeLlama
    root.StoppingCriteriaList = StoppingCriteriaList
    chat = types.ModuleType("llama_cpp.llama_chat_format")
    chat.Jinja2ChatFormatter = Jinja2ChatFormatter
    chat.ChatFormatterResponse = ChatFormatterResponse
    root.llama_chat_format = chat
    return {"llama_cpp": root, "llama_cpp.llama_chat_format": chat}


def install_stand_in(monkeypatch) -> bool:
    """Put the stand-in modules in sys.modules where llama_cpp is not installed; True if it did."""
    if real_llama_cpp_installed():
        return False
    for name, module in stand_in_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    return True
