"""Reference policies: assistants that need no model, for a first run in seconds.

`capa eval --model reference:asker --cells C01` plays the dataset with one of these in place of a
model. Each is a real engine of the runners protocol (it sees only the conversation, and is
batched, cached and recorded like any other), built from the dataset the run loads:

- `reference:oracle`    submits the variant's reference at once: ES 100%, FT-ES 100%, TTC 1
                        (what an assistant that already knows every hidden item scores);
- `reference:asker`     asks about each hidden item in turn (the item's curated question), then
                        submits the reference (`reference` alone means this one): it exercises
                        the simulated user, who must reveal one item per question;
- `reference:humaneval` submits HumanEval's own canonical solution at once, ignoring the user:
                        how far the personal conventions move a session from the original task.

Each session's reply is found by its cell and its request, which are unique in a dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

from runners.types import ChatRequest, ChatResult

from capa_hf.errors import CapaError

PREFIX = "reference"
POLICIES = ("asker", "oracle", "humaneval")
DEFAULT_POLICY = "asker"
SUBMIT_LINE = "Here is the function."


def is_reference(spec: str) -> bool:
    return spec.strip().partition(":")[0].lower() == PREFIX


def policy_name(spec: str) -> str:
    name = spec.strip().partition(":")[2].strip().lower() or DEFAULT_POLICY
    if name not in POLICIES:
        raise CapaError(f"--model {spec!r}: unknown reference policy {name!r}; expected one of "
                        + ", ".join(f"{PREFIX}:{p}" for p in POLICIES))
    return name


def code_reply(code: str) -> str:
    return f"{SUBMIT_LINE}\n\n```python\n{code.rstrip()}\n```"


@dataclass(frozen=True)
class Script:
    questions: tuple[str, ...]     # one per hidden item, in priority order (asker only)
    code: str


def _question(item, data, task_id: str) -> str:
    if item.kind == "convention":
        dim = data.dimensions.get(item.dimension)
        text = dim.questions[0] if dim and dim.questions else f"What about {item.dimension}?"
        return text.format(result="the result", input="the input")
    for kp in data.contents[task_id].keypoints:
        if kp.id == item.keypoint_id:
            return kp.question
    return "Is there anything the request leaves open?"


def scripts_for(policy: str, data) -> dict[tuple[str, str], Script]:
    """{(cell id, initial request): script} for every session of both splits."""
    out = {}
    for sessions in (data.heldout, data.history):
        for s in sessions.values():
            if policy == "humaneval":
                task = data.tasks[s.task_id]
                script = Script((), task.prompt.rstrip() + "\n" + task.canonical_solution)
            else:
                asks = tuple(_question(h, data, s.task_id) for h in s.hidden_items) if policy == "asker" else ()
                script = Script(asks, data.problem(s).reference)
            out[(s.cell_id, s.initial_request)] = script
    return out


class ReferencePolicy:
    """A runners engine that plays one reference policy over a loaded dataset."""

    name = PREFIX

    def __init__(self, policy: str, data) -> None:
        self.policy = policy
        self.model = f"{PREFIX}:{policy}"
        self.scripts = scripts_for(policy, data)

    def describe(self) -> dict:
        return {"engine": self.name, "model": self.model}

    def cache_identity(self) -> dict:
        return {"policy": self.policy}

    def reply(self, request: ChatRequest) -> str:
        messages = request.message_dicts()
        users = [m["content"] for m in messages if m["role"] == "user"]
        script = self.scripts.get((request.affinity, users[0])) if users else None
        if script is None:
            raise KeyError("no session of the dataset has this cell and request")
        asked = sum(1 for m in messages if m["role"] == "assistant")
        return script.questions[asked] if asked < len(script.questions) else code_reply(script.code)

    def generate(self, requests: list[ChatRequest]) -> list[ChatResult]:
        out = []
        for req in requests:
            try:
                text = self.reply(req)
            except KeyError as exc:
                out.append(ChatResult.failure(f"{self.model}: {exc.args[0]}"))
                continue
            out.append(ChatResult(text=text, finish_reason="stop", prompt_tokens=0,
                                  completion_tokens=len(text.split())))
        return out

    def close(self) -> None:
        pass


def reference_engine(spec: str, data, options: dict) -> ReferencePolicy:
    if options:
        raise CapaError(f"--model {spec!r}: a reference policy takes no --engine-arg (got {sorted(options)})")
    return ReferencePolicy(policy_name(spec), data)
