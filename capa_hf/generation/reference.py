"""The reference assistant of Stage 2: asks about each hidden item, then submits the reference code.

It is a real `runners` engine (it only ever sees the conversation), so it can be swapped for any
other engine with `capa build --assistant SPEC`.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

from runners.types import ChatRequest, ChatResult

from capa_hf.prompts import fill
from capa_hf.schema import Task


def reference_code(task: Task) -> str:
    """The canonical solution as a compact program: docstrings (and their doctests) removed."""
    tree = ast.parse(task.prompt + task.canonical_solution)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


@dataclass(frozen=True)
class ReferenceScript:
    questions: tuple[tuple[str, str], ...]   # (clarification text that answers it, question)
    code: str


def request_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ReferenceAssistant:
    """Asks the first hidden item whose answer has not appeared yet; then submits."""

    name = "reference"
    model = "reference-v1"

    def __init__(self) -> None:
        self.scripts: dict[str, ReferenceScript] = {}

    def add(self, initial_request: str, script: ReferenceScript) -> None:
        self.scripts[request_key(initial_request)] = script

    def describe(self) -> dict:
        return {"engine": self.name, "model": self.model}

    def cache_identity(self) -> dict:
        return {}

    def reply(self, messages: list[dict]) -> str:
        users = [m["content"] for m in messages if m["role"] == "user"]
        script = self.scripts.get(request_key(users[0])) if users else None
        if script is None:
            raise KeyError("the reference assistant has no script for this request")
        later = " ".join(users[1:])
        for answer, question in script.questions:
            if answer not in later:
                return fill("reference_question", question=question)
        return fill("reference_submission", code=script.code)

    def generate(self, requests: list[ChatRequest]) -> list[ChatResult]:
        out = []
        for req in requests:
            text = self.reply(req.message_dicts())
            out.append(ChatResult(text=text, finish_reason="stop", prompt_tokens=0,
                                  completion_tokens=len(text.split())))
        return out
