"""Token, latency and cache accounting, per episode and per run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .types import ChatResult


@dataclass
class Usage:
    """Totals over a set of calls (one episode, one engine, or one run)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0      # engine latency of calls actually sent (cache hits add nothing)
    cache_hits: int = 0
    errors: int = 0
    length_stops: int = 0

    def add(self, result: ChatResult) -> None:
        self.calls += 1
        self.prompt_tokens += int(result.prompt_tokens or 0)
        self.completion_tokens += int(result.completion_tokens or 0)
        self.cached_tokens += int(result.cached_tokens or 0)
        if result.cached:
            self.cache_hits += 1
        else:
            self.latency_s += float(result.latency_s or 0.0)
        if not result.ok:
            self.errors += 1
        elif result.finish_reason == "length":
            self.length_stops += 1

    def merge(self, other: "Usage") -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BatchRecord:
    """One step's batch for one engine."""

    step: int
    engine: str          # engine label: "<name>:<model>"
    roles: tuple[str, ...]
    size: int            # calls in the step for this engine (hits + sent)
    sent: int            # requests actually sent to the engine (cache misses)
    cache_hits: int
    engine_s: float      # wall time inside engine.generate for this batch


@dataclass
class RunStats:
    """What a driver run did.  Pass one to ``run_episodes(stats=...)`` to read it afterwards."""

    episodes: int = 0
    finished: int = 0
    failed: int = 0
    steps: int = 0
    calls: int = 0               # calls yielded by episodes
    batches: int = 0             # engine.generate invocations
    sent: int = 0                # requests sent to engines
    cache_hits: int = 0
    wall_s: float = 0.0
    engine_s: float = 0.0        # time spent inside engine.generate
    cache_s: float = 0.0         # time spent reading/writing the completion cache
    usage: Usage = field(default_factory=Usage)
    per_engine: dict[str, Usage] = field(default_factory=dict)
    batch_log: list[BatchRecord] = field(default_factory=list)

    @property
    def overhead_s(self) -> float:
        """Driver time outside engines and the cache (episode code included)."""
        return max(0.0, self.wall_s - self.engine_s - self.cache_s)

    def batch_sizes(self, engine: str | None = None) -> list[int]:
        """Requests sent per batch, in order (optionally for one engine label)."""
        return [b.sent for b in self.batch_log if engine is None or b.engine == engine]

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes, "finished": self.finished, "failed": self.failed,
            "steps": self.steps, "calls": self.calls, "batches": self.batches, "sent": self.sent,
            "cache_hits": self.cache_hits, "wall_s": round(self.wall_s, 6),
            "engine_s": round(self.engine_s, 6), "cache_s": round(self.cache_s, 6),
            "overhead_s": round(self.overhead_s, 6),
            "usage": self.usage.to_dict(),
            "per_engine": {k: v.to_dict() for k, v in self.per_engine.items()},
        }
