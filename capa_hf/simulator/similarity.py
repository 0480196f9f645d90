"""Content-word stems of a text (the question matcher, the fidelity and Stage 3 checks use them)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an the of to in on for and or is are be it its this that these those what which how do does "
    "should would could can will with as by at from if when than then there their they you your i we "
    "me my our us so just any all each some should it's what's there's into about also like want "
    "function code".split()
)


def stem(w: str) -> str:
    for suf in ("ing", "ies", "es", "ed", "s"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def tokens(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS)
