"""One coding session as plain sequential code: the episode shared by generation and evaluation.

`session_episode` is a generator: it yields `runners.Call`s for the assistant (and, for an LLM
user, for the user) and receives `ChatResult`s; the lock-step driver batches those calls across
hundreds of live episodes. The episode never sees batching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Generator

from runners.types import Sampling
from runners.driver import Call

from capa_hf.schema import Task
from capa_hf.simulator.extraction import extract_submission

MAX_TURNS = 8


@dataclass(frozen=True)
class EpisodeSetup:
    """What the assistant sees before the request, and the rules of the session."""

    session_id: str
    task: Task
    initial_request: str
    system_prompt: str
    context: tuple[dict, ...] = ()     # messages from the history condition, before the request
    max_turns: int = MAX_TURNS
    sampling: Sampling = field(default_factory=Sampling)
    assistant_role: str = "assistant"


def _usage(result) -> dict:
    return {"prompt_tokens": getattr(result, "prompt_tokens", 0),
            "completion_tokens": getattr(result, "completion_tokens", 0),
            "cached_tokens": getattr(result, "cached_tokens", 0),
            "latency_s": round(getattr(result, "latency_s", 0.0), 4),
            "finish_reason": getattr(result, "finish_reason", "stop"),
            "from_cache": bool(getattr(result, "cached", False))}


def session_episode(setup: EpisodeSetup, user, judge) -> Generator[Call, Any, dict]:
    """Run one session to its first passing submission or to `max_turns` assistant turns.

    Returns a plain dict: the public transcript, every submission with its verdict, the turn of
    first success (None if unsolved), per-turn token usage and timings.
    """
    t0 = time.perf_counter()
    head = [{"role": "system", "content": setup.system_prompt}, *setup.context]
    dialogue = [{"role": "user", "content": setup.initial_request}]
    submissions, usage, turn_kinds = [], [], []
    success_turn = None
    judge_s = 0.0
    for turn in range(1, setup.max_turns + 1):
        result = yield Call(role=setup.assistant_role, messages=head + dialogue, sampling=setup.sampling)
        reply = (getattr(result, "text", "") or "")
        usage.append(_usage(result))
        dialogue.append({"role": "assistant", "content": reply})
        submission = extract_submission(reply, setup.task.entry_point)
        verdict = None
        if submission is not None:
            tj = time.perf_counter()
            verdict = judge.judge(submission, setup.task)
            judge_s += time.perf_counter() - tj
            submissions.append({"turn": turn, **submission.to_dict(), "verdict": verdict})
            turn_kinds.append("submission")
            if verdict.get("status") == "passed":
                success_turn = turn
                break
        else:
            turn_kinds.append("empty" if not reply.strip() else
                              "cut_off" if usage[-1]["finish_reason"] == "length" else "clarification")
        if turn == setup.max_turns:
            break
        message = yield from user.respond(reply, verdict)
        dialogue.append({"role": "user", "content": message})
    return {
        "session_id": setup.session_id,
        "turns": dialogue,
        "turn_kinds": turn_kinds,
        "assistant_turns": len(turn_kinds),
        "submissions": submissions,
        "success_turn": success_turn,
        "solved": success_turn is not None,
        "revealed": list(getattr(user, "revealed", [])),
        "usage": usage,
        "timing": {"wall_s": round(time.perf_counter() - t0, 4), "judge_s": round(judge_s, 4)},
    }
