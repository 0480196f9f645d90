"""`capa eval --rescore OLD --out NEW`: score a finished run's recorded replies again, with the
current extraction rule and sandbox, without calling any model.

Every recorded assistant reply of every finished session is extracted again
(`capa_hf/simulator/extraction.py`) and each submission is run in the sandbox against the
session's problem, loaded from the run's own dataset (a different dataset manifest is refused).
NEW is a run folder like any other (config.json, sessions.jsonl, summary.json, summary.md), so
`capa report OLD NEW` reads both: its config's `run` gains `rescored_from` (the old run's name,
config hash and the rule), which makes it another model setting, and the report's rescore table
pairs it with OLD session by session.

What a rescored session means. The recorded conversation is what the model and the simulated
user said given the old verdicts; a different verdict at turn k would have changed every later
turn, and only a model could say how. So:
- a session's first success is the first turn whose re-extracted submission now passes;
- turns after a new, earlier pass are dropped (the session would have ended there), and
  counted (`truncated`);
- a recorded pass that now fails leaves the session unsolved within the turns that were played;
  when those are fewer than the turn budget the session is marked `cut_short` (what the model
  would have done next is unknown) and scored as unsolved, a bound from below;
- a failing submission that fails differently (an error that is now a wrong answer) keeps the
  recorded later turns, whose user message answered the old verdict (`feedback_differs`).
Every record carries `rescore` (its outcome and the turns whose verdict changed), every
re-judged submission `previous_status`, and summary.json `rescore` with the counts. Incomplete
records (engine errors) are copied unchanged. Runs with an LLM veto, which would need the veto
model, and blank-control runs are refused.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from capa_hf.errors import CapaError
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.records import RESULTS, prepare_out, read_config, read_records, rewrite
from capa_hf.schema.record import SessionRecord, SubmissionRecord, TurnRecord
from capa_hf.simulator.episode import turn_kind
from capa_hf.simulator.extraction import RULE, extract_submission
from capa_hf.simulator.protocols import verdict_without_model

PASSED = "passed"


def _status(sub: SubmissionRecord | None) -> str | None:
    return None if sub is None else sub.verdict.status


def read_old_run(old: Path) -> tuple[dict, dict[str, SessionRecord]]:
    config = read_config(old)
    run = config["run"]
    if run.get("condition") == "blank-control":
        raise CapaError(f"--rescore {old}: a blank-control run; rescoring covers `capa eval` runs only")
    model = run.get("judge_model") or run.get("veto")     # (`veto`: a run folder written before the veto judge)
    if model:
        raise CapaError(f"--rescore {old}: the run's judge {run.get('judge')} asked {model}; re-judging it would "
                        "need the veto model, which --rescore never calls")
    records = read_records(old / RESULTS)
    if not records:
        raise CapaError(f"--rescore {old}: no finished session in {old / RESULTS}")
    return config, records


def eval_config(run: dict) -> EvalConfig:
    """The EvalConfig a run's config.json `run` block was written from."""
    kw = {k: v for k, v in run.items() if k in EvalConfig.model_fields}
    kw["cells"] = tuple(kw["cells"]) if kw.get("cells") else None
    return EvalConfig(**kw)


def config_hash(run: dict) -> str:
    """sha256 of a run block's canonical JSON (what `capa report` prints as the config hash)."""
    return hashlib.sha256(json.dumps(run, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def rescore_record(rec: SessionRecord, new_subs: dict[int, SubmissionRecord | None], max_turns: int) -> SessionRecord:
    """One session record under the new verdicts (`new_subs`: assistant turn -> the new
    submission with its verdict, or None when the reply is no longer a submission)."""
    old_subs = {s.turn: s for s in rec.submissions}
    replies = rec.assistant_replies()
    played = len(replies)
    recorded_kinds = list(rec.turn_kinds or ["clarification"] * played)
    old_success = next((t for t in sorted(old_subs) if _status(old_subs[t]) == PASSED), None)
    new_success = next((t for t in sorted(new_subs) if _status(new_subs[t]) == PASSED), None)
    end = new_success or played
    changed = [t for t in range(1, played + 1) if _status(old_subs.get(t)) != _status(new_subs.get(t))]
    code_changed = [t for t in range(1, played + 1) if _code(old_subs.get(t)) != _code(new_subs.get(t))]
    subs, kinds = [], []
    for t in range(1, end + 1):
        new, old = new_subs.get(t), old_subs.get(t)
        if new is not None:
            subs.append(new.model_copy(update={"previous_status": _status(old)}))
            kinds.append("submission")
        elif old is not None:    # no longer a submission: a clarification, or however the reply ended
            finish = rec.usage[t - 1].finish_reason if t <= len(rec.usage) else "stop"
            kinds.append(turn_kind(replies[t - 1], {"finish_reason": finish}, None))
        else:
            kinds.append(recorded_kinds[t - 1])
    cut_short = old_success is not None and new_success is None and played < max_turns
    feedback = [t for t in changed if t < end and _status(old_subs.get(t)) != PASSED
                and _status(new_subs.get(t)) != PASSED]
    out = rec.to_dict()
    out.update({"turns": [m.to_dict() for m in _turns_through(rec.turns, end)], "turn_kinds": kinds,
                "assistant_turns": len(kinds), "submissions": [s.to_dict() for s in subs],
                "success_turn": new_success, "solved": new_success is not None,
                "usage": [u.to_dict() for u in rec.usage[:end]],
                "user_log": [e for e in rec.user_log if e.get("turn", 0) < end]})
    outcome = ("unchanged" if old_success == new_success else
               "solved_earlier" if old_success is not None and new_success is not None else
               "newly_solved" if new_success is not None else "pass_lost")
    out["rescore"] = {"rule": RULE, "outcome": outcome, "previous_success_turn": old_success,
                      "changed_turns": changed, "changes": [{"turn": t, "was": _status(old_subs.get(t)),
                                                             "now": _status(new_subs.get(t))} for t in changed],
                      "code_changed_turns": code_changed, "played_turns": played, "truncated": end < played,
                      "dropped_turns": played - end, "cut_short": cut_short, "feedback_differs": feedback}
    return SessionRecord.from_dict(out)


def _code(sub: SubmissionRecord | None) -> str | None:
    return None if sub is None else sub.code


def _turns_through(turns: list[TurnRecord], k: int) -> list[TurnRecord]:
    """The conversation up to and including the k-th assistant message."""
    seen = 0
    for i, m in enumerate(turns):
        if m.role == "assistant":
            seen += 1
            if seen == k:
                return turns[: i + 1]
    return list(turns)


def rescore_run(old: str | Path, out: str | Path, data=None) -> dict:
    """Re-extract and re-judge every recorded reply of the run in `old`; write the run `out`."""
    from capa_hf.dataset.load import load_capa
    from capa_hf.evaluation.runner import write_summary
    from capa_hf.simulator.protocols import build_judge
    from runners.usage import RunStats

    old, out = Path(old), Path(out)
    if out.resolve() == old.resolve():
        raise CapaError(f"--out {out}: the rescored run needs its own folder, not the old run's")
    config, records = read_old_run(old)
    run = config["run"]
    cfg = eval_config(run)
    data = data or load_capa(cfg.dataset, revision=cfg.revision)
    if config.get("dataset_manifest_sha256") and data.manifest_sha256 != config["dataset_manifest_sha256"]:
        raise CapaError(f"--rescore {old}: the run was made on dataset {config.get('dataset_version')} (manifest "
                        f"{str(config['dataset_manifest_sha256'])[:12]}), but {data.source} is {data.version} "
                        f"(manifest {str(data.manifest_sha256)[:12]}); pass the run's --dataset/--revision")
    pool = data.heldout if cfg.split == "heldout" else data.history
    unknown = sorted({r.session_id for r in records.values()} - set(pool))
    if unknown:
        raise CapaError(f"--rescore {old}: sessions {unknown[:5]} are not in the {cfg.split} split of {data.source}")
    t0 = time.perf_counter()
    source = {"run": old.name, "config_hash": config_hash(run), "rule": RULE}
    new_config = {**config, "run": {**run, "rescored_from": source}}
    prepare_out(out, new_config)
    jobs = []        # (record key, turn, submission, problem)
    for key, rec in records.items():
        if rec.incomplete:
            continue
        problem = data.problem(pool[rec.session_id])
        for turn, reply in enumerate(rec.assistant_replies(), 1):
            jobs.append((key, turn, extract_submission(reply, problem.entry_point), problem))
    judge = build_judge(cfg.judge, seed=cfg.seed)
    try:
        def one(job):
            _key, _turn, sub, problem = job
            return None if sub is None else verdict_without_model(judge, sub, problem, "--rescore")
        workers = getattr(getattr(judge, "pool", None), "size", 1) or 1
        with ThreadPoolExecutor(max_workers=workers) as ex:
            verdicts = list(ex.map(one, jobs))
        sandbox_info = judge.describe()
    finally:
        judge.close()
    per_record: dict[str, dict[int, SubmissionRecord | None]] = {}
    for (key, turn, sub, _p), verdict in zip(jobs, verdicts):
        per_record.setdefault(key, {})[turn] = None if sub is None else SubmissionRecord.from_dict(
            {"turn": turn, **sub.to_dict(), "verdict": verdict})
    new_records = {}
    for key, rec in records.items():
        new_records[key] = rec if rec.incomplete else rescore_record(rec, per_record.get(key, {}), cfg.max_turns)
    rewrite(out / RESULTS, new_records)
    summary = write_summary(out, cfg, set(new_records), RunStats(), time.perf_counter() - t0, 0, sandbox_info,
                            config.get("difficulty"))
    summary["rescore"] = {**source, **rescore_counts(records, new_records)}
    summary["config"] = new_config["run"]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    from capa_hf.evaluation.summary_md import summary_markdown

    (out / "summary.md").write_text(summary_markdown(summary) + "\n" + "\n".join(rescore_lines(summary["rescore"]))
                                    + "\n", encoding="utf-8")
    return summary


def rescore_counts(old: dict[str, SessionRecord], new: dict[str, SessionRecord]) -> dict:
    """How many submissions changed verdict, and what that did to the sessions."""
    scored = [(old[k], new[k]) for k in old if not old[k].incomplete]
    infos = [after.rescore for _, after in scored]
    changes = [c for i in infos for c in i.changes]
    judged = sum(len(before.submissions) for before, _ in scored)
    outcomes: dict[str, int] = {}
    for i in infos:
        outcomes[i.outcome] = outcomes.get(i.outcome, 0) + 1
    return {"sessions": len(scored), "submissions_before": judged,
            "submissions_changed": len(changes), "now_passing": sum(c.now == PASSED for c in changes),
            "no_longer_passing": sum(c.was == PASSED for c in changes),
            "code_changed": sum(len(i.code_changed_turns) for i in infos),
            "sessions_changed": sum(1 for i in infos if i.outcome != "unchanged"), "outcomes": outcomes,
            "truncated": sum(1 for i in infos if i.truncated),
            "dropped_turns": sum(i.dropped_turns for i in infos),
            "cut_short": sum(1 for i in infos if i.cut_short),
            "feedback_differs": sum(1 for i in infos if i.feedback_differs)}


def rescore_lines(counts: dict) -> list[str]:
    c = counts
    return [f"rescored {c['sessions']} sessions of {c['run']} with extraction rule {c['rule']}: "
            f"{c['submissions_changed']} of {c['submissions_before']} recorded submissions changed verdict "
            f"({c['now_passing']} now pass, {c['no_longer_passing']} no longer pass); the code that runs changed "
            f"in {c['code_changed']}",
            f"sessions: {c['sessions_changed']} changed outcome {c['outcomes']}; {c['truncated']} truncated "
            f"({c['dropped_turns']} turns dropped), {c['cut_short']} cut short, "
            f"{c['feedback_differs']} with later turns answering an old failure"]


def rescore_cli(args) -> int:
    from capa_hf.evaluation.summary_md import summary_markdown

    given = [flag for flag, value in (("--model", args.model), ("--preset", args.preset),
                                      ("--cells", args.cells), ("--limit", args.limit), ("--veto", args.veto),
                                      ("--judge-model", getattr(args, "judge_model", None)))
             if value]
    if given:
        raise CapaError(f"--rescore takes every setting from the old run; drop {', '.join(given)}")
    summary = rescore_run(args.rescore, args.out)
    print(summary_markdown(summary))
    for line in rescore_lines(summary["rescore"]):
        print(line, file=sys.stderr)
    print(f"wrote {args.out}/summary.json and {args.out}/{RESULTS}", file=sys.stderr)
    return 0
