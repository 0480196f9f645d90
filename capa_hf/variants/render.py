"""Write recorded calls and expected values as an ordinary HumanEval-style `check(candidate)`.

Pure functions. Values are written as Python literals that evaluate back to an equal value of
the same type (tuples stay tuples, sets stay sets, nan and infinities spelled out), so the test
is readable and needs nothing but the builtins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class RenderError(ValueError):
    """A value has no literal form (it cannot be written into a test)."""


def literal(value) -> str:
    t = type(value)
    if value is None or t is bool or t is int or t is str or t is bytes:
        return repr(value)
    if t is float:
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if t is list:
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if t is tuple:
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if t is dict:
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if t in (set, frozenset):
        items = sorted((literal(v) for v in value))
        body = "{" + ", ".join(items) + "}" if items else "set()"
        return body if t is set else f"frozenset({body if items else ''})"
    raise RenderError(f"no literal form for a value of type {t.__name__}")


def call_source(args: tuple, kwargs: dict) -> str:
    parts = [literal(a) for a in args] + [f"{k}={literal(v)}" for k, v in kwargs.items()]
    return "candidate(" + ", ".join(parts) + ")"


def _has_float(value) -> bool:
    if type(value) is float:
        return True
    if type(value) in (list, tuple, set, frozenset):
        return any(_has_float(v) for v in value)
    if type(value) is dict:
        return any(_has_float(v) for v in value.values())
    return False


@dataclass(frozen=True)
class Expectation:
    """One call of the candidate and what the variant's reference did with it."""

    args: tuple
    kwargs: dict
    value: object = None
    raises: str | None = None     # exception type name when the reference raised


CLOSE_HELPER = '''
def _close(got, want, tol):
    if isinstance(want, float):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and (
            abs(got - want) < tol or (want != want and got != got))
    if isinstance(want, (list, tuple)):
        return type(got) is type(want) and len(got) == len(want) and all(
            _close(g, w, tol) for g, w in zip(got, want))
    return got == want
'''.lstrip("\n")


def render_check(header: str, expectations: list[Expectation], tolerance: float | None) -> str:
    """A `check(candidate)` asserting every expectation in order.

    Floats (also inside lists and tuples) compare within `tolerance` when one is given, as the
    task's own HumanEval test does; everything else compares with ==. An expected exception is
    a try/except that fails when the call returns instead of raising.
    """
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    body: list[str] = []
    uses_close = False
    for e in expectations:
        call = call_source(e.args, e.kwargs)
        if e.raises is not None:
            msg = literal(f"{call} should raise {e.raises}")
            body += ["    try:", f"        {call}", f"    except {e.raises}:", "        pass", "    else:",
                     f"        raise AssertionError({msg})"]
        elif tolerance is not None and _has_float(e.value):
            uses_close = True
            body.append(f"    assert _close({call}, {literal(e.value)}, {tolerance!r})")
        else:
            body.append(f"    assert {call} == {literal(e.value)}")
    out = "\n".join(lines) + "\n\n"
    if uses_close:
        out += CLOSE_HELPER + "\n\n"
    out += "def check(candidate):\n" + ("\n".join(body) if body else "    pass") + "\n"
    return out
