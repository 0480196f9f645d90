"""Results as pandas DataFrames, for notebooks: `sessions_df(runs)` and `turns_df(runs)`; a run's
records as typed `SessionRecord`s: `load_run(path).records`.

The implementation lives in `capa_hf.analysis.results`; this is the short import path."""

from capa_hf.analysis.results import Run, load_run, sessions_df, turns_df
from capa_hf.schema.record import SessionRecord

__all__ = ["Run", "SessionRecord", "load_run", "sessions_df", "turns_df"]
