"""Mechanical checks that a visible line cannot settle a hidden item (rubric question 1).

Four checks, run by `capa validate-content` on the curated data:
- `settles` tags (capa_hf/data/variants/<task>.yaml) name real keypoints of the task;
- a line a request can show while it hides a dimension (the empty-input value, case, tie-break,
  bounds) states no rule that reads as one value, such as a rule that covers the empty input (cues
  and guards: capa_hf/data/settling_cues.yaml), unless its source is tagged;
- the stand-in of a hideable data_type keypoint does not name the result's kind;
- a hideable keypoint's stand-in does not all but name it, and no line in sight while it is hidden
  gives it away (the result's kind, the main sort key in a tie-break line, "every other entry is
  left as it is"), unless that line's source is tagged.
Stage 1 reads the same tags (capa_hf.generation.stage1_plan.settlers).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator, Mapping

from capa_hf.data_files import read_yaml
from capa_hf.paths import DATA_DIR

CUES_FILE = DATA_DIR / "settling_cues.yaml"


@lru_cache(maxsize=1)
def settling_cues() -> dict:
    return read_yaml(CUES_FILE)


def _any(patterns, text: str) -> str | None:
    for p in patterns:
        m = re.search(p, text, flags=0 if re.search(r"[A-Z]", p.replace("\\b", "")) else re.I)
        if m:
            return m.group(0)
    return None


def lines_in_sight_while_hidden(content, source, dim: str) -> Iterator[tuple[str, str]]:
    """(source, line) for every line a request of this task can show while `dim` (a dimension or
    a keypoint id) is hidden: the gist, each other keypoint's neutral_plain line, else its plain
    line if it is no convention's; sources tagged as settling `dim` are left out (Stage 1 states
    the value, or keeps the keypoint in sight, when they show)."""
    tagged = {s for s, targets in source.settles.items() if dim in targets}
    if "gist" not in tagged:
        yield "gist", content.gist
    for kp in content.keypoints:
        if kp.id in tagged or kp.id == dim:
            continue
        if kp.id in source.neutral_plain:
            yield kp.id, source.neutral_plain[kp.id]
        elif kp.id not in source.convention_keypoints:
            yield kp.id, kp.plain


def dimension_problems(content, source) -> list[str]:
    """Lines in sight while a dimension of the task is hidden that state a rule reading as one value."""
    out = []
    for dim, cues in settling_cues()["dimensions"].items():
        if dim not in source.dimensions:
            continue
        for src, line in lines_in_sight_while_hidden(content, source, dim):
            cue = _any(cues["cues"], line)
            if cue and not _any(cues["guards"], line):
                out.append(f"{src} can show while {dim} is hidden and reads as one value ({cue!r}): {line!r}; "
                           f"reword it, or tag settles: {{{src}: [{dim}]}}")
    return out


_RESULT_START = re.compile(r"\b(get|tell me|have it|hand me|give me|let me know)\b.*", re.I | re.S)


def result_part(vague: str) -> str:
    """The part of a stand-in that speaks of the result ("... and get a number back"), else all of it."""
    m = _RESULT_START.search(vague)
    return m.group(0) if m else vague


def data_type_problems(content, source) -> list[str]:
    words = settling_cues()["data_type_result_words"]
    out = []
    for kp in content.keypoints:
        if kp.category != "data_type" or kp.id not in source.misreadings or kp.id in source.convention_keypoints:
            continue
        word = _any(words, result_part(kp.vague))
        if word:
            out.append(f"{kp.id}: the stand-in of a hideable data_type keypoint names the result's kind "
                       f"({word!r}): {kp.vague!r}")
    return out


def hideable(content, source) -> list:
    """The keypoints Stage 1 can hide as task items: those with a misreading, no convention's."""
    return [k for k in content.keypoints if k.id in source.misreadings and k.id not in source.convention_keypoints]


def keypoint_problems(content, source) -> list[str]:
    """Stand-ins that all but name their keypoint, and lines in sight while a keypoint is hidden
    that give it away: the result's kind (data_type), the main sort key in a tie-break line, or
    "every other entry is left as it is" while another rule that changes entries is hidden."""
    cues = settling_cues()
    out = []
    for kp in hideable(content, source):
        word = _any(cues["stand_in"], kp.vague)
        if word:
            out.append(f"{kp.id}: its stand-in all but names it ({word!r}): {kp.vague!r}")
        keyed = _any(cues["sort_key"], kp.plain)
        kind_named = (kp.category == "data_type" and _any(cues["return_kind_keypoint"], kp.plain)
                      and kp.id not in cues["return_kind_exempt"].get(content.task_id, ()))
        for src, line in lines_in_sight_while_hidden(content, source, kp.id):
            why = None
            if kind_named and _any(cues["return_kind"], line):
                why = f"names the result's kind ({_any(cues['return_kind'], line)!r})"
            elif keyed and _any(cues["tie_break"], line):
                why = f"breaks ties on the main sort key it states ({_any(cues['tie_break'], line)!r})"
            elif kp.category in ("core_definition", "logical_control") and _any(cues["rest"], line):
                why = f"says every other entry is left alone ({_any(cues['rest'], line)!r}), false while it is hidden"
            if why:
                out.append(f"{src} can show while {kp.id} is hidden and {why}: {line!r}; "
                           f"reword it, or tag settles: {{{src}: [{kp.id}]}}")
    return out


def tag_problems(content, source) -> list[str]:
    kps = {k.id for k in content.keypoints}
    out = []
    for src, targets in source.settles.items():
        for name in [src, *targets]:
            if name != "gist" and name not in source.dimensions and name not in kps:
                out.append(f"settles.{src}: {name} is not a keypoint of the task")
    return out


def check_settles(tasks: Mapping, variants: Mapping) -> list[str]:
    """Every problem, one line each, for the tasks that have both keypoints and variants."""
    errors = []
    for task_id in sorted(set(tasks) & set(variants), key=lambda t: int(t.split("/")[1])):
        where = f"variants/{task_id.replace('/', '_')}.yaml"
        content, source = tasks[task_id], variants[task_id]
        for problem in (tag_problems(content, source) + dimension_problems(content, source)
                        + data_type_problems(content, source) + keypoint_problems(content, source)):
            errors.append(f"{where}: {problem}")
    return errors
