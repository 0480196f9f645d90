"""One coding session as plain sequential code: the episode shared by generation and evaluation.

`session_episode` is a generator: it yields `runners.Call`s for the assistant (and, for an LLM
user or judge, for those roles) and receives `ChatResult`s; the lock-step driver batches those
calls across hundreds of live episodes. The episode never sees batching.

The loop works on plain dicts (the messages the engine gets, the verdicts the user reads); the
episode returns one typed `SessionRecord` (capa_hf/schema/record.py), validated once at its end.
An engine error is never a scored turn: the episode stops and returns an *incomplete* record
with the error, which the run leaves out of the metrics and retries on a rerun.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Generator

from pydantic import ValidationError
from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import MAX_TURNS
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.extraction import extract_submission
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.protocols import Judge, SimulatedUser


@dataclass(frozen=True)
class EpisodeSetup:
    """What the assistant sees before the request, and the rules of the session."""

    session_id: str
    problem: Problem
    initial_request: str
    system_prompt: str
    max_turns: int = MAX_TURNS
    sampling: Sampling = field(default_factory=Sampling)
    assistant_role: str = "assistant"
    trial: int = 0                      # repeated trials of one session get independent seeds
    affinity: str | None = None         # keeps a user's conversations on one replica (prefix caches)


def turn_seed(base: int | None, session_id: str, trial: int, turn: int) -> int | None:
    """A seed derived from (run seed, session, trial, turn): independent samples across trials."""
    return None if base is None else derive_seed(base, session_id, trial, turn)


def _usage(result) -> dict:
    return {"prompt_tokens": getattr(result, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(result, "completion_tokens", 0) or 0,
            "cached_tokens": getattr(result, "cached_tokens", 0) or 0,
            "latency_s": round(getattr(result, "latency_s", 0.0) or 0.0, 4),
            "finish_reason": getattr(result, "finish_reason", "stop"),
            "from_cache": bool(getattr(result, "cached", False))}


def turn_kind(reply: str, usage: dict, result: Any) -> str:
    if getattr(result, "cut_in_thinking", False):
        return "cut_off_thinking"
    if not reply.strip():
        return "empty"
    return "cut_off" if usage["finish_reason"] == "length" else "clarification"


def _call(setup: EpisodeSetup, messages: list[dict], turn: int) -> Call:
    sampling = replace(setup.sampling, seed=turn_seed(setup.sampling.seed, setup.session_id, setup.trial, turn))
    return Call(role=setup.assistant_role, messages=messages, sampling=sampling, affinity=setup.affinity)


def session_episode(setup: EpisodeSetup, user: SimulatedUser, judge: Judge) -> Generator[Call, Any, SessionRecord]:
    """Run one session to its first passing submission or to `max_turns` assistant turns.

    Returns its `SessionRecord`: the public transcript, every submission with its verdict, the
    turn of first success (None if unsolved), per-turn token usage and timings; or, when the
    engine failed, the same with `incomplete` set and the `error`.
    """
    t0 = time.perf_counter()
    head = [{"role": "system", "content": setup.system_prompt}]
    dialogue = [{"role": "user", "content": setup.initial_request}]
    submissions, usage, turn_kinds = [], [], []
    success_turn = None
    judge_s = 0.0
    error = None
    for turn in range(1, setup.max_turns + 1):
        result = yield _call(setup, head + dialogue, turn)
        if getattr(result, "finish_reason", "stop") == "error" or getattr(result, "error", None):
            error = {"turn": turn, "error": getattr(result, "error", None) or "engine error"}
            break
        reply = getattr(result, "text", "") or ""
        usage.append(_usage(result))
        dialogue.append({"role": "assistant", "content": reply})
        submission = extract_submission(reply, setup.problem.entry_point)
        verdict = None
        if submission is not None:
            tj = time.perf_counter()
            verdict = yield from judge.judge(submission, setup.problem)
            judge_s += time.perf_counter() - tj
            submissions.append({"turn": turn, **submission.to_dict(), "verdict": verdict})
            turn_kinds.append("submission")
            if verdict.get("status") == "passed":    # a judge's verdict is a dict (protocols.Judge)
                success_turn = turn
                break
        else:
            turn_kinds.append(turn_kind(reply, usage[-1], result))
        if turn == setup.max_turns:
            break
        message = yield from user.respond(reply, verdict)
        dialogue.append({"role": "user", "content": message})
    record = {
        "session_id": setup.session_id,
        "trial": setup.trial,
        "variant_id": setup.problem.variant_id,
        "turns": dialogue,
        "turn_kinds": turn_kinds,
        "assistant_turns": len(turn_kinds),
        "submissions": submissions,
        "success_turn": success_turn,
        "solved": success_turn is not None,
        "revealed": list(getattr(user, "revealed", [])),
        "user_log": list(getattr(user, "log", [])),
        "usage": usage,
        "timing": {"wall_s": round(time.perf_counter() - t0, 4), "judge_s": round(judge_s, 4)},
    }
    if error is not None:
        record.update({"incomplete": True, "error": error, "solved": False, "success_turn": None})
    try:
        return SessionRecord.from_dict(record)
    except ValidationError as exc:     # a plug-in judge's verdict without a status, say: say which field
        err = exc.errors()[0]
        raise ValueError(f"session {setup.session_id}: no valid record (judge {getattr(judge, 'name', '?')!r}, "
                         f"user {getattr(user, 'name', '?')!r}): {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
