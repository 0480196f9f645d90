"""The two swappable parts of an episode, as protocols with registries (like conditions).

A **simulated user** answers each assistant reply. `respond` is a generator: an LLM user yields
`runners.Call`s through the same lock-step driver as the assistant and receives the results;
the scripted user yields nothing. A **judge** decides a submission against the session's
`Problem`; it may be a plain sandbox run or wrap one (an LLM veto).

    @register_user("mine")
    def make_mine(session_data, **options) -> SimulatedUser: ...

Unknown names are refused with the known ones; a plug-in package adds a part through an entry
point (groups `capa.users`, `capa.judges`; see `capa_hf/registry.py`).
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Protocol, runtime_checkable

from capa_hf.registry import Registry
from capa_hf.simulator.extraction import Submission
from capa_hf.simulator.problem import Problem


@runtime_checkable
class SimulatedUser(Protocol):
    name: str
    revealed: list[str]          # hidden item ids revealed so far, in order

    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[Any, Any, str]:
        """The next user message (yield model calls if the user needs any)."""


@runtime_checkable
class Judge(Protocol):
    name: str

    def judge(self, submission: Submission, problem: Problem) -> Generator[Any, Any, dict]:
        """The verdict as a plain dict with at least `status` ('passed' or another sandbox status).
        A generator, so that an LLM judge can yield model calls; a sandbox judge yields none."""

    def describe(self) -> dict | None: ...

    def close(self) -> None: ...


USERS: Registry[Callable[..., SimulatedUser]] = Registry(
    "simulated user", "capa.users",
    builtins=("capa_hf.simulator.users", "capa_hf.simulator.llm_user", "capa_hf.simulator.debugger_user"),
    hint="an LLM user is written llm:<engine spec>")
JUDGES: Registry[Callable[..., Judge]] = Registry("judge", "capa.judges", builtins=("capa_hf.simulator.judges",))

register_user = USERS.register
register_judge = JUDGES.register
known_users = USERS.names
known_judges = JUDGES.names
user_factory = USERS.get      # "llm:vllm:Qwen/Qwen3-8B" -> the factory registered as "llm"
judge_factory = JUDGES.get
