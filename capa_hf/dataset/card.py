"""Rendering the dataset card (README.md with a YAML header) from dataset_card/."""

from __future__ import annotations

from string import Template

import yaml

from capa_hf.dataset.features import LAYOUT
from capa_hf.errors import DataFileError
from capa_hf.paths import CARD_DIR


def yaml_header(version: str, split_rows: dict, split_bytes: dict) -> dict:
    configs, infos = [], []
    for name, (features, files) in LAYOUT.items():
        entry = {"config_name": name, "data_files": [{"split": s, "path": p} for s, p in files.items()]}
        if name == "default":
            entry["default"] = True
        configs.append(entry)
        infos.append({
            "config_name": name,
            "features": features._to_yaml_list(),
            "splits": [{"name": s, "num_bytes": split_bytes[(name, s)], "num_examples": split_rows[(name, s)]}
                       for s in files],
            "download_size": sum(split_bytes[(name, s)] for s in files),
            "dataset_size": sum(split_bytes[(name, s)] for s in files),
        })
    return {
        "license": "mit",
        "language": ["en"],
        "pretty_name": "CAPA",
        "version": version,
        "task_categories": ["text-generation"],
        "tags": ["code", "multi-turn", "clarification", "personalization", "ambiguity", "humaneval"],
        "size_categories": ["n<1K"],
        "configs": configs,
        "dataset_info": infos,
    }


def render_card(version: str, split_rows: dict, split_bytes: dict, generation: str, stage3: str) -> str:
    path = CARD_DIR / "README.md"
    if not path.is_file():
        raise DataFileError(path, "dataset card template not found")
    header = yaml.safe_dump(yaml_header(version, split_rows, split_bytes), sort_keys=False,
                            allow_unicode=True, width=100).strip()
    table = "\n".join(
        f"| `{name}` | {', '.join(f'`{s}`' for s in files)} | "
        f"{' + '.join(str(split_rows[(name, s)]) for s in files)} | {_what(name)} |"
        for name, (_, files) in LAYOUT.items())
    n_sessions = sum(split_rows[("default", s)] for s in LAYOUT["default"][1])
    return Template(path.read_text(encoding="utf-8")).substitute(
        yaml_header=header, version=version, n_sessions=n_sessions, n_cells=split_rows[("cells", "train")],
        config_table=table, generation=generation, stage3=stage3)


def _what(name: str) -> str:
    return {"default": "the sessions", "tasks": "HumanEval tasks with gist and keypoints",
            "personas": "the 10 personas and their voice kits",
            "mechanisms": "the 6 ambiguity mechanisms and their resolution patterns",
            "cells": "the 60 users: persona, mechanism pair, patterns, tasks"}[name]


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
