"""``make_engine(spec, **options)``: build an engine from a short spec string.

Specs::

    scripted                         options fn=... or table=... (see ScriptedEngine)
    llamacpp                         embedded default model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
    llamacpp:qwen2.5-coder-1.5b      a bundled model by name
    llamacpp:/path/model.gguf        any local GGUF file
    vllm:<hf model id or path>       options: tensor_parallel_size, data_parallel_size, max_model_len,
                                     enable_thinking, gpu_memory_utilization, date_string /
                                     llama_date_string, seed, llm_kwargs...
    openai:<model>@<base_url>        options: api_key / api_key_env, concurrency, max_retries, timeout_s
"""

from __future__ import annotations

from typing import Any, Callable

ENGINES = ("llamacpp", "openai", "scripted", "vllm")


def _scripted(arg: str, **options: Any) -> Any:
    from .scripted import ScriptedEngine

    if arg:
        options.setdefault("model", arg)
    return ScriptedEngine(**options)


def _llamacpp(arg: str, **options: Any) -> Any:
    from .llamacpp import LlamaCppEngine

    return LlamaCppEngine(arg or None, **options)


def _vllm(arg: str, **options: Any) -> Any:
    from .vllm_engine import VllmEngine

    if not arg:
        raise ValueError("engine spec 'vllm' needs a model: 'vllm:<hf model id or path>'")
    return VllmEngine(arg, **options)


def _openai(arg: str, **options: Any) -> Any:
    from .openai_engine import OpenAIEngine, parse_openai_spec

    model, base_url = parse_openai_spec(arg)
    return OpenAIEngine(model, base_url, **options)


_BUILDERS: dict[str, Callable[..., Any]] = {
    "scripted": _scripted, "llamacpp": _llamacpp, "vllm": _vllm, "openai": _openai,
}


def make_engine(spec: str, **options: Any) -> Any:
    """Build the engine named by ``spec`` (see the module doc).  Unknown names raise ValueError."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"engine spec must be a non-empty string, got {spec!r}; "
                         f"known engines: {', '.join(ENGINES)}")
    name, _, arg = spec.strip().partition(":")
    builder = _BUILDERS.get(name.lower())
    if builder is None:
        raise ValueError(f"unknown engine {name!r} in spec {spec!r}; known engines: {', '.join(ENGINES)}")
    return builder(arg, **options)
