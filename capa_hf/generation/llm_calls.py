"""Offline LLM work outside an episode (Stage 1 requests, the Stage 3 consistency check, keypoint
extraction), batched by the same lock-step driver: each job is a small generator that yields
`runners.Call`s in one role, so all pending jobs go to the engine as one batch per step, through
the completion cache when one is given."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from runners.driver import run_episodes
from runners.engine import engine_label

from capa_hf.errors import CapaError


def run_jobs(jobs: Iterable[tuple[str, Callable[[], Any]]], engine: Any, role: str, cache=None,
             progress: bool | str = False) -> dict[str, Any]:
    """Run every job to its return value; a job that raised (an engine error, a bug) is named."""
    outcomes = run_episodes(list(jobs), engines={role: engine}, cache=cache, progress=progress)
    broken = {jid: oc.error for jid, oc in outcomes.items() if oc.error}
    if broken:
        jid, err = next(iter(broken.items()))
        last = err.strip().splitlines()[-1] if err else "unknown error"
        raise CapaError(f"{role}: {len(broken)} of {len(outcomes)} jobs failed, first {jid}: {last}")
    return {jid: oc.result for jid, oc in outcomes.items()}


def spec_name(engine: Any, spec: str | None = None) -> str:
    """How an engine is recorded in `generator` fields and the card: its spec, else name:model."""
    return spec or engine_label(engine)
