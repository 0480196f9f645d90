"""Run folders as pandas DataFrames: `sessions_df(runs)` and `turns_df(runs)`.

    from capa_hf.results import sessions_df
    df = sessions_df(["runs/qwen-none", "runs/qwen-same-user"])
    df.groupby(["model", "condition"])[["solved", "first_turn", "ttc"]].mean()

A run is a `capa eval` (or `capa blank-control`) folder: config.json and sessions.jsonl. A
folder that is missing, has no config, or is half-written (fewer finished sessions than the run
targets) is refused with an error that names it; `allow_partial=True` reads what is there.
Incomplete records (engine errors) are never scored and are left out unless asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from capa_hf.defaults import MAX_TURNS
from capa_hf.errors import CapaError
from capa_hf.evaluation.metrics import first_success_turn, item_kind_label
from capa_hf.evaluation.records import RESULTS, read_config, read_records
from capa_hf.schema.record import SessionRecord

# Fields of a run's config that say which sessions it covers and under which condition; runs
# that agree on everything else are the same model setting and may be paired.
_SELECTION = ("condition", "condition_args", "split", "cells", "limit", "max_errors", "samples")


def canonical_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Run:
    """One finished run folder: its config.json and the latest record per (session, trial)."""

    path: Path
    config: dict
    records: list[SessionRecord] = field(repr=False)
    name: str = ""

    @property
    def run(self) -> dict:
        return self.config.get("run", {})

    @cached_property
    def config_hash(self) -> str:
        """sha256 of the canonical JSON of the run's EvalConfig."""
        return canonical_hash(self.run)

    @cached_property
    def setting(self) -> str:
        """A short hash of the run's config without its selection and condition."""
        return canonical_hash({k: v for k, v in self.run.items() if k not in _SELECTION})[:8]

    @property
    def model(self) -> str:
        return str(self.run.get("model", "?"))

    @property
    def condition(self) -> str:
        return str(self.run.get("condition", "?"))

    @property
    def split(self) -> str:
        return str(self.run.get("split", "heldout"))

    @property
    def max_turns(self) -> int:
        return int(self.run.get("max_turns", MAX_TURNS))

    @property
    def samples(self) -> int:
        return int(self.run.get("samples", 1))

    @property
    def dataset_version(self) -> str | None:
        return self.config.get("dataset_version")

    @property
    def dataset_sha(self) -> str | None:
        return self.config.get("dataset_manifest_sha256")

    @property
    def scored(self) -> list[SessionRecord]:
        return [r for r in self.records if not r.incomplete]

    def describe(self) -> dict:
        """What names a run in every table."""
        return {"run": self.name, "model": self.model, "condition": self.condition, "split": self.split,
                "dataset_version": self.dataset_version, "config_hash": self.config_hash[:12],
                "sessions": len({r.session_id for r in self.scored}), "trials": self.samples,
                "incomplete": len(self.records) - len(self.scored), "path": str(self.path)}


def load_run(path: str | Path, allow_partial: bool = False) -> Run:
    """Read a run folder; refuse a missing, config-less or half-written one, naming it."""
    path = Path(path)
    if not path.is_dir():
        raise CapaError(f"{path}: no such run folder")
    config = read_config(path)
    records = list(read_records(path / RESULTS).values())
    run = Run(path=path, config=config, records=records, name=path.name)
    expected = config.get("n_targets")
    if not allow_partial:
        _check_finished(run, expected)
    return run


def _check_finished(run: Run, expected: int | None) -> None:
    if not (run.path / RESULTS).is_file():
        raise CapaError(f"{run.path}: half-written run: config.json but no {RESULTS} (no session finished); "
                        "rerun the same `capa eval` command to finish it")
    if expected is None:
        return
    wanted = int(expected) * run.samples
    done = len(run.scored)
    if done < wanted:
        broken = len(run.records) - done
        raise CapaError(f"{run.path}: half-written run: {done} of {wanted} sessions x trials finished "
                        f"({broken} incomplete, {wanted - done - broken} not started); rerun the same `capa eval` "
                        "command to finish it, or pass --allow-partial to report what is there")


def as_runs(runs: Iterable[str | Path | Run] | str | Path | Run, allow_partial: bool = False,
            progress: bool = False) -> list[Run]:
    """Runs from paths (or Runs), with names unique in the list (parent/name on a clash)."""
    items = [runs] if isinstance(runs, (str, Path, Run)) else list(runs)
    if progress:
        from tqdm import tqdm

        items = tqdm(items, desc="reading runs", unit="run")
    loaded = [r if isinstance(r, Run) else load_run(r, allow_partial) for r in items]
    names = [r.name or r.path.name for r in loaded]
    out = []
    for r, n in zip(loaded, names):
        if names.count(n) > 1:
            n = f"{r.path.parent.name}/{r.path.name}"
        out.append(r if r.name == n else Run(path=r.path, config=r.config, records=r.records, name=n))
    if len({r.name for r in out}) < len(out):
        raise CapaError(f"two runs share a folder name: {[str(r.path) for r in out]}")
    return out


