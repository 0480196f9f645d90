"""Counts a run's condition adds to summary.json (`condition_stats`), from the session records:
the gate's verdicts per session, and a memory system's counts once per cell."""

from __future__ import annotations

from typing import Sequence


def condition_stats(records: Sequence[dict]) -> dict:
    """Counts for summary.json: the gate's verdicts per session, a memory system's counts per cell."""
    out: dict = {}
    gated = [r["gate"] for r in records if isinstance(r.get("gate"), dict)]
    if gated:
        n = len(gated)
        suff = sum(1 for g in gated if g.get("sufficient") and not g.get("fallback"))
        out["gate"] = {"sessions": n, "sufficient": suff, "sufficient_rate": round(suff / n, 4),
                       "unresolved": sum(1 for g in gated if not g.get("sufficient") and not g.get("fallback")),
                       "fallbacks": sum(1 for g in gated if g.get("fallback")),
                       "retried": sum(1 for g in gated if g.get("attempts", 1) > 1)}
    cells: dict = {}
    for r in records:
        mem = r.get("memory")
        if isinstance(mem, dict):
            cells.setdefault(r.get("cell_id"), (mem, r))
    if cells:
        totals: dict = {}
        for mem, _ in cells.values():
            for k, v in (mem.get("cell_counts") or {}).items():
                if isinstance(v, (int, float)):
                    totals[k] = totals.get(k, 0) + v
        empty_contexts = sum(1 for r in records if isinstance(r.get("memory"), dict) and not r.get("context_chars"))
        first = next(iter(cells.values()))[0]
        out["memory"] = {"system": first.get("system"), "llm": first.get("llm"), "cells": len(cells),
                         "empty_cells": sum(1 for m, _ in cells.values() if not (m.get("cell_counts") or {}).get("memories",
                                            (m.get("cell_counts") or {}).get("notes", 0))),
                         "empty_contexts": empty_contexts, **totals}
    return out
