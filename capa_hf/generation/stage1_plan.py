"""Stage 1, part one: what a session hides, by which mechanism, and what it states plainly.

Pure and text-free. A session's *plan* hides two kinds of items:
- **convention items**: the user's value on a dimension the task exercises, obscured by the
  mechanism the cell assigns to that dimension (`Cell.dimension_mechanisms`);
- **task items**: task-specific keypoints, chosen by each mechanism's resolution pattern (the
  keypoint categories it takes first), only among *hideable* keypoints (verified by a curated
  misreading the tests refuse) that are not about a dimension.
What the plan does not hide is visible: the other keypoints (their dimension-neutral lines) and
plain statements of the remaining dimensions. The cell's role for the position (learn, reuse,
convention_only, mixed; see capa_hf.schema.cell.ROLE_DOC) decides the mix. Planning goes through
a cell's positions in order, so each item knows the earlier history sessions that stated the
same value (`revealed_in`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from capa_hf.defaults import APPLY_WITHOUT_ASKING, GUESS_FIRST_SHARE, HISTORY_SIZE
from capa_hf.generation.empty_results import knowable
from capa_hf.schema import Cell, Keypoint, Mechanism, TaskContent
from capa_hf.schema.convention import VariantSource
from capa_hf.seeding import rng_for

EXTRA_TASK_ITEM = 0.35      # chance a mechanism that hides a convention also hides a task item
HIDE_UNSHOWN = 0.5          # chance a mixed held-out session hides a convention the history never showed
MAX_ITEMS = 5               # hidden items per session at most


@dataclass(frozen=True)
class PlannedItem:
    kind: str                         # "convention" | "task"
    mechanism: Mechanism
    keypoint: Keypoint | None         # the task keypoint (a convention item's, when it has one)
    dimension: str | None = None
    value: str | None = None
    revealed_in: tuple[str, ...] = ()
    apply_unasked: bool = False       # the reference assistant applies it without asking (history)

    @property
    def order(self) -> int:
        return int(self.keypoint.id[3:]) if self.keypoint else 100


@dataclass(frozen=True)
class SessionPlan:
    session_id: str
    position: int
    role: str
    task_id: str
    values: tuple[tuple[str, str], ...]          # the variant: (dimension, value) for the task's dimensions
    items: tuple[PlannedItem, ...]               # hidden, in priority order
    visible: tuple[tuple[Keypoint, str], ...]    # visible keypoints with the line the request uses
    stated: tuple[tuple[str, str], ...]          # dimensions stated plainly: (dimension, value)
    guess_first: bool = False                    # Stage 2: the reference assistant guesses first
    single_mechanism: bool = False               # only one mechanism could act (a counted relaxation)
    refused: tuple[str, ...] = ()                # hideable keypoints the visible text settles in this session
    second_repair: bool = False                  # Stage 2: a first repair fails once more (defaults.LONG_TRACE_SHARE)

    def hidden_dimensions(self) -> set[str]:
        return {i.dimension for i in self.items if i.kind == "convention"}


@dataclass
class CellMemory:
    """What the user has stated in the cell's history so far: dimension -> session ids."""

    stated: dict[str, list[str]] = field(default_factory=dict)
    neutral_kinds: set[str] = field(default_factory=set)   # empty-result kinds shown under empty_input=neutral

    def shown(self, dim: str) -> tuple[str, ...]:
        return tuple(self.stated.get(dim, ()))

    def record(self, dim: str, session_id: str) -> None:
        self.stated.setdefault(dim, []).append(session_id)


def session_id(cell: Cell, position: int) -> str:
    return f"{cell.cell_id}-S{position:02d}"


def hideable_keypoints(content: TaskContent, source: VariantSource | None) -> list[Keypoint]:
    """Task keypoints that may be hidden: verified by a misreading and not about a dimension."""
    if source is None:
        return []
    return [k for k in content.keypoints if k.id in source.misreadings and k.id not in source.convention_keypoints]


def _pattern_categories(mechanism: Mechanism, pattern_id: str | None) -> tuple[str, ...]:
    for p in mechanism.patterns:
        if p.id == pattern_id:
            return p.categories
    return mechanism.patterns[0].categories


def pick_task_item(free: list[Keypoint], mechanism: Mechanism, pattern_id: str | None) -> Keypoint | None:
    """The first free keypoint of the first category of the mechanism's pattern that has one,
    else the first free keypoint: the v0.1 information control, one item at a time."""
    for category in _pattern_categories(mechanism, pattern_id):
        for k in free:
            if k.category == category:
                return k
    return free[0] if free else None


