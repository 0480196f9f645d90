"""Specs written on the command line for a part that a model plays: `llm:<engine spec>`."""

from __future__ import annotations

from capa_hf.errors import CapaError


def llm_spec(flag: str, value: str) -> str:
    """The engine spec of an `llm:<engine spec>` value given to `flag`; anything else is refused."""
    kind, _, spec = value.partition(":")
    if kind != "llm" or not spec.strip():
        raise CapaError(f"{flag} {value!r}: expected llm:<engine spec>, e.g. llm:vllm:Qwen/Qwen3-8B or llm:llamacpp")
    return spec
