"""Where the package's data files live."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"
PROMPTS_DIR = PACKAGE_DIR / "prompts"
REPO_DIR = PACKAGE_DIR.parent
CARD_DIR = REPO_DIR / "dataset_card"
DEFAULT_DATASET_DIR = REPO_DIR / "dist" / "capa"
