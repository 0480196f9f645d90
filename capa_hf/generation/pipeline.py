"""Stages 1-3 end to end: from the cell design to 600 validated sessions.

Stage 1 plans each cell's sessions in order (stage1_plan: what is hidden, by which mechanism,
what is stated) and writes the requests (stage1_realize); Stage 2 plays every session through
the shared simulator (scripted user, sandbox judge on the session's variant tests) with the
reference assistant or any runners engine (stage2_dialogue); Stage 3 checks each session
against its cell and regenerates failures with the next attempt's seed (stage3_checks).
With `--realizer llm:SPEC` a model writes the requests (stage1_llm) and with
`--consistency llm:SPEC` a model compares each trace with its cell and the cell's previously
accepted trace (stage3_llm); both are batched per attempt and counted in BuildStats.
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from runners.driver import run_episodes
from runners.engine import engine_label
from runners.types import Sampling

from capa_hf.content import Content, load_assistant_lines, load_content, load_stage1_phrases, load_user_lines
from capa_hf.conventions import task_dimensions
from capa_hf.defaults import GREEDY, HISTORY_SIZE, JUDGE, MAX_ATTEMPTS, STAGE2_MAX_TOKENS, USER
from capa_hf.design import default_design
from capa_hf.errors import CapaError
from capa_hf.generation.empty_results import empty_kinds
from capa_hf.generation.stage1_llm import FALLBACK, check_llm_request, realizer_of
from capa_hf.generation.stage1_plan import CellMemory, SessionPlan, plan_session, remember, session_id
from capa_hf.generation.stage1_realize import Realization, Realizer, RequestContext, TemplateRealizer
from capa_hf.generation.stage2_dialogue import (ReferenceAssistant, ReferenceScript, mark_second_repairs,
                                               reference_script, refuted_refs)
from capa_hf.generation.stage3_checks import (CHECKS, check_answers, check_attempts, check_joins, check_leaks,
                                              check_mechanisms,
                                              check_repeats, check_resolved, check_voice)
from capa_hf.generation.stage3_llm import TraceToCheck, as_check, cell_config
from capa_hf.humaneval import load_tasks
from capa_hf.prompts import prompt_text
from capa_hf.schema import Cell, GeneratorInfo, Session, Turn
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.cast import cast_episode
from capa_hf.simulator.protocols import Judge, build_judge, judge_engine_role
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.user_data import names_other_item
from capa_hf.variants.catalog import VariantCatalog
from capa_hf.variants.visible_examples import ExampleCheck, check_examples, load_keypoint_examples
from capa_hf.version import PIPELINE_VERSION


@dataclass
class Draft:
    cell: Cell
    plan: SessionPlan
    problem: Problem
    realization: Realization
    attempt: int

    @property
    def session_id(self) -> str:
        return self.plan.session_id


@dataclass
class BuildStats:
    checks: Counter = field(default_factory=Counter)       # check name -> sessions failing it
    regenerated: int = 0
    fallbacks: int = 0
    single_mechanism: int = 0                              # sessions where only one mechanism could act
    refused_by_examples: int = 0                           # held-out (session, keypoint) pairs the visible text settles
    attempts: Counter = field(default_factory=Counter)     # accepted attempt -> sessions
    realizer: str = "template"
    realizer_fallbacks: int = 0                            # LLM requests replaced by the template's
    consistency_by: str | None = None
    consistency: Counter = field(default_factory=Counter)  # checked, consistent, inconsistent, invalid, kept

    def lines(self) -> list[str]:
        names = CHECKS + (("llm_request",) if self.realizer != "template" else ()) + \
            (("consistency",) if self.consistency_by else ())
        out = [f"stage 3 {name:16} failures: {self.checks[name]}" for name in names]
        out.append(f"regenerated sessions: {self.regenerated}   fallbacks to reference: {self.fallbacks}")
        out.append(f"sessions with only one mechanism at work (design relaxation): {self.single_mechanism}")
        out.append(f"held-out task keypoints kept visible because the visible text refutes their misreading: "
                   f"{self.refused_by_examples}")
        if self.realizer != "template":
            out.append(f"requests written by {self.realizer}; replaced by the template's on the last attempt: "
                       f"{self.realizer_fallbacks}")
        if self.consistency_by:
            c = self.consistency
            out.append(f"consistency check by {self.consistency_by}: {c['checked']} checks, {c['consistent']} "
                       f"consistent, {c['inconsistent']} inconsistent (regenerated), {c['invalid']} unusable answers "
                       f"(accepted), {c['kept']} kept after the last attempt")
        return out


@dataclass
class World:
    """Everything generation reads, loaded once."""

    content: Content
    tasks: dict
    catalog: VariantCatalog
    phrases: dict
    user_lines: dict
    assistant_lines: dict

    @classmethod
    def load(cls, content: Content | None = None) -> "World":
        content = content or load_content()
        tasks = load_tasks()
        return cls(content, tasks, VariantCatalog(tasks, content.variants, content.dimensions),
                   load_stage1_phrases(), load_user_lines(), load_assistant_lines())


def plan_cells(cells: list[Cell], world: World, seed: int, examples=None) -> dict[str, SessionPlan]:
    """Stage 1 plans, a cell's positions in order (later sessions know what earlier ones showed).
    `examples` (visible_examples.ExampleCheck) keeps task items the visible text settles visible."""
    plans = {}
    kinds = empty_kinds()
    for cell in cells:
        memory = CellMemory()
        for pos, tid in enumerate(cell.task_ids, 1):
            plan = plan_session(cell, pos, world.content.tasks[tid], world.content.variants.get(tid),
                                world.content.mechanisms, memory, seed, examples, kinds.get(tid))
            remember(plan, memory, kinds.get(tid))
            plans[plan.session_id] = plan
    return mark_second_repairs(plans, world.catalog, world.content.variants, world.content.dimensions, seed)


def voice_slots(cells: list[Cell]) -> dict[str, int]:
    """Each session's index among its persona's sessions (openers are dealt over these)."""
    count: Counter = Counter()
    out = {}
    for cell in cells:
        for pos in range(1, len(cell.task_ids) + 1):
            out[session_id(cell, pos)] = count[cell.persona_id]
            count[cell.persona_id] += 1
    return out


def request_context(cell: Cell, plan: SessionPlan, world: World, seed: int, attempt: int, slot: int) -> RequestContext:
    content = world.content
    tid = plan.task_id
    persona = content.personas[cell.persona_id]
    return RequestContext(cell=cell, persona=persona, lexicon=content.lexicons[persona.discipline],
                          content=content.tasks[tid], source=content.variants.get(tid),
                          dimensions=task_dimensions(content.dimensions, content.variants.get(tid)),
                          plan=plan, phrases=world.phrases, seed=seed,
                          attempt=attempt, voice_slot=slot)


def stage1(cell: Cell, plan: SessionPlan, world: World, realizer: Realizer, seed: int, attempt: int,
           slot: int) -> Draft:
    ctx = request_context(cell, plan, world, seed, attempt, slot)
    return Draft(cell, plan, world.catalog.problem(plan.task_id, dict(plan.values)), realizer.realize(ctx), attempt)


def stage1_all(pairs: list[tuple[Cell, SessionPlan, int]], world: World, realizer: Realizer, seed: int,
               attempt: int) -> list[Draft]:
    """Stage 1 for many sessions; a realizer with `realize_many` (an LLM) gets them as one batch."""
    if not hasattr(realizer, "realize_many"):
        return [stage1(c, p, world, realizer, seed, attempt, slot) for c, p, slot in pairs]
    ctxs = [request_context(c, p, world, seed, attempt, slot) for c, p, slot in pairs]
    return [Draft(c, p, world.catalog.problem(p.task_id, dict(p.values)), r, attempt)
            for (c, p, _), r in zip(pairs, realizer.realize_many(ctxs))]


def brief_for(d: Draft, world: World) -> UserBrief:
    content = world.content
    return UserBrief(session_id=d.session_id, hidden_items=d.realization.hidden_items,
                     keypoints={k.id: k for k in content.tasks[d.plan.task_id].keypoints},
                     dimensions=task_dimensions(content.dimensions, content.variants.get(d.plan.task_id)),
                     persona=content.personas[d.cell.persona_id],
                     user_lines=world.user_lines, reference=d.problem.reference,
                     task_prompt=world.tasks[d.plan.task_id].prompt, initial_request=d.realization.initial_request,
                     variant_id=d.problem.variant_id)


def script_for(d: Draft, world: World, seed: int) -> ReferenceScript:
    """What the reference assistant says in this session (stage2_dialogue.reference_script)."""
    source = world.content.variants.get(d.plan.task_id)
    variant = world.catalog.variant(d.plan.task_id, dict(d.plan.values))
    return reference_script(d.plan, d.realization, variant, d.problem.reference, source,
                            world.content.dimensions, world.assistant_lines, seed,
                            refuted_refs(d.problem.variant_id, d.problem.test),
                            keypoints=tuple(world.content.tasks[d.plan.task_id].keypoints),
                            wraps=tuple(world.content.personas[d.cell.persona_id].voice.clarification_wraps))


def stage2(drafts: list[Draft], world: World, judge: Judge, seed: int, engine: Any = None, cache=None,
           progress: bool = True) -> dict[str, SessionRecord]:
    """Play every draft through the simulator; return episode records by session id (a session
    the reference replayed after the engine left it unresolved carries the extra `fallback`)."""
    reference = ReferenceAssistant()
    for d in drafts:
        reference.add(d.realization.initial_request, script_for(d, world, seed))
    sampling = Sampling(temperature=GREEDY, max_tokens=STAGE2_MAX_TOKENS, seed=0)

    def play(assistant, subset, tag):
        episodes = [(d.session_id, cast_episode(brief_for(d, world), d.problem, d.realization.initial_request,
                                                prompt_text("assistant_system"), judge, sampling=sampling,
                                                affinity=d.cell.cell_id)) for d in subset]
        outcomes = run_episodes(episodes, engines={"assistant": assistant}, cache=cache,
                                progress=f"stage 2 ({tag})" if progress else False)
        res = {}
        for sid, oc in outcomes.items():
            if oc.error or oc.result.incomplete:
                raise RuntimeError(f"stage 2 episode {sid} failed:\n{oc.error or oc.result.error_text()}")
            res[sid] = oc.result
        return res

    results = play(engine or reference, drafts, "assistant" if engine else "reference")
    if engine is not None:
        unresolved = [d for d in drafts if not results[d.session_id].solved]
        if unresolved:
            again = play(reference, unresolved, "reference fallback")
            for sid, r in again.items():
                r.add_extra("fallback", True)
                results[sid] = r
    return results


def off_item_questions(d: Draft, script: ReferenceScript, tc) -> dict[str, str]:
    """Scripted question -> the other keypoint it names first, for each question asked about a
    signature keypoint that another keypoint settles (user_data.names_other_item)."""
    kp_of = {h.clarification: h.keypoint_id for h in d.realization.hidden_items if h.kind == "task"}
    out = {}
    for (clarification, question), bare in zip(script.asks, script.questions or [q for _, q in script.asks]):
        kid = kp_of.get(clarification)
        other = names_other_item(bare, d.plan.task_id, kid, tc.keypoints) if kid else None
        if other is not None:
            out[question] = other
    return out


def stage3(d: Draft, result: SessionRecord, world: World, script: ReferenceScript | None = None) -> list:
    """The Stage 3 checks of one session; with the reference assistant's `script`, also whether
    each of its questions got the answer it asked for (check_answers) and each of its wrong
    attempts failed in the sandbox before the final code passed (check_attempts)."""
    content = world.content
    tc = content.tasks[d.plan.task_id]
    kps = {k.id: k for k in tc.keypoints}
    visible = [tc.gist] + [line for _, line in d.plan.visible] + list(d.realization.visible)
    req = d.realization.initial_request
    llm = check_llm_request(d.realization)
    return [
        check_voice(req, content.personas[d.cell.persona_id]),
        check_mechanisms(d.realization.hidden_items, d.cell, allow_single=d.plan.single_mechanism),
        check_leaks(req, d.realization.hidden_items, kps, dict(d.plan.values), visible),
        check_repeats(req),
        check_resolved(result.solved),
        *([check_answers([t.to_dict() for t in result.turns], script.asks, off_item_questions(d, script, tc),
                         script.wraps),
           check_attempts([s.verdict.passed for s in result.submissions], script.wrong_attempts())]
          if script is not None else []),
        check_joins([t.to_dict() for t in result.turns],
                    [f for forms in (world.user_lines.get("what_happened") or {}).values() for f in forms]),
        *([llm] if llm is not None else []),
    ]


def to_session(d: Draft, result: SessionRecord, seed: int, assistant_name: str, realizer: str = "template") -> Session:
    history = d.cell.split_of(d.plan.position) == "history"
    return Session(
        session_id=d.session_id, cell_id=d.cell.cell_id, position=d.plan.position,
        split=d.cell.split_of(d.plan.position), role=d.plan.role, persona_id=d.cell.persona_id,
        mechanisms=d.cell.mechanisms, patterns=d.cell.patterns, task_id=d.plan.task_id,
        variant_id=d.problem.variant_id, entry_point=d.problem.entry_point,
        initial_request=d.realization.initial_request, hidden_items=d.realization.hidden_items,
        # held-out rows ship no trace: its last code is the answer key
        turns=tuple(Turn(role=t.role, content=t.content) for t in result.turns) if history else (),
        resolved=result.solved, assistant_turns=result.assistant_turns,
        generator=GeneratorInfo(pipeline_version=PIPELINE_VERSION, realizer=realizer_of(d.realization, realizer),
                                assistant="reference" if result.extra("fallback") else assistant_name,
                                user=USER, seed=seed, attempt=d.attempt,
                                fallback=bool(result.extra("fallback"))),
    )


@contextmanager
def stage2_judge(spec: str):
    """(judge, sandbox pool): Stage 2's judge, built from the judge registry by `spec`, and the
    pool the visible examples run in (the judge's own when it has one). The build calls no model
    but the assistant's, so a judge that asks one (the veto) is refused."""
    role = judge_engine_role(spec)
    if role:
        raise CapaError(f"judge {spec!r} asks a model (role {role!r}); the dataset build judges without one")
    judge = build_judge(spec)
    try:
        pool = getattr(judge, "pool", None)
        if pool is not None:
            yield judge, pool
        else:
            from sandbox import SandboxPool

            with SandboxPool() as own:
                yield judge, own
    finally:
        judge.close()


def generate(seed: int = 0, realizer: Realizer | None = None, engine: Any = None, cache=None,
             progress: bool = True, cells: list[Cell] | None = None, content: Content | None = None,
             consistency=None, judge: str = JUDGE) -> tuple[list[Cell], list[Session], BuildStats, dict]:
    """Returns the cells, the 600 sessions, the Stage 3 counts and the Stage 2 records by session.
    `consistency` (stage3_llm.LLMConsistency) adds the LLM consistency check after the others;
    `judge` is the judge's spec in the judge registry (the sandbox by default)."""
    world = World.load(content)
    cells = cells if cells is not None else default_design(seed)
    realizer = realizer or TemplateRealizer()
    slots = voice_slots(cells)
    stats = BuildStats(realizer=realizer.name, consistency_by=consistency.name if consistency else None)
    checked: dict[str, dict] = {}         # cell id -> position -> TraceToCheck of accepted sessions
    accepted: dict[str, Session] = {}
    traces: dict[str, SessionRecord] = {}
    by_id = {session_id(c, p): c for c in cells for p in range(1, len(c.task_ids) + 1)}
    pending = list(by_id)
    assistant_name = "reference" if engine is None else engine_label(engine)
    stuck: list[str] = []
    with stage2_judge(judge) as (stage2_judging, pool):
        examples = visible_example_check(world, pool, {t for c in cells for t in c.task_ids})
        plans = plan_cells(cells, world, seed, examples)
        stats.refused_by_examples = sum(len(p.refused) for p in plans.values() if p.position > HISTORY_SIZE)
        for attempt in range(MAX_ATTEMPTS):
            if not pending:
                break
            drafts = stage1_all([(by_id[sid], plans[sid], slots[sid]) for sid in pending], world, realizer, seed,
                                attempt)
            results = stage2(drafts, world, stage2_judging, seed, engine=engine, cache=cache, progress=progress)
            failures = {d.session_id: [r for r in stage3(d, results[d.session_id], world,
                                                         _script_if_reference(d, results, engine, world, seed))
                                       if not r.ok] for d in drafts}
            if consistency is not None:
                _consistency(drafts, results, failures, world, consistency, checked, stats, attempt)
            retry = []
            for d in drafts:
                res = results[d.session_id]
                failed = failures[d.session_id]
                for r in failed:
                    stats.checks[r.name] += 1
                if failed and attempt + 1 < MAX_ATTEMPTS:
                    retry.append(d.session_id)
                    stats.regenerated += 1
                    continue
                if failed:
                    stuck.append(f"{d.session_id} ({d.plan.task_id}): " +
                                 "; ".join(f"{r.name}: {r.detail}" for r in failed))
                    continue
                stats.attempts[attempt] += 1
                stats.fallbacks += bool(res.extra("fallback"))
                stats.single_mechanism += d.plan.single_mechanism
                stats.realizer_fallbacks += realizer_of(d.realization, "") == FALLBACK
                accepted[d.session_id] = to_session(d, res, seed, assistant_name, realizer.name)
                traces[d.session_id] = res
                if consistency is not None:
                    checked.setdefault(d.cell.cell_id, {})[d.plan.position] = _to_check(d, res, world)
            pending = retry
            if progress and retry:
                print(f"stage 3: regenerating {len(retry)} sessions (attempt {attempt + 2})", file=sys.stderr)
    if stuck:
        raise CapaError(f"{len(stuck)} sessions still fail Stage 3 after {MAX_ATTEMPTS} attempts (fix the curated "
                        "content they name):\n" + "\n".join(stuck))
    sessions = [accepted[sid] for sid in by_id]
    return cells, sessions, stats, traces


def visible_example_check(world: World, pool, task_ids: set[str]) -> ExampleCheck:
    """The stated examples of the visible sentences, run in the sandbox against every variant's
    misreadings (`capa validate-content` also runs them against every reference)."""
    content = world.content
    examples = {t: e for t, e in load_keypoint_examples().items() if t in task_ids}
    check = check_examples(examples, content.variants, world.tasks, content.tasks, content.dimensions, pool,
                           references=False)
    if check.errors:
        raise CapaError(f"{len(check.errors)} visible examples do not hold (run `capa validate-content`):\n"
                        + "\n".join(check.errors[:20]))
    return check


def _to_check(d: Draft, result: SessionRecord, world: World) -> TraceToCheck:
    content = world.content
    config = cell_config(d.cell, content.personas[d.cell.persona_id], content.mechanisms, dict(d.plan.values),
                         {k: v.name for k, v in content.dimensions.items()})
    return TraceToCheck(d.session_id, d.cell.cell_id, d.plan.position, config, tuple(t.to_dict() for t in result.turns))


def _script_if_reference(d: Draft, results: dict, engine, world: World, seed: int) -> ReferenceScript | None:
    """The reference assistant's script where it played the session (no engine, or a fallback)."""
    played_by_reference = engine is None or results[d.session_id].extra("fallback")
    return script_for(d, world, seed) if played_by_reference else None


def _consistency(drafts: list[Draft], results: dict, failures: dict, world: World, checker, checked: dict,
                 stats: BuildStats, attempt: int) -> None:
    """The LLM consistency check on the drafts that passed every other check; a "no" is a
    failure (regenerated), except on the last attempt, where the session is kept and counted."""
    todo = [d for d in drafts if not failures[d.session_id]]
    verdicts = checker.check([_to_check(d, results[d.session_id], world) for d in todo], checked, attempt)
    for d in todo:
        v = verdicts[d.session_id]
        results[d.session_id].add_extra("consistency", {k: v[k] for k in ("consistent", "reason", "valid", "previous")})
        stats.consistency["checked"] += 1
        stats.consistency["invalid" if v["consistent"] is None else
                          "consistent" if v["consistent"] else "inconsistent"] += 1
        if v["consistent"] is False:
            if attempt + 1 < MAX_ATTEMPTS:
                failures[d.session_id].append(as_check(v))
            else:
                stats.consistency["kept"] += 1
