"""The two swappable parts of an episode, as protocols with registries (like conditions).

A **simulated user** answers each assistant reply. `respond` is a generator: an LLM user yields
`runners.Call`s through the same lock-step driver as the assistant and receives the results;
the scripted user yields nothing. A **judge** decides a submission against the session's
`Problem`; it may be a plain sandbox run or wrap one (an LLM veto).

    @register_user("mine")
    def make_mine(session_data, **options) -> SimulatedUser: ...

Unknown names are refused with the known ones.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Protocol, runtime_checkable

from capa_hf.errors import CapaError
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


_USERS: dict[str, Callable[..., SimulatedUser]] = {}
_JUDGES: dict[str, Callable[..., Judge]] = {}


def register_user(name: str):
    def deco(factory):
        _USERS[name] = factory
        return factory
    return deco


def register_judge(name: str):
    def deco(factory):
        _JUDGES[name] = factory
        return factory
    return deco


def known_users() -> list[str]:
    _builtins()
    return sorted(_USERS)


def known_judges() -> list[str]:
    _builtins()
    return sorted(_JUDGES)


def _builtins() -> None:
    """The shipped users and judges register when their modules load."""
    import capa_hf.simulator.judges  # noqa: F401
    import capa_hf.simulator.llm_user  # noqa: F401
    import capa_hf.simulator.users  # noqa: F401


def user_factory(name: str) -> Callable[..., SimulatedUser]:
    _builtins()
    kind = name.split(":", 1)[0]
    if kind not in _USERS:
        raise CapaError(f"unknown simulated user {name!r}; expected one of {', '.join(known_users())} "
                        "(an LLM user is written llm:<engine spec>)")
    return _USERS[kind]


def judge_factory(name: str) -> Callable[..., Judge]:
    _builtins()
    kind = name.split(":", 1)[0]
    if kind not in _JUDGES:
        raise CapaError(f"unknown judge {name!r}; expected one of {', '.join(known_judges())}")
    return _JUDGES[kind]
