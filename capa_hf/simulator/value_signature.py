"""A short, deterministic signature of a value, to tell which misreading a wrong result looks like.

The same source runs inside the sandboxed probe that records the failure ties at build time
(capa_hf/variants/ties.py) and here, on the value a failed submission gave at its failing line
(the judge records it), so the two can be compared.
"""

from __future__ import annotations

import ast
import re

# A value's signature: its type, its elements regardless of order, and its exact form, each as a
# short FNV-1a hash of a repr: "list|1a2b3c4d|5e6f7a8b"; "raise:ValueError" for an exception.
# The same source runs in the sandboxed probe (build time) and in the judge's caller (run time).
SIGNATURE_SOURCE = '''
def _capa_fnv(text):
    h = 2166136261
    for ch in text.encode("utf-8", "replace"):
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return "%08x" % h


def _capa_signature(value):
    if isinstance(value, (list, tuple, set, frozenset)):
        try:
            elems = repr(sorted(repr(v) for v in value))
        except Exception:
            elems = repr(value)
    elif isinstance(value, dict):
        elems = repr(sorted(repr(kv) for kv in value.items()))
    elif isinstance(value, str):
        elems = repr(sorted(value))
    else:
        elems = repr(value)
    return type(value).__name__ + "|" + _capa_fnv(elems) + "|" + _capa_fnv(repr(value))
'''
_NS: dict = {}
exec(SIGNATURE_SOURCE, _NS)


def signature(value) -> str:
    return _NS["_capa_signature"](value)


def raised_signature(exception_type: str) -> str:
    return f"raise:{exception_type}"


def expected_signature(line: str) -> str | None:
    """What a failing test line expects, as a signature: the literal of `assert <call> == <literal>`
    (or of `_close(<call>, <literal>, tol)`), `raise:<Type>` for an expected exception."""
    m = re.match(r"raise AssertionError\((['\"])candidate\(.*\) should raise (\w+)\1\)$", line)
    if m:
        return raised_signature(m.group(2))
    try:
        node = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
        return None
    if not isinstance(node, ast.Assert):
        return None
    test = node.test
    try:
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            return signature(ast.literal_eval(test.comparators[0]))
        if isinstance(test, ast.Call) and getattr(test.func, "id", "") == "_close" and len(test.args) >= 2:
            return signature(ast.literal_eval(test.args[1]))
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return None


def agreement(got: str | None, alternative: str | None, expected: str | None) -> int:
    """How well an alternative explains a wrong value: 10 when the value is exactly the
    alternative's, else one point for each part (type, elements, exact form) the value shares
    with the alternative where it differs from what the line expects."""
    if got is None or alternative is None:
        return 0
    if got == alternative:
        return 10
    g, a = got.split("|"), alternative.split("|")
    e = expected.split("|") if expected else []
    if len(g) != 3 or len(a) != 3:
        return 0
    if len(e) != 3:          # the line expects an exception (or nothing known): every part differs
        e = [None] * 3
    return sum(1 for x, y, z in zip(g, a, e) if x == y and x != z)
