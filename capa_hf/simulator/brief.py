"""`UserBrief`: what a simulated user of one session may know, every user's input.

Built by generation (Stage 2) and evaluation from a session's data; read by the scripted user,
the LLM planner and the expression agent. It is never shown to the assistant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from capa_hf.schema import HiddenItem, Keypoint, Persona
from capa_hf.schema.convention import Dimension
from capa_hf.simulator.user_data import stated_line, variant_ties


@dataclass(frozen=True)
class UserBrief:
    """Everything a simulated user of one session may know (never shown to the assistant)."""

    session_id: str
    hidden_items: tuple[HiddenItem, ...]
    keypoints: Mapping[str, Keypoint]
    dimensions: Mapping[str, Dimension]      # or anything with name, summary and questions
    persona: Persona | None                  # None for a user without one (the blank control's debugger)
    user_lines: Mapping
    reference: str = ""           # the variant's reference code (an LLM planner's ground truth)
    task_prompt: str = ""
    initial_request: str = ""     # the user's own first message (an LLM user's first commitment)
    variant_id: str = ""          # the session's variant: its failure ties and its task's question forms
    ties: Mapping[str, Mapping[str, list]] | None = field(default=None)   # overrides the recorded ties

    @property
    def task_id(self) -> str:
        return self.variant_id.split("@", 1)[0]

    def failure_ties(self) -> Mapping[str, Mapping[str, list]]:
        """Failing test line -> {ref: signatures of its alternatives there} (capa regen-ties)."""
        return self.ties if self.ties is not None else variant_ties(self.variant_id)

    def variant_values(self) -> dict[str, str]:
        key = self.variant_id.split("@", 1)[1] if "@" in self.variant_id else ""
        return dict(kv.split("=", 1) for kv in key.split("+") if "=" in kv)

    def stated_conventions(self) -> dict[str, str]:
        """Dimension -> how the request stated it, for the variant's conventions it did not hide."""
        hidden = {h.dimension for h in self.hidden_items if h.kind == "convention"}
        return {d: stated_line(self.task_id, d, v, self.initial_request)
                for d, v in sorted(self.variant_values().items()) if d not in hidden}
