import pytest

from capa_hf.paths import DEFAULT_DATASET_DIR


@pytest.fixture(scope="session")
def capa_data():
    """The committed dataset, loaded with `datasets` (offline)."""
    from capa_hf.dataset.load import load_capa

    return load_capa(DEFAULT_DATASET_DIR)


@pytest.fixture(scope="session")
def design0():
    """The shipped cell design (seed 0), computed once for the whole suite (cells are frozen)."""
    from capa_hf.design import default_design

    return tuple(default_design(0))


@pytest.fixture(scope="session")
def default_plans(design0):
    """The shipped design's world and session plans, computed once for the suite's Stage 1 checks:
    (world, cells, plans by session id, voice slots). Plans are frozen; tests only read them."""
    from capa_hf.generation.pipeline import World, plan_cells, voice_slots

    world = World.load()
    cells = list(design0)
    return world, cells, plan_cells(cells, world, 0), voice_slots(cells)
