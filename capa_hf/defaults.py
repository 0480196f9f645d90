"""Every default of the benchmark, in one place. Modules import these; nothing repeats them
(tests/test_defaults.py fails on a restated default). Grouped by what they govern."""

from sandbox.config import JobLimits

# --- The benchmark design (the paper's numbers) ---------------------------------------------
N_CELLS = 60
CELLS_PER_PERSONA = 6
SESSIONS_PER_CELL = 10
HISTORY_SIZE = 5                 # positions 1-5 are history, 6-10 held-out
N_PERSONAS = 10
N_MECHANISMS = 6

# --- The evaluation protocol ----------------------------------------------------------------
MAX_TURNS = 8                    # assistant turns per session; an unsolved session counts as 8
# A reply ends where its first fenced code block that defines a function closes: the text after
# it is not part of the transcript (llama.cpp stops decoding there; other engines' text is cut).
STOP_AFTER_FENCE = "def "
CONDITION = "none"               # what the model under test sees before the request
SPLIT = "heldout"                # the split `capa eval` plays
USER = "scripted"                # the simulated user (`llm:<engine spec>` for the paper's LLM user)
JUDGE = "sandbox"                # the judge of every submission
MAX_ERROR_SHARE = 0.05           # a run stops after this share of its sessions failed (at least 1)

# The blank control (paper Table 6) is `capa eval` with these three (analysis/blank_control.py)
BLANK_CONDITION = "blank-control"   # no context
BLANK_SPLIT = "humaneval"           # HumanEval's 164 tasks with their full prompt
BLANK_USER = "debugger"             # reports the failing check, nothing else

# --- Every role's reply budget (max_tokens) and temperature ---------------------------------
GREEDY = 0.0                     # temperature of every role that is not given one
EVAL_MAX_TOKENS = 768            # the model under test, per turn
DEMO_MAX_TOKENS = 384            # the embedded model in `make demo`
STAGE2_MAX_TOKENS = 1024         # an engine playing the Stage 2 assistant
REALIZER_MAX_TOKENS = 320        # Stage 1: a model writing a request
REALIZER_RETRY_TEMPERATURE = 0.7  # ... sampled after its first attempt failed a check
CONSISTENCY_MAX_TOKENS = 200     # Stage 3: the consistency checker's yes/no and reason
PLANNER_MAX_TOKENS = 200         # the LLM user's planner (JSON)
EXPRESSION_MAX_TOKENS = 160      # the LLM user's expression agent (one message)
VETO_MAX_TOKENS = 200            # the judge's LLM veto (JSON)
GATE_MAX_TOKENS = 400            # the gate condition's verdict (JSON)
AMEM_MAX_TOKENS = 1000           # A-mem's note construction and evolution
AMEM_TEMPERATURE = 0.7           # ... as A-mem samples them
EXTRACTION_MAX_TOKENS = 1200     # `capa extract-keypoints`, one task's keypoints (YAML)

# --- Statistics -----------------------------------------------------------------------------
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95

# --- Dataset v0.2 design targets (checked by tests/test_design.py and reported by `capa validate`)
CONVENTION_ONLY_SHARE = 0.45     # held-out sessions that hide only convention items
MIN_CONVENTION_ONLY_SHARE = 0.40
HISTORY_REUSE_SHARE = 0.12       # history sessions that only reuse conventions shown earlier
GUESS_FIRST_SHARE = 0.24         # history learn sessions whose assistant guesses first and repairs (about 20% of all)
APPLY_WITHOUT_ASKING = 0.5       # chance a convention already shown in the cell is applied unasked
SECOND_ATTEMPT_SHARE = 0.6       # of those guess-first sessions: all answers in, the assistant slips once more, then repairs
# History sessions (a share of all of them, drawn with the build seed among those that ask three
# questions or more and have two wrong readings the variant's tests refuse) whose first repair
# fails once more before the last one passes: traces of 6-8 assistant turns, as the paper's are
LONG_TRACE_SHARE = 0.22

# --- Generation -----------------------------------------------------------------------------
MAX_ATTEMPTS = 5                 # Stage 3 regenerations per session

# --- The sandbox ----------------------------------------------------------------------------
SANDBOX_LIMITS = JobLimits()     # every judged submission (the sandbox's own defaults)
REGEN_LIMITS = JobLimits(timeout_s=20.0)   # `capa regen-tests`: recording every call of a check takes longer

# --- Memory systems -------------------------------------------------------------------------
ENDPOINT_PROBE_TIMEOUT_S = 10.0  # asking a memory LLM's URL which models it serves

# --- Paths (relative to the working directory) -----------------------------------------------
DATASET_OUT = "dist/capa"        # where `capa build` writes and `capa publish` reads
