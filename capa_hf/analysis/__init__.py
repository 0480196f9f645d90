"""The paper's analyses over finished run folders: results as pandas DataFrames (results.py),
paired intervals and permutation tests (paired.py), difficulty labels (difficulty.py), the
blank control (blank_control.py), the report's tables (tables.py, comparisons.py), plots
(plots.py) and `capa report` itself (report.py)."""