# `refuters(keypoint_id)`: the visible sources (gist or keypoint ids) whose stated examples the
# keypoint's misreading fails under the session's variant (capa_hf.variants.visible_examples)
Refuters = Callable[[str], frozenset]


def task_items(cell: Cell, role: str, items: list[PlannedItem], free: list[Keypoint],
               mechanisms: Mapping[str, Mechanism], rng, refuters: Refuters | None = None,
               unseen: frozenset = frozenset()) -> list[PlannedItem]:
    """Task items by the v0.1 control, dealt round by round so both mechanisms get one first:
    1. each mechanism that obscures nothing yet takes one keypoint of its pattern's categories;
    2. a mechanism with no convention to obscure takes more, up to its `max_items`;
    3. a mechanism that obscures a convention sometimes takes one (a mixed held-out session
       always gets at least one task item).
    A keypoint is taken only while every source that refutes its misreading is out of sight:
    hidden as a task item already, or in `unseen` (keypoints with no visible line)."""
    free = list(free)
    out: list[PlannedItem] = []
    mechs = sorted(cell.mechanisms)
    has_conv = {m: any(i.mechanism.id == m for i in items) for m in mechs}

    def take(m: str) -> bool:
        if len(items) + len(out) >= MAX_ITEMS:
            return False
        hidden = unseen | {i.keypoint.id for i in out}
        ok = [k for k in free if refuters is None or refuters(k.id) <= hidden]
        kp = pick_task_item(ok, mechanisms[m], cell.patterns.get(m))
        if kp is None:
            return False
        free.remove(kp)
        out.append(PlannedItem("task", mechanisms[m], kp))
        return True

    for m in mechs:
        if not has_conv[m]:
            take(m)
    for m in mechs:
        if not has_conv[m]:
            while sum(1 for i in out if i.mechanism.id == m) < mechanisms[m].max_items and take(m):
                pass
    for m in mechs:
        if has_conv[m] and ((role == "mixed" and not out) or rng.random() < EXTRA_TASK_ITEM):
            take(m)
    return out


def names_container(items: list[PlannedItem], stated: list[tuple[str, str]]) -> bool:
    """Whether the request speaks of the result's container (stated, or obscured but not removed),
    or states the neutral empty-input value ("return False", "return 0", "return an empty list"):
    the return type is then named, and a `data_type` misreading that returns another kind is ruled out."""
    return any(d == "container" or (d, v) == ("empty_input", "neutral") for d, v in stated) or any(
        i.dimension == "container" and i.mechanism.operation != "remove" for i in items)


def settlers(source: VariantSource | None, target: str) -> frozenset:
    """The visible sources ("gist" or keypoint ids) whose line settles `target`, a keypoint or a
    dimension, by the curated `settles` tags of the task's variants file."""
    if source is None:
        return frozenset()
    return frozenset(s for s, targets in source.settles.items() if target in targets)


def session_refuters(content: TaskContent, source: VariantSource | None, values: Mapping[str, str],
                     examples, items: list[PlannedItem], stated: list[tuple[str, str]]) -> Refuters:
    """What refutes each hideable keypoint's misreading in this session: the visible sources whose
    stated examples it fails (`examples`: a visible_examples.ExampleCheck, or None), the sources
    whose line settles it (`settles` tags), and for a `data_type` keypoint the container sentence
    when the request has one ("gist" stands for it: it cannot be hidden)."""
    typed = names_container(items, stated)
    cats = {k.id: k.category for k in content.keypoints}

    def refuters(kp: str) -> frozenset:
        out = examples.refused_by(content.task_id, values, kp) if examples is not None else frozenset()
        out = out | settlers(source, kp)
        return out | {"gist"} if typed and cats.get(kp) == "data_type" else out
    return refuters


def settled_in_sight(source: VariantSource | None, dim: str, unseen: frozenset) -> bool:
    """Whether a line the request will show settles `dim` (a `settles` tag whose source is the gist or
    a keypoint with a visible line); such a dimension is stated plainly rather than hidden."""
    return any(s == "gist" or s not in unseen for s in settlers(source, dim))


def neutral_unknowable(position: int, dim: str, value: str, kind: str | None, memory: CellMemory) -> bool:
    """A held-out session cannot hide empty_input=neutral where the natural empty result is a
    bool, a sentinel or anything but the empty container, 0 or "" (`empty_results`), unless the
    same user's history showed the neutral value for a task of the same return kind."""
    return (position > HISTORY_SIZE and dim == "empty_input" and value == "neutral"
            and not knowable(kind) and kind not in memory.neutral_kinds)


