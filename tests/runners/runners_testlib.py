"""Episode builders shared by the runner tests."""

from __future__ import annotations

from runners import Call, Sampling


def echo(messages):
    return "echo: " + [m["content"] for m in messages if m["role"] == "user"][-1]


def chat_episode(eid: str, turns: int, role: str = "assistant", log: list | None = None):
    """A multi-turn conversation: each turn asks a unique question and checks its own reply."""

    def factory():
        msgs = [{"role": "system", "content": "You are terse."}]
        replies = []
        for t in range(turns):
            msgs.append({"role": "user", "content": f"{eid} turn {t}"})
            res = yield Call(role, list(msgs), Sampling(max_tokens=64))
            if log is not None:
                log.append((eid, t, res.text))
            replies.append(res.text)
            msgs.append({"role": "assistant", "content": res.text})
        return {"id": eid, "replies": replies}

    return factory
