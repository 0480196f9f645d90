"""Stage 3's LLM consistency check (`capa build --consistency llm:<engine spec>`).

After a session passes the deterministic checks, a model compares its trace with the cell's
configuration (persona, the two mechanisms with their information controls and the cell's
resolution patterns, the convention values the session uses) and with the previously accepted
trace of the same cell, and answers `{"consistent": bool, "reason": str}`
(`capa_hf/prompts/stage3_consistency_*.md`). A "no" sends the session back for regeneration
with the next attempt's seed; on the last attempt it is kept and counted as such. An answer
that is not usable JSON is asked for once more; if still unusable the session is accepted and
counted as `invalid` (a "no" must be an explicit judgement).

Sessions are checked position by position, so "previous" is the nearest earlier position of
the cell that is accepted, or judged consistent in this round; each position's sessions across
all cells go to the engine as one batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import CONSISTENCY_MAX_TOKENS, GREEDY
from capa_hf.generation.llm_calls import run_jobs, spec_name
from capa_hf.generation.stage3_checks import CheckResult
from capa_hf.llm_json import ask_json, reason_of, strict_bool
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Cell, Mechanism, Persona
from capa_hf.simulator.expression import persona_profile

ROLE = "consistency"
MAX_TURN_CHARS = 700
_CODE = re.compile(r"```.*?(```|$)", re.S)


@dataclass(frozen=True)
class TraceToCheck:
    session_id: str
    cell_id: str
    position: int
    config: str                      # the cell's configuration as text (cell_config)
    turns: tuple[dict, ...]          # the Stage 2 dialogue, initial request first


def cell_config(cell: Cell, persona: Persona, mechanisms: Mapping[str, Mechanism],
                values: Mapping[str, str], dimension_names: Mapping[str, str]) -> str:
    lines = [persona_profile(persona), "", "Habits that leave requests incomplete:"]
    for mid in cell.mechanisms:
        m = mechanisms[mid]
        pattern = next((p.summary for p in m.patterns if p.id == cell.patterns.get(mid)), "")
        lines.append(f"- {m.name}: {' '.join(m.information_control.split())} Resolved when: "
                     f"{' '.join(m.resolution.split())}" + (f" Pattern of this user: {pattern}" if pattern else ""))
    if values:
        lines += ["", "Standing conventions this session uses:"]
        lines += [f"- {dimension_names.get(d, d)}: {v}" for d, v in sorted(values.items())]
    return "\n".join(lines)


def render_trace(turns: Sequence[dict]) -> str:
    out = []
    for t in turns:
        text = _CODE.sub("[code]", t["content"]).strip()
        text = text if len(text) <= MAX_TURN_CHARS else text[:MAX_TURN_CHARS] + " [...]"
        out.append(f"{t['role'].upper()}: {text}")
    return "\n".join(out) or "(empty)"


def consistency_messages(item: TraceToCheck, previous: TraceToCheck | None) -> list[dict]:
    turn = fill("stage3_consistency_turn", config=item.config, session=item.session_id, trace=render_trace(item.turns),
                previous=render_trace(previous.turns) if previous else "(none: this is the user's first session)")
    return [{"role": "system", "content": prompt_text("stage3_consistency_system")}, {"role": "user", "content": turn}]


class LLMConsistency:
    def __init__(self, engine: Any, spec: str | None = None, cache=None, seed: int = 0,
                 max_tokens: int = CONSISTENCY_MAX_TOKENS, progress: bool = False) -> None:
        self.engine = engine
        self.spec = spec_name(engine, spec)
        self.cache = cache
        self.seed = seed
        self.max_tokens = max_tokens
        self.progress = progress

    @property
    def name(self) -> str:
        return f"llm:{self.spec}"

    def _job(self, item: TraceToCheck, previous: TraceToCheck | None, attempt: int):
        call = Call(ROLE, consistency_messages(item, previous),
                    Sampling(temperature=GREEDY, max_tokens=self.max_tokens,
                             seed=derive_seed(self.seed, item.session_id, attempt, ROLE)))

        def job():
            answer = yield from ask_json(call, lambda v: strict_bool(v, "consistent"),
                                         f"consistency check of {item.session_id}")
            return {"consistent": answer.value["consistent"] if answer.ok else None,
                    "reason": reason_of(answer.value) if answer.ok else "no usable answer",
                    "valid": answer.ok, "previous": previous.session_id if previous else None,
                    "attempts": answer.attempts}
        return job

    def check(self, items: Sequence[TraceToCheck], accepted: Mapping[str, Mapping[int, TraceToCheck]],
              attempt: int = 0) -> dict[str, dict]:
        """A verdict per session id; `accepted` holds each cell's accepted traces by position."""
        known = {cell: dict(by_pos) for cell, by_pos in accepted.items()}
        verdicts: dict[str, dict] = {}
        for pos in sorted({i.position for i in items}):
            group = [i for i in items if i.position == pos]
            jobs = []
            for it in group:
                earlier = [p for p in known.get(it.cell_id, {}) if p < pos]
                prev = known[it.cell_id][max(earlier)] if earlier else None
                jobs.append((it.session_id, self._job(it, prev, attempt)))
            results = run_jobs(jobs, self.engine, ROLE, cache=self.cache,
                               progress=f"stage 3 consistency (position {pos})" if self.progress else False)
            for it in group:
                verdicts[it.session_id] = results[it.session_id]
                if results[it.session_id]["consistent"] is not False:
                    known.setdefault(it.cell_id, {})[pos] = it
        return verdicts


def as_check(verdict: dict) -> CheckResult:
    ok = verdict["consistent"] is not False
    return CheckResult("consistency", ok, "" if ok else verdict["reason"])
