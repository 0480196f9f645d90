"""Which replica serves a conversation: sticky by an affinity key, keys spread evenly.

Engines with several replicas (OpenAI-compatible servers at several URLs, vLLM data-parallel
workers) send every request with the same key to the same replica, so that replica's prefix
cache holds the conversation (and, for a benchmark cell, the history every session of the
cell shares).  The key is :attr:`ChatRequest.affinity` when the caller gives one (capa passes
the cell id); otherwise a hash of the conversation's first two messages (system prompt and
first user turn), which stay the same from turn to turn.

A new key goes to the replica with the fewest keys so far (lowest index on a tie), so keys
spread evenly in the order they first appear; the mapping lives as long as the engine.  It is
not a load balancer: a replica that is down keeps its keys, and their requests fail.
"""

from __future__ import annotations

import hashlib

from .types import ChatRequest


def affinity_key(request: ChatRequest) -> str:
    if request.affinity is not None:
        return "a:" + request.affinity
    head = "\x1e".join(f"{role}\x1f{content}" for role, content in request.messages[:2])
    return "h:" + hashlib.blake2b(head.encode("utf-8"), digest_size=8).hexdigest()


class StickyAssigner:
    """Maps keys to ``0..n-1``: sticky once seen, new keys to the least-used replica."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"StickyAssigner needs at least one replica, got {n}")
        self.n = n
        self._where: dict[str, int] = {}
        self.keys_per_replica = [0] * n

    def replica(self, key: str) -> int:
        r = self._where.get(key)
        if r is None:
            r = min(range(self.n), key=lambda i: self.keys_per_replica[i])
            self._where[key] = r
            self.keys_per_replica[r] += 1
        return r

    def assign(self, requests: "list[ChatRequest]") -> list[int]:
        return [self.replica(affinity_key(r)) for r in requests]
