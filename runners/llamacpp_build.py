"""What a llama.cpp build runs on: its version, its kernels and the CPU's features.

Greedy replies depend on the build's kernels (an AVX-512 build and an AVX2 build of the same
version write different transcripts for the same prompts), so a run records this next to its
results, and the completion cache keys on the kernel list.
"""

from __future__ import annotations

import copy
import functools
from typing import Any


def _llama_cpp_version() -> str | None:
    try:
        import llama_cpp
        return getattr(llama_cpp, "__version__", None)
    except ImportError:  # pragma: no cover
        return None


CPU_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "amx_tile", "sve", "neon", "asimd")


def build_info() -> dict[str, Any]:
    """Which kernels this llama.cpp build uses and what the CPU offers. Read once per process:
    the completion cache asks for it with every request's key."""
    return copy.deepcopy(_build_info())


@functools.lru_cache(maxsize=1)
def _build_info() -> dict[str, Any]:
    info: dict[str, Any] = {"llama_cpp_version": _llama_cpp_version()}
    try:
        import llama_cpp
        info["system_info"] = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except (ImportError, AttributeError):  # pragma: no cover
        info["system_info"] = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        text = ""
    info["cpu"] = cpu_from_cpuinfo(text)
    return info


def cpu_from_cpuinfo(text: str) -> dict[str, Any]:
    """The CPU's model name and which of :data:`CPU_FEATURES` it has, from ``/proc/cpuinfo``
    text (x86 writes ``model name``/``flags``, ARM ``Model``/``Features``)."""
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model") and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return {"model": model, "features": [f for f in CPU_FEATURES if f in flags]}
