"""Rendering the dataset card (README.md with a YAML header) from dataset_card/.

The header follows the Hub's dataset-card conventions: `configs` with their data files,
`dataset_info` with each split's uncompressed Arrow size (`num_bytes`, as `datasets` counts it)
and example count, the download size (parquet bytes), and the provenance keys. The version is
not a header key (the Hub ignores it): it lives in the tag, the manifest and the text.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

import yaml

from capa_hf.defaults import DATASET_OUT
from capa_hf.dataset.features import LAYOUT
from capa_hf.errors import DataFileError
from capa_hf.paths import CARD_DIR

PAPER = "https://arxiv.org/abs/2607.26611"
WHAT = {"default": "the sessions (evaluate on `heldout`; `history` holds the resolved traces)",
        "tasks": "HumanEval tasks with gist, keypoints, dimensions and hideable keypoints",
        "variants": "each task under each combination of convention values: reference and regenerated tests",
        "dimensions": "the convention dimensions and their values",
        "personas": "the 10 personas and their voice kits",
        "mechanisms": "the 6 ambiguity mechanisms and their resolution patterns",
        "cells": "the 60 users: persona, mechanism pair, convention profile, roles, tasks"}


LOCAL_ID = DATASET_OUT          # where `capa build` writes by default, and where a clone has the data
LOCAL_NOTE = ("This card belongs to a local build: the path is the folder `capa build` writes by default. "
              "`capa publish --repo-id ORG/NAME` renders this section again with the Hub id and the version's tag.")
HUB_NOTE = ("`{tag}` is the tag `capa publish` created for this version: pin it, so that the data under a "
            "result cannot change.")
_LOADING = re.compile(r"<!-- loading: .*? -->\n.*?<!-- /loading -->\n?", re.DOTALL)


def loading_section(repo_id: str | None, version: str) -> str:
    """The card's Loading examples: the local folder, or (for `capa publish`) the Hub id, pinned."""
    path = CARD_DIR / "loading.md"
    if not path.is_file():
        raise DataFileError(path, "dataset card template not found")
    tag = f"v{version}"
    slots = ({"load_id": LOCAL_ID, "revision": "", "where": LOCAL_NOTE} if repo_id is None else
             {"load_id": repo_id, "revision": f', revision="{tag}"', "where": HUB_NOTE.format(tag=tag)})
    return Template(path.read_text(encoding="utf-8")).substitute(slots)


def with_loading(card: str, repo_id: str, version: str) -> str:
    """The card with its Loading section rendered for `repo_id` (what `capa publish` uploads)."""
    if not _LOADING.search(card):
        raise DataFileError("README.md", "the card has no Loading section to render (rebuild it with capa build)")
    section = loading_section(repo_id, version)
    return _LOADING.sub(lambda _: section, card, count=1)


def card_load_id(card: str) -> str | None:
    """The id the card's Loading examples use."""
    m = re.search(r"<!-- loading: (.*?) -->", card)
    return m.group(1) if m else None


def yaml_header(files: dict) -> dict:
    by_split = {(v["config"], v["split"]): v for v in files.values()}
    configs, infos = [], []
    for name, (features, paths) in LAYOUT.items():
        entry = {"config_name": name, "data_files": [{"split": s, "path": p} for s, p in paths.items()]}
        if name == "default":
            entry["default"] = True
        configs.append(entry)
        splits = [{"name": s, "num_bytes": by_split[(name, s)]["num_bytes"],
                   "num_examples": by_split[(name, s)]["rows"]} for s in paths]
        infos.append({"config_name": name, "features": features._to_yaml_list(), "splits": splits,
                      "download_size": sum(by_split[(name, s)]["bytes"] for s in paths),
                      "dataset_size": sum(sp["num_bytes"] for sp in splits)})
    return {
        "license": "mit",
        "language": ["en"],
        "pretty_name": "CAPA",
        "annotations_creators": ["machine-generated"],
        "language_creators": ["machine-generated"],
        "multilinguality": ["monolingual"],
        "source_datasets": ["openai/openai_humaneval"],
        "task_categories": ["text-generation"],
        "tags": ["code", "multi-turn", "clarification", "personalization", "ambiguity", "humaneval"],
        "size_categories": ["n<1K"],
        "configs": configs,
        "dataset_info": infos,
    }


def _facts_table(facts: dict) -> str:
    return "\n".join(f"| {k.replace('_', ' ')} | {v} |" for k, v in facts.items())


