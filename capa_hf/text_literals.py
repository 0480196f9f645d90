"""Numerals and quoted literals in a text: what an obscured phrasing must not repeat."""

from __future__ import annotations

import re

_NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_QUOTED = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"")


def literals(text: str) -> set[str]:
    nums = {m.group(0).lstrip("-") for m in _NUM.finditer(text)}
    quoted = {a or b for a, b in _QUOTED.findall(text)}
    return {x for x in nums | quoted if x.strip()}


def repeated_literals(source: str, text: str) -> list[str]:
    """Literals of `source` that occur in `text` as whole tokens."""
    found = []
    for lit in sorted(literals(source)):
        if re.search(r"(?<![\w.])" + re.escape(lit) + r"(?![\w])", text):
            found.append(lit)
    return found
