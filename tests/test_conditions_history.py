"""The raw-history conditions pick what they claim: shuffled shows other users, conflicting shows
other users whose conventions contradict the target's on the dimensions its held-out tasks use."""

from __future__ import annotations

from capa_hf.evaluation.conditions import get_condition
from capa_hf.evaluation.conditions.history import render_history


def _targets(data, cell_id):
    return sorted((s for s in data.heldout.values() if s.cell_id == cell_id), key=lambda s: s.position)


def test_conflicting_history_never_shows_the_targets_own_value_and_mostly_contradicts_it(capa_data):
    data = capa_data
    contradicting_sessions = shown = 0
    for cell_id in sorted(data.cells):
        targets = _targets(data, cell_id)
        dims = {d for t in targets for d in data.values_of(t)}
        profile = data.cells[cell_id].profile
        ctx = get_condition("conflicting").contexts(targets, data)
        sources = ctx[targets[0].session_id]["sources"]
        assert len(sources) == 5 and len({data.history[s].task_id for s in sources}) == 5
        held_tasks = {t.task_id for t in targets}
        for sid in sources:
            s = data.history[sid]
            assert s.cell_id != cell_id and s.task_id not in held_tasks
            values = data.values_of(s)
            touched = [d for d in dims if d in values]
            # never the target's own value on a dimension its held-out tasks exercise
            assert all(values[d] != profile[d] for d in touched), (cell_id, sid, values, profile)
            contradicting_sessions += bool(touched)
            shown += 1
    # most of what is shown actually states a wrong value for the target (not just silence)
    assert contradicting_sessions / shown >= 0.8, (contradicting_sessions, shown)


def test_shuffled_and_conflicting_are_sized_like_the_users_own_history(capa_data):
    data = capa_data
    for cell_id in ("C01", "C17", "C42"):
        targets = _targets(data, cell_id)
        own = len(get_condition("same-user").contexts(targets, data)[targets[0].session_id]["text"])
        for name in ("shuffled", "conflicting"):
            ctx = get_condition(name).contexts(targets, data)
            texts = {c["text"] for c in ctx.values()}
            assert len(texts) == 1                      # one context per cell: prefix caching applies
            sources = ctx[targets[0].session_id]["sources"]
            assert len(render_history([data.history[s] for s in sources])) <= own * 1.15
            if name == "shuffled":
                me = data.history[f"{cell_id}-S01"]
                assert all(data.history[s].persona_id != me.persona_id for s in sources)
