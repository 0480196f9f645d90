"""CAPA: cross-session personalized ambiguity adaptation for coding assistants.

`capa_hf` is the benchmark layer: schema, taxonomy, personas, cells, generation stages,
simulated user, judge, evaluation conditions, metrics and the Hugging Face dataset build.
It sits above `runners` (LLM machinery) and `sandbox` (code execution), never below them.
"""

from capa_hf.version import PIPELINE_VERSION

__all__ = ["PIPELINE_VERSION"]
