"""How faithfully the scripted user answers: two figures `capa validate-content` prints.

1. **Question matching.** The labeled question set (capa_hf/data/question_set/*.jsonl: one
   {"session_id", "item", "question"} per line over the held-out split, the item named by kind and
   dimension or keypoint, e.g. `convention:bounds`, `task:kp_02`, so that a rebuild that hides one
   item more or less keeps the labels; an item the build leaves visible is counted, not scored) is
   matched by the scripted user's planner with every hidden item of the session still hidden; top-1 accuracy
   per part. The part written by a reviewer who did not write the vocabularies is held out from
   tuning (`HELD_OUT_PARTS`).
2. **Answering the failure.** Each held-out session whose hidden conventions HumanEval's own
   behaviour breaks first submits HumanEval's reference; the figure is the share of sessions
   where the user's answer reveals one of the broken conventions.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from capa_hf.defaults import JUDGE
from capa_hf.paths import DATA_DIR

QUESTION_SET_DIR = DATA_DIR / "question_set"
HELD_OUT_PARTS = ("reviewer_questions",)     # written blind to the vocabularies; never used to tune


@dataclass
class MatchReport:
    parts: dict = field(default_factory=dict)        # part -> (correct, total)
    misses: dict = field(default_factory=dict)       # part -> Counter of the intended item's topic
    errors: list = field(default_factory=list)
    not_hidden: dict = field(default_factory=dict)   # part -> labeled items this build leaves visible

    def lines(self) -> list[str]:
        out = []
        for part, (ok, n) in sorted(self.parts.items()):
            tag = "held out" if part in HELD_OUT_PARTS else "tuning"
            worst = ", ".join(f"{k} {v}" for k, v in self.misses.get(part, Counter()).most_common(4))
            skipped = self.not_hidden.get(part, 0)
            out.append(f"question matching, {part} ({tag}): top-1 {ok}/{n} = {100 * ok / max(n, 1):.1f}%"
                       + (f"; misses: {worst}" if worst else "")
                       + (f"; {skipped} labeled items are not hidden in this build" if skipped else ""))
        return out


def read_question_set(folder: Path = QUESTION_SET_DIR) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                row = json.loads(line)
                if not all(isinstance(row.get(k), str) for k in ("session_id", "item", "question")):
                    raise ValueError(f"{path}:{n}: expected session_id, item (e.g. convention:bounds or "
                                     "task:kp_02) and question strings")
                rows.append(row)
        out[path.stem] = rows
    return out


def item_key(h) -> str:
    """A hidden item's identity across builds: its kind and dimension or keypoint (the h-number
    changes whenever a build hides one item more or less in the session)."""
    return f"{h.kind}:{h.dimension if h.kind == 'convention' else h.keypoint_id}"


def _topic(session, item_id: str) -> str:
    h = next((h for h in session.hidden_items if h.id == item_id), None)
    return "?" if h is None else (h.dimension if h.kind == "convention" else "task item")


def match_question_set(data, user_lines: dict, folder: Path = QUESTION_SET_DIR) -> MatchReport:
    """Top-1 matching of every labeled question, each with all of its session's items hidden."""
    from capa_hf.evaluation.capa_source import brief
    from capa_hf.simulator.users import scripted_user

    report = MatchReport()
    users = {}
    for part, rows in read_question_set(folder).items():
        ok = 0
        misses: Counter = Counter()
        scored = 0
        for row in rows:
            s = data.heldout.get(row["session_id"])
            if s is None:
                report.errors.append(f"question_set/{part}: no held-out session {row['session_id']}")
                continue
            item_id = next((h.id for h in s.hidden_items if item_key(h) == row["item"]), None)
            if item_id is None:       # the build states this point in the request: nothing to ask
                report.not_hidden[part] = report.not_hidden.get(part, 0) + 1
                continue
            scored += 1
            if s.session_id not in users:
                users[s.session_id] = scripted_user(brief(s, data, user_lines))
            plan, _ = users[s.session_id].plan(row["question"], None)
            if plan.basis == "question" and plan.item_id == item_id:
                ok += 1
            else:
                misses[_topic(s, item_id)] += 1
        report.parts[part] = (ok, scored)
        report.misses[part] = misses
    return report


@dataclass
class FailureReport:
    sessions: int = 0           # held-out sessions where HumanEval's behaviour breaks a hidden convention
    revealed_broken: int = 0    # ... and the user's answer reveals one of the hidden ones it broke
    restated_broken: int = 0    # ... or points again to a broken convention the request stated
    passed: int = 0             # ... and the submission passed anyway (not counted)
    bases: Counter = field(default_factory=Counter)
    missed: list = field(default_factory=list)

    def lines(self) -> list[str]:
        n = max(self.sessions, 1)
        both = self.revealed_broken + self.restated_broken
        return [f"after HumanEval's own behaviour fails: the user names a convention it broke in {both}/"
                f"{self.sessions} held-out sessions = {100 * both / n:.1f}% (reveals a hidden one "
                f"{self.revealed_broken} = {100 * self.revealed_broken / n:.1f}%, restates a stated one "
                f"{self.restated_broken}; bases: {', '.join(f'{k} {v}' for k, v in sorted(self.bases.items()))}; "
                f"{self.passed} sessions passed although a hidden convention differs)"]


