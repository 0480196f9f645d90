"""Results as pandas DataFrames, for notebooks: `sessions_df(runs)` and `turns_df(runs)`.

The implementation lives in `capa_hf.analysis.results`; this is the short import path."""

from capa_hf.analysis.results import Run, load_run, sessions_df, turns_df

__all__ = ["Run", "load_run", "sessions_df", "turns_df"]