def plan_session(cell: Cell, position: int, content: TaskContent, source: VariantSource | None,
                 mechanisms: Mapping[str, Mechanism], memory: CellMemory, seed: int, examples=None,
                 empty_kind: str | None = None) -> SessionPlan:
    """Plan one session. `memory` holds what earlier history sessions of the cell stated; the
    caller records this plan's statements into it afterwards (`remember`). `examples` (a
    visible_examples.ExampleCheck) refuses task items whose misreading a visible example refutes."""
    sid = session_id(cell, position)
    role = cell.role_of(position) or ("learn" if position <= HISTORY_SIZE else "mixed")
    rng = rng_for(seed, "plan", sid)
    dims = sorted(source.dimensions) if source else []
    values = tuple((d, cell.profile[d]) for d in dims)
    conv_kp = {dim: kp for kp, dim in (source.convention_keypoints.items() if source else ())}
    kps = {k.id: k for k in content.keypoints}
    items: list[PlannedItem] = []
    stated: list[tuple[str, str]] = []
    neutral_lines = source.neutral_plain if source else {}
    unseen = frozenset(k for k in conv_kp.values() if k not in neutral_lines)
    for d in dims:
        shown = memory.shown(d)
        hide = (role in ("learn", "reuse") or bool(shown) or (role == "mixed" and rng.random() < HIDE_UNSHOWN))
        if (role == "convention_only" and not shown) or neutral_unknowable(position, d, cell.profile[d],
                                                                            empty_kind, memory):
            hide = False
        if settled_in_sight(source, d, unseen):
            hide = False
        if not hide:
            stated.append((d, cell.profile[d]))
            continue
        unasked = position <= HISTORY_SIZE and bool(shown) and (role == "reuse" or rng.random() < APPLY_WITHOUT_ASKING)
        items.append(PlannedItem("convention", mechanisms[cell.dimension_mechanisms[d]],
                                 kps.get(conv_kp[d]) if d in conv_kp else None, d, cell.profile[d], shown, unasked))
    refused: tuple[str, ...] = ()
    if role in ("learn", "mixed"):
        # a stated dimension's value line stands where its convention keypoint would: in sight
        said = {d for d, _ in stated}
        unseen = frozenset(k for d, k in conv_kp.items() if k not in neutral_lines and d not in said)
        free = hideable_keypoints(content, source)
        refuters = session_refuters(content, source, dict(values), examples, items, stated)
        taken = task_items(cell, role, items, free, mechanisms, rng, refuters, unseen)
        hidden = unseen | {i.keypoint.id for i in taken}
        refused = tuple(k.id for k in free if k.id not in hidden and not refuters(k.id) <= hidden)
        items += taken
    items.sort(key=lambda i: (i.order, i.dimension or ""))
    hidden_kp = {i.keypoint.id for i in items if i.kind == "task"}
    conv = source.convention_keypoints if source else {}
    neutral = source.neutral_plain if source else {}
    # a keypoint about a dimension is visible only through its dimension-neutral line (the rest
    # of its fact); the dimension itself is hidden or stated on its own
    visible = tuple((k, neutral.get(k.id, k.plain)) for k in content.keypoints
                    if k.id not in hidden_kp and (k.id not in conv or k.id in neutral))
    asks = [i for i in items if not i.apply_unasked]
    guess = (position <= HISTORY_SIZE and role == "learn" and bool(asks)
             and rng_for(seed, "guess", sid).random() < GUESS_FIRST_SHARE)
    single = {i.mechanism.id for i in items} != set(cell.mechanisms)
    return SessionPlan(sid, position, role, content.task_id, values, tuple(items), visible, tuple(stated),
                       guess, single, refused)


def remember(plan: SessionPlan, memory: CellMemory, empty_kind: str | None = None) -> None:
    """Record what a history session states: its asked-about conventions and its plain statements
    (and, under empty_input=neutral, the return kind of the task's empty result)."""
    if plan.position > HISTORY_SIZE:
        return
    shown = {i.dimension for i in plan.items if i.kind == "convention" and not i.apply_unasked} | {
        d for d, _ in plan.stated}
    if empty_kind is not None and "empty_input" in shown and dict(plan.values).get("empty_input") == "neutral":
        memory.neutral_kinds.add(empty_kind)
    for item in plan.items:
        if item.kind == "convention" and not item.apply_unasked:
            memory.record(item.dimension, plan.session_id)
    for d, _ in plan.stated:
        memory.record(d, plan.session_id)
