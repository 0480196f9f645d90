"""``make_engine(spec, **options)``: build an engine from a short spec string.

Specs and their main options (``runners.options.engine_options(spec)`` lists them all; an
unknown option is refused with that list)::

    scripted                         fn=... / request_fn=... / table=... (see ScriptedEngine)
    llamacpp                         embedded default model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
    llamacpp:qwen2.5-coder-1.5b      a bundled model by name
    llamacpp:/path/model.gguf        any local GGUF file; n_ctx, n_threads, state_cache_mb, lookup_draft
                                     (0 = plain greedy decoding), llama.cpp's own
    vllm:<hf model id or path>       tensor_parallel_size, data_parallel_size (replicas; dense models only),
                                     max_model_len, gpu_memory_utilization, enable_thinking, keep_thinking,
                                     date_string, seed, dtype, enforce_eager, max_num_seqs, quantization,
                                     ... (vllm_engine.LLM_OPTIONS), llm_kwargs={...} for any other LLM() argument
    openai:<model>@<url>[,<url>...]  several URLs: replicas, conversations spread by affinity;
                                     api_key / api_key_env, concurrency (per server), max_retries, timeout_s,
                                     max_tokens_field (auto | max_tokens | max_completion_tokens),
                                     enable_thinking, keep_thinking, extra_body, headers

From text (a CLI): ``make_engine(spec, **parse_engine_args(["tensor_parallel_size=4", ...]))``.
"""

from __future__ import annotations

from typing import Any, Callable

from .options import check_engine_options, engine_name

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

    model, urls = parse_openai_spec(arg)
    return OpenAIEngine(model, urls, **options)


_BUILDERS: dict[str, Callable[..., Any]] = {
    "scripted": _scripted, "llamacpp": _llamacpp, "vllm": _vllm, "openai": _openai,
}


def make_engine(spec: str, **options: Any) -> Any:
    """Build the engine named by ``spec`` (see the module doc).

    An unknown engine name, or an option that engine does not take, raises ValueError
    (naming it and listing the known ones) before anything is loaded.
    """
    name = engine_name(spec)
    check_engine_options(spec, options)
    return _BUILDERS[name](spec.strip().partition(":")[2], **options)
