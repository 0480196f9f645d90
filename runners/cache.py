"""On-disk completion cache (sqlite, WAL).

The key is a hash of (engine name, model, engine settings that change replies, messages,
sampling).  The driver looks every call up before sending and stores each batch's results
as soon as the batch returns (one commit per batch), so a killed run restarts where it
stopped and a rerun with the same configuration reproduces every reply.  Results with
``finish_reason == "error"`` are never stored.  Several processes may read one cache file
at the same time; writers wait on sqlite's lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .engine import cache_identity
from .types import ChatRequest, ChatResult

SCHEMA_VERSION = 1


def request_key(engine_name: str, model: str, request: ChatRequest,
                identity: Mapping[str, Any] | None = None) -> str:
    payload = {
        "v": SCHEMA_VERSION,
        "engine": engine_name,
        "model": model,
        "identity": dict(identity or {}),
        "messages": [list(m) for m in request.messages],
        "sampling": request.sampling.to_dict(),
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def engine_key(engine: Any, request: ChatRequest) -> str:
    return request_key(getattr(engine, "name", type(engine).__name__), getattr(engine, "model", ""),
                       request, cache_identity(engine))


class CompletionCache:
    """sqlite-backed map from request key to :class:`ChatResult`."""

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=timeout_s, check_same_thread=False,
                                     isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS completions ("
            " key TEXT PRIMARY KEY,"
            " engine TEXT NOT NULL,"
            " model TEXT NOT NULL,"
            " request TEXT NOT NULL,"
            " result TEXT NOT NULL,"
            " created REAL NOT NULL)"
        )
        self.hits = 0
        self.misses = 0
        self.writes = 0

    # -- reading -------------------------------------------------------------------------
    def get(self, key: str) -> ChatResult | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, ChatResult]:
        found: dict[str, ChatResult] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(uniq), 500):
                chunk = uniq[i:i + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, result FROM completions WHERE key IN ({marks})", chunk).fetchall()
                for key, blob in rows:
                    res = ChatResult.from_dict(json.loads(blob))
                    res.cached = True
                    found[key] = res
        self.hits += sum(1 for k in keys if k in found)
        self.misses += sum(1 for k in keys if k not in found)
        return found

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM completions WHERE key=?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    # -- writing -------------------------------------------------------------------------
    def put_many(self, items: Iterable[tuple[str, str, str, ChatRequest, ChatResult]]) -> int:
        """Store ``(key, engine, model, request, result)`` rows in one transaction.

        Error results are skipped.  Returns the number of rows written.
        """
        rows = []
        now = time.time()
        for key, engine, model, request, result in items:
            if result.error is not None or result.finish_reason == "error":
                continue
            res = result.to_dict()
            res["cached"] = False
            req = {"messages": [list(m) for m in request.messages], "sampling": request.sampling.to_dict()}
            rows.append((key, engine, model, json.dumps(req, ensure_ascii=False),
                         json.dumps(res, ensure_ascii=False), now))
        if not rows:
            return 0
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO completions (key, engine, model, request, result, created)"
                    " VALUES (?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        self.writes += len(rows)
        return len(rows)

    def put(self, key: str, engine: str, model: str, request: ChatRequest, result: ChatResult) -> bool:
        return self.put_many([(key, engine, model, request, result)]) == 1

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "CompletionCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
