"""Prompt texts live as files under capa_hf/prompts/; this module only reads and fills them."""

from __future__ import annotations

from functools import lru_cache
from string import Template

from capa_hf.errors import DataFileError
from capa_hf.paths import PROMPTS_DIR


@lru_cache(maxsize=None)
def prompt_text(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        raise DataFileError(path, "prompt file not found")
    return path.read_text(encoding="utf-8").strip()


def fill(name: str, **slots: str) -> str:
    try:
        return Template(prompt_text(name)).substitute(**slots)
    except KeyError as exc:
        raise DataFileError(PROMPTS_DIR / f"{name}.md", f"needs slot {exc}") from None
