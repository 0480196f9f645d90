"""Casting the simulated user of a session from the session's own data."""

from __future__ import annotations

from typing import Iterable, Mapping

from capa_hf.schema import HiddenItem, Keypoint, Persona
from capa_hf.simulator.planner import PlannerItem
from capa_hf.simulator.scripted_user import ScriptedUser, UserScript


def scripted_user(
    session_id: str,
    hidden_items: Iterable[HiddenItem],
    keypoints: Mapping[str, Keypoint],
    persona: Persona,
    controls: Mapping,
) -> ScriptedUser:
    hidden = list(hidden_items)
    items = tuple(
        PlannerItem(id=h.id, question=keypoints[h.keypoint_id].question,
                    plain=keypoints[h.keypoint_id].plain,
                    original_text=keypoints[h.keypoint_id].original_text)
        for h in hidden
    )
    script = UserScript(
        session_id=session_id,
        items=items,
        clarifications={h.id: h.clarification for h in hidden},
        failure_reactions=tuple(persona.voice.failure_reactions),
        failing_check=tuple(controls["failing_check"]),
        nothing_left=tuple(controls["nothing_left"]),
    )
    return ScriptedUser(script)
