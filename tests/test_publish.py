"""`capa publish` against an injected fake of huggingface_hub.HfApi: the exact calls, and refusals."""

import shutil
from types import SimpleNamespace
from unittest.mock import call, create_autospec

import pytest

from capa_hf.dataset.publish import publish
from capa_hf.errors import CapaError
from capa_hf.paths import DEFAULT_DATASET_DIR
from capa_hf.version import PIPELINE_VERSION as V


def fake_api(tags=()):
    """huggingface_hub.HfApi with its real signatures (a call it would refuse fails here too)."""
    from huggingface_hub import HfApi

    api = create_autospec(HfApi, instance=True)
    api.list_repo_refs.return_value = SimpleNamespace(tags=[SimpleNamespace(name=t) for t in tags], branches=[])

    def upload_folder(**kw):
        from pathlib import Path

        folder = Path(kw["folder_path"])
        api.uploaded = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        return SimpleNamespace(oid="abc123")

    api.upload_folder.side_effect = upload_folder
    return api


def test_publish_uploads_then_tags_the_commit():
    api = fake_api(tags=["v0.1.0", "not-a-version"])
    tag = publish(DEFAULT_DATASET_DIR, "org/capa", V, api=api)
    assert tag == f"v{V}"
    staged = api.upload_folder.call_args.kwargs["folder_path"]
    assert api.method_calls == [
        call.whoami(),          # the token first, before anything is created
        call.create_repo("org/capa", repo_type="dataset", private=False, exist_ok=True),
        call.list_repo_refs("org/capa", repo_type="dataset"),
        call.upload_folder(repo_id="org/capa", folder_path=staged, repo_type="dataset",
                           commit_message=f"CAPA v{V}"),
        call.create_tag("org/capa", tag=f"v{V}", revision="abc123", repo_type="dataset",
                        tag_message=f"CAPA dataset v{V}"),
    ]
    # the folder as built, but its card loads the data from the Hub id it went to, at the new tag
    local = {p.relative_to(DEFAULT_DATASET_DIR).as_posix(): p.read_bytes()
             for p in DEFAULT_DATASET_DIR.rglob("*") if p.is_file()}
    assert set(api.uploaded) == set(local) and staged != str(DEFAULT_DATASET_DIR)
    assert all(api.uploaded[k] == local[k] for k in local if k != "README.md")
    card = api.uploaded["README.md"].decode()
    assert f'load_dataset("org/capa", split="heldout", revision="v{V}")' in card
    assert f'load_dataset("org/capa", "variants", split="train", revision="v{V}")' in card
    assert "dist/capa" not in card and "capa publish --repo-id ORG/NAME" not in card
    assert card.replace("org/capa", "X").split("## Loading")[0] == local["README.md"].decode().split("## Loading")[0]


@pytest.mark.parametrize("last", [f"v{V}", "v9.1.0", "10.0.0"])
def test_refuses_a_version_that_is_not_newer(last):
    api = fake_api(tags=[last])
    with pytest.raises(CapaError, match="not newer"):
        publish(DEFAULT_DATASET_DIR, "org/capa", V, api=api)
    assert not api.upload_folder.called and not api.create_tag.called


def test_refuses_a_version_the_folder_was_not_built_as():
    api = fake_api()
    with pytest.raises(CapaError, match="--version is 9.9.9"):
        publish(DEFAULT_DATASET_DIR, "org/capa", "9.9.9", api=api)
    assert api.method_calls == []


def test_refuses_a_folder_whose_card_and_data_disagree(tmp_path):
    copy = tmp_path / "capa"
    shutil.copytree(DEFAULT_DATASET_DIR, copy)
    card = copy / "README.md"
    card.write_text(card.read_text().replace("num_examples: 300", "num_examples: 301", 1))
    api = fake_api()
    with pytest.raises(CapaError, match="does not validate"):
        publish(copy, "org/capa", V, api=api)
    assert api.method_calls == []


def test_bad_version_and_repo_id_are_named():
    with pytest.raises(CapaError, match="X.Y.Z"):
        publish(DEFAULT_DATASET_DIR, "org/capa", "latest", api=fake_api())
    with pytest.raises(CapaError, match="ORG/NAME"):
        publish(DEFAULT_DATASET_DIR, "capa", V, api=fake_api())


def hub_failure(kind: str) -> Exception:
    import httpx
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError

    request = httpx.Request("GET", "https://huggingface.co/api/whoami-v2")
    return {"no-token": LocalTokenNotFoundError("Token is required to call the /whoami-v2 endpoint\nmore text"),
            "offline": httpx.ConnectError("[Errno -3] Temporary failure in name resolution", request=request),
            "refused": HfHubHTTPError("401 Client Error: Unauthorized\nlong body",
                                      response=httpx.Response(401, request=request))}[kind]


@pytest.mark.parametrize("kind, expected", [
    ("no-token", "capa publish: error: no Hugging Face token: log in with `hf auth login`"),
    ("offline", "capa publish: error: cannot reach the Hugging Face Hub to publish org/capa (ConnectError"),
    ("refused", "capa publish: error: the Hub refused the Hugging Face token (HTTP 401)"),
])
def test_publish_checks_the_token_first_and_fails_in_one_line(kind, expected, capsys, monkeypatch):
    import huggingface_hub

    from tests.cli_run import one_line_error

    api = fake_api()
    api.whoami.side_effect = hub_failure(kind)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: api)
    err = one_line_error(["publish", str(DEFAULT_DATASET_DIR), "--repo-id", "org/capa", "--version", V],
                         capsys, expected)
    assert api.method_calls == [call.whoami()], err       # nothing created, nothing uploaded


def test_publish_without_network_after_the_token_is_one_line(capsys, monkeypatch):
    import huggingface_hub

    from tests.cli_run import one_line_error

    api = fake_api()
    api.create_repo.side_effect = hub_failure("offline")
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: api)
    one_line_error(["publish", str(DEFAULT_DATASET_DIR), "--repo-id", "org/capa", "--version", V],
                   capsys, "cannot reach the Hugging Face Hub to publish org/capa")
    assert not api.upload_folder.called and not api.create_tag.called


def test_publish_with_the_real_client_and_no_token_stops_before_any_request(tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    from tests.cli_run import one_line_error

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    one_line_error(["publish", str(DEFAULT_DATASET_DIR), "--repo-id", "org/capa", "--version", V],
                   capsys, "no Hugging Face token")