def humaneval_behaviour_reveals(data, user_lines: dict, judge=None, judge_spec: str = JUDGE) -> FailureReport:
    """Submit HumanEval's reference in every held-out session that hides a convention it breaks.
    `judge`: a judge to use (left open); by default one built from the judge registry by
    `judge_spec` (the sandbox), closed at the end. A judge that asks a model is refused."""
    from capa_hf.evaluation.capa_source import brief
    from capa_hf.generation.stage2_dialogue import code_reply
    from capa_hf.simulator.extraction import extract_submission
    from capa_hf.schema.record import Verdict
    from capa_hf.simulator.protocols import build_judge, verdict_without_model
    from capa_hf.simulator.users import scripted_user
    from capa_hf.variants.catalog import VariantCatalog
    from capa_hf.variants.combos import humaneval_variant

    from capa_hf.content import load_dimensions

    catalog = VariantCatalog(data.tasks, _sources(), load_dimensions())
    own = judge is None
    judge = judge or build_judge(judge_spec)
    report = FailureReport()
    try:
        for s in sorted(data.heldout.values(), key=lambda s: s.session_id):
            variants = catalog.variants(s.task_id)
            if not variants:
                continue
            he = humaneval_variant(variants)
            he_values = he.values_dict()
            values = dict(kv.split("=", 1) for kv in s.variant_id.split("@", 1)[1].split("+")) \
                if "=" in s.variant_id else {}
            broken = {h.id for h in s.hidden_items if h.kind == "convention"
                      and values.get(h.dimension) != he_values.get(h.dimension)}
            hidden_dims = {h.dimension for h in s.hidden_items if h.kind == "convention"}
            broken_stated = {d for d, v in values.items() if d not in hidden_dims and v != he_values.get(d)}
            if not broken:
                continue
            problem = data.problem(s)
            reply = code_reply("Here it is.", he.reference)
            verdict = verdict_without_model(judge, extract_submission(reply, problem.entry_point), problem,
                                            "the user fidelity check")
            judged = Verdict.from_dict(verdict)     # the user reads the judge's dict; this check its fields
            if judged.passed:
                report.passed += 1
                continue
            user = scripted_user(brief(s, data, user_lines))
            plan, entry = user.plan(reply, verdict)
            report.sessions += 1
            report.bases[entry["basis"]] += 1
            hit = plan.kind == "item" and plan.item_id in broken
            restated = plan.kind == "restate" and plan.item_id in broken_stated
            report.revealed_broken += hit
            report.restated_broken += restated
            if not hit and not restated:
                report.missed.append({"session": s.session_id, "plan": entry, "broken": sorted(broken),
                                      "got": judged.failing_value})
    finally:
        if own:
            judge.close()
    return report


def _sources():
    from capa_hf.content import load_variant_sources

    return load_variant_sources()


def paraphrase_rows(data, templates: dict) -> list[dict]:
    """One paraphrase of the reference assistant's question per hidden item of every held-out
    session, the template picked by a hash of the session and item (deterministic)."""
    import hashlib

    from capa_hf.content import load_variant_sources

    sources = load_variant_sources()
    rows = []
    for s in sorted(data.heldout.values(), key=lambda s: s.session_id):
        src = sources.get(s.task_id)
        nouns = {"result": src.nouns.result if src else "the result", "input": src.nouns.input if src else "the input"}
        kps = {k.id: k for k in data.contents[s.task_id].keypoints}
        for h in s.hidden_items:
            key = int(hashlib.sha256(f"{s.session_id}/{h.id}".encode()).hexdigest()[:8], 16)
            if h.kind == "convention":
                forms = templates["dimensions"][h.dimension]
                q = forms[key % len(forms)].format(**nouns)
            else:
                kp = kps[h.keypoint_id]
                ask = (src.asks.get(kp.id) if src else None) or kp.question
                lead = templates["task_leads"][key % len(templates["task_leads"])]
                q = lead.format(question=kp.question, ask=ask, question_lower=kp.question[0].lower() + kp.question[1:])
            rows.append({"session_id": s.session_id, "item": item_key(h), "question": q})
    return rows


def main(argv=None) -> int:
    import argparse

    from capa_hf.content import load_user_lines
    from capa_hf.data_files import read_yaml
    from capa_hf.dataset.load import load_capa

    p = argparse.ArgumentParser(prog="python -m capa_hf.user_fidelity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default=None, help="a built dataset folder (default: the committed one)")
    p.add_argument("--write-paraphrases", action="store_true",
                   help="(re)write question_set/paraphrases.jsonl from paraphrase_templates.yaml")
    p.add_argument("--no-sandbox", action="store_true", help="skip the HumanEval-behaviour figure")
    args = p.parse_args(argv)
    data = load_capa(args.dataset)
    if args.write_paraphrases:
        rows = paraphrase_rows(data, read_yaml(QUESTION_SET_DIR / "paraphrase_templates.yaml"))
        (QUESTION_SET_DIR / "paraphrases.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {len(rows)} paraphrases")
    lines = load_user_lines()
    print("\n".join(match_question_set(data, lines).lines()))
    if not args.no_sandbox:
        print("\n".join(humaneval_behaviour_reveals(data, lines).lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
