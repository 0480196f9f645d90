"""Where a `--dataset` value points: a local folder or a Hub id, and which of a folder's files
cannot be read.

A value that looks like a path and does not exist is refused at once as a missing local folder
(never tried on the Hub, which would retry the network before failing); a folder whose dataset
fails to load is searched for the parquet file that cannot be read, so the error names it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from capa_hf.errors import CapaError

# a Hub repository id: `name` or `namespace/name`, letters, digits, `-`, `_`, `.`
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def looks_like_hub_id(src: str) -> bool:
    return bool(_HUB_ID.match(src)) and ".." not in src and "--" not in src and len(src) <= 96


def looks_local(src: str) -> bool:
    """Whether `src` reads as a local path: it starts with `.`, `/` or `~`, or it has a path
    separator and either is no Hub id or names a folder whose parent exists (`dist/capa2`)."""
    seps = tuple(s for s in (os.sep, os.altsep, "/") if s)
    if src.startswith((".", "~") + seps):
        return True
    if not any(s in src for s in seps):
        return False
    return not looks_like_hub_id(src) or Path(src).parent.is_dir()


def check_local(src: str) -> bool:
    """True when `src` is an existing local path; a path-like `src` that does not exist is
    refused, naming it; False for a Hub id."""
    if Path(src).exists():
        return True
    if looks_local(src):
        raise CapaError(f"dataset {src!r}: no such local folder ({Path(src).absolute()}); "
                        "give a folder written by capa build, or a Hub id namespace/name")
    return False


def unreadable_parquet(folder: str | Path, whole: bool = True) -> tuple[Path, Exception] | None:
    """The first parquet file under `folder` that pyarrow cannot read (`whole`) or whose footer it
    cannot read (a truncated file; quick), with the error; None when every one reads."""
    import pyarrow.parquet as pq

    for path in sorted(Path(folder).rglob("*.parquet")):
        try:
            pq.read_table(path) if whole else pq.ParquetFile(path).metadata
        except Exception as exc:     # any failure to read it is what we want to name
            return path, exc
    return None


def check_parquet_footers(folder: str | Path) -> None:
    """Refuse a folder with a truncated parquet file before `datasets` tries it, naming the file."""
    bad = unreadable_parquet(folder, whole=False)
    if bad is not None:
        raise _unreadable(*bad)


def _unreadable(path: Path, err: Exception) -> CapaError:
    return CapaError(f"{path}: unreadable parquet file ({one_line(err)}); rebuild the dataset with capa build "
                     "or restore the file")


def one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def load_error(src: str, local: bool, message: str) -> CapaError:
    """The error for a failed load from `src`: for a local folder with a parquet file that cannot
    be read, that file by name; otherwise `message`."""
    if local:
        bad = unreadable_parquet(src)
        if bad is not None:
            return _unreadable(*bad)
    return CapaError(message)


def local_cache_dir(folder: str | Path) -> str:
    """A `datasets` cache folder for a local dataset folder, keyed by what its files hold.

    `datasets` keys its cache of a local parquet folder by the folder's name and the files' paths,
    not their bytes: a copy named like the committed build, or a folder edited in place, would be
    served the tables cached from another load. Keying the cache by the files' contents means an
    edited dataset is read as it is, and an unchanged one is still read from the cache."""
    import hashlib

    from datasets import config

    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".parquet", ".md", ".json")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return str(Path(config.HF_DATASETS_CACHE) / "capa-local" / digest.hexdigest()[:20])
