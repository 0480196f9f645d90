"""`gate`: same-user history gating (the paper's RQ3 method).

A gate model (`--gate-model SPEC`, condition option `gate_model`; default: the model under
test) reads the cell's 5 history sessions and the new request and answers one JSON object,
`{"sufficient": bool, "session": 1-5 or null, "guidance": str}`:
- sufficient: the context holds the highlighted session, rendered like a history session under
  its own number, and one line on why it was chosen (`gate_highlight.md`);
- not sufficient: the context holds the guidance on what is still unresolved, to be asked about
  (`gate_unresolved.md`).
An answer that is not such an object is asked again once (`capa_hf.llm_json.ask_json`); after
a second bad answer the session falls back to the raw same-user history, and that is counted.
An engine error is no answer: the condition fails before any session.

The gate's calls are driver episodes, one per (cell, request), in role `gate`, batched across
the run's sessions and kept in the run's completion cache; the verdicts are also kept in
`<run>/gate.jsonl` (one line per (cell, request, gate model)), recorded with each session under
`gate`, and summarised in summary.json (`condition_stats`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from runners.driver import Call, run_episodes
from runners.engine import engine_label
from runners.types import Sampling, derive_seed

from capa_hf.dataset.load import LoadedDataset
from capa_hf.defaults import GATE_MAX_TOKENS, GREEDY
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import ConditionEnv, register, render_dialogue, render_history, render_sessions
from capa_hf.evaluation.conditions.history import by_cell, own_history
from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Session
from capa_hf.schema.record import SessionRecord

ROLE = "gate"
VERDICTS = "gate.jsonl"


def check_verdict(value: dict, n_sessions: int) -> str | None:
    """None when `value` is a usable verdict, else what is wrong with it (sent back on retry)."""
    if not isinstance(value.get("sufficient"), bool):
        return '"sufficient" must be true or false'
    if not isinstance(value.get("guidance", ""), str):
        return '"guidance" must be a string'
    if value["sufficient"]:
        n = value.get("session")
        if isinstance(n, str) and n.strip().isdigit():
            n = int(n)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= n_sessions:
            return f'when "sufficient" is true, "session" must be the number of a past session (1-{n_sessions})'
    elif not str(value.get("guidance") or "").strip():
        return 'when "sufficient" is false, "guidance" must say what is still unresolved'
    return None


def normalize_verdict(value: dict) -> dict:
    """The verdict of a value that passed `check_verdict`."""
    sufficient = value["sufficient"]
    session = int(value["session"]) if sufficient else None
    return {"sufficient": sufficient, "session": session, "guidance": str(value.get("guidance") or "").strip()}


def gate_messages(hist: Sequence[Session], request: str) -> list[dict]:
    return [{"role": "system", "content": prompt_text("gate_system")},
            {"role": "user", "content": fill("gate_request", history=render_sessions(hist), request=request)}]


def gate_episode(hist: Sequence[Session], request: str, seed: int, key: str, affinity: str):
    from capa_hf.llm_json import ask_json

    call = Call(ROLE, gate_messages(hist, request),
                Sampling(temperature=GREEDY, max_tokens=GATE_MAX_TOKENS, seed=derive_seed(seed, "gate", key)),
                affinity=affinity)
    answer = yield from ask_json(call, lambda v: check_verdict(v, len(hist)), what="gate verdict", retries=1)
    return answer


def gate_context(verdict: dict, hist: Sequence[Session]) -> dict:
    """The context dict for one session from its verdict (or the raw-history fallback)."""
    all_ids = [s.session_id for s in hist]
    if verdict.get("fallback"):
        text, sources = render_history(hist), all_ids
    elif verdict["sufficient"]:
        s = hist[verdict["session"] - 1]
        shown = fill("history_session", index=str(verdict["session"]), dialogue=render_dialogue(s))
        reason = verdict["guidance"] or "it settles the same kind of gap as the new request"
        text, sources = fill("gate_highlight", session=shown, reason=" ".join(reason.split())), [s.session_id]
    else:
        text, sources = fill("gate_unresolved", guidance=verdict["guidance"]), all_ids
    public = {k: verdict.get(k) for k in ("sufficient", "session", "guidance", "fallback", "attempts", "model")}
    public["session_id"] = sources[0] if verdict.get("sufficient") and not verdict.get("fallback") else None
    return {"text": text, "sources": sources, "digest": text, "gate": public}


def verdict_key(cell_id: str, request: str, model: str) -> str:
    return hashlib.sha256("\x1f".join((cell_id, request, model)).encode("utf-8")).hexdigest()[:32]


def load_verdicts(path: Path | None) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if path is None or not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue            # a torn last line from a killed run
        if isinstance(rec, dict) and "key" in rec and "verdict" in rec:
            out[rec["key"]] = rec
    return out


def gate_counts(records: Sequence[SessionRecord]) -> dict:
    """summary.json's `condition_stats` of a gate run: the gate's verdicts per session (each
    record's `gate`, a field of this condition's own)."""
    out: dict = {}
    gated = [g for r in records if isinstance(g := r.extra("gate"), dict)]
    if gated:
        n = len(gated)
        suff = sum(1 for g in gated if g.get("sufficient") and not g.get("fallback"))
        out["gate"] = {"sessions": n, "sufficient": suff, "sufficient_rate": round(suff / n, 4),
                       "unresolved": sum(1 for g in gated if not g.get("sufficient") and not g.get("fallback")),
                       "fallbacks": sum(1 for g in gated if g.get("fallback")),
                       "retried": sum(1 for g in gated if g.get("attempts", 1) > 1)}
    return out


@register("gate")
class Gate:
    name = "gate"
    order, family, baseline = 6, "memory", "same-user"
    options = {"gate_model": "the gate's engine spec, also --gate-model (default: the model under test)"}
    summary_counts = staticmethod(gate_counts)

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _engine(self, env: ConditionEnv) -> tuple[Any, bool]:
        spec = (env.options or {}).get("gate_model")
        if not spec:
            if env.assistant is None:
                raise CapaError("the gate condition needs a gate model: the model under test or --gate-model SPEC")
            return env.assistant, False
        if env.make_engine is not None:
            return env.make_engine(str(spec), {}), True
        from runners import make_engine

        return make_engine(str(spec)), True

    def contexts(self, targets, data: LoadedDataset, env=None):
        env = env or ConditionEnv()
        engine, owned = self._engine(env)
        try:
            return self._contexts(targets, data, env, engine)
        finally:
            if owned and callable(getattr(engine, "close", None)):
                engine.close()

    def _contexts(self, targets, data, env, engine):
        label = engine_label(engine)
        path = Path(env.out) / VERDICTS if env.out is not None else None
        known = load_verdicts(path)
        hists = {c: own_history(c, data) for c in by_cell(targets)}
        keys = {t.session_id: verdict_key(t.cell_id, t.initial_request, label) for t in targets}
        todo: dict[str, Session] = {}
        for t in targets:
            if keys[t.session_id] not in known:
                todo.setdefault(keys[t.session_id], t)
        if todo:
            outcomes = run_episodes(
                [(k, (lambda t=t, k=k: gate_episode(hists[t.cell_id], t.initial_request, self.seed, k, t.cell_id)))
                 for k, t in todo.items()],
                engines={ROLE: engine}, cache=env.cache, progress="gate" if env.progress else False)
            lines = []
            for k, t in todo.items():
                outcome = outcomes[k]
                if outcome.error:
                    last = outcome.error.strip().splitlines()[-1]
                    raise CapaError(f"gate model {label} failed on {t.session_id}: {last}")
                answer = outcome.result
                verdict = normalize_verdict(answer.value) if answer.ok else \
                    {"sufficient": False, "session": None, "guidance": ""}
                verdict.update({"fallback": not answer.ok, "attempts": len(answer.attempts), "model": label})
                rec = {"key": k, "cell_id": t.cell_id, "request_sha": hashlib.sha256(
                    t.initial_request.encode("utf-8")).hexdigest()[:16], "first_session": t.session_id,
                       "verdict": verdict, "replies": answer.attempts}
                known[k] = rec
                lines.append(json.dumps(rec, ensure_ascii=False))
            if path is not None and lines:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
        return {t.session_id: gate_context(known[keys[t.session_id]]["verdict"], hists[t.cell_id]) for t in targets}
