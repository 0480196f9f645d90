import pytest

from capa_hf.paths import DEFAULT_DATASET_DIR


@pytest.fixture(scope="session")
def capa_data():
    """The committed dataset, loaded with `datasets` (offline)."""
    from capa_hf.dataset.load import load_capa

    return load_capa(DEFAULT_DATASET_DIR)
