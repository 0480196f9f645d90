"""`blank-control`: no context at all (the blank control's condition, with the `humaneval` split
and the `debugger` user)."""

from __future__ import annotations

from capa_hf.defaults import BLANK_CONDITION
from capa_hf.evaluation.conditions.base import register


@register(BLANK_CONDITION)
class Blank:
    name = BLANK_CONDITION

    def __init__(self, seed: int = 0):
        self.seed = seed

    def contexts(self, targets, data, env=None):
        return {t.session_id: {"text": "", "sources": []} for t in targets}
