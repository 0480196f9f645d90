"""The LLM simulated user (`--user llm:<engine spec>`): the paper's planner + expression agent.

Each turn:
1. The **planner** (sees the ground truth) answers JSON naming ONE focus: a hidden item id,
   "failing_test", or null. An answer that is not JSON or names an invalid focus is asked for
   once more; if that fails too, the scripted planner's choice replaces it (counted).
2. The **expression agent** (sees the persona profile, its own earlier messages as
   commitments, and the focus's clarification as the content to convey) writes the message.
   Every message goes through the fidelity checks (fidelity.py). A failing one is regenerated
   once; if that fails too, the scripted user's message for the same focus replaces it (counted).
Both agents are calls in this user's driver role (default "user"), batched by the lock-step
driver with every other live episode; the model under test is a different role. `log` holds
one entry per turn: the planner's JSON, every attempt, every check result, what was sent.
`revealed` lists the items the messages conveyed (the focus, when a message for it was sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator, Iterable

from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import EXPRESSION_MAX_TOKENS, GREEDY, PLANNER_MAX_TOKENS
from capa_hf.llm_json import ask_json, check_result
from capa_hf.prompts import fill
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.expression import clean_message, convey_text, expression_messages, instruction_texts
from capa_hf.simulator.fidelity import MAX_WORDS, Check, echo_grams, failed, message_checks
from capa_hf.simulator.llm_planner import allowed_focus, focus_of, plan_of, planner_messages, validate_plan
from capa_hf.simulator.planner import Plan
from capa_hf.simulator.protocols import register_user
from capa_hf.simulator.users import scripted_user
from capa_hf.simulator.verdicts import failing_line


@dataclass
class LLMUser:
    brief: UserBrief
    role: str = "user"
    seed: int | None = 0
    temperature: float = GREEDY
    planner_max_tokens: int = PLANNER_MAX_TOKENS
    expression_max_tokens: int = EXPRESSION_MAX_TOKENS
    max_words: int = MAX_WORDS
    name: str = "llm"
    revealed: list[str] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    said: list[str] = field(default_factory=list)       # every user message, the initial request first

    def __post_init__(self) -> None:
        self.fallback = scripted_user(self.brief)
        self.echo = echo_grams(instruction_texts())
        self.dialogue: list[dict] = []
        if self.brief.initial_request:
            self.said.append(self.brief.initial_request)
            self.dialogue.append({"role": "user", "content": self.brief.initial_request})

    def _sampling(self, turn: int, what: str, max_tokens: int) -> Sampling:
        seed = None if self.seed is None else derive_seed(self.seed, self.brief.session_id, turn, what)
        return Sampling(temperature=self.temperature, max_tokens=max_tokens, seed=seed)

    # -- planner ----------------------------------------------------------------------------
    def _plan(self, turn: int, reply: str, verdict: dict | None) -> Generator[Call, Any, tuple[Plan, dict]]:
        self.fallback.revealed = list(self.revealed)
        scripted, _ = self.fallback.plan(reply, verdict)      # the scripted choice: question match, failure tie
        if scripted.kind == "restate":                        # no wording of its own here: quote the check
            scripted = Plan("failing_check", reason=scripted.reason, basis="failing_check")
        allowed = allowed_focus(self.brief, verdict)
        call = Call(role=self.role, messages=planner_messages(self.brief, self.dialogue, self.revealed, verdict),
                    sampling=self._sampling(turn, "planner", self.planner_max_tokens))
        answer = yield from ask_json(call, lambda v: validate_plan(v, allowed), f"{self.brief.session_id} planner")
        plan = plan_of(answer.value) if answer.ok else scripted
        entry = {"json": answer.value, "attempts": answer.attempts, "valid": answer.ok,
                 "retried": answer.retried, "fallback": not answer.ok, "focus": focus_of(plan),
                 "scripted_focus": focus_of(scripted)}
        return plan, entry

    # -- expression -------------------------------------------------------------------------
    def _express(self, turn: int, reply: str, plan: Plan, verdict: dict | None
                 ) -> Generator[Call, Any, tuple[str, dict]]:
        focus = plan.item_id if plan.kind == "item" else None
        messages = expression_messages(self.brief, reply, self.said, convey_text(self.brief, plan, verdict))
        attempts = []
        for attempt in range(2):
            result = yield Call(role=self.role, messages=messages,
                                sampling=self._sampling(turn, f"expression{attempt}", self.expression_max_tokens))
            text = clean_message(check_result(result, f"{self.brief.session_id} expression agent"))
            checks = message_checks(text, reference=self.brief.reference, items=self.brief.hidden_items,
                                    focus=focus, revealed=self.revealed, said_before=self.said,
                                    persona=self.brief.persona, max_words=self.max_words, echo=self.echo,
                                    failing=failing_line(verdict) if plan.kind == "failing_check" else None)
            if text in self.said:
                checks = [*checks, Check("no_repeat", False, "repeats an earlier message word for word")]
            attempts.append({"text": text, "checks": [c.to_dict() for c in checks]})
            bad = failed(checks)
            if not bad:
                return text, {"attempts": attempts, "fallback": False, "source": "llm"}
            problems = "; ".join(f"{c.name}: {c.detail}" for c in bad)
            messages = messages + [{"role": "assistant", "content": text or "(empty)"},
                                   {"role": "user", "content": fill("llm_user_expression_retry", problems=problems)}]
        return self.fallback.express(plan, verdict), {"attempts": attempts, "fallback": True, "source": "scripted"}

    # -- the SimulatedUser protocol ---------------------------------------------------------
    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[Call, Any, str]:
        turn = len(self.log) + 1
        self.dialogue.append({"role": "assistant", "content": assistant_reply})
        plan, planner = yield from self._plan(turn, assistant_reply, verdict)
        message, expression = yield from self._express(turn, assistant_reply, plan, verdict)
        if plan.kind == "item" and plan.item_id not in self.revealed:
            self.revealed.append(plan.item_id)
        self.said.append(message)
        self.fallback.said.append(message)        # the scripted wording never repeats any sent message
        self.dialogue.append({"role": "user", "content": message})
        self.log.append({"turn": turn, "planner": planner, "expression": expression, "message": message})
        return message


OPTIONS = ("role", "seed", "temperature", "planner_max_tokens", "expression_max_tokens", "max_words")


@register_user("llm")
def make_llm_user(brief: UserBrief, **options) -> LLMUser:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"the llm user takes options {', '.join(OPTIONS)}; got unknown {unknown}")
    return LLMUser(brief, **options)


def fallback_counts(records: Iterable[SessionRecord]) -> dict:
    """Planner and expression fallbacks over the LLM user turns of some session records, and
    per 100 user turns. Records without an LLM user log count no turns."""
    turns = planner = expression = retried = regenerated = 0
    failed_checks: dict[str, int] = {}
    for rec in records:
        for entry in rec.user_log:
            if "planner" not in entry:
                continue
            turns += 1
            planner += bool(entry["planner"].get("fallback"))
            retried += bool(entry["planner"].get("retried"))
            exp = entry.get("expression", {})
            expression += bool(exp.get("fallback"))
            regenerated += len(exp.get("attempts", ())) > 1
            for att in exp.get("attempts", ()):
                for c in att.get("checks", ()):
                    if not c["ok"]:
                        failed_checks[c["name"]] = failed_checks.get(c["name"], 0) + 1
    per100 = (lambda n: round(100.0 * n / turns, 2) if turns else None)
    return {"turns": turns, "planner_retried": retried, "planner_fallbacks": planner,
            "expression_regenerated": regenerated, "expression_fallbacks": expression,
            "planner_fallbacks_per_100_turns": per100(planner),
            "expression_fallbacks_per_100_turns": per100(expression),
            "failed_checks": dict(sorted(failed_checks.items()))}


# What the run reads of this user (evaluation/run.py): the driver role of its own engine, built from
# the spec after `llm:`, and the counts it adds to summary.json.
make_llm_user.engine_role = "user"
make_llm_user.summary_counts = lambda records: {"llm_user": fallback_counts(records)}
