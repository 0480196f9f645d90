"""Records to dataset rows and back. Pure functions."""

from __future__ import annotations

from capa_hf.schema import Cell, Mechanism, Persona, Session, Task, TaskContent
from capa_hf.schema.convention import Dimension, VariantSource


def _pairs(mapping: dict, key: str, value: str) -> list[dict]:
    return [{key: k, value: v} for k, v in sorted(mapping.items())]


def _unpairs(rows: list[dict], key: str, value: str) -> dict:
    return {r[key]: r[value] for r in rows}


def session_row(s: Session) -> dict:
    row = s.model_dump(mode="json")
    row["mechanisms"] = list(s.mechanisms)
    row["patterns"] = _pairs(s.patterns, "mechanism", "pattern")
    return row


def session_from_row(row: dict) -> Session:
    data = dict(row)
    data["mechanisms"] = tuple(row["mechanisms"])
    data["patterns"] = _unpairs(row["patterns"], "mechanism", "pattern")
    return Session.model_validate(data)


def task_row(task: Task, content: TaskContent, source: VariantSource | None) -> dict:
    conv = source.convention_keypoints if source else {}
    return {"task_id": task.task_id, "entry_point": task.entry_point, "prompt": task.prompt,
            "canonical_solution": task.canonical_solution, "test": task.test, "gist": content.gist,
            "keypoints": [k.model_dump() for k in content.keypoints],
            "dimensions": _pairs(source.dimensions if source else {}, "dimension", "humaneval_value"),
            "convention_keypoints": _pairs(conv, "keypoint_id", "dimension"),
            "hideable_keypoints": sorted(k for k in (source.misreadings if source else {}) if k not in conv)}


def task_from_row(row: dict) -> tuple[Task, TaskContent]:
    content = TaskContent.model_validate({"task_id": row["task_id"], "gist": row["gist"],
                                          "keypoints": row["keypoints"]})
    task = Task(task_id=row["task_id"], prompt=row["prompt"], entry_point=row["entry_point"],
                canonical_solution=row["canonical_solution"], test=row["test"], content=content)
    return task, content


def dimension_row(d: Dimension) -> dict:
    return {"id": d.id, "name": d.name, "constant": d.constant, "summary": d.summary,
            "questions": list(d.questions),
            "values": [{"id": v.id, "habit": list(v.habit), "state": list(v.state)} for v in d.values]}


def persona_row(p: Persona) -> dict:
    row = p.model_dump(mode="json")
    row["voice"]["style_moves"] = [{"kind": m["kind"], "variants": list(m["variants"])}
                                   for m in row["voice"]["style_moves"]]
    return row


def persona_from_row(row: dict) -> Persona:
    return Persona.model_validate(row)


def mechanism_row(m: Mechanism) -> dict:
    return m.model_dump(mode="json")


def cell_row(c: Cell) -> dict:
    return {"cell_id": c.cell_id, "persona_id": c.persona_id, "mechanisms": list(c.mechanisms),
            "patterns": _pairs(c.patterns, "mechanism", "pattern"), "task_ids": list(c.task_ids),
            "profile": _pairs(c.profile, "dimension", "value"),
            "dimension_mechanisms": _pairs(c.dimension_mechanisms, "dimension", "mechanism"),
            "roles": list(c.roles)}


def cell_from_row(row: dict) -> Cell:
    return Cell(cell_id=row["cell_id"], persona_id=row["persona_id"], mechanisms=tuple(row["mechanisms"]),
                task_ids=tuple(row["task_ids"]), patterns=_unpairs(row["patterns"], "mechanism", "pattern"),
                profile=_unpairs(row["profile"], "dimension", "value"),
                dimension_mechanisms=_unpairs(row["dimension_mechanisms"], "dimension", "mechanism"),
                roles=tuple(row["roles"]))
