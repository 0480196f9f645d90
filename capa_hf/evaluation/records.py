"""A run folder's files: config.json, sessions.jsonl (one line per finished session and trial).

Each line is a `SessionRecord` (capa_hf/schema/record.py): written with `to_dict()`, read back
with `from_dict()`, so a line written by an earlier version reads and rewrites unchanged. A line
with `incomplete: true` is a session the engine could not finish (an HTTP error, an outage): it is
kept for the record, never scored, and a rerun of the same command plays it again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from pydantic import ValidationError

from capa_hf.errors import CapaError
from capa_hf.schema.record import SessionRecord

RESULTS = "sessions.jsonl"
CONTEXTS = "contexts.jsonl"     # what the model was shown before the request, once per distinct text


def record_key(rec: SessionRecord) -> str:
    return rec.key


def json_lines(path: Path) -> list[dict]:
    """The parsed lines of a JSONL file (none when it does not exist); a torn line is skipped."""
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def read_records(path: Path) -> dict[str, SessionRecord]:
    """The latest record per (session, trial) of an earlier run. A torn last line is dropped; a
    line that is JSON but no session record is refused, naming the file, the line and the field."""
    out = {}
    for n, row in enumerate(json_lines(path), 1):
        try:
            rec = SessionRecord.from_dict(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "the record"
            raise CapaError(f"{path}: record {n} is not a session record ({where}: {err['msg']}); "
                            "expected a line that `capa eval` wrote") from None
        out[rec.key] = rec
    return out


def read_config(path: Path) -> dict:
    """A run folder's config.json; a missing, unreadable or run-less one is refused, naming it."""
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CapaError(f"{path}: not a run folder (no config.json); expected the --out of `capa eval`")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CapaError(f"{cfg_path}: unreadable ({exc})") from None
    if not isinstance(config.get("run"), dict):
        raise CapaError(f"{cfg_path}: has no 'run' block; expected the config.json that `capa eval` writes")
    return config


def complete(records: dict[str, SessionRecord]) -> dict[str, SessionRecord]:
    return {k: r for k, r in records.items() if not r.incomplete}


def record_line(record: SessionRecord) -> str:
    """The record's sessions.jsonl line (with its newline)."""
    return json.dumps(record.to_dict(), ensure_ascii=False) + "\n"


def rewrite(path: Path, records: dict[str, SessionRecord]) -> None:
    """Drop a torn last line (and superseded lines) before appending."""
    text = "".join(record_line(r) for r in records.values())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def context_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_contexts(path: Path) -> dict[str, str]:
    """{sha256: text} of a run's contexts.jsonl (empty for a run made before it existed). A torn
    last line is skipped: the run writes that context again."""
    return {row["sha256"]: row["text"] for row in json_lines(path)}


def store_contexts(out: Path, texts: Iterable[str]) -> dict[str, str]:
    """Append each distinct text not yet in `out`/contexts.jsonl; {text: sha256} for all of them.
    A session record names its context by digest, so 5 sessions of one cell under `same-user`
    share one stored copy."""
    path = out / CONTEXTS
    known = read_contexts(path)
    digests = {}
    new = []
    for text in texts:
        if text in digests:
            continue
        digests[text] = d = context_digest(text)
        if d not in known:
            known[d] = text
            new.append(json.dumps({"sha256": d, "text": text}, ensure_ascii=False) + "\n")
    if new:
        with open(path, "a", encoding="utf-8") as fh:
            fh.writelines(new)
            fh.flush()
            os.fsync(fh.fileno())
    return digests


def outcome_record(base: dict, outcome, trial: int) -> SessionRecord:
    """One finished episode's record: `base` (what the run knows of the session) with the
    episode's result (a SessionRecord, or a dict of its fields), or, when the episode raised (an
    engine error, never the model's), an *incomplete* record that the metrics leave out and a
    rerun retries. The keys keep the order of `base`, then the episode's."""
    rec = dict(base)
    if outcome.error:
        rec.update({"trial": trial, "incomplete": True, "error": {"error": outcome.error},
                    "submissions": [], "success_turn": None, "solved": False})
    else:
        result = outcome.result
        rec.update(result.to_dict() if isinstance(result, SessionRecord) else result)
    return SessionRecord.from_dict(rec)


def append(fh, record: SessionRecord) -> None:
    fh.write(record_line(record))
    fh.flush()
    os.fsync(fh.fileno())


def prepare_out(out: Path, config: dict, overwrite: bool = False) -> dict:
    """Create the run folder, or check that it holds a run the new config may resume
    (evaluation/resume.py: a folder with no finished session takes the new config, a limit may
    grow, defaults compare equal); `overwrite` deletes the earlier run first. Writes and returns
    the config the run records."""
    from capa_hf.evaluation.resume import clear_run, resumed_config

    if overwrite:
        clear_run(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "config.json"
    if cfg_path.is_file():
        finished = complete(read_records(out / RESULTS))
        try:
            old = json.loads(cfg_path.read_text())
        except json.JSONDecodeError:
            if finished:
                raise CapaError(f"{cfg_path}: unreadable config of an earlier run; use a new --out, "
                                "or --overwrite to start over") from None
            old = None
        if not finished:      # a crashed or engine-failed start: no run to keep
            if old is None or old.get("run") != config["run"]:
                (out / RESULTS).unlink(missing_ok=True)
        else:
            config = resumed_config(out, old, config)
    cfg_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return config
