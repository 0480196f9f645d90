"""A port of A-mem's core: note construction, linking, memory evolution and retrieval.

Source read: github.com/agiresearch/A-mem at commit ceffb860f0712bbae97b184d440df62bc910ca8d
(main, 2025-12-12): `agentic_memory/memory_system.py` (MemoryNote, AgenticMemorySystem:
add_note, process_memory, find_related_memories, find_related_memories_raw), `retrievers.py`
(ChromaRetriever) and `llm_controller.py` (OpenAIController). A-mem is not on PyPI (the `a-mem`
and `agentic-memory` packages there are other projects), so this is a rewrite in our own words,
prompts included (`capa_hf/prompts/amem_*.md`), not a copy.

What is kept, with the original's defaults:
- a note is one piece of content with LLM-written keywords, a one-sentence context and tags
  (defaults "General", category "Uncategorized", empty lists when the LLM's answer does not parse:
  the original swallows those failures too; here they are counted);
- its embedding is the content's MiniLM (all-MiniLM-L6-v2) vector, as the original embeds the
  note's content only;
- evolution: from the second note on, the k=5 nearest stored notes are shown to the LLM, which
  may "strengthen" (link the new note to some of them and retag it) and/or "update_neighbor"
  (rewrite their context and tags); `evo_threshold` = 100 evolutions between consolidations;
- retrieval (`find_related_memories_raw`): the k=5 nearest notes to the query, each followed by
  its linked notes (up to k per hit);
- the LLM: temperature 0.7, at most 1000 tokens, a system message asking for JSON.

Departures, each for a stated reason:
- Note construction calls the LLM on every note. On main, `add_note` no longer does (the
  metadata stays at its defaults; A-mem's issue #10); the fix (commit a5b9ded, not merged) and
  the paper both construct notes with the LLM.
- The neighbours are shown numbered 0..k-1, and `suggested_connections` may name them by that
  number (or by note id). The original shows numbers but asks for ids and appends whatever comes
  back; its unmerged fix drops unknown ids. `update_neighbor` rewrites the i-th *shown*
  neighbour; the original indexes the list of all notes by the neighbour's rank, a bug.
- Storage is an in-memory matrix of unit vectors with exact cosine ranking, one store per cell,
  instead of one Chroma collection per process (Chroma's default L2 distance on unit vectors
  ranks the same). Consolidation re-indexes nothing, since the index is the vectors themselves.
- Retrieval drops repeated notes (the original can list a linked note twice).
- JSON is requested with `response_format: json_object` (mem0 does the same), not the original's
  `json_schema`, which llama.cpp's server does not accept; the fields are spelled out in the prompt.
- Timestamps are the history session's position, not the wall clock, so a rerun is identical.
- LLM calls are driver episodes (`runners.driver`): batched across cells and cached; an engine
  error stops the condition instead of being swallowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Generator, Sequence

import numpy as np

from runners.driver import Call
from runners.types import Sampling, derive_seed

from capa_hf.defaults import AMEM_MAX_TOKENS, AMEM_TEMPERATURE
from capa_hf.errors import CapaError
from capa_hf.prompts import fill, prompt_text

K = 5
EVO_THRESHOLD = 100
ROLE = "memory"
JSON_BODY = {"response_format": {"type": "json_object"}}


@dataclass
class Note:
    id: str
    content: str
    timestamp: str
    source: str = ""                  # the history session the content came from
    keywords: list[str] = field(default_factory=list)
    context: str = "General"
    category: str = "Uncategorized"
    tags: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    evolution_history: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Store:
    """The notes of one cell, in the order they were added, and their unit embedding rows."""

    notes: list[Note] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 384), dtype=np.float32))
    evo_cnt: int = 0
    consolidations: int = 0

    def add(self, note: Note, vector: np.ndarray) -> None:
        self.notes.append(note)
        self.vectors = np.vstack([self.vectors.reshape(-1, vector.shape[-1]), vector[None, :]])

    def by_id(self) -> dict[str, int]:
        return {n.id: i for i, n in enumerate(self.notes)}

    def nearest(self, vector: np.ndarray, k: int = K) -> list[int]:
        """Indices of the k most similar notes, most similar first (ties: earlier note first)."""
        if not self.notes:
            return []
        sims = self.vectors @ vector
        order = sorted(range(len(self.notes)), key=lambda i: (-float(sims[i]), i))
        return order[:k]


def _str_list(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()]


def parse_analysis(value: dict | None) -> dict | None:
    """keywords/context/tags from the LLM's object, or None when it does not have that shape."""
    if not isinstance(value, dict):
        return None
    keywords, tags, context = _str_list(value.get("keywords")), _str_list(value.get("tags")), value.get("context")
    if keywords is None or tags is None or not isinstance(context, str):
        return None
    return {"keywords": keywords, "context": context.strip() or "General", "tags": tags}


def parse_evolution(value: dict | None, n_neighbors: int) -> dict | None:
    """The evolution decision, normalised, or None when it does not have that shape."""
    if not isinstance(value, dict) or not isinstance(value.get("should_evolve"), bool):
        return None
    actions = _str_list(value.get("actions", []))
    if actions is None:
        return None
    contexts = value.get("new_context_neighborhood", [])
    tag_lists = value.get("new_tags_neighborhood", [])
    if not isinstance(contexts, list) or not isinstance(tag_lists, list):
        return None
    return {"should_evolve": value["should_evolve"], "actions": actions,
            "suggested_connections": value.get("suggested_connections") or [],
            "tags_to_update": _str_list(value.get("tags_to_update")),
            "new_context_neighborhood": [c if isinstance(c, str) else None for c in contexts][:n_neighbors],
            "new_tags_neighborhood": [_str_list(t) for t in tag_lists][:n_neighbors]}


