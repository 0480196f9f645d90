"""``make_engine(spec, **options)``: build an engine from a short spec string.

Specs and their main options (``engine_options(spec)`` lists them all; an
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

A plug-in package adds an engine through an entry point in the group ``capa.engines`` whose
value is an ``EngineEntry`` (or a builder ``build(arg, **options)``, with an optional
``build.options()`` listing its option names); the built-in engines are declared there too
(``runners.registry:SCRIPTED`` ...). Plug-ins are loaded the first time a name is looked up.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping

from .options import llamacpp_options, openai_options, scripted_options, vllm_options_list


@dataclass(frozen=True)
class EngineEntry:
    """One engine: how to build it from the text after ``name:`` and options, and which option
    names it accepts."""

    build: Callable[..., Any]
    options: Callable[[], list[str]]


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


SCRIPTED = EngineEntry(_scripted, scripted_options)
LLAMACPP = EngineEntry(_llamacpp, llamacpp_options)
VLLM = EngineEntry(_vllm, vllm_options_list)
OPENAI = EngineEntry(_openai, openai_options)
ENTRY_POINT_GROUP = "capa.engines"

# The one engine table: name -> builder and option names. `register_engine` and the plug-ins'
# entry points add to it.
_ENGINES: dict[str, EngineEntry] = {"scripted": SCRIPTED, "llamacpp": LLAMACPP, "vllm": VLLM, "openai": OPENAI}
ENGINES = tuple(sorted(_ENGINES))     # the built-in engines
_plugins_loaded = False


def _as_entry(obj: Any) -> EngineEntry:
    if isinstance(obj, EngineEntry):
        return obj
    if callable(obj):
        return EngineEntry(obj, getattr(obj, "options", lambda: []))
    raise TypeError(f"expected an EngineEntry or a builder function, got {type(obj).__name__}")


def _load_plugins() -> None:
    """The engines of the ``capa.engines`` entry points, once. One that names a built-in engine
    must be that engine; a broken one is refused, naming it."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry = _as_entry(ep.load())
        except Exception as exc:
            raise ValueError(f"engine plug-in {ep.name!r} ({ep.value}, entry point group "
                             f"{ENTRY_POINT_GROUP!r}) failed to load: {exc}") from exc
        if ep.name in _ENGINES and _ENGINES[ep.name] != entry:
            raise ValueError(f"engine plug-in {ep.name!r} ({ep.value}) takes a name already registered")
        _ENGINES[ep.name] = entry


def register_engine(name: str, build: Callable[..., Any], options: Callable[[], list[str]]) -> None:
    """Add an engine: ``build(arg, **options)`` gets the text after ``name:``; ``options()``
    lists the option names it accepts. A name already taken is refused."""
    if not isinstance(name, str) or not name.isidentifier() or name.lower() != name:
        raise ValueError(f"engine name must be a lower-case identifier, got {name!r}")
    if name in _ENGINES and _ENGINES[name].build is not build:
        raise ValueError(f"engine {name!r} is already registered")
    _ENGINES[name] = EngineEntry(build, options)


def unregister_engine(name: str) -> None:
    if name in ENGINES:
        raise ValueError(f"engine {name!r} is built in")
    _ENGINES.pop(name, None)


def known_engines() -> list[str]:
    _load_plugins()
    return sorted(_ENGINES)


def engine_name(spec: str) -> str:
    """The engine part of a spec (``"vllm:Qwen/Qwen3-8B"`` -> ``"vllm"``); unknown names raise ValueError."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"engine spec must be a non-empty string, got {spec!r}; "
                         f"known engines: {', '.join(known_engines())}")
    name = spec.strip().partition(":")[0].lower()
    _load_plugins()
    if name not in _ENGINES:
        raise ValueError(f"unknown engine {name!r} in spec {spec!r}; known engines: {', '.join(known_engines())}")
    return name


def engine_options(spec: str) -> list[str]:
    """The option names the engine of ``spec`` accepts, sorted."""
    return sorted(set(_ENGINES[engine_name(spec)].options()))


def check_engine_options(spec: str, options: Mapping[str, Any]) -> None:
    """Raise ValueError if ``options`` has a name the engine of ``spec`` does not accept."""
    known = engine_options(spec)
    unknown = sorted(set(options) - set(known))
    if unknown:
        name = engine_name(spec)
        raise ValueError(f"unknown {name} engine option(s) {', '.join(map(repr, unknown))}; "
                         f"known {name} options: {', '.join(known)}")


def make_engine(spec: str, **options: Any) -> Any:
    """Build the engine named by ``spec`` (see the module doc).

    An unknown engine name, or an option that engine does not take, raises ValueError
    (naming it and listing the known ones) before anything is loaded.
    """
    name = engine_name(spec)
    check_engine_options(spec, options)
    return _ENGINES[name].build(spec.strip().partition(":")[2], **options)
