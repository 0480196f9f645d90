"""The one run loop: play a run's sessions and write a resumable run folder.

`run_sessions` owns everything a run does around its episodes: the run folder (config.json; a
different config in the same folder is refused), resume (finished sessions are kept, a torn line
dropped, incomplete ones played again), the completion cache, the error budget (`--max-errors`,
by default MAX_ERROR_SHARE of the sessions), one record per finished session and trial, appended
as it ends, the judge's lifecycle, and summary.json / summary.md. What is played comes from the
caller: the targets (a task source's), their contexts (a condition's, computed once the cache is
open) and one episode factory per (target, trial). `capa eval` is its one caller (run.py); the
blank control is a configuration of it (split `humaneval`, condition `blank-control`, user
`debugger`).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from runners.cache import CompletionCache
from runners.driver import run_episodes
from runners.engine import EngineError
from runners.types import Sampling
from runners.usage import RunStats

from capa_hf.defaults import MAX_ERROR_SHARE, STOP_AFTER_FENCE
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import HISTORY_STOPS
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.metrics import summarize
from capa_hf.evaluation.provenance import stamp_end
from capa_hf.evaluation.records import (RESULTS, append, complete, outcome_record, prepare_out, read_records,
                                        record_key, rewrite, store_contexts)
from capa_hf.evaluation.summary_md import summary_markdown
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.scripted_user import reasoning_shares


class TooManyErrors(CapaError):
    """The engine failed on more sessions than --max-errors allows."""


def build_engine(spec: str, options: dict, flag: str = "--model"):
    """A runners engine from its spec; a bad spec or option is a CapaError naming `flag`."""
    from runners import make_engine

    from runners.engine import ModelAssetError

    try:
        return make_engine(spec, **options)
    except (ValueError, TypeError) as exc:
        hint = ("; for a first run without a model, try --model reference:asker"
                if flag == "--model" and spec.strip() == "scripted" else "")
        raise CapaError(f"{flag} {spec!r}: {exc}{hint}") from None
    except (ImportError, ModelAssetError) as exc:    # a missing extra, GGUF or model part package
        raise CapaError(f"{flag} {spec!r}: {exc}") from None


def sampling_for(config: EvalConfig) -> Sampling:
    """The model under test's sampling; top_p / top_k / min_p only when set (None leaves them to
    the model's generation config)."""
    sampling = Sampling(temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed,
                        stop=HISTORY_STOPS, stop_after_fence=STOP_AFTER_FENCE)
    extra = {k: getattr(config, k) for k in ("top_p", "top_k", "min_p") if getattr(config, k) is not None}
    if not extra:
        return sampling
    try:
        return replace(sampling, **extra)
    except TypeError as exc:
        raise CapaError(f"this runners version does not take {sorted(extra)}: {exc}") from None


def error_budget(config: EvalConfig, n_jobs: int) -> int:
    return config.max_errors if config.max_errors is not None else max(1, math.ceil(MAX_ERROR_SHARE * n_jobs))


def error_text(rec: SessionRecord) -> str:
    text = rec.error_text()
    if text.startswith("Traceback"):   # an episode that raised: its last line says what happened
        lines = [line for line in text.strip().splitlines() if line.strip()]
        text = lines[-1] if lines else text
    return text


def record_facts(facts: dict, condition: str, context: dict) -> dict:
    """What a record carries besides the episode: its target's facts and the context it saw."""
    return {**facts, "condition": condition, "context_sources": context["sources"],
            "context_chars": len(context["text"]),
            **{k: v for k, v in context.items() if k not in ("text", "sources")}}


def run_sessions(out: Path, config: EvalConfig, targets: Sequence[Any],
                 make_episode: Callable[[Any, int, dict], Callable[[], Any]], *, run_info: dict,
                 engines: Mapping[str, Any], judge: Any, contexts: Callable[[Any], Mapping[str, dict]],
                 system_prompt: Callable[[dict], str] | None = None, progress: bool = True, difficulty: dict | None = None,
                 summary_extra: Callable[[list[SessionRecord], list[SessionRecord]], dict] | None = None,
                 overwrite: bool = False) -> dict:
    """Run (or resume) `targets` (each with `session_id` and `facts`) for `config.samples` trials.

    `contexts(cache)` gives each target's context ({"text", "sources", ...}), `system_prompt(context)`
    the text the model is shown before the request (stored once per run by digest); `make_episode(target,
    trial, context)` an episode factory for the driver. `engines` maps driver roles to engines;
    `judge` is described in the summary and closed at the end, whatever happens;
    `summary_extra(scored, latest)` adds the counts the run's parts declare. Returns the summary
    (also written to summary.json and summary.md). `overwrite` deletes an earlier run in `out`
    first; a `provenance` block in `run_info` gets the end time and how the run ended."""
    if config.samples < 1:
        raise CapaError(f"--samples must be >= 1, got {config.samples}")
    try:
        prepare_out(out, run_info, overwrite=overwrite)
    except BaseException:
        judge.close()
        raise
    ended = "error"
    try:
        summary = play(out, config, targets, make_episode, engines=engines, judge=judge, contexts=contexts,
                       system_prompt=system_prompt, progress=progress, difficulty=difficulty,
                       summary_extra=summary_extra)
        ended = "finished"
        return summary
    except BaseException as exc:
        ended = type(exc).__name__
        raise
    finally:
        stamp_end(out, ended)


