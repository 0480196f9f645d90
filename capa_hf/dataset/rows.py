"""Records to dataset rows and back. Pure functions."""

from __future__ import annotations

from capa_hf.schema import Cell, Mechanism, Persona, Session, Task, TaskContent


def _patterns(patterns: dict) -> list[dict]:
    return [{"mechanism": m, "pattern": p} for m, p in sorted(patterns.items())]


def session_row(s: Session) -> dict:
    row = s.model_dump(mode="json")
    row["mechanisms"] = list(s.mechanisms)
    row["patterns"] = _patterns(s.patterns)
    return row


def session_from_row(row: dict) -> Session:
    data = dict(row)
    data["mechanisms"] = tuple(row["mechanisms"])
    data["patterns"] = {p["mechanism"]: p["pattern"] for p in row["patterns"]}
    return Session.model_validate(data)


def task_row(task: Task, content: TaskContent) -> dict:
    return {"task_id": task.task_id, "entry_point": task.entry_point, "prompt": task.prompt,
            "canonical_solution": task.canonical_solution, "test": task.test, "gist": content.gist,
            "keypoints": [k.model_dump() for k in content.keypoints]}


def task_from_row(row: dict) -> tuple[Task, TaskContent]:
    content = TaskContent.model_validate({"task_id": row["task_id"], "gist": row["gist"],
                                          "keypoints": row["keypoints"]})
    task = Task(task_id=row["task_id"], prompt=row["prompt"], entry_point=row["entry_point"],
                canonical_solution=row["canonical_solution"], test=row["test"], content=content)
    return task, content


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
            "patterns": _patterns(c.patterns), "task_ids": list(c.task_ids)}
