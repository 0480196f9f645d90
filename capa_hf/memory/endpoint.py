"""The memory LLM: where mem0 and A-mem send their calls.

`--memory-llm SPEC` (condition option `memory_llm`):
- `openai:<model>@<url>`  an OpenAI-compatible server that is already running;
- `<url>`                 the same, with the model named by the server's `GET /models`;
- `llamacpp[:<model>]`    (the default: the embedded model) served for the run by llama.cpp's own
                          server on 127.0.0.1 with a context of at least 16384 tokens, started
                          once for all cells and stopped when the contexts are built.

A memory LLM that cannot be reached is refused before any session, naming the URL and what to
start or install.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from capa_hf.defaults import ENDPOINT_PROBE_TIMEOUT_S
from capa_hf.errors import CapaError
from capa_hf.memory import SERVER_EXTRA_HINT

DEFAULT_MEMORY_LLM = "llamacpp"
MIN_N_CTX = 16384


@dataclass(frozen=True)
class Endpoint:
    model: str
    base_url: str
    spec: str
    served: bool = False        # True: started by us for this run (the embedded model)

    def engine_spec(self) -> str:
        return f"openai:{self.model}@{self.base_url}"

    def describe(self) -> dict:
        return {"spec": self.spec, "model": self.model, "base_url": self.base_url, "served_by_capa": self.served}


def _models(base_url: str, timeout_s: float = ENDPOINT_PROBE_TIMEOUT_S) -> list[str]:
    import httpx

    url = base_url.rstrip("/") + "/models"
    try:
        resp = httpx.get(url, timeout=timeout_s)
        resp.raise_for_status()
        data = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise CapaError(f"--memory-llm: no OpenAI-compatible server answers {url} ({type(exc).__name__}: {exc}); "
                        "start one there (e.g. `python -m llama_cpp.server --model M.gguf --n_ctx 16384`, "
                        "`vllm serve MODEL`) or use --memory-llm llamacpp to serve the embedded model") from None
    return [m.get("id") for m in (data.get("data") or []) if isinstance(m, dict) and m.get("id")]


def check_reachable(endpoint: Endpoint) -> Endpoint:
    """The endpoint, after `GET /models` answered; CapaError naming the URL otherwise."""
    _models(endpoint.base_url)
    return endpoint


def parse_remote(spec: str) -> Endpoint | None:
    """An Endpoint for `openai:<model>@<url>` or a bare URL; None for a spec we serve ourselves."""
    s = spec.strip()
    if s.startswith("openai:"):
        m = re.match(r"openai:(.+?)@(https?://\S+)$", s)
        if not m:
            raise CapaError(f"--memory-llm {spec!r}: expected openai:<model>@<http(s) url>")
        return Endpoint(model=m.group(1), base_url=m.group(2).rstrip("/"), spec=s)
    if re.match(r"https?://\S+$", s):
        base = s.rstrip("/")
        models = _models(base)
        if not models:
            raise CapaError(f"--memory-llm {spec!r}: the server lists no model at {base}/models; "
                            "name one with openai:<model>@<url>")
        return Endpoint(model=models[0], base_url=base, spec=s)
    if s == "llamacpp" or s.startswith("llamacpp:"):
        return None
    raise CapaError(f"--memory-llm {spec!r}: expected llamacpp[:<model or .gguf>], openai:<model>@<url> or a URL")


@contextlib.contextmanager
def memory_endpoint(spec: str | None, log_dir: Path | None = None, n_ctx: int = MIN_N_CTX,
                    startup_timeout_s: float = 600.0) -> Iterator[Endpoint]:
    """Yield a reachable Endpoint for `spec`; serve the embedded model while the block runs."""
    spec = spec or DEFAULT_MEMORY_LLM
    remote = parse_remote(spec)
    if remote is not None:
        yield check_reachable(remote)
        return
    from runners.engine import EngineUnavailable, ModelAssetError
    from runners.llama_server import LlamaServer, missing_server_modules
    from runners.model_assets import ensure_model

    missing = missing_server_modules()
    if missing:
        raise CapaError(f"--memory-llm {spec}: llama.cpp's server needs {', '.join(missing)}; install: {SERVER_EXTRA_HINT}")
    name = spec.partition(":")[2] or None
    try:
        path = ensure_model(name)
    except ModelAssetError as exc:
        raise CapaError(f"--memory-llm {spec}: {exc}") from None
    if n_ctx < MIN_N_CTX:
        raise CapaError(f"the memory LLM needs a context of at least {MIN_N_CTX} tokens (mem0's extraction "
                        f"prompt alone is about 8k), got n_ctx={n_ctx}")
    log = (Path(log_dir) / "memory-llm-server.log") if log_dir else None
    server = LlamaServer(path, alias=Path(path).stem, n_ctx=n_ctx, log_path=log, startup_timeout_s=startup_timeout_s)
    try:
        server.start()
    except EngineUnavailable as exc:
        raise CapaError(f"--memory-llm {spec}: {exc}") from None
    try:
        yield Endpoint(model=server.alias, base_url=server.base_url, spec=spec, served=True)
    finally:
        server.stop()
