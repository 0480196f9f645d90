"""Stages 1-3 end to end: from the cell design to 600 validated sessions.

Stage 1 writes each session's request and hidden items; Stage 2 plays every session through the
shared simulator (scripted user, sandbox judge) with the reference assistant or any runners
engine; Stage 3 checks each session against its cell and regenerates failures with the next
attempt's seed.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runners.driver import run_episodes
from runners.types import Sampling

from capa_hf.content import Content, load_content
from capa_hf.design import default_design
from capa_hf.generation.consistency import CHECKS, check_leaks, check_mechanisms, check_resolved, check_voice
from capa_hf.generation.controls import plan_controls
from capa_hf.generation.realizer import Realization, Realizer, RequestContext, TemplateRealizer
from capa_hf.generation.reference import ReferenceAssistant, ReferenceScript, reference_code
from capa_hf.humaneval import load_tasks
from capa_hf.prompts import prompt_text
from capa_hf.schema import Cell, GeneratorInfo, Session, Task, Turn
from capa_hf.simulator.episode import EpisodeSetup, session_episode
from capa_hf.simulator.judge import SandboxJudge
from capa_hf.simulator.users import scripted_user
from capa_hf.version import PIPELINE_VERSION

MAX_ATTEMPTS = 5


@dataclass
class Draft:
    session_id: str
    cell: Cell
    position: int
    task: Task
    realization: Realization
    attempt: int


@dataclass
class BuildStats:
    checks: Counter = field(default_factory=Counter)       # check name -> sessions failing it
    regenerated: int = 0
    fallbacks: int = 0
    attempts: Counter = field(default_factory=Counter)     # accepted attempt -> sessions

    def lines(self) -> list[str]:
        out = [f"stage 3 {name:16} failures: {self.checks[name]}" for name in CHECKS]
        out.append(f"regenerated sessions: {self.regenerated}   fallbacks to reference: {self.fallbacks}")
        return out


def keypoints_of(content: Content, task_id: str) -> dict:
    return {k.id: k for k in content.tasks[task_id].keypoints}


def session_id(cell: Cell, position: int) -> str:
    return f"{cell.cell_id}-S{position:02d}"


def stage1(cell: Cell, position: int, task: Task, content: Content, realizer: Realizer,
           seed: int, attempt: int) -> Draft:
    tc = content.tasks.get(task.task_id)
    if tc is None:
        raise KeyError(f"no curated keypoints for {task.task_id}")
    persona = content.personas[cell.persona_id]
    mechs = [content.mechanisms[m] for m in cell.mechanisms]
    plan = plan_controls(tc, mechs, cell.patterns)
    sid = session_id(cell, position)
    ctx = RequestContext(session_id=sid, cell=cell, persona=persona,
                         lexicon=content.lexicons[persona.discipline], content=tc, plan=plan,
                         controls=content.controls, seed=seed, attempt=attempt)
    return Draft(sid, cell, position, task, realizer.realize(ctx), attempt)


def stage2(drafts: list[Draft], content: Content, judge: SandboxJudge, engine: Any = None,
           cache=None, progress: bool = True) -> dict[str, dict]:
    """Play every draft through the simulator; return episode results by session id."""
    reference = ReferenceAssistant()
    for d in drafts:
        kps = keypoints_of(content, d.task.task_id)
        reference.add(d.realization.initial_request, ReferenceScript(
            questions=tuple((h.clarification, kps[h.keypoint_id].question) for h in d.realization.hidden_items),
            code=reference_code(d.task)))

    def play(engine_for_assistant, subset, tag):
        def factory(d: Draft):
            user = scripted_user(d.session_id, d.realization.hidden_items, keypoints_of(content, d.task.task_id),
                                 content.personas[d.cell.persona_id], content.controls)
            setup = EpisodeSetup(session_id=d.session_id, task=d.task,
                                 initial_request=d.realization.initial_request,
                                 system_prompt=prompt_text("assistant_system"),
                                 sampling=Sampling(temperature=0.0, max_tokens=1024, seed=0))
            return lambda: session_episode(setup, user, judge)

        outcomes = run_episodes([(d.session_id, factory(d)) for d in subset],
                                engines={"assistant": engine_for_assistant}, cache=cache,
                                progress=f"stage 2 ({tag})" if progress else False)
        res = {}
        for sid, oc in outcomes.items():
            if oc.error:
                raise RuntimeError(f"stage 2 episode {sid} failed:\n{oc.error}")
            res[sid] = oc.result
        return res

    results = play(engine or reference, drafts, "assistant" if engine else "reference")
    if engine is not None:
        unresolved = [d for d in drafts if not results[d.session_id]["solved"]]
        if unresolved:
            again = play(reference, unresolved, "reference fallback")
            for sid, r in again.items():
                r["fallback"] = True
                results[sid] = r
    return results


def stage3(draft: Draft, result: dict, content: Content) -> list:
    tc = content.tasks[draft.task.task_id]
    kps = keypoints_of(content, draft.task.task_id)
    hidden_ids = {h.keypoint_id for h in draft.realization.hidden_items}
    visible = [tc.gist] + [k.plain for k in tc.keypoints if k.id not in hidden_ids]
    req = draft.realization.initial_request
    return [
        check_voice(req, content.personas[draft.cell.persona_id]),
        check_mechanisms(draft.realization.hidden_items, draft.cell),
        check_leaks(req, draft.realization.hidden_items, kps, visible),
        check_resolved(bool(result["solved"])),
    ]


def to_session(d: Draft, result: dict, seed: int, assistant_name: str) -> Session:
    return Session(
        session_id=d.session_id, cell_id=d.cell.cell_id, position=d.position,
        split=d.cell.split_of(d.position), persona_id=d.cell.persona_id,
        mechanisms=d.cell.mechanisms, patterns=d.cell.patterns, task_id=d.task.task_id,
        entry_point=d.task.entry_point, initial_request=d.realization.initial_request,
        hidden_items=d.realization.hidden_items,
        turns=tuple(Turn(**t) for t in result["turns"]),
        resolved=bool(result["solved"]), assistant_turns=result["assistant_turns"],
        generator=GeneratorInfo(
            pipeline_version=PIPELINE_VERSION, realizer="template",
            assistant="reference" if result.get("fallback") or assistant_name == "reference" else assistant_name,
            user="scripted", seed=seed, attempt=d.attempt, fallback=bool(result.get("fallback"))),
    )


def generate(seed: int = 0, realizer: Realizer | None = None, engine: Any = None, cache=None,
             progress: bool = True, cells: list[Cell] | None = None,
             content: Content | None = None) -> tuple[list[Cell], list[Session], BuildStats]:
    content = content or load_content()
    tasks = load_tasks()
    cells = cells if cells is not None else default_design(seed)
    realizer = realizer or TemplateRealizer()
    stats = BuildStats()
    accepted: dict[str, Session] = {}
    pending = [(c, p) for c in cells for p in range(1, len(c.task_ids) + 1)]
    assistant_name = "reference" if engine is None else f"{getattr(engine, 'name', '?')}:{getattr(engine, 'model', '?')}"
    with SandboxJudge() as judge:
        for attempt in range(MAX_ATTEMPTS):
            if not pending:
                break
            drafts = [stage1(c, p, tasks[c.task_ids[p - 1]], content, realizer, seed, attempt) for c, p in pending]
            results = stage2(drafts, content, judge, engine=engine, cache=cache, progress=progress)
            retry = []
            for d in drafts:
                res = results[d.session_id]
                failed = [r for r in stage3(d, res, content) if not r.ok]
                for r in failed:
                    stats.checks[r.name] += 1
                if failed and attempt + 1 < MAX_ATTEMPTS:
                    retry.append((d.cell, d.position))
                    stats.regenerated += 1
                    continue
                if failed:
                    detail = "; ".join(f"{r.name}: {r.detail}" for r in failed)
                    raise RuntimeError(f"{d.session_id}: still failing Stage 3 after {MAX_ATTEMPTS} attempts: {detail}")
                stats.attempts[attempt] += 1
                stats.fallbacks += bool(res.get("fallback"))
                accepted[d.session_id] = to_session(d, res, seed, assistant_name)
            pending = retry
            if progress and retry:
                print(f"stage 3: regenerating {len(retry)} sessions (attempt {attempt + 2})", file=sys.stderr)
    sessions = [accepted[session_id(c, p)] for c in cells for p in range(1, len(c.task_ids) + 1)]
    return cells, sessions, stats
