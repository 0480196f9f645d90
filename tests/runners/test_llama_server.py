"""LlamaServer: start, wait until it answers, stop; a server that dies during start-up; missing extra."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from runners.engine import EngineUnavailable
from runners.llama_server import LlamaServer, missing_server_modules

HERE = Path(__file__).resolve().parent


@pytest.fixture
def stub_env(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE))


def _server(tmp_path, name="model.gguf", **kw):
    model = tmp_path / name
    model.write_bytes(b"GGUF")
    return LlamaServer(model, alias="tiny", n_ctx=16384, module="stub_llama_server", log_path=tmp_path / "log.txt",
                       startup_timeout_s=60, **kw)


def test_start_answers_on_loopback_and_stop_ends_it(tmp_path, stub_env):
    with _server(tmp_path) as srv:
        assert srv.base_url.startswith("http://127.0.0.1:")
        body = httpx.get(srv.base_url + "/models").json()
        assert body["data"][0] == {"id": "tiny", "n_ctx": 16384}
        proc = srv.proc
        assert srv.running()
    assert proc.poll() is not None and not srv.running()
    with pytest.raises(httpx.HTTPError):
        httpx.get(srv.base_url + "/models", timeout=2)
    assert "n_ctx=16384" in (tmp_path / "log.txt").read_text()


def test_a_server_that_exits_during_start_up_is_reported_with_its_log(tmp_path, stub_env):
    srv = _server(tmp_path, name="crash")
    with pytest.raises(EngineUnavailable, match=r"(?s)exited with status 3.*refusing to load"):
        srv.start()
    assert srv.proc is None


def test_a_missing_model_file_is_refused_before_starting(tmp_path):
    srv = LlamaServer(tmp_path / "absent.gguf", module="stub_llama_server")
    with pytest.raises(EngineUnavailable, match="absent.gguf does not exist"):
        srv.start()


def test_missing_server_modules_names_them(monkeypatch):
    import importlib.util

    # whatever this environment has installed: every module is found but one, then all of them
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "sse_starlette" else object())
    assert missing_server_modules() == ["sse_starlette"]
    with pytest.raises(EngineUnavailable, match=r"sse_starlette missing.*llama-cpp-python\[server\]==0.3.36"):
        LlamaServer("/nonexistent.gguf").start()
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object())
    assert missing_server_modules() == []


def test_the_server_dies_with_the_process_that_started_it(tmp_path, stub_env):
    import subprocess
    import sys
    import textwrap

    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    script = textwrap.dedent(f"""
        import sys
        from runners.llama_server import LlamaServer
        srv = LlamaServer({str(model)!r}, module="stub_llama_server", log_path={str(tmp_path / 'log.txt')!r}).start()
        print(srv.proc.pid, srv.base_url, flush=True)
        sys.stdin.read()                     # wait until the test kills us
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=str(HERE.parent.parent))
    pid, url = parent.stdout.readline().split()
    assert httpx.get(url + "/models").status_code == 200
    parent.kill()                            # no chance to run stop()
    parent.wait()
    import os
    import time

    for _ in range(200):                     # bounded wait for the kernel's death signal to land
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            break
        try:
            os.waitpid(int(pid), os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    else:
        os.kill(int(pid), 9)
        raise AssertionError("the server outlived the process that started it")
