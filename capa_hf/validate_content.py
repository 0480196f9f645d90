"""`capa validate-content`: checks every curated task, persona and lexicon."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from capa_hf.content import Content, load_content
from capa_hf.errors import CapaError
from capa_hf.humaneval import load_tasks
from capa_hf.schema import CATEGORIES
from capa_hf.text_literals import repeated_literals
from capa_hf.variants.visible_settles import check_settles

LEXICON_ENTITIES = (
    "list", "array", "sequence", "dictionary", "string", "character", "word", "sentence", "integer",
    "number", "float", "digit", "tuple", "pair", "set", "element", "value", "key", "index", "sum",
    "product", "count", "maximum", "minimum", "average", "prefix", "suffix", "substring", "sort",
    "filter", "graph", "matrix", "row", "column", "interval", "duplicate", "vowel", "letter", "boolean",
)


@dataclass
class ContentReport:
    errors: list[str] = field(default_factory=list)
    categories: Counter = field(default_factory=Counter)
    n_tasks: int = 0
    n_keypoints: int = 0
    n_personas: int = 0
    variants: object | None = None      # VariantReport when the sandbox checks ran
    user: list[str] = field(default_factory=list)   # the scripted user's fidelity figures
    examples: object | None = None      # visible_examples.ExampleCheck when the sandbox checks ran

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        lines = [f"tasks: {self.n_tasks}  keypoints: {self.n_keypoints}  "
                 f"mean per task: {self.n_keypoints / max(self.n_tasks, 1):.2f}  personas: {self.n_personas}"]
        lines += [f"  {c:20} {self.categories[c]}" for c in CATEGORIES]
        if self.variants is not None:
            lines += self.variants.lines()
        lines += self.user
        if self.examples is not None:
            lines += self.examples.lines()
        lines += [f"ERROR {e}" for e in self.errors]
        lines.append("content OK" if self.ok else f"{len(self.errors)} problems")
        return "\n".join(lines)


def check_tasks(content: Content, report: ContentReport, strict: bool) -> None:
    humaneval = load_tasks()
    acted_on = {c for m in content.mechanisms.values() for p in m.patterns for c in p.categories}
    missing = [t for t in humaneval if t not in content.tasks]
    if strict and missing:
        report.errors.append(f"{len(missing)} tasks have no keypoint file, e.g. {missing[:3]}")
    for task_id, tc in content.tasks.items():
        where = f"keypoints/{task_id.replace('/', '_')}.yaml"
        task = humaneval.get(task_id)
        if task is None:
            report.errors.append(f"{where}: unknown task {task_id}")
            continue
        report.n_tasks += 1
        report.n_keypoints += len(tc.keypoints)
        if not any(k.category in acted_on for k in tc.keypoints):
            report.errors.append(f"{where}: no keypoint an information control can act on")
        for kp in tc.keypoints:
            report.categories[kp.category] += 1
            loc = f"{where}:{kp.id}"
            if kp.original_text not in task.prompt:
                report.errors.append(f"{loc}: original_text is not verbatim in the prompt: {kp.original_text!r}")
            if ">>>" in kp.original_text:
                report.errors.append(f"{loc}: original_text includes a doctest line")
            rep = repeated_literals(kp.original_text, kp.vague)
            if rep:
                report.errors.append(f"{loc}: vague repeats literal(s) {rep} of original_text")
    if report.n_tasks:
        for c in CATEGORIES:
            if report.categories[c] == 0:
                report.errors.append(f"category {c} never appears in the corpus")


def check_personas(content: Content, report: ContentReport) -> None:
    report.n_personas = len(content.personas)
    for pid, persona in content.personas.items():
        where = f"personas/{pid}.yaml"
        if persona.discipline not in content.lexicons:
            report.errors.append(f"{where}: discipline {persona.discipline!r} has no lexicon file")
        n_variants = sum(max(len(m.variants), 1) for m in persona.voice.style_moves)
        if n_variants < 4:
            report.errors.append(f"{where}: style_moves need at least 4 variants in all, found {n_variants}")
        for m in persona.voice.style_moves:
            if m.kind != "lowercase" and len(m.variants) < 4:
                report.errors.append(f"{where}: style move {m.kind} needs at least 4 variants")
    for lid, lex in content.lexicons.items():
        lacking = [e for e in LEXICON_ENTITIES if not lex.terms.get(e)]
        if lacking:
            report.errors.append(f"lexicons/{lid}.yaml: no terms for {lacking}")
    report.errors += voice_errors(content)


def voice_errors(content: Content) -> list[str]:
    """A persona's kit uses only its own words (persona_voice.yaml `owned`) and names its field
    (`fields`); a safe swap (lexicon_keep.yaml `same_meaning`) is one of its lexicon's terms."""
    import yaml

    from capa_hf.generation.persona_voice import persona_voice
    from capa_hf.generation.stage1_lexicon import same_meaning

    voice, out = persona_voice(), []
    for pid, persona in content.personas.items():
        foreign = voice.foreign_words(yaml.safe_dump(persona.voice.model_dump()), pid)
        if foreign:
            out.append(f"personas/{pid}.yaml: uses words of other personas {sorted(set(foreign))}")
        if pid not in (voice.fields or {}):
            out.append(f"persona_voice.yaml: fields has no entry for {pid}")
    for lid, entities in same_meaning().items():
        lex = content.lexicons.get(lid)
        for entity, nouns in entities.items():
            terms = {t.sg for t in lex.terms.get(entity, ())} if lex else set()
            if not nouns <= terms:
                out.append(f"lexicon_keep.yaml: same_meaning {lid}.{entity} names {sorted(nouns - terms)}, "
                           f"not terms of lexicons/{lid}.yaml")
    return out


