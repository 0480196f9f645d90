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
