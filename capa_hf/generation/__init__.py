"""The generation pipeline (paper Stages 1-3), offline and deterministic by default."""
