"""ES, FT-ES, TTC and pass^k, with bootstrap intervals. Pure functions over session records.

A record is a `SessionRecord` (one line of a run's sessions.jsonl): the metrics read its
`submissions` (each with `turn` and `verdict.status`), `session_id` and `trial`, and for grouping
`persona_id`, `mechanisms`, `role`, `item_kinds`, `fully_resolvable` and `difficulty`. Incomplete
records (an engine error) are never scored: the caller leaves them out. With several trials per
session, a metric is the mean over all trials, and its interval resamples sessions (all trials of
a session together).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from math import comb

from capa_hf.defaults import BOOTSTRAP_RESAMPLES, CONFIDENCE, MAX_TURNS
from capa_hf.schema.record import SessionRecord

Records = Sequence[SessionRecord]


def first_success_turn(record: SessionRecord) -> int | None:
    """The turn of the first passing submission; later passing submissions are ignored."""
    turns = [s.turn for s in record.submissions if s.verdict.passed]
    return min(turns) if turns else None


def solved(record: SessionRecord, max_turns: int = MAX_TURNS) -> bool:
    t = first_success_turn(record)
    return t is not None and t <= max_turns


def es(records: Records, max_turns: int = MAX_TURNS) -> float:
    return _mean([1.0 if solved(r, max_turns) else 0.0 for r in records])


def ft_es(records: Records) -> float:
    return _mean([1.0 if first_success_turn(r) == 1 else 0.0 for r in records])


def ttc(records: Records, max_turns: int = MAX_TURNS) -> float:
    """Mean first-success turn; an unsolved session counts as `max_turns`."""
    return _mean([float(t) if (t := first_success_turn(r)) is not None and t <= max_turns else float(max_turns)
                  for r in records])


def pass_hat_k(successes: Sequence[tuple[int, int]], k: int) -> float:
    """tau2-bench's pass^k: the chance that k trials drawn from a session's n all succeed,
    averaged over sessions; `successes` holds (successes c, trials n) per session, n >= k."""
    usable = [(c, n) for c, n in successes if n >= k]
    return _mean([comb(c, k) / comb(n, k) for c, n in usable])


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def clusters(records: Records) -> list[list[SessionRecord]]:
    """Records grouped by session (a session's trials stay together), in first-seen order."""
    out: dict[str, list[SessionRecord]] = {}
    for r in records:
        out.setdefault(r.session_id, []).append(r)
    return list(out.values())


def bootstrap_ci(records: Records, stat: Callable[[Records], float], n: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0, alpha: float = 1 - CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap over sessions."""
    groups = clusters(records)
    if not groups:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    k = len(groups)
    values = sorted(stat([r for _ in range(k) for r in groups[rng.randrange(k)]]) for _ in range(n))
    return (values[int((alpha / 2) * (n - 1))], values[int((1 - alpha / 2) * (n - 1))])


def metric_block(records: Records, max_turns: int = MAX_TURNS, n_boot: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0) -> dict:
    stats = {"ES": lambda rs: es(rs, max_turns), "FT-ES": ft_es, "TTC": lambda rs: ttc(rs, max_turns)}
    out = {"n": len(records), "sessions": len(clusters(records))}
    for name, fn in stats.items():
        lo, hi = bootstrap_ci(records, fn, n=n_boot, seed=seed)
        out[name] = {"value": fn(records), "ci95": [lo, hi]}
    out["clarifications_per_session"] = _mean([
        float(sum(1 for k in r.turn_kinds if k == "clarification")) for r in records])
    return out


def trial_block(records: Records, max_turns: int = MAX_TURNS) -> dict | None:
    """With several trials per session: per-trial ES spread and pass^k for k = 1..n."""
    groups = clusters(records)
    n_trials = min((len(g) for g in groups), default=0)
    if n_trials < 2:
        return None
    by_trial: dict[int, list[SessionRecord]] = {}
    for r in records:
        by_trial.setdefault(r.trial, []).append(r)
    per_trial = [es(rs, max_turns) for _, rs in sorted(by_trial.items())]
    mean = _mean(per_trial)
    sd = (sum((x - mean) ** 2 for x in per_trial) / (len(per_trial) - 1)) ** 0.5
    succ = [(sum(solved(r, max_turns) for r in g), len(g)) for g in groups]
    return {"trials": n_trials, "ES_per_trial": per_trial, "ES_between_trial_sd": sd,
            "pass_hat_k": {str(k): pass_hat_k(succ, k) for k in range(1, n_trials + 1)}}


def grouped(records: Iterable[SessionRecord],
            key: Callable[[SessionRecord], Iterable[str]]) -> dict[str, list[SessionRecord]]:
    groups: dict[str, list[SessionRecord]] = {}
    for r in records:
        for g in key(r):
            groups.setdefault(g, []).append(r)
    return dict(sorted(groups.items()))


def item_kind_label(record: SessionRecord) -> str:
    kinds = set(record.item_kinds)
    if kinds == {"convention"}:
        return "conventions only"
    if kinds == {"task"}:
        return "task items only"
    return "conventions + task items" if kinds else "unknown"


def summarize(records: Records, max_turns: int = MAX_TURNS, n_boot: int = BOOTSTRAP_RESAMPLES,
              seed: int = 0) -> dict:
    """Overall, per persona, per mechanism (multi-label: a session counts for both), per role,
    per item kind, by whether history resolves every hidden item, and per difficulty label
    (records annotated with `difficulty`)."""
    def block(rs):
        return metric_block(rs, max_turns, n_boot, seed)

    def by(key):
        return {k: block(v) for k, v in grouped(records, key).items()}

    out = {
        "overall": block(records),
        "per_persona": by(lambda r: [r.persona_id] if r.persona_id else []),
        "per_mechanism": by(lambda r: r.mechanisms),
        "per_role": by(lambda r: [r.role] if r.role else []),
        "per_item_kind": by(lambda r: [item_kind_label(r)] if r.item_kinds else []),
        "per_resolvable": by(lambda r: ["fully resolvable from history" if r.fully_resolvable
                                        else "not fully resolvable"] if r.fully_resolvable is not None else []),
        "per_difficulty": by(lambda r: [r.difficulty] if r.difficulty else []),
    }
    trials = trial_block(records, max_turns)
    if trials:
        out["trials"] = trials
    return out
