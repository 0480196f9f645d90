"""What the memory conditions (mem0, amem) share: per-cell digests, cached in the run folder,
built with the memory LLM that one `memory_endpoint` provides for the whole run.

Options (`--memory-llm`, `--condition-arg KEY=VALUE`): `memory_llm` (default: the embedded
model, served by llama.cpp for the run), `memory_scope` (`cell`, the default, or `session`;
see `capa_hf.memory.digest`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Sequence

from capa_hf.dataset.load import LoadedDataset
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import ConditionEnv
from capa_hf.evaluation.conditions.history import by_cell, own_history
from capa_hf.memory.digest import SCOPES, DigestCache, context_entry, fingerprint
from capa_hf.memory.endpoint import DEFAULT_MEMORY_LLM, Endpoint, memory_endpoint
from capa_hf.schema import Session
from capa_hf.schema.record import SessionRecord


def query_sessions(cell_id: str, data: LoadedDataset, targets: Sequence[Session]) -> list[Session]:
    """The requests a cell's memory is asked about: its held-out sessions and any evaluated target
    of the cell, so the digest does not depend on --limit."""
    pool = {s.session_id: s for s in data.heldout.values() if s.cell_id == cell_id}
    pool.update({t.session_id: t for t in targets if t.cell_id == cell_id})
    return sorted(pool.values(), key=lambda s: (s.position, s.session_id))


def memory_counts(records: Sequence[SessionRecord]) -> dict:
    """summary.json's `condition_stats` of a memory run: the memory system's counts, once per cell
    (each record's `memory`, a field of the memory conditions' own)."""
    out: dict = {}
    cells: dict = {}
    for r in records:
        mem = r.extra("memory")
        if isinstance(mem, dict):
            cells.setdefault(r.cell_id, (mem, r))
    if cells:
        totals: dict = {}
        for mem, _ in cells.values():
            for k, v in (mem.get("cell_counts") or {}).items():
                if isinstance(v, (int, float)):
                    totals[k] = totals.get(k, 0) + v
        empty_contexts = sum(1 for r in records if isinstance(r.extra("memory"), dict) and not r.context_chars)
        first = next(iter(cells.values()))[0]
        out["memory"] = {"system": first.get("system"), "llm": first.get("llm"), "cells": len(cells),
                         "empty_cells": sum(1 for m, _ in cells.values() if not (m.get("cell_counts") or {}).get("memories",
                                            (m.get("cell_counts") or {}).get("notes", 0))),
                         "empty_contexts": empty_contexts, **totals}
    return out


class MemoryCondition:
    """Subclasses set `name`, `label`, `settings()`, `check_installed()`, `build()`, `line()`."""

    name = ""
    summary_counts = staticmethod(memory_counts)
    label = ""
    options = {"memory_llm": "the memory system's LLM, also --memory-llm (default: the embedded model)",
               "memory_scope": f"what a session's context holds: {' or '.join(SCOPES)} (default: cell)"}

    def __init__(self, seed: int = 0):
        self.seed = seed

    # -- what a subclass provides --------------------------------------------------------
    def settings(self) -> dict:
        raise NotImplementedError

    def check_installed(self) -> None:
        raise NotImplementedError

    def build(self, cells: dict[str, tuple[list[Session], list[Session]]], endpoint: Endpoint, env: ConditionEnv,
              work_dir: Path) -> dict[str, dict]:
        """cell -> {"memories": [...], "hits": {session id: [memory ids]}, "counts": {...}}"""
        raise NotImplementedError

    @staticmethod
    def line(memory: dict) -> str:
        raise NotImplementedError

    # -- the shared part -----------------------------------------------------------------
    def contexts(self, targets, data, env=None):
        env = env or ConditionEnv()
        opts = dict(env.options or {})
        scope = str(opts.get("memory_scope", "cell"))
        if scope not in SCOPES:
            raise CapaError(f"--condition-arg memory_scope={scope}: expected one of {', '.join(SCOPES)}")
        spec = str(opts.get("memory_llm") or DEFAULT_MEMORY_LLM)
        settings = {**self.settings(), "memory_llm": spec, "seed": self.seed}
        cache = DigestCache(env.out, self.name)
        digests, todo, keys = {}, {}, {}
        for cell_id in by_cell(targets):
            hist, queries = own_history(cell_id, data), query_sessions(cell_id, data, targets)
            keys[cell_id] = fingerprint(self.name, cell_id, hist, queries, settings)
            found = cache.load(cell_id, keys[cell_id])
            if found is not None:
                digests[cell_id] = found
            else:
                todo[cell_id] = (hist, queries)
        if todo:
            self.check_installed()
            with tempfile.TemporaryDirectory(prefix=f"capa-{self.name}-") as tmp:
                work_dir = Path(env.out) if env.out is not None else Path(tmp)
                with memory_endpoint(spec, log_dir=env.out) as endpoint:
                    if env.progress:
                        print(f"{self.name}: building {len(todo)} cell digest(s) with {endpoint.model} at "
                              f"{endpoint.base_url}", file=sys.stderr)
                    built = self.build(todo, endpoint, env, work_dir)
                for cell_id, digest in built.items():
                    digest = {"system": self.name, "cell_id": cell_id, "key": keys[cell_id],
                              "llm": endpoint.describe(), "settings": settings, **digest}
                    cache.save(cell_id, digest)
                    digests[cell_id] = digest
        return {t.session_id: context_entry(digests[t.cell_id], t.session_id, scope, self.label, self.line)
                for t in targets}

