import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs a real model on CPU (minutes)")


@pytest.fixture
def fake_vllm(monkeypatch):
    """Install tests/runners/fake_vllm.py as the 'vllm' module (and importable as 'fake_vllm')."""
    monkeypatch.syspath_prepend(str(HERE))
    import fake_vllm as mod

    mod.INSTANCES.clear()
    monkeypatch.setitem(sys.modules, "vllm", mod)
    return mod


@pytest.fixture
def cache_path(tmp_path):
    return tmp_path / "completions.sqlite"
