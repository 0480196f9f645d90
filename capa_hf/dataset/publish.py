"""`capa publish`: upload a validated build to the Hub and tag the commit `vX.Y.Z`."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from capa_hf.dataset.build import MANIFEST
from capa_hf.dataset.validate import validate_folder
from capa_hf.errors import CapaError

_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def parse_version(text: str) -> tuple[int, int, int]:
    m = _SEMVER.match(text.strip())
    if not m:
        raise CapaError(f"version {text!r} is not of the form X.Y.Z")
    return tuple(int(x) for x in m.groups())


def latest_tag(api, repo_id: str) -> tuple[int, int, int] | None:
    refs = api.list_repo_refs(repo_id, repo_type="dataset")
    versions = [parse_version(t.name) for t in refs.tags if _SEMVER.match(t.name)]
    return max(versions) if versions else None


def card_version(text: str) -> str | None:
    """The version the card's title states ("# CAPA 0.2.0: ...")."""
    m = re.search(r"^# CAPA (\d+\.\d+\.\d+)", text, re.MULTILINE)
    return m.group(1) if m else None


def check_folder_version(folder: Path, version: str) -> None:
    report = validate_folder(folder)
    if not report.ok:
        raise CapaError(f"{folder}: refusing to publish a folder that does not validate:\n{report.summary()}")
    card = card_version((folder / "README.md").read_text(encoding="utf-8"))
    manifest = json.loads((folder / MANIFEST).read_text())
    found = {"card": str(card), "manifest": str(manifest.get("version"))}
    if any(not _SEMVER.match(v) or parse_version(v) != parse_version(version) for v in found.values()):
        raise CapaError(f"{folder}: built as version card={found['card']} manifest={found['manifest']}, "
                        f"but --version is {version}; rebuild with `capa build --version {version}`")


def stage_for_hub(folder: Path, staged: Path, repo_id: str, version: str) -> Path:
    """A copy of `folder` whose card loads the data from `repo_id` at the version's tag (the
    build's card shows the local folder): what the Hub page then shows."""
    from capa_hf.dataset.card import with_loading

    shutil.copytree(folder, staged)
    card = staged / "README.md"
    card.write_text(with_loading(card.read_text(encoding="utf-8"), repo_id, version), encoding="utf-8")
    return staged


NO_TOKEN = ("no Hugging Face token: log in with `hf auth login` (or set HF_TOKEN to a token with write "
            "access), then rerun")


def check_token(api) -> None:
    """Ask the Hub who the token belongs to before any upload: no token, or one the Hub refuses,
    is one line saying how to log in."""
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError

    try:
        api.whoami()
    except LocalTokenNotFoundError:
        raise CapaError(NO_TOKEN) from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise CapaError(f"the Hub refused the Hugging Face token (HTTP {status}); log in again with "
                            "`hf auth login` (a token with write access), then rerun") from None
        raise


@contextlib.contextmanager
def hub_errors(repo_id: str) -> Iterator[None]:
    """The Hub unreachable, or an HTTP error from it, as one line naming the repo."""
    import httpx
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except (httpx.TransportError, OfflineModeIsEnabled, ConnectionError, TimeoutError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CapaError(f"cannot reach the Hugging Face Hub to publish {repo_id} ({type(exc).__name__}: {first}); "
                        "check the network (and HF_ENDPOINT / HF_HUB_OFFLINE), then rerun") from None
    except HfHubHTTPError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CapaError(f"the Hub refused a request for {repo_id}: {first}") from None


def publish(folder: Path, repo_id: str, version: str, private: bool = False, api=None) -> str:
    """Returns the tag it created. `api` defaults to `huggingface_hub.HfApi()` (injectable for tests)."""
    if "/" not in repo_id:
        raise CapaError(f"--repo-id {repo_id!r} should look like ORG/NAME")
    wanted = parse_version(version)
    check_folder_version(folder, version)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    with hub_errors(repo_id):
        check_token(api)
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        last = latest_tag(api, repo_id)
        if last is not None and wanted <= last:
            raise CapaError(f"version {version} is not newer than the last tag v{'.'.join(map(str, last))} "
                            f"of {repo_id}")
        tag = "v" + ".".join(map(str, wanted))
        with tempfile.TemporaryDirectory(prefix="capa-publish-") as tmp:
            staged = stage_for_hub(folder, Path(tmp) / folder.name, repo_id, ".".join(map(str, wanted)))
            commit = api.upload_folder(repo_id=repo_id, folder_path=str(staged), repo_type="dataset",
                                       commit_message=f"CAPA {tag}")
        api.create_tag(repo_id, tag=tag, revision=commit.oid, repo_type="dataset",
                       tag_message=f"CAPA dataset {tag}")
    print(f"published {folder} to {repo_id} at {commit.oid} and tagged {tag}")
    return tag
