"""Fixtures for the sandbox tests: shared pools, and a check that nothing is left behind."""
from __future__ import annotations

import os

import pytest

# A secret placed in the test process's environment before any pool starts: it must
# never reach a submission (workers start with a minimal environment).
os.environ.setdefault("CAPA_SANDBOX_TEST_SECRET", "do-not-leak-4f1c")

from sandbox import SandboxConfig, SandboxPool  # noqa: E402
from sandbox_testlib import assert_nothing_left  # noqa: E402


@pytest.fixture(scope="session")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


@pytest.fixture(scope="session")
def pool_factory():
    pools: dict[str, SandboxPool] = {}

    def get(name: str, config: SandboxConfig, workers: int = 1) -> SandboxPool:
        if name not in pools:
            pools[name] = SandboxPool(workers=workers, config=config)
        return pools[name]

    yield get
    for p in pools.values():
        p.close()


@pytest.fixture
def clean(pool):
    """Run a test, then assert that it left nothing behind in the shared pool."""
    yield pool
    assert_nothing_left(pool)
