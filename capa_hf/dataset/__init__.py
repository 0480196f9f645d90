"""The Hugging Face dataset: features, build, card, validation, loading and publishing."""
