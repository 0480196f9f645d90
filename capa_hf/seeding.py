"""Deterministic choices keyed by strings, independent of global random state."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def rng_for(*parts: object) -> random.Random:
    key = "/".join(str(p) for p in parts)
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest()[:16], 16))


def pick(options: Sequence[T], *parts: object) -> T:
    if not options:
        raise ValueError(f"nothing to pick from for {'/'.join(map(str, parts))}")
    return options[rng_for(*parts).randrange(len(options))]


def pick_index(n: int, *parts: object) -> int:
    return rng_for(*parts).randrange(n)
