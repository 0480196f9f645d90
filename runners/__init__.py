"""Generic LLM machinery: engines (vLLM, llama.cpp, OpenAI-compatible, scripted), a lock-step
driver for multi-turn episodes, and an on-disk completion cache.

This package knows nothing of the benchmark built on it.
"""

from .cache import CompletionCache, request_key
from .driver import Call, EpisodeOutcome, run_episodes
from .engine import Engine, EngineError, EngineUnavailable, ModelAssetError, describe_engine, engine_label
from .options import parse_engine_args
from .registry import ENGINES, EngineEntry, check_engine_options, engine_options, make_engine, register_engine
from .scripted import ScriptedEngine
from .types import ChatRequest, ChatResult, Message, Sampling, derive_seed, strip_thinking
from .usage import BatchRecord, RunStats, Usage

__all__ = [
    "BatchRecord", "Call", "ChatRequest", "ChatResult", "CompletionCache", "ENGINES", "Engine", "EngineEntry", "EngineError",
    "EngineUnavailable", "EpisodeOutcome", "Message", "ModelAssetError", "RunStats", "Sampling",
    "ScriptedEngine", "Usage", "check_engine_options", "derive_seed", "describe_engine", "engine_label", "engine_options",
    "make_engine", "parse_engine_args", "register_engine", "request_key", "run_episodes", "strip_thinking",
]
