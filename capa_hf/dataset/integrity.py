"""Does a dataset folder still hold what its build wrote? Its files against capa_manifest.json.

The build records each data file's sha256 in the manifest (dataset/build.py). `check_manifest`
hashes the files as they are now and gives the manifest's hash as it would read with those
hashes: for an untouched build that is the hash of the manifest file itself (the value runs and
labels have always recorded); for an edited one it differs, so two runs on different data never
record the same identity.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from capa_hf.dataset.build import MANIFEST, sha256
from capa_hf.errors import CapaError


@dataclass(frozen=True)
class ManifestCheck:
    folder: Path
    sha256: str              # the manifest's hash with the files' actual hashes
    written_sha256: str      # the hash of capa_manifest.json as it is on disk
    differing: tuple[str, ...]   # data files (relative paths) whose content is not what the build wrote
    missing: tuple[str, ...]     # data files the manifest names that are not there

    @property
    def matches(self) -> bool:
        return not self.differing and not self.missing

    def problem_line(self) -> str:
        parts = [f"{', '.join(self.differing)} differ{'s' if len(self.differing) == 1 else ''}"] \
            if self.differing else []
        parts += [f"{', '.join(self.missing)} missing"] if self.missing else []
        return f"{self.folder}: {' and '.join(parts)} from its {MANIFEST} (edited or corrupt)"


def check_manifest(folder: Path) -> ManifestCheck:
    """Hash every data file the manifest of `folder` names and compare; a missing or unreadable
    manifest is refused, naming it."""
    path = Path(folder) / MANIFEST
    try:
        raw = path.read_bytes()
        manifest = json.loads(raw)
    except (OSError, json.JSONDecodeError) as exc:
        raise CapaError(f"{path}: cannot read the dataset manifest ({type(exc).__name__}: {exc}); "
                        "expected the folder `capa build` writes") from None
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise CapaError(f"{path}: has no 'files' table; expected the manifest `capa build` writes")
    differing, missing, actual = [], [], {}
    for rel, entry in sorted(files.items()):
        file = Path(folder) / rel
        if not file.is_file():
            missing.append(rel)
            actual[rel] = {**entry, "sha256": None, "bytes": None}
            continue
        digest = sha256(file)
        if digest != entry.get("sha256"):
            differing.append(rel)
        actual[rel] = {**entry, "sha256": digest, "bytes": file.stat().st_size}
    written = hashlib.sha256(raw).hexdigest()
    if not differing and not missing:
        computed = written
    else:   # the manifest as the build would have written it for these files
        text = json.dumps({**manifest, "files": actual}, indent=2, sort_keys=True) + "\n"
        computed = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return ManifestCheck(Path(folder), computed, written, tuple(differing), tuple(missing))
