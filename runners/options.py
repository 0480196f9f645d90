"""Engine options from text (``KEY=VALUE``), and the option names each engine accepts.

``parse_engine_args(["tensor_parallel_size=4", "enable_thinking=false", 'llm_kwargs={"x": 1}'])``
gives ``{"tensor_parallel_size": 4, "enable_thinking": False, "llm_kwargs": {"x": 1}}``.
A value is read, in order, as: ``true``/``false`` (any case) -> bool, ``none``/``null`` ->
None, an integer, a float, JSON (when it starts with ``{``, ``[`` or ``"``), else the
string as written.  Quote a string that looks like a number as JSON: ``revision="123"``.

The option names each built-in engine accepts (read from its signature) are listed here;
``runners.registry`` holds the one engine table, and ``engine_options(spec)`` /
``check_engine_options(spec, options)`` there.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Callable, Iterable

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"[+-]?\d+$")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$|[+-]?(inf|nan)$", re.IGNORECASE)


def parse_value(text: str) -> Any:
    """One option value, typed as the module doc says."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    if t and t[0] in "{[\"":
        try:
            return json.loads(t)
        except json.JSONDecodeError as exc:
            raise ValueError(f"value {text!r} starts like JSON but is not valid JSON: {exc.msg} "
                             f"at character {exc.pos}") from None
    return t


def parse_engine_args(items: Iterable[str]) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` -> ``{KEY: typed value}``.  A malformed or repeated KEY is a ValueError."""
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise ValueError(f"engine option {item!r} must be KEY=VALUE (e.g. tensor_parallel_size=4)")
        key, _, value = item.partition("=")
        key = key.strip()
        if not _KEY.match(key):
            raise ValueError(f"engine option {item!r}: {key!r} is not an option name (letters, digits, '_')")
        if key in out:
            raise ValueError(f"engine option {key!r} is given twice ({key}={out[key]!r} and {item!r})")
        try:
            out[key] = parse_value(value)
        except ValueError as exc:
            raise ValueError(f"engine option {item!r}: {exc}") from None
    return out


def signature_options(fn: Callable[..., Any], skip: Iterable[str] = ()) -> list[str]:
    """The keyword parameters of ``fn`` (an engine's ``__init__``), less ``skip``: its option names."""
    skip = {"self", *skip}
    return [n for n, p in inspect.signature(fn).parameters.items()
            if n not in skip and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]


def scripted_options() -> list[str]:
    from .scripted import ScriptedEngine
    return signature_options(ScriptedEngine.__init__)


def llamacpp_options() -> list[str]:
    from .llamacpp import LlamaCppEngine
    own = signature_options(LlamaCppEngine.__init__, skip=("model",))
    try:  # other keyword arguments go to llama_cpp.Llama
        from llama_cpp import Llama
        own += signature_options(Llama.__init__, skip=("model_path", "verbose"))
    except ImportError:
        pass
    return own


def vllm_options_list() -> list[str]:
    from .vllm_engine import vllm_options
    return vllm_options()


def openai_options() -> list[str]:
    from .openai_engine import OpenAIEngine
    return signature_options(OpenAIEngine.__init__, skip=("model", "base_url"))