def labels_source_text(labels: Mapping | None) -> str | None:
    """How a difficulty labels file names its source run."""
    if not labels:
        return None
    s = labels.get("source", {})
    return f"{s.get('run', '?')} ({s.get('model', '?')}, {s.get('condition', '?')}, config {str(s.get('config_hash', '?'))[:12]})"


def _labels_for(run: Run, difficulty: Mapping | None) -> Mapping | None:
    return difficulty if difficulty is not None else run.config.get("difficulty")


def session_row(run: Run, rec: SessionRecord, labels: Mapping | None) -> dict:
    first = first_success_turn(rec)
    solved = first is not None and first <= run.max_turns
    label_map = (labels or {}).get("labels", {})
    kinds = rec.turn_kinds
    return {
        "run": run.name, "model": run.model, "setting": run.setting, "condition": run.condition,
        "split": run.split, "dataset_version": run.dataset_version, "config_hash": run.config_hash[:12],
        "session_id": rec.session_id, "trial": rec.trial, "cell_id": rec.cell_id,
        "persona_id": rec.persona_id, "mechanisms": list(rec.mechanisms),
        "task_id": rec.task_id, "role": rec.role, "item_kinds": list(rec.item_kinds),
        "item_kind": item_kind_label(rec), "fully_resolvable": rec.fully_resolvable,
        "difficulty": label_map.get(rec.session_id), "difficulty_source": labels_source_text(labels),
        "success_turn": first if solved else None, "solved": solved, "first_turn": solved and first == 1,
        "ttc": float(first if solved else run.max_turns), "assistant_turns": len(kinds),
        "clarifications": sum(1 for k in kinds if k == "clarification"),
        "submissions": len(rec.submissions),
        "prompt_tokens": sum(u.prompt_tokens for u in rec.usage),
        "completion_tokens": sum(u.completion_tokens for u in rec.usage),
        "wall_s": float(rec.timing.get("wall_s", float("nan"))),
        "incomplete": rec.incomplete,
    }


SESSION_COLUMNS = tuple(session_row(Run(Path("."), {"run": {}}, []), SessionRecord(session_id=""), None))


def sessions_df(runs, difficulty: Mapping | None = None, include_incomplete: bool = False,
                allow_partial: bool = False) -> pd.DataFrame:
    """One row per (run, session, trial): model, condition, dataset version, persona, mechanisms,
    difficulty, item kinds, success turn, solved, first-turn success, TTC (unsolved = the run's
    turn budget), tokens and wall time. `difficulty`: a labels file's content (`capa
    label-difficulty`); by default the labels a run was evaluated with (`capa eval --difficulty`)."""
    rows = [session_row(run, rec, _labels_for(run, difficulty))
            for run in as_runs(runs, allow_partial) for rec in run.records
            if include_incomplete or not rec.incomplete]
    df = pd.DataFrame(rows, columns=list(SESSION_COLUMNS))
    return df.astype({"success_turn": "Int64"})     # a turn number, or <NA> for unsolved


USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "cached_tokens", "latency_s", "finish_reason", "from_cache")


def turn_rows(run: Run, rec: SessionRecord) -> list[dict]:
    subs = {s.turn: s for s in rec.submissions}
    replies = rec.assistant_replies()
    out = []
    for i, kind in enumerate(rec.turn_kinds, start=1):
        verdict = subs[i].verdict if i in subs else None
        failure = verdict.failure if verdict is not None else None
        u = rec.usage[i - 1] if i <= len(rec.usage) else None
        out.append({
            "run": run.name, "model": run.model, "condition": run.condition, "split": run.split,
            "session_id": rec.session_id, "trial": rec.trial, "turn": i, "kind": kind,
            "status": verdict.status if verdict is not None else None,
            "failure_type": failure.type if failure is not None else None,
            "reply": replies[i - 1] if i <= len(replies) else None,
            **{k: getattr(u, k) if u is not None else None for k in USAGE_COLUMNS},
        })
    return out


def turns_df(runs, include_incomplete: bool = False, allow_partial: bool = False) -> pd.DataFrame:
    """One row per assistant turn: its kind (submission, clarification, cut_off, ...), the
    verdict of a submission, the reply text, tokens and latency."""
    rows = [row for run in as_runs(runs, allow_partial) for rec in run.records
            if include_incomplete or not rec.incomplete for row in turn_rows(run, rec)]
    return pd.DataFrame(rows)