def play(out: Path, config: EvalConfig, targets: Sequence[Any],
         make_episode: Callable[[Any, int, dict], Callable[[], Any]], *, engines: Mapping[str, Any], judge: Any,
         contexts: Callable[[Any], Mapping[str, dict]], system_prompt: Callable[[dict], str] | None,
         progress: bool, difficulty: dict | None,
         summary_extra: Callable[[list[dict], list[dict]], dict] | None) -> dict:
    """run_sessions' work once the run folder is ready: resume, play, record, summarise."""
    results = out / RESULTS
    earlier = read_records(results)
    if results.is_file():
        rewrite(results, earlier)
    done = complete(earlier)
    by_key = {f"{t.session_id}#{k}": (t, k) for t in targets for k in range(config.samples)}
    jobs = [key for key in by_key if key not in done]
    budget = error_budget(config, len(jobs))
    stats, incomplete, t0 = RunStats(), [], time.perf_counter()
    try:
        with CompletionCache(str(out / "cache.sqlite")) as cache, open(results, "a", encoding="utf-8") as fh:
            ctx = contexts(cache)
            # what the model saw before the request, stored once per distinct text (contexts.jsonl)
            systems = {t.session_id: system_prompt(ctx[t.session_id]) for t in targets} if system_prompt else {}
            digests = store_contexts(out, systems.values())

            def on_done(key: str, outcome) -> None:
                t, trial = by_key[key]
                facts = record_facts(t.facts, config.condition, ctx[t.session_id])
                if systems:
                    facts["context_sha256"] = digests[systems[t.session_id]]
                rec = outcome_record(facts, outcome, trial)
                append(fh, rec)
                if rec.incomplete:
                    incomplete.append(rec)
                    if len(incomplete) > budget:
                        raise TooManyErrors(f"{len(incomplete)} sessions could not be finished by the engine "
                                            f"(limit --max-errors {budget}); last error: "
                                            f"{error_text(rec)[:300]}. Finished sessions are saved in {results}; "
                                            "rerun the same command to retry the rest.")

            episodes = [(key, make_episode(*by_key[key], ctx[by_key[key][0].session_id])) for key in jobs]
            try:
                run_episodes(episodes, engines=dict(engines), cache=cache, abort_on_failed_batch=True,
                             progress=f"eval {config.condition}" if progress else False, on_done=on_done,
                             stats=stats)
            except EngineError as exc:
                raise CapaError(f"{config.model}: {exc}. Finished sessions are saved in {results}; "
                                "rerun the same command once the engine serves requests again.") from None
    finally:
        sandbox_info = judge.describe()
        judge.close()
    return write_summary(out, config, set(by_key), stats, time.perf_counter() - t0, len(done), sandbox_info,
                         difficulty, summary_extra)


def write_summary(out: Path, config: EvalConfig, wanted: set[str], stats, wall_s: float, resumed: int,
                  sandbox_info, difficulty: dict | None = None,
                  summary_extra: Callable[[list[SessionRecord], list[SessionRecord]], dict] | None = None) -> dict:
    latest = {k: r for k, r in read_records(out / RESULTS).items() if k in wanted}
    scored = [r for r in latest.values() if not r.incomplete]
    broken = [r for r in latest.values() if r.incomplete]
    if difficulty:   # the labels annotate the records in memory: sessions.jsonl stays as played
        scored = [r.model_copy(update={"difficulty": difficulty["labels"].get(r.session_id)}) for r in scored]
    summary = {"config": config.to_dict(), "n_sessions": len(scored), "n_incomplete": len(broken),
               "incomplete": [{"session": record_key(r), "error": error_text(r)[:300]} for r in broken],
               "wall_s": round(wall_s, 2), "resumed": resumed, "usage": stats.to_dict(), "sandbox": sandbox_info,
               **({"difficulty_source": difficulty["source"]} if difficulty else {}),
               **summarize(scored, max_turns=config.max_turns, seed=config.seed),
               "user_reasoning": reasoning_shares(scored),
               **(summary_extra(scored, list(latest.values())) if summary_extra else {})}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary
