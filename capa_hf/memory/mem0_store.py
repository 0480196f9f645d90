"""mem0's real library (mem0ai 2.2.1, pinned in the `memory` extra) fed a cell's history.

Set-up, all offline: `MEM0_TELEMETRY=False` and `MEM0_DIR` inside the run folder (both read when
mem0 is first imported); the `openai` LLM provider pointed at the memory LLM's URL; the
`huggingface` embedder given the packaged MiniLM folder; qdrant in memory (`QdrantClient(":memory:")`)
with `embedding_model_dims: 384` set (mem0's defaults are 1536 and `/tmp/qdrant`); the history
database in memory, so a rerun does not see an earlier run's messages.

A cell's 5 history traces are added in order, each as one conversation with `user_id` set to the
cell id. mem0 2.2.1 makes one extraction call per `add` (`response_format: json_object`) and
swallows a reply it cannot parse; a `response_callback` keeps each raw reply, and
`classify_extraction` counts failures (no JSON object with a `memory` list) and empty
extractions. Retrieval is `search(query, filters={"user_id": ...}, top_k=20)` (mem0's default
top_k and threshold); a top-level `user_id` raises in this release.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from capa_hf.errors import CapaError
from capa_hf.memory import MEMORY_EXTRA_HINT
from capa_hf.memory.embed import EMBEDDING_DIMS, minilm_path, offline_env
from capa_hf.memory.endpoint import Endpoint

MEM0_VERSION = "2.2.1"
TOP_K = 20


def import_mem0(mem0_dir: Path | None):
    """mem0's Memory class, imported with telemetry off and its folder in the run folder."""
    os.environ["MEM0_TELEMETRY"] = "False"
    if mem0_dir is not None and "mem0" not in sys.modules:    # mem0 reads MEM0_DIR once, at import
        Path(mem0_dir).mkdir(parents=True, exist_ok=True)
        os.environ["MEM0_DIR"] = str(mem0_dir)
    offline_env()
    try:
        import mem0
        import mem0.memory.telemetry as telemetry
        from mem0 import Memory
    except ImportError as exc:
        raise CapaError(f"the mem0 condition needs the mem0ai library ({exc}); install the memory extra: "
                        f"{MEMORY_EXTRA_HINT}") from None
    telemetry.MEM0_TELEMETRY = False      # imported earlier with telemetry on: off all the same (no posthog, no notices)
    version = getattr(mem0, "__version__", None)
    if version and version != MEM0_VERSION:
        raise CapaError(f"mem0ai {version} is installed, the mem0 condition is written for {MEM0_VERSION}: "
                        f"pip install mem0ai=={MEM0_VERSION}")
    return Memory


def classify_extraction(raw: str | None) -> str:
    """'ok', 'empty' (parsed, no memories) or 'failed' (mem0 would get nothing out of it)."""
    from capa_hf.llm_json import first_json_object

    if raw is None:
        return "failed"
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    value, _ = first_json_object(text)
    if not isinstance(value, dict) or not isinstance(value.get("memory"), list):
        return "failed"
    return "ok" if any(isinstance(m, dict) and m.get("text") for m in value["memory"]) else "empty"


def mem0_config(endpoint: Endpoint, collection: str, work_dir: Path, callback=None) -> dict:
    from qdrant_client import QdrantClient

    return {
        "llm": {"provider": "openai", "config": {"model": endpoint.model, "openai_base_url": endpoint.base_url,
                                                 "api_key": "capa-local", "response_callback": callback}},
        "embedder": {"provider": "huggingface", "config": {"model": minilm_path(), "embedding_dims": EMBEDDING_DIMS}},
        "vector_store": {"provider": "qdrant", "config": {"collection_name": collection,
                                                          "embedding_model_dims": EMBEDDING_DIMS,
                                                          "client": QdrantClient(location=":memory:"),
                                                          "path": str(work_dir / "qdrant-unused")}},
        "history_db_path": ":memory:",
    }


class Mem0Cells:
    """One mem0 Memory for the run; each cell is a `user_id` inside it."""

    def __init__(self, endpoint: Endpoint, work_dir: Path):
        Memory = import_mem0(work_dir / "mem0")
        self.raw: list[str | None] = []
        self.memory = Memory.from_config(mem0_config(endpoint, "capa", work_dir, callback=self._keep))

    def _keep(self, llm, response, params) -> None:
        try:
            self.raw.append(response.choices[0].message.content)
        except (AttributeError, IndexError):
            self.raw.append(None)

    def feed(self, cell_id: str, sessions: Sequence[tuple[str, list[dict]]]) -> tuple[list[dict], list[dict]]:
        """Add each (session id, messages) in order; return the memories (text, source, id) in the
        order mem0 created them, and one record per extraction call."""
        memories, calls = [], []
        for sid, messages in sessions:
            start = len(self.raw)
            try:
                result = self.memory.add(messages, user_id=cell_id)
            except Exception as exc:   # mem0 raises LLMError when the LLM is unreachable
                raise CapaError(f"mem0 could not add session {sid} of {cell_id}: {type(exc).__name__}: {exc}") from None
            added = [r for r in (result or {}).get("results", []) if r.get("event") == "ADD"]
            raws = self.raw[start:]
            calls.append({"session": sid, "status": classify_extraction(raws[-1] if raws else None),
                          "added": len(added), "raw": (raws[-1] or "")[:4000] if raws else None})
            memories += [{"id": r["id"], "text": r["memory"], "source": sid} for r in added]
        return memories, calls

    def search(self, cell_id: str, query: str, top_k: int = TOP_K) -> list[str]:
        found = self.memory.search(query, filters={"user_id": cell_id}, top_k=top_k)
        return [r["id"] for r in (found or {}).get("results", []) if r.get("id")]
