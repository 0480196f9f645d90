"""Whether a rerun into a run folder resumes it, and with which config.

- a folder with no finished session takes the new config (a crashed start is no run to keep);
- the same run resumes it; options equal to their defaults compare equal (`--dataset` given as
  the default folder or left out, the same cells in another order);
- `--limit` may grow: the finished sessions are kept, the new ones run, the recorded limit
  becomes the new one; a smaller limit or any other changed option is refused, naming the keys;
- `--overwrite` deletes the run's files first (saying so), and the run starts over.

The `run` block decides, with the dataset's version and manifest hash (the same options on a
rebuilt or edited dataset are another run); the provenance (times, command line, versions) never does.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Callable

from capa_hf.errors import CapaError
from capa_hf.paths import DEFAULT_DATASET_DIR

GROWS = "limit"
IDENTITY = ("dataset_version", "dataset_manifest_sha256")     # what the run was played on


def dataset_key(value: str | None) -> str:
    """One spelling for one dataset: the default folder when none is given, a local folder by its
    absolute path, a Hub id as it is."""
    if value is None:
        return str(DEFAULT_DATASET_DIR.resolve())
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else str(value)


def normalise(run: dict) -> dict:
    out = dict(run)
    out["dataset"] = dataset_key(run.get("dataset"))
    if out.get("cells"):
        out["cells"] = sorted(out["cells"])
    else:
        out["cells"] = None
    return out


def differing_keys(old: dict, new: dict) -> list[str]:
    a, b = normalise(old), normalise(new)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def limit_grows(old: int | None, new: int | None) -> bool:
    """None is every session: a number may grow to a larger one or to None, never shrink."""
    if new is None:
        return True
    return old is not None and new >= old


def resumed_config(out: Path, old: dict, new: dict) -> dict:
    """The config a resumed run records (`new`, which may only have grown the limit, with the
    earlier invocations' provenance kept), or a CapaError naming the keys that differ."""
    old_run, new_run = old.get("run") or {}, new["run"]
    diff = [k for k in differing_keys(old_run, new_run) if k != GROWS]
    if GROWS in differing_keys(old_run, new_run) and not limit_grows(old_run.get(GROWS), new_run.get(GROWS)):
        diff.append(f"limit (was {old_run.get(GROWS)}, now {new_run.get(GROWS)}: a limit may only grow)")
    # the same options on other data (a rebuilt or edited dataset) are another run too
    diff += [k for k in IDENTITY if k in old and k in new and old[k] != new[k]]
    if diff:
        raise CapaError(f"{out} holds a run with another config (differs in: {', '.join(sorted(diff))}); "
                        "rerun with its options to resume it, pass --overwrite to start over, or use a new --out")
    merged = dict(new)
    earlier = list(old.get("earlier_provenance") or [])
    if isinstance(old.get("provenance"), dict):
        earlier.append(old["provenance"])
    if earlier and "provenance" in new:
        merged["earlier_provenance"] = earlier
    return merged


def clear_run(out: Path, say: Callable[[str], None] | None = None) -> None:
    """--overwrite: delete what a run folder holds, after saying so. A folder that is not a run
    folder (no config.json) but holds files is refused; nothing is deleted."""
    say = say or (lambda line: print(line, file=sys.stderr))
    if not out.is_dir():
        return
    entries = sorted(out.iterdir())
    if not entries:
        return
    if not (out / "config.json").is_file():
        raise CapaError(f"--overwrite {out}: not a run folder (no config.json), so nothing was deleted; "
                        "give the --out of an earlier run or a new folder")
    say(f"--overwrite: deleting the run in {out} ({', '.join(p.name for p in entries)})")
    for path in entries:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
