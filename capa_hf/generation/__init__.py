"""The generation pipeline (the paper's Stages 1-3), offline and deterministic by default.

Where each stage lives:

| stage | module | what it does |
|---|---|---|
| 1 | `stage1_plan` | which items a session hides (conventions and task keypoints), by which mechanism, and what it states plainly; pure |
| 1 | `stage1_realize` | the request text and each item's clarification in the persona's voice (`TemplateRealizer`, or an LLM realizer) |
| 1 | `stage1_llm` | `--realizer llm:SPEC`: a model writes the request body from the template plan's visible text, the persona and the information controls; one batch per attempt |
| 1 | `stage1_lexicon` | the discipline nouns a domain-cognitive user speaks in; article agreement |
| 2 | `stage2_dialogue` | the reference assistant that plays each session to a resolved trace (the simulator itself is `capa_hf.simulator`) |
| 3 | `stage3_checks` | persona voice, both mechanisms, no leak, no repeated sentence, resolved |
| 3 | `stage3_llm` | `--consistency llm:SPEC`: a model compares each trace with its cell and the cell's previous accepted trace |
| 1-3 | `pipeline` | runs the stages over the 60 cells and regenerates what Stage 3 refuses |

Task variants (the tests each session is judged by) come from `capa_hf.variants`.
"""
