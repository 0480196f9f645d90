"""The `debugger` simulated user of the blank control: no persona, no hidden items.

After a failing submission it quotes the concrete failing check or error; after a reply without
code it asks for the function (capa_hf/data/debugger_lines.yaml). Registered as `debugger`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator

from capa_hf.data_files import read_yaml
from capa_hf.errors import CapaError
from capa_hf.paths import DATA_DIR
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.protocols import register_user
from capa_hf.simulator.verdicts import failure_summary

LINES_FILE = DATA_DIR / "debugger_lines.yaml"


def debugger_lines() -> dict[str, str]:
    lines = read_yaml(LINES_FILE)
    if not isinstance(lines, dict) or not {"failed", "no_code"} <= set(lines):
        raise CapaError(f"{LINES_FILE}: expected the keys 'failed' and 'no_code'")
    return lines


def failure_text(verdict: dict) -> str:
    """The failing check (or the error) and its message, as a debugger prints it."""
    failure = verdict.get("failure") or {}
    text = failure_summary(verdict)
    message = (failure.get("message") or "").strip().splitlines()
    if failure.get("line") and message and message[0]:
        text += f" ({message[0][:200]})"
    return text


@dataclass
class DebuggerUser:
    """A SimulatedUser that only reports test results."""

    lines: dict[str, str]
    revealed: list[str] = field(default_factory=list)
    name: str = "debugger"

    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[Any, Any, str]:
        if verdict is None:
            return self.lines["no_code"]
        return self.lines["failed"].format(error=failure_text(verdict))
        yield  # pragma: no cover - a user is a generator; this one never calls a model


@register_user("debugger")
def make_debugger_user(brief: UserBrief, **options) -> DebuggerUser:
    if options:
        raise ValueError(f"the debugger user takes no options, got {sorted(options)}")
    return DebuggerUser(debugger_lines())
