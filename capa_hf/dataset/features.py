"""Arrow/`datasets` features of every config. One place, used by build, validate and load."""

from __future__ import annotations

from datasets import Features, List, Value

S = Value("string")
B = Value("bool")

HIDDEN_ITEM = {"id": S, "kind": S, "keypoint_id": S, "dimension": S, "mechanism": S, "obscured_as": S,
               "clarification": S, "resolvable_from_history": B, "revealed_in": List(S)}

SESSION = Features({
    "session_id": S,
    "cell_id": S,
    "position": Value("int32"),
    "split": S,
    "role": S,
    "persona_id": S,
    "mechanisms": List(S),
    "patterns": List({"mechanism": S, "pattern": S}),
    "task_id": S,
    "variant_id": S,
    "entry_point": S,
    "initial_request": S,
    "hidden_items": List(HIDDEN_ITEM),
    "turns": List({"role": S, "content": S}),
    "resolved": B,
    "assistant_turns": Value("int32"),
    "difficulty": S,
    "generator": {
        "pipeline_version": S, "realizer": S, "assistant": S, "user": S,
        "seed": Value("int64"), "attempt": Value("int32"), "fallback": B,
    },
})

TASK = Features({
    "task_id": S, "entry_point": S, "prompt": S, "canonical_solution": S, "test": S, "gist": S,
    "keypoints": List({"id": S, "category": S, "description": S, "original_text": S,
                       "plain": S, "vague": S, "question": S}),
    "dimensions": List({"dimension": S, "humaneval_value": S}),
    "convention_keypoints": List({"keypoint_id": S, "dimension": S}),
    "hideable_keypoints": List(S),
})

VARIANT = Features({
    "variant_id": S, "task_id": S, "values": S, "humaneval": B, "reference": S, "test": S,
})

DIMENSION = Features({
    "id": S, "name": S, "constant": S, "summary": S, "questions": List(S),
    "values": List({"id": S, "habit": List(S), "state": List(S)}),
})

PERSONA = Features({
    "id": S, "name": S, "summary": S, "discipline": S,
    "traits": {"expertise": S, "background": S, "tone": S, "verbosity": S,
               "security_awareness": S, "emotional_state": S, "failure_style": S},
    "voice": {"openers": List(S), "closers": List(S), "clarification_wraps": List(S),
              "failure_reactions": List(S), "style_moves": List({"kind": S, "variants": List(S)})},
})

MECHANISM = Features({
    "id": S, "name": S, "abbrev": S, "cause": S, "information_control": S, "operation": S,
    "max_items": Value("int32"), "resolution": S,
    "patterns": List({"id": S, "summary": S, "categories": List(S)}),
})

CELL = Features({
    "cell_id": S, "persona_id": S, "mechanisms": List(S),
    "patterns": List({"mechanism": S, "pattern": S}), "task_ids": List(S),
    "profile": List({"dimension": S, "value": S}),
    "dimension_mechanisms": List({"dimension": S, "mechanism": S}),
    "roles": List(S),
})

# config name -> (features, {split: relative parquet path})
LAYOUT = {
    "default": (SESSION, {"history": "data/history-00000-of-00001.parquet",
                          "heldout": "data/heldout-00000-of-00001.parquet"}),
    "tasks": (TASK, {"train": "tasks/train-00000-of-00001.parquet"}),
    "variants": (VARIANT, {"train": "variants/train-00000-of-00001.parquet"}),
    "dimensions": (DIMENSION, {"train": "dimensions/train-00000-of-00001.parquet"}),
    "personas": (PERSONA, {"train": "personas/train-00000-of-00001.parquet"}),
    "mechanisms": (MECHANISM, {"train": "mechanisms/train-00000-of-00001.parquet"}),
    "cells": (CELL, {"train": "cells/train-00000-of-00001.parquet"}),
}
