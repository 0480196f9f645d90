"""Every default of the benchmark, in one place. Modules import these; nothing repeats them."""

# The benchmark design (the paper's numbers)
N_CELLS = 60
CELLS_PER_PERSONA = 6
SESSIONS_PER_CELL = 10
HISTORY_SIZE = 5                 # positions 1-5 are history, 6-10 held-out
N_PERSONAS = 10
N_MECHANISMS = 6

# The evaluation protocol
MAX_TURNS = 8                    # assistant turns per session; an unsolved session counts as 8
EVAL_MAX_TOKENS = 768            # reply budget of the model under test per turn
DEMO_MAX_TOKENS = 384            # the embedded model in `make demo`
# A reply ends where its first fenced code block that defines a function closes: the text after
# it is not part of the transcript (llama.cpp stops decoding there; other engines' text is cut).
STOP_AFTER_FENCE = "def "
STAGE2_MAX_TOKENS = 1024         # an engine playing the Stage 2 assistant
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95

# Dataset v0.2 design targets (checked by tests/test_design.py and reported by `capa validate`)
CONVENTION_ONLY_SHARE = 0.45     # held-out sessions that hide only convention items
MIN_CONVENTION_ONLY_SHARE = 0.40
HISTORY_REUSE_SHARE = 0.12       # history sessions that only reuse conventions shown earlier
GUESS_FIRST_SHARE = 0.24         # history learn sessions whose assistant guesses first and repairs (about 20% of all)
APPLY_WITHOUT_ASKING = 0.5       # chance a convention already shown in the cell is applied unasked

# Generation
MAX_ATTEMPTS = 5                 # Stage 3 regenerations per session
SANDBOX_TIMEOUT_S = 10.0
SANDBOX_MEMORY_MB = 1024
