"""ES, FT-ES and TTC, with bootstrap intervals. Pure functions over session records.

A record is one line of a run's sessions.jsonl: it needs `submissions` (each with `turn` and a
`verdict` holding `status`), and for grouping `persona_id` and `mechanisms`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

MAX_TURNS = 8


def first_success_turn(record: dict) -> int | None:
    """The turn of the first passing submission; later passing submissions are ignored."""
    turns = [s["turn"] for s in record.get("submissions", []) if s.get("verdict", {}).get("status") == "passed"]
    return min(turns) if turns else None


def solved(record: dict, max_turns: int = MAX_TURNS) -> bool:
    t = first_success_turn(record)
    return t is not None and t <= max_turns


def es(records: Sequence[dict], max_turns: int = MAX_TURNS) -> float:
    return _mean([1.0 if solved(r, max_turns) else 0.0 for r in records])


def ft_es(records: Sequence[dict]) -> float:
    return _mean([1.0 if first_success_turn(r) == 1 else 0.0 for r in records])


def ttc(records: Sequence[dict], max_turns: int = MAX_TURNS) -> float:
    """Mean first-success turn; an unsolved session counts as `max_turns`."""
    return _mean([float(t) if (t := first_success_turn(r)) is not None and t <= max_turns else float(max_turns)
                  for r in records])


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def bootstrap_ci(records: Sequence[dict], stat: Callable[[Sequence[dict]], float], n: int = 2000,
                 seed: int = 0, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap over sessions."""
    if not records:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    k = len(records)
    values = sorted(stat([records[rng.randrange(k)] for _ in range(k)]) for _ in range(n))
    lo = values[int((alpha / 2) * (n - 1))]
    hi = values[int((1 - alpha / 2) * (n - 1))]
    return (lo, hi)


def metric_block(records: Sequence[dict], max_turns: int = MAX_TURNS, n_boot: int = 2000, seed: int = 0) -> dict:
    stats = {"ES": lambda rs: es(rs, max_turns), "FT-ES": ft_es, "TTC": lambda rs: ttc(rs, max_turns)}
    out = {"n": len(records)}
    for name, fn in stats.items():
        lo, hi = bootstrap_ci(records, fn, n=n_boot, seed=seed)
        out[name] = {"value": fn(records), "ci95": [lo, hi]}
    out["clarifications_per_session"] = _mean([
        float(sum(1 for k in r.get("turn_kinds", []) if k == "clarification")) for r in records])
    return out


def grouped(records: Iterable[dict], key: Callable[[dict], Iterable[str]]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in records:
        for g in key(r):
            groups.setdefault(g, []).append(r)
    return dict(sorted(groups.items()))


def summarize(records: Sequence[dict], max_turns: int = MAX_TURNS, n_boot: int = 2000, seed: int = 0) -> dict:
    """Overall, per persona, and per mechanism (multi-label: a session counts for both)."""
    return {
        "overall": metric_block(records, max_turns, n_boot, seed),
        "per_persona": {k: metric_block(v, max_turns, n_boot, seed)
                        for k, v in grouped(records, lambda r: [r["persona_id"]]).items()},
        "per_mechanism": {k: metric_block(v, max_turns, n_boot, seed)
                          for k, v in grouped(records, lambda r: r["mechanisms"]).items()},
    }
