"""A memory system's digest of one cell: built once, cached in the run folder, rendered per session.

A digest is a JSON file `<run>/memory/<system>/<cell>.json` holding the memories in the order the
system stored them (each with the history session it came from), the ids each query retrieved
(one query per request of the cell), the counts (extraction failures, empty memories, ...) and a
fingerprint of what it was built from. A rerun with the same inputs reads it instead of calling
the memory LLM again; a changed input rebuilds it.

Rendering (`render`): with scope `cell` (the default) a session's context holds every memory
retrieved for any request of its cell, in stored order, so the cell's held-out sessions see the
same text and prefix caching applies; with scope `session` only the memories retrieved for its
own request.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Sequence

from capa_hf.errors import CapaError
from capa_hf.prompts import fill
from capa_hf.schema import Session

SCOPES = ("cell", "session")


def fingerprint(system: str, cell_id: str, history: Sequence[Session], queries: Sequence[Session], settings: dict) -> str:
    blob = json.dumps({"system": system, "cell": cell_id,
                       "history": [[s.session_id, [[t.role, t.content] for t in s.turns]] for s in history],
                       "queries": [[q.session_id, q.initial_request] for q in queries], "settings": settings},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class DigestCache:
    """Digests of one system in one run folder (nothing is kept when `out` is None)."""

    def __init__(self, out: Path | None, system: str):
        self.dir = Path(out) / "memory" / system if out is not None else None

    def path(self, cell_id: str) -> Path | None:
        return self.dir / f"{cell_id}.json" if self.dir is not None else None

    def load(self, cell_id: str, key: str) -> dict | None:
        path = self.path(cell_id)
        if path is None or not path.is_file():
            return None
        try:
            digest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None          # a torn write: rebuild
        return digest if digest.get("key") == key else None

    def save(self, cell_id: str, digest: dict) -> None:
        path = self.path(cell_id)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(digest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def selected(digest: dict, session_id: str, scope: str) -> list[dict]:
    """The memories a session's context shows, in stored order."""
    if scope not in SCOPES:
        raise CapaError(f"memory scope {scope!r}: expected one of {', '.join(SCOPES)}")
    hits = digest["hits"]
    if session_id not in hits:
        raise CapaError(f"memory digest of {digest.get('cell_id')}: no retrieval for session {session_id}")
    wanted = set(hits[session_id]) if scope == "session" else {i for ids in hits.values() for i in ids}
    return [m for m in digest["memories"] if m["id"] in wanted]


def render(system_label: str, memories: Sequence[dict], line: Callable[[dict], str]) -> str:
    """The context text: empty when nothing was retrieved (the session then sees no history)."""
    if not memories:
        return ""
    return fill("memory_digest", system=system_label, notes="\n".join(line(m) for m in memories))


def context_entry(digest: dict, session_id: str, scope: str, system_label: str, line: Callable[[dict], str]) -> dict:
    """A condition's context dict for one session: text, sources, the digest and its counts."""
    shown = selected(digest, session_id, scope)
    text = render(system_label, shown, line)
    sources = sorted({m["source"] for m in shown if m.get("source")})
    return {"text": text, "sources": sources, "digest": text,
            "memory": {"system": digest["system"], "scope": scope, "shown": len(shown),
                       "retrieved": len(digest["hits"][session_id]), "cell_counts": digest["counts"],
                       "llm": digest.get("llm")}}
