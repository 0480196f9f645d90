"""Version of the generation pipeline and of the dataset it builds."""

PIPELINE_VERSION = "0.3.1"