def check_variants(content: Content, report: ContentReport, strict: bool, only: set[str] | None = None) -> None:
    """Run every variant, reference and misreading in the sandbox (see capa_hf/variants/verify.py)."""
    from sandbox import SandboxPool

    from capa_hf.variants.verify import verify_variants

    sources = {t: s for t, s in content.variants.items() if only is None or t in only}
    missing = [t for t in content.tasks if t not in content.variants and (only is None or t in only)]
    if only is not None and missing:
        report.errors.append(f"no variants file for {missing}")
    if strict and missing:
        report.errors.append(f"{len(missing)} tasks have no variants file (capa_hf/data/variants/), "
                             f"e.g. {missing[:3]}")
    from capa_hf.variants.visible_examples import check_examples, load_keypoint_examples

    examples = {t: e for t, e in load_keypoint_examples().items() if only is None or t in only}
    with SandboxPool() as pool:
        vr = verify_variants(sources, load_tasks(), content.tasks, content.dimensions, pool)
        report.examples = check_examples(examples, content.variants, load_tasks(), content.tasks,
                                         content.dimensions, pool)
        if only is None:
            report.errors += check_empty_results(content, pool)
    report.variants = vr
    report.errors += vr.errors + report.examples.errors


def check_empty_results(content: Content, pool) -> list[str]:
    """capa_hf/data/empty_results.yaml: every task with an empty_input dimension has an entry, and
    the neutral reference on its empty call returns the recorded result (in the sandbox)."""
    from capa_hf.generation.empty_results import empty_result_jobs, load_empty_results

    recorded = load_empty_results()
    errors = [f"empty_results.yaml: no entry for {t}" for t, s in content.variants.items()
              if "empty_input" in s.dimensions and t not in recorded]
    jobs = empty_result_jobs(content.variants, load_tasks(), content.dimensions)
    for (tid, result, _), v in zip(jobs, pool.check_many([j for _, _, j in jobs])):
        if not v.passed:
            errors.append(f"empty_results.yaml: {tid} under empty_input=neutral does not return {result!r} "
                          f"({v.status}: {v.failure})")
    return errors


def check_user_data(content: Content, report: ContentReport) -> None:
    """The scripted user's data: reaction fits name real persona reactions, keypoint question
    forms name real keypoints, and the failure ties match the committed variant tests."""
    from capa_hf.content import load_user_lines
    from capa_hf.simulator.user_data import curated_forms, ties_record, question_vocab
    from capa_hf.variants.ties import tests_sha256

    lines = load_user_lines()
    for pid, rows in (lines.get("reaction_fit") or {}).items():
        persona = content.personas.get(pid)
        for r in rows:
            if persona is None or r["text"] not in persona.voice.failure_reactions:
                report.errors.append(f"user_lines.yaml reaction_fit.{pid}: not a reaction of that persona: {r['text']!r}")
    _, dim_cues, _ = question_vocab()
    for dim in content.dimensions:
        if dim not in dim_cues:
            report.errors.append(f"question_vocab.yaml: no cues for dimension {dim}")
    for task_id, forms in curated_forms().items():
        kps = {k.id for k in content.tasks[task_id].keypoints} if task_id in content.tasks else set()
        for kp in forms:
            if kp not in kps:
                report.errors.append(f"keypoint_questions.yaml: {task_id} has no keypoint {kp}")
    stale = [t for t in content.variants if ties_record(t).get("tests_sha256") != tests_sha256(t)]
    if stale:
        report.errors.append(f"{len(stale)} task(s) have stale or missing failure ties (capa_hf/data/variant_ties/), "
                             f"e.g. {stale[:3]}; run `capa regen-ties`")


def check_user_fidelity(report: ContentReport, sandbox: bool) -> None:
    """Top-1 question matching on the labeled question set and, with the sandbox, how often the
    user answers HumanEval's own behaviour with a convention it broke (the committed dataset)."""
    from capa_hf.content import load_user_lines
    from capa_hf.dataset.load import load_capa
    from capa_hf.paths import DEFAULT_DATASET_DIR
    from capa_hf.user_fidelity import humaneval_behaviour_reveals, match_question_set

    if not (DEFAULT_DATASET_DIR / "README.md").is_file():
        report.user.append(f"scripted user: no built dataset at {DEFAULT_DATASET_DIR.name}/, figures skipped")
        return
    data, lines = load_capa(DEFAULT_DATASET_DIR), load_user_lines()
    matched = match_question_set(data, lines)
    report.user += matched.lines()
    report.errors += matched.errors
    if sandbox:
        report.user += humaneval_behaviour_reveals(data, lines).lines()


def validate(strict: bool = True, sandbox: bool = True, tasks: list[str] | None = None) -> ContentReport:
    report = ContentReport()
    try:
        content = load_content()
    except CapaError as exc:
        report.errors.append(str(exc))
        return report
    check_tasks(content, report, strict)
    report.errors += check_settles(content.tasks, content.variants)
    check_personas(content, report)
    check_user_data(content, report)
    if sandbox:
        only = {t if t.startswith("HumanEval/") else f"HumanEval/{t}" for t in tasks} if tasks else None
        check_variants(content, report, strict and only is None, only)
    if not tasks:
        check_user_fidelity(report, sandbox)
    return report


def main(strict: bool = True, sandbox: bool = True, tasks: list[str] | None = None) -> int:
    report = validate(strict=strict, sandbox=sandbox, tasks=tasks)
    print(report.summary())
    return 0 if report.ok else 1
