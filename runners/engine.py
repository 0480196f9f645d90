"""The engine interface every backend implements, and the errors they raise."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from .types import ChatRequest, ChatResult


@runtime_checkable
class Engine(Protocol):
    """A chat-completion backend.

    ``generate`` is one batched call: it returns one :class:`ChatResult` per request, in
    order.  A request that cannot be served ends as a result with ``finish_reason="error"``
    (or ``"length"`` when the prompt does not fit); it never aborts the batch.  An engine
    raises only when it cannot serve anything at all (e.g. :class:`EngineUnavailable`).

    Optional extras the rest of ``runners`` uses when present:

    * ``describe() -> dict``: settings to record in a run's config (model, merged
      sampling defaults, template options...).
    * ``cache_identity() -> dict``: settings that change replies, mixed into the
      completion-cache key (e.g. thinking on/off).
    * ``close()``: release the model / connections.
    """

    name: str
    model: str

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]: ...


class EngineError(RuntimeError):
    """Base class for engine set-up and serving errors."""


class EngineUnavailable(EngineError):
    """The backend cannot serve any request (e.g. endpoint unreachable after retries)."""


class ModelAssetError(EngineError):
    """A model file is missing, incomplete, or does not match its expected hash."""


def describe_engine(engine: Any) -> dict[str, Any]:
    """``engine.describe()`` when available, else its name and model."""
    fn = getattr(engine, "describe", None)
    if callable(fn):
        return dict(fn())
    return {"engine": getattr(engine, "name", type(engine).__name__), "model": getattr(engine, "model", "")}


def engine_label(engine: Any) -> str:
    """How an engine is named in logs, records and the card: ``name:model`` (``vllm:Qwen/Qwen3-8B``)."""
    return f"{getattr(engine, 'name', type(engine).__name__)}:{getattr(engine, 'model', '')}"


def cache_identity(engine: Any) -> dict[str, Any]:
    fn = getattr(engine, "cache_identity", None)
    if callable(fn):
        return dict(fn())
    return {}
