"""The condition protocol and registry, and the one rendering of history sessions.

A condition is tiny: given the evaluated targets and the dataset, it returns the text that goes
into each target's system message and the history sessions it drew on. Register new ones with
`@register("name")` (or, from a plug-in package, an entry point in the group `capa.conditions`);
the episode never changes. A condition that needs model calls (a gate, a
memory system) does them in `prepare` before any session starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from capa_hf.dataset.load import LoadedDataset
from capa_hf.errors import CapaError
from capa_hf.registry import Registry
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Session


@dataclass
class ConditionEnv:
    """What a condition that calls models gets from the run: the run folder (for its own caches),
    the completion cache, the model under test, a way to build other engines, the seed."""

    out: Path | None = None
    cache: Any = None
    assistant: Any = None
    make_engine: Callable[..., Any] | None = None
    seed: int = 0
    progress: bool = False
    options: dict = field(default_factory=dict)     # the run's --condition-arg values


class Condition(Protocol):
    """What a condition declares besides `contexts` (each optional, read by the run and the report):
    `options` (the `--condition-arg` names it takes, each with what it is; a run that gives it any
    other is refused), `order` (where tables list it), `family` (the report table it is compared in: main, identity,
    memory) with its `baseline` (the condition its paired deltas are against) and `paired_with` (a
    condition it also gets a delta-only row against), and `summary_counts(records)` (what it adds
    to summary.json as condition_stats, from `SessionRecord`s: a field the condition adds to its
    contexts, such as the gate's `gate`, is read with `rec.extra("gate")`)."""

    name: str

    def contexts(self, targets: Sequence[Session], data: LoadedDataset, env: ConditionEnv | None = None
                 ) -> dict[str, dict]:
        """session_id -> {"text": context for the system message, "sources": [session ids], ...}.
        Extra keys (a gate's verdict, a memory digest's counts) are recorded with the session."""


CONDITIONS: Registry[Callable[..., Condition]] = Registry(
    "condition", "capa.conditions",
    builtins=tuple(f"capa_hf.evaluation.conditions.{m}" for m in ("history", "gate", "mem0_memory", "amem_memory",
                                                                   "blank")))
register = CONDITIONS.register
known_conditions = CONDITIONS.names


def get_condition(name: str, seed: int = 0) -> Condition:
    return CONDITIONS.get(name)(seed=seed)


def condition_options(name: str) -> dict[str, str]:
    """The options condition `name` declares: {option: what it is}; none when it declares none."""
    return dict(getattr(CONDITIONS.get(name), "options", None) or {})


def check_condition_options(name: str, options: dict) -> None:
    """Refuse an option the condition does not declare, naming what it takes and who takes it."""
    takes = condition_options(name)
    for key in sorted(set(options) - set(takes)):
        owners = [n for n in CONDITIONS.names() if key in condition_options(n)]
        raise CapaError(f"--condition-arg {key}: the condition {name!r} takes "
                        f"{', '.join(sorted(takes)) or 'no options'} ("
                        + (f"{key} is an option of {', '.join(owners)})" if owners
                           else f"no condition declares {key})"))


def condition_rank(name: str) -> tuple[float, str]:
    """Where the report lists a condition: by its declared `order`; unknown and undeclared ones last."""
    part = CONDITIONS.get(name) if name in CONDITIONS else None
    return (getattr(part, "order", float("inf")), name)


def family_of(family: str) -> dict:
    """A report table's conditions, from what they declare: the members (compared), their baseline,
    every condition shown (members, the baseline and its own baselines, the paired ones), and the
    delta-only pairs."""
    members = sorted((n for n in CONDITIONS.names() if getattr(CONDITIONS.get(n), "family", None) == family),
                     key=condition_rank)
    baselines = {getattr(CONDITIONS.get(n), "baseline", None) for n in members}
    if len(baselines) != 1 or None in baselines:
        raise CapaError(f"conditions of the {family!r} family must declare one baseline, got {sorted(map(str, baselines))}")
    (baseline,) = baselines
    shown, b = set(members), baseline
    while b is not None and b not in shown:
        shown.add(b)
        b = getattr(CONDITIONS.get(b), "baseline", None) if b in CONDITIONS else None
    pairs = tuple((n, p) for n in members if (p := getattr(CONDITIONS.get(n), "paired_with", None)))
    shown |= {p for _, p in pairs}
    return {"members": tuple(members), "baseline": baseline,
            "shown": tuple(sorted(shown, key=condition_rank)), "pairs": pairs}


# Stop sequences for the model under test: a reply ends where it would start to write the next
# turn of a rendered history (small models continue transcripts they were shown).
HISTORY_STOPS = ("<user>", "</assistant>", "<session")


def render_dialogue(session: Session) -> str:
    return "\n".join(f"<{t.role}>\n{t.content}\n</{t.role}>" for t in session.turns)


def render_sessions(sessions: Sequence[Session], start: int = 1) -> str:
    return "\n\n".join(fill("history_session", index=str(i), dialogue=render_dialogue(s))
                       for i, s in enumerate(sessions, start))


def render_history(sessions: Sequence[Session]) -> str:
    """The same rendering for every condition that shows history sessions."""
    return "\n\n".join([prompt_text("history_header"), render_sessions(sessions), prompt_text("history_footer")])
