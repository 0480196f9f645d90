"""Typed records of the benchmark. Every field carries its own documentation."""

from capa_hf.schema.task import CATEGORIES, Keypoint, Task, TaskContent
from capa_hf.schema.taxonomy import Mechanism, ResolutionPattern
from capa_hf.schema.persona import Lexicon, Persona, StyleMove, VoiceKit
from capa_hf.schema.cell import Cell
from capa_hf.schema.session import GeneratorInfo, HiddenItem, Session, Turn

__all__ = [
    "CATEGORIES", "Keypoint", "Task", "TaskContent", "Mechanism", "ResolutionPattern",
    "Lexicon", "Persona", "StyleMove", "VoiceKit", "Cell", "GeneratorInfo", "HiddenItem",
    "Session", "Turn",
]
