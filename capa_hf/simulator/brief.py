"""`UserBrief`: what a simulated user of one session may know, every user's input.

Built by generation (Stage 2) and evaluation from a session's data; read by the scripted user,
the LLM planner and the expression agent. It is never shown to the assistant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from capa_hf.schema import HiddenItem, Keypoint, Persona
from capa_hf.schema.convention import Dimension


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
