"""Casting an episode: one function for both generation (Stage 2) and evaluation.

The cast is the assistant (an engine role in the driver), the simulated user (a registered
`SimulatedUser`, built from the session's `UserBrief`), the judge (a registered `Judge`) and
the context the assistant sees before the request (the system prompt, with a history
condition's text in evaluation).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from runners.types import Sampling

from capa_hf.defaults import MAX_TURNS, USER
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.episode import EpisodeSetup, session_episode
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.protocols import Judge, user_factory


def cast_episode(brief: UserBrief, problem: Problem, initial_request: str, system_prompt: str, judge: Judge, *,
                 sampling: Sampling, user: str = USER, user_options: Mapping[str, Any] | None = None,
                 max_turns: int = MAX_TURNS, trial: int = 0, affinity: str | None = None,
                 assistant_role: str = "assistant") -> Callable[[], Any]:
    """An episode factory for the driver. The user is built afresh each time the factory runs."""
    setup = EpisodeSetup(session_id=brief.session_id, problem=problem, initial_request=initial_request,
                         system_prompt=system_prompt, max_turns=max_turns, sampling=sampling,
                         assistant_role=assistant_role, trial=trial, affinity=affinity)
    make_user = user_factory(user)

    def factory():
        return session_episode(setup, make_user(brief, **dict(user_options or {})), judge)

    return factory
