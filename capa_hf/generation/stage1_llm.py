"""Stage 1 with an LLM writing the request (`capa build --realizer llm:<engine spec>`).

`LLMRealizer` keeps what the template realizer decides (the hidden items and their
clarifications, the dealt opener and closer, what is stated plainly) and lets a model write the
request body from the visible keypoints, the persona and the cell's mechanisms' information
controls (`capa_hf/prompts/stage1_llm_*.md`). The request is the persona's opener, the model's
body and the persona's closer. The model never sees a hidden fact: only the phrases a mechanism
puts in its place, which it must keep word for word (so each item's `obscured_as` stays true).

Every Stage 3 check applies to the result (pipeline.py), plus `llm_request`: the body is
non-empty, holds no code, stays within MAX_WORDS and keeps every obscured phrase. A failing
session is regenerated with the next attempt's seed (sampled at REALIZER_RETRY_TEMPERATURE after the
first). On the last attempt the template's request is used instead, recorded in `generator`
as the realizer "template (llm fallback)" and counted in the build output and the card.
All drafts of one attempt go to the engine as one batch (through the build's completion cache).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import GREEDY, MAX_ATTEMPTS, REALIZER_MAX_TOKENS, REALIZER_RETRY_TEMPERATURE
from capa_hf.generation.llm_calls import run_jobs, spec_name
from capa_hf.generation.stage1_realize import Realization, RequestContext, TemplateRealizer, sentence
from capa_hf.generation.stage3_checks import CheckResult, norm
from capa_hf.llm_json import check_result
from capa_hf.prompts import fill, prompt_text
from capa_hf.simulator.expression import clean_message, persona_profile

MAX_WORDS = 160
FALLBACK = "template (llm fallback)"
ROLE = "realizer"


@dataclass(frozen=True)
class LLMRealization(Realization):
    realizer: str = ""                 # who wrote this request: the llm spec, or FALLBACK
    body: str = ""                     # the model's text as cleaned
    problems: tuple[str, ...] = ()     # what `llm_request` refuses (empty when fine)


def request_messages(ctx: RequestContext, template: Realization) -> list[dict]:
    facts = list(template.visible[1:]) or ["(none beyond what the function is for)"]
    obscured = list(dict.fromkeys(h.obscured_as for h in template.hidden_items if h.obscured_as)) or ["(none)"]
    controls = []
    for item in ctx.plan.items:        # the cell's mechanisms, as they act in this session
        line = f"{item.mechanism.name}: {' '.join(item.mechanism.information_control.split())}"
        if line not in controls:
            controls.append(line)
    turn = fill("stage1_llm_request", profile=persona_profile(ctx.persona), gist=template.visible[0] if template.visible
                else ctx.content.gist, visible="\n".join(f"- {f}" for f in facts),
                obscured="\n".join(f"- {o}" for o in obscured), controls="\n".join(f"- {c}" for c in controls) or "-")
    return [{"role": "system", "content": prompt_text("stage1_llm_system")}, {"role": "user", "content": turn}]


def body_problems(body: str, hidden) -> list[str]:
    problems = []
    if not body.strip():
        problems.append("the body is empty")
    if "```" in body or re.search(r"(?m)^\s*(def|class|import)\s", body):
        problems.append("the body holds code")
    n = len(body.split())
    if n > MAX_WORDS:
        problems.append(f"the body has {n} words (at most {MAX_WORDS})")
    flat = norm(body)
    for h in hidden:
        if h.obscured_as and norm(h.obscured_as) not in flat:
            problems.append(f"{h.id}'s phrase {h.obscured_as[:60]!r} is not kept word for word")
    return problems


def compose(template: Realization, body: str) -> str:
    body = body.strip()
    sep = "\n" if "\n" in body else " "
    return f"{sentence(template.opener)} {body}{sep}{sentence(template.closer)}".strip()


def _job(call: Call, what: str):
    def job():
        result = yield call
        return check_result(result, what)
    return job


class LLMRealizer:
    def __init__(self, engine: Any, spec: str | None = None, cache=None, template: TemplateRealizer | None = None,
                 max_tokens: int = REALIZER_MAX_TOKENS, fallback: bool = True, progress: bool = False) -> None:
        self.engine = engine
        self.spec = spec_name(engine, spec)
        self.cache = cache
        self.template = template or TemplateRealizer()
        self.max_tokens = max_tokens
        self.fallback = fallback
        self.progress = progress

    @property
    def name(self) -> str:
        return f"llm:{self.spec}"

    def sampling(self, ctx: RequestContext) -> Sampling:
        return Sampling(temperature=GREEDY if ctx.attempt == 0 else REALIZER_RETRY_TEMPERATURE, max_tokens=self.max_tokens,
                        seed=derive_seed(ctx.seed, ctx.session_id, ctx.attempt, ROLE))

    def realize(self, ctx: RequestContext) -> Realization:
        return self.realize_many([ctx])[0]

    def realize_many(self, ctxs: Sequence[RequestContext]) -> list[Realization]:
        templates = [self.template.realize(c) for c in ctxs]
        last = [self.fallback and c.attempt >= MAX_ATTEMPTS - 1 for c in ctxs]
        jobs = [(f"{c.session_id}#{c.attempt}", _job(Call(ROLE, request_messages(c, t), self.sampling(c)),
                                                     f"stage 1 realizer on {c.session_id}"))
                for c, t, fb in zip(ctxs, templates, last) if not fb]
        texts = run_jobs(jobs, self.engine, ROLE, cache=self.cache,
                         progress="stage 1 (llm)" if self.progress else False) if jobs else {}
        out = []
        for c, t, fb in zip(ctxs, templates, last):
            if fb:
                out.append(LLMRealization(t.initial_request, t.hidden_items, t.opener, t.closer, t.visible,
                                          realizer=FALLBACK))
                continue
            body = clean_message(texts[f"{c.session_id}#{c.attempt}"])
            out.append(LLMRealization(compose(t, body), t.hidden_items, t.opener, t.closer, t.visible,
                                      realizer=self.name, body=body, problems=tuple(body_problems(body, t.hidden_items))))
        return out


def check_llm_request(realization: Realization) -> CheckResult | None:
    """The `llm_request` check (None for a request the template wrote)."""
    if not isinstance(realization, LLMRealization) or realization.realizer == FALLBACK:
        return None
    ok = not realization.problems
    return CheckResult("llm_request", ok, "; ".join(realization.problems))


def realizer_of(realization: Realization, default: str) -> str:
    return getattr(realization, "realizer", "") or default
