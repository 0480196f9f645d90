"""`capa list engines|presets|conditions|users`: what a run can name, one per line."""

from __future__ import annotations

from capa_hf.errors import CapaError

# how each engine is written in --model, and what it is
ENGINE_FORMS = {
    "llamacpp": "llamacpp | llamacpp:qwen2.5-coder-1.5b | llamacpp:/path/model.gguf   embedded llama.cpp (CPU)",
    "openai": "openai:<model>@<url>[,<url>...]   any OpenAI-compatible server (several: replicas)",
    "scripted": "scripted --engine-arg default=TEXT   a fixed reply, for tests",
    "vllm": "vllm:<hf model id or path>   offline vLLM (GPU; pip install -e '.[vllm]')",
}


def engine_lines() -> list[str]:
    from runners import ENGINES

    from capa_hf.evaluation.reference_policy import POLICIES, PREFIX

    lines = [f"{name:10} {ENGINE_FORMS.get(name, name)}" for name in ENGINES]
    lines.append(f"{PREFIX:10} " + " | ".join(f"{PREFIX}:{p}" for p in POLICIES)
                 + "   no model: reference policies for a first run")
    return lines


def preset_lines() -> list[str]:
    from capa_hf.presets import load_presets

    lines = []
    for name, entry in load_presets().items():
        lines.append(f"{name:28} {entry.model}")
        lines += [f"{name + ':' + v:28} {entry.model} ({variant.notes or 'variant'})"
                  for v, variant in entry.variants.items()]
    return lines


def condition_lines() -> list[str]:
    from capa_hf.evaluation.conditions import known_conditions

    return known_conditions()


def user_lines() -> list[str]:
    from capa_hf.simulator.protocols import known_users

    return [f"{u}:<engine spec>" if u == "llm" else u for u in known_users()]


LISTS = {"engines": engine_lines, "presets": preset_lines, "conditions": condition_lines, "users": user_lines}


def list_lines(what: str) -> list[str]:
    if what not in LISTS:
        raise CapaError(f"{what!r}: expected one of {', '.join(LISTS)}")
    return LISTS[what]()