def oracle_paragraph(facts: dict) -> str:
    """What the oracle FT-ES is, and next to it the sessions that need history."""
    n = facts.get("heldout_sessions", 0)
    full = facts.get("heldout_fully_resolvable", 0)
    need = facts.get("heldout_needing_history")
    text = (f"**Oracle FT-ES {100 * facts.get('oracle_ft_es', 0):.1f}%** ({full} of {n} held-out sessions): the "
            "first-turn success of an assistant that applies every convention shown in the cell's history and "
            "asks about nothing else. It solves exactly the fully resolvable held-out sessions. It is not an "
            "upper bound on what a model can reach, and not all of it is owed to history: some of those "
            "sessions also pass with HumanEval's defaults and no history.")
    if need is not None:
        text += (f" **{need} of {n} held-out sessions need history** ({100 * need / max(n, 1):.1f}%): fully "
                 "resolvable from it, with a hidden convention whose value is not HumanEval's, so HumanEval's "
                 "defaults fail them and the user's conventions pass them.")
    return text


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def review_paragraph(version: str, folder=None) -> str:
    """What the latest blind review of an EARLIER version counted (a version's own review is written
    after its build, so its card cannot hold it; `capa validate` prints it), and where this
    version's review lives."""
    from capa_hf.dataset.review import REVIEW_DIR, TARGETS, load_review, review_counts

    root = Path(folder or REVIEW_DIR)
    older = sorted((p for p in root.glob("*.yaml") if re.fullmatch(r"\d+\.\d+\.\d+", p.stem)
                    and _version_key(p.stem) < _version_key(version)), key=lambda p: _version_key(p.stem))
    own = (f"The review of {version} itself is `docs/review/results/{version}.yaml` in the CAPA repository "
           "once it is written; `capa validate` prints its counts.")
    if not older:
        return f"No earlier version has been reviewed, so this card reports no review counts. {own}"
    review = load_review(older[-1])
    c = review_counts(review, set(review.heldout), set(review.history))
    n_held, n_hist = c["heldout_reviewed"], c["history_reviewed"]
    return (f"The review of {review.dataset_version} ({n_held} held-out requests and {n_hist} history traces, "
            f"{len(review.reviewers)} reviewers) counted: a hidden item settled by the visible text in "
            f"{c['settled']} held-out sessions (target at most {round(TARGETS['settled_share'] * n_held)}), "
            f"{c['garbled']} garbled and {c['awkward']} awkward requests (targets {TARGETS['garbled']} and at most "
            f"{round(TARGETS['awkward_share'] * n_held)}), {c['persona_breaks']} persona breaks, "
            f"{c['off_question']} history traces where the user answered another question (target "
            f"{TARGETS['off_question']}), {c['habit_not_own']} habits put in someone else's mouth and "
            f"{c['dangling_back_reference']} back references with nothing to point at. This version's changes "
            f"answer those findings (see the changelog). {own}")


def render_card(version: str, files: dict, generation: str, stage3: str, facts: dict) -> str:
    path = CARD_DIR / "README.md"
    if not path.is_file():
        raise DataFileError(path, "dataset card template not found")
    header_data = {k: v for k, v in yaml_header(files).items() if v is not None}
    header = yaml.safe_dump(header_data, sort_keys=False, allow_unicode=True, width=100).strip()
    by_split = {(v["config"], v["split"]): v for v in files.values()}
    table = "\n".join(
        f"| `{name}` | {', '.join(f'`{s}`' for s in paths)} | "
        f"{' + '.join(str(by_split[(name, s)]['rows']) for s in paths)} | {WHAT[name]} |"
        for name, (_, paths) in LAYOUT.items())
    n_sessions = sum(by_split[("default", s)]["rows"] for s in LAYOUT["default"][1])
    return Template(path.read_text(encoding="utf-8")).substitute(
        yaml_header=header, version=version, n_sessions=n_sessions, n_cells=by_split[("cells", "train")]["rows"],
        config_table=table, generation=generation, stage3=stage3, facts=_facts_table(facts), paper=PAPER,
        loading=loading_section(None, version).rstrip("\n"),
        oracle=oracle_paragraph(facts), review=review_paragraph(version))


def read_card_header(text: str, where: str) -> dict:
    if not text.startswith("---\n"):
        raise DataFileError(where, "card does not start with a YAML header")
    try:
        _, head, _ = text.split("---\n", 2)
        data = yaml.safe_load(head)
    except (ValueError, yaml.YAMLError) as exc:
        raise DataFileError(where, f"card YAML header is unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise DataFileError(where, "card YAML header is not a mapping")
    return data