def resolve_connections(raw: Sequence[Any], neighbors: Sequence[Note]) -> list[str]:
    """Note ids for the LLM's suggested connections: a neighbour's number or a known note id."""
    out = []
    for item in raw:
        text = str(item).strip()
        if text.isdigit() and int(text) < len(neighbors):
            nid = neighbors[int(text)].id
        else:
            nid = next((n.id for n in neighbors if n.id == text), None)
        if nid is not None and nid not in out:
            out.append(nid)
    return out


def apply_evolution(note: Note, neighbors: Sequence[Note], decision: dict) -> bool:
    """Apply the decision to the new note and the shown neighbours; True when it evolved."""
    if not decision["should_evolve"]:
        return False
    if "strengthen" in decision["actions"]:
        for nid in resolve_connections(decision["suggested_connections"], neighbors):
            if nid not in note.links:
                note.links.append(nid)
        if decision["tags_to_update"] is not None:
            note.tags = decision["tags_to_update"]
    if "update_neighbor" in decision["actions"]:
        for i, nb in enumerate(neighbors):
            ctx = decision["new_context_neighborhood"][i] if i < len(decision["new_context_neighborhood"]) else None
            tags = decision["new_tags_neighborhood"][i] if i < len(decision["new_tags_neighborhood"]) else None
            if ctx is None and tags is None:
                continue
            nb.evolution_history.append({"by": note.id, "context": nb.context, "tags": list(nb.tags)})
            nb.context = ctx if ctx is not None else nb.context
            nb.tags = tags if tags is not None else nb.tags
    return True


def retrieve(store: Store, vector: np.ndarray, k: int = K) -> list[int]:
    """The k nearest notes, each followed by up to k of its linked notes; no repeats."""
    index = store.by_id()
    out: list[int] = []
    for i in store.nearest(vector, k):
        if i not in out:
            out.append(i)
        for nid in store.notes[i].links[:k]:
            j = index.get(nid)
            if j is not None and j not in out:
                out.append(j)
    return out


def describe_neighbors(neighbors: Sequence[Note]) -> str:
    return "\n".join(f"{i}. from {n.timestamp} | content: {n.content} | context: {n.context} | "
                     f"keywords: {', '.join(n.keywords)} | tags: {', '.join(n.tags)}"
                     for i, n in enumerate(neighbors))


def _messages(user: str) -> list[dict]:
    return [{"role": "system", "content": prompt_text("memory_json_system")}, {"role": "user", "content": user}]


def _sampling(seed: int, *parts: Any) -> Sampling:
    return Sampling(temperature=AMEM_TEMPERATURE, max_tokens=AMEM_MAX_TOKENS, seed=derive_seed(seed, "amem", *parts))


def _first_object(text: str) -> dict | None:
    from capa_hf.llm_json import first_json_object

    value, _ = first_json_object(text)
    return value if isinstance(value, dict) else None


def _text(result: Any, what: str) -> str:
    if result is None or not getattr(result, "ok", False):
        raise CapaError(f"A-mem {what}: the memory LLM failed: {getattr(result, 'error', None) or 'no result'}")
    return result.text or ""


def build_store(items: Sequence[tuple[str, str, str]], vectors: np.ndarray, seed: int = 0, key: str = "",
                affinity: str | None = None) -> Generator[Call, Any, tuple[Store, dict]]:
    """Episode: add each (source, timestamp, content) in order; return the store and counts."""
    store = Store()
    counts = {"notes": 0, "analysis_failures": 0, "empty_notes": 0, "evolution_calls": 0,
              "evolution_failures": 0, "evolutions": 0, "links": 0}
    for i, (source, stamp, content) in enumerate(items):
        reply = yield Call(ROLE, _messages(fill("amem_analyze", content=content)), _sampling(seed, key, i, "analyze"),
                           affinity=affinity)
        analysis = parse_analysis(_first_object(_text(reply, "note construction")))
        note = Note(id=f"{key}-n{i + 1:03d}", content=content, timestamp=stamp, source=source)
        if analysis is None:
            counts["analysis_failures"] += 1
        else:
            note.keywords, note.context, note.tags = analysis["keywords"], analysis["context"], analysis["tags"]
        if not note.keywords and not note.tags:
            counts["empty_notes"] += 1
        if store.notes:
            neighbors = [store.notes[j] for j in store.nearest(vectors[i], K)]
            user = fill("amem_evolve", context=note.context, content=note.content, keywords=", ".join(note.keywords),
                        neighbors=describe_neighbors(neighbors), neighbor_number=str(len(neighbors)))
            reply = yield Call(ROLE, _messages(user), _sampling(seed, key, i, "evolve"), affinity=affinity)
            counts["evolution_calls"] += 1
            decision = parse_evolution(_first_object(_text(reply, "memory evolution")), len(neighbors))
            if decision is None:
                counts["evolution_failures"] += 1
            elif apply_evolution(note, neighbors, decision):
                counts["evolutions"] += 1
                store.evo_cnt += 1
                if store.evo_cnt % EVO_THRESHOLD == 0:
                    store.consolidations += 1
        store.add(note, vectors[i])
        counts["notes"] += 1
    counts["links"] = sum(len(n.links) for n in store.notes)
    return store, counts
