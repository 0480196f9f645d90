"""Lexical similarity between an assistant's question and a hidden item's texts."""

from __future__ import annotations

import math
import re

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an the of to in on for and or is are be it its this that these those what which how do does "
    "should would could can will with as by at from if when than then there their they you your i we "
    "me my our us so just any all each some should it's what's there's into about also like want "
    "function code".split()
)


def _stem(w: str) -> str:
    for suf in ("ing", "ies", "es", "ed", "s"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def tokens(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS)


def similarity(a: str, b: str) -> float:
    """Set cosine over content-word stems: |A & B| / sqrt(|A| |B|)."""
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / math.sqrt(len(ta) * len(tb))
