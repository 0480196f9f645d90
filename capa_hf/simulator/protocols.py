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

from capa_hf.defaults import JUDGE
from capa_hf.errors import CapaError
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
JUDGES: Registry[Callable[..., Judge]] = Registry("judge", "capa.judges",
                                                  builtins=("capa_hf.simulator.judges", "capa_hf.simulator.veto"))

register_user = USERS.register
register_judge = JUDGES.register
known_users = USERS.names
known_judges = JUDGES.names
user_factory = USERS.get      # "llm:vllm:Qwen/Qwen3-8B" -> the factory registered as "llm"
judge_factory = JUDGES.get


def judge_spec(spec: str) -> str:
    """`spec` written in full: a judge that wraps another, named alone, wraps the default judge
    (`veto` -> `veto:sandbox`); an inner judge is checked the same way, recursively."""
    kind, colon, inner = spec.partition(":")
    factory = judge_factory(kind)
    if getattr(factory, "wraps", False):
        return f"{kind}:{judge_spec(inner or JUDGE)}"
    if colon:
        raise CapaError(f"judge {spec!r}: judge {kind!r} wraps no other judge; expected just {kind!r}")
    return kind


def judge_engine_role(spec: str) -> str | None:
    """The driver role of the engine the judge `spec` asks (the veto's: `veto`), if it declares one."""
    return getattr(judge_factory(spec), "engine_role", None)


def build_judge(spec: str, seed: int | None = 0) -> Judge:
    """The judge `spec` names. A factory that declares `wraps` gets the judge named after its
    colon (`veto:sandbox`) first; one that declares an `engine_role` gets `role` and `seed`. Only
    the outermost judge may ask a model (the run gives one engine per role)."""
    kind, _, inner = judge_spec(spec).partition(":")
    factory = judge_factory(kind)
    role = getattr(factory, "engine_role", None)
    options = {"role": role, "seed": seed} if role else {}
    if not getattr(factory, "wraps", False):
        return factory(**options)
    if judge_engine_role(inner):
        raise CapaError(f"judge {spec!r}: the judge {kind!r} wraps must not ask a model of its own")
    return factory(build_judge(inner, seed=seed), **options)


def verdict_without_model(judge: Judge, submission: Submission, problem: Problem, caller: str) -> dict:
    """The verdict of a judge that needs no model, got outside the lock-step driver (rescoring,
    the fidelity checks, the dataset build); a judge that asks a model is refused, naming `caller`."""
    gen = judge.judge(submission, problem)
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value
    gen.close()
    raise CapaError(f"judge {getattr(judge, 'name', judge)!r} asks a model for its verdict; {caller} never calls one")
