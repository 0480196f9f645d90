"""Model presets (capa_hf/data/presets.yaml): a model spec, engine options, sampling, max_tokens.

    preset = resolve_preset("llama-3.3-70b:8x141gb")      # NAME or NAME:VARIANT
    print("\\n".join(preset.describe_lines()))            # a preset prints what it sets
    run = apply_preset(preset, model=None, engine_args={"max_model_len": 8192},
                       sampling={"temperature": None}, max_tokens=None)
    run.model, run.engine, run.sampling, run.max_tokens    # explicit values won
    run.overridden                                         # ("engine.max_model_len",)

Every explicit value (not None) overrides the preset's; ``None`` means "not given".  A bad
file raises :class:`DataFileError` naming the file and the field; an unknown preset name
raises :class:`CapaError` listing the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from pydantic import Field, field_validator

from capa_hf.data_files import parse_record, read_yaml
from capa_hf.errors import CapaError, DataFileError
from capa_hf.paths import DATA_DIR
from capa_hf.schema.base import Record

PRESETS_FILE = DATA_DIR / "presets.yaml"
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p")


class _Variant(Record):
    notes: str = ""
    engine: dict[str, Any] = Field(default_factory=dict)


class _Entry(Record):
    model: str
    notes: str = ""
    engine: dict[str, Any] = Field(default_factory=dict)
    sampling: dict[str, Any] = Field(default_factory=dict)
    max_tokens: int | None = Field(default=None, ge=1)
    variants: dict[str, _Variant] = Field(default_factory=dict)
    default_variant: str | None = None

    @field_validator("sampling")
    @classmethod
    def _sampling(cls, v: dict[str, Any]) -> dict[str, Any]:
        from runners import Sampling

        bad = sorted(set(v) - set(SAMPLING_FIELDS))
        if bad:
            raise ValueError(f"unknown sampling field(s) {bad}; known: {list(SAMPLING_FIELDS)}")
        Sampling(**v)  # ranges, with the message naming the field
        return v


@dataclass(frozen=True)
class Preset:
    name: str                    # NAME or NAME:VARIANT as resolved
    model: str                   # runners engine spec
    engine: dict[str, Any]       # engine options (the variant's over the entry's)
    sampling: dict[str, Any]     # decoding fields it sets
    max_tokens: int | None
    notes: tuple[str, ...] = ()

    def describe_lines(self) -> list[str]:
        lines = [f"preset {self.name}:", f"  model       {self.model}"]
        lines.append("  engine      " + (_kv(self.engine) or "(none)"))
        lines.append("  sampling    " + (_kv(self.sampling) or "(the run's own)"))
        own = "(the run's own)"
        lines.append(f"  max_tokens  {own if self.max_tokens is None else self.max_tokens}")
        lines += [f"  note: {n}" for n in self.notes if n]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "engine": dict(self.engine), "sampling": dict(self.sampling),
                "max_tokens": self.max_tokens, "notes": list(self.notes)}


@dataclass(frozen=True)
class Resolved:
    """What a run uses after a preset and the explicit flags are merged."""

    model: str | None
    engine: dict[str, Any]
    sampling: dict[str, Any]     # only the fields that are set
    max_tokens: int | None
    preset: str | None = None
    overridden: tuple[str, ...] = ()   # preset values an explicit flag replaced, e.g. "engine.max_model_len"
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def describe_lines(self) -> list[str]:
        lines = [f"  overridden by your flags: {', '.join(self.overridden)}"] if self.overridden else []
        return lines + [f"  warning: {w}" for w in self.warnings]

    def to_dict(self) -> dict[str, Any]:
        return {"preset": self.preset, "model": self.model, "engine": dict(self.engine),
                "sampling": dict(self.sampling), "max_tokens": self.max_tokens,
                "overridden": list(self.overridden), "warnings": list(self.warnings)}


def _kv(d: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_fmt(v)}" for k, v in d.items())


def _fmt(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _check_entry(name: str, entry: _Entry, path: Path) -> None:
    from runners import check_engine_options

    if entry.variants and entry.default_variant not in entry.variants:
        raise DataFileError(path, f"default_variant {entry.default_variant!r} is not one of "
                                  f"{sorted(entry.variants)}", field=f"presets.{name}.default_variant")
    if not entry.variants and entry.default_variant is not None:
        raise DataFileError(path, "default_variant without variants", field=f"presets.{name}.default_variant")
    for where, engine in [("engine", entry.engine)] + [(f"variants.{v}.engine", var.engine)
                                                      for v, var in entry.variants.items()]:
        try:
            check_engine_options(entry.model, engine)
        except ValueError as exc:
            raise DataFileError(path, str(exc), field=f"presets.{name}.{where}") from None
        mml = {**entry.engine, **engine}.get("max_model_len")
        if mml is not None and entry.max_tokens is not None and entry.max_tokens >= mml:
            raise DataFileError(path, f"max_tokens {entry.max_tokens} leaves no room for the prompt in "
                                      f"max_model_len {mml}", field=f"presets.{name}.max_tokens")


def load_presets(path: Path | None = None) -> dict[str, _Entry]:
    path = path or PRESETS_FILE
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("presets"), dict) or not raw["presets"]:
        raise DataFileError(path, "expected a top-level 'presets' mapping of name -> preset", field="presets")
    out: dict[str, _Entry] = {}
    for name, item in raw["presets"].items():
        if not isinstance(name, str) or not name or ":" in name:
            raise DataFileError(path, f"preset name {name!r} must be a non-empty string without ':'",
                                field=f"presets.{name}")
        entry = parse_record(_Entry, item, path, prefix=("presets", name))
        _check_entry(name, entry, path)
        out[name] = entry
    return out


@lru_cache(maxsize=4)
def _cached(path: str) -> dict[str, _Entry]:
    return load_presets(Path(path))


def known_presets(path: Path | None = None) -> list[str]:
    """Every name ``resolve_preset`` accepts: NAME, and NAME:VARIANT for presets with variants."""
    names = []
    for name, entry in _cached(str(path or PRESETS_FILE)).items():
        names.append(name)
        names += [f"{name}:{v}" for v in entry.variants]
    return sorted(names)


def resolve_preset(name: str, path: Path | None = None) -> Preset:
    entries = _cached(str(path or PRESETS_FILE))
    base, _, variant = (name or "").partition(":")
    entry = entries.get(base)
    if entry is None or (variant and variant not in entry.variants):
        raise CapaError(f"--preset {name!r}: unknown preset; known: {', '.join(known_presets(path))}")
    variant = variant or entry.default_variant or ""
    var = entry.variants.get(variant)
    return Preset(name=f"{base}:{variant}" if variant else base, model=entry.model,
                  engine={**entry.engine, **(var.engine if var else {})}, sampling=dict(entry.sampling),
                  max_tokens=entry.max_tokens, notes=tuple(n for n in (entry.notes, var.notes if var else "") if n))


def apply_preset(preset: Preset | None, *, model: str | None = None, engine_args: Mapping[str, Any] | None = None,
                 sampling: Mapping[str, Any] | None = None, max_tokens: int | None = None) -> Resolved:
    """Merge ``preset`` < explicit values.  ``None`` (or a missing key) means the flag was not given."""
    engine_args = dict(engine_args or {})
    given = {k: v for k, v in (sampling or {}).items() if v is not None}
    bad = sorted(set(given) - set(SAMPLING_FIELDS))
    if bad:
        raise CapaError(f"unknown sampling field(s) {bad}; known: {list(SAMPLING_FIELDS)}")
    if preset is None:
        return Resolved(model=model, engine=engine_args, sampling=given, max_tokens=max_tokens)
    over = []
    if model is not None and model != preset.model:
        over.append("model")
    over += [f"engine.{k}" for k, v in engine_args.items() if k in preset.engine and preset.engine[k] != v]
    over += [f"sampling.{k}" for k, v in given.items() if k in preset.sampling and preset.sampling[k] != v]
    if max_tokens is not None and preset.max_tokens is not None and max_tokens != preset.max_tokens:
        over.append("max_tokens")
    engine = {**preset.engine, **engine_args}
    merged = {**preset.sampling, **given}
    warnings = []
    if engine.get("enable_thinking") is True and merged.get("temperature") == 0:
        warnings.append("thinking mode under greedy decoding (temperature 0): the Qwen3 model card says never "
                        "greedy in thinking mode (repetition, endless thinking)")
    tokens = max_tokens if max_tokens is not None else preset.max_tokens
    mml = engine.get("max_model_len")
    if isinstance(mml, int) and tokens is not None and tokens >= mml:
        warnings.append(f"max_tokens {tokens} >= max_model_len {mml}: every reply is capped to the room the "
                        "prompt leaves")
    return Resolved(model=model if model is not None else preset.model, engine=engine, sampling=merged,
                    max_tokens=tokens, preset=preset.name,
                    overridden=tuple(over), warnings=tuple(warnings))
