"""History conditions: what the model under test sees before the new request.

`none`, `same-user`, `shuffled` and `conflicting` live in `history.py`; conditions that call a
model or a memory library live in their own modules and register the same way.
"""

from capa_hf.evaluation.conditions.base import (HISTORY_STOPS, Condition, ConditionEnv, check_condition_options,
                                                condition_options, get_condition, known_conditions, register,
                                                render_dialogue, render_history)

__all__ = ["HISTORY_STOPS", "Condition", "ConditionEnv", "check_condition_options", "condition_options",
           "get_condition", "known_conditions", "register", "render_dialogue", "render_history"]
