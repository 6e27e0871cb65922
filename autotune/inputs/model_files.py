"""The model, checked before any trial and without loading weights or importing torch.

``transformers.AutoConfig`` would do, but importing transformers imports torch (3 s here,
measured), and ``autotune validate`` must stay instant. So this reads what AutoConfig reads: the
model directory's ``config.json`` (its ``model_type`` and position limit) and the files a
tokenizer is loaded from. ``autotune run`` adds the full check with transformers itself
(``autotune.worker.preflight``), in the process that imports torch anyway.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from autotune.errors import SpecError
from autotune.spec import StudySpec
from autotune.spec.packaged import resolve_model

TINY_POSITIONS = 2048  # autotune.worker.models.build_tiny's max_position_embeddings
# Where transformers configs keep the longest sequence the position embeddings take: BERT/llama
# name it max_position_embeddings, GPT-2 n_positions, MPT max_seq_len.
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len")
# A tokenizer loads from one of these (transformers' tokenization_utils file names).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
)


@dataclass(frozen=True)
class ModelFacts:
    name: str  # resolved: a directory, a hub id, or "tiny"
    model_type: str
    position_limit: int | None
    local: bool


def _read_config(path: Path, name: str) -> dict[str, Any]:
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SpecError(f"model.name: {name}: config.json cannot be read ({err.__class__.__name__})") from None
    if not isinstance(cfg, dict) or not cfg.get("model_type"):
        raise SpecError(f"model.name: {name}: config.json names no model_type, so transformers cannot load it")
    return cfg


def _position_limit(cfg: dict[str, Any]) -> int | None:
    for key in _POSITION_KEYS:
        value = cfg.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _hub_config(name: str, revision: str | None) -> dict[str, Any]:
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(name, "config.json", revision=revision)
    if isinstance(cached, str):
        return _read_config(Path(cached), name)
    if not _hub_reachable():
        raise SpecError(
            f"model.name: '{name}' is not a local directory, not in the Hugging Face cache, and the hub "
            "cannot be reached from here (offline)"
        )
    from huggingface_hub import hf_hub_download

    try:
        return _read_config(Path(hf_hub_download(name, "config.json", revision=revision)), name)
    except Exception as err:  # huggingface_hub raises many types: each is one user line
        raise SpecError(
            f"model.name: '{name}': cannot fetch config.json from the hub ({err.__class__.__name__})"
        ) from None


def check_model(spec: StudySpec) -> ModelFacts:
    """Config and tokenizer present, position limit above data.max_length; SpecError otherwise."""
    name = resolve_model(spec.model.name)
    if name == "tiny":
        facts = ModelFacts(name, "tiny", TINY_POSITIONS, True)
    else:
        path = Path(name).expanduser()
        looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1
        if path.is_dir():
            cfg_path = path / "config.json"
            if not cfg_path.is_file():
                raise SpecError(f"model.name: {name}: no config.json in this directory, so it holds no model")
            cfg = _read_config(cfg_path, name)
            if not any((path / f).is_file() for f in _TOKENIZER_FILES):
                raise SpecError(
                    f"model.name: {name}: no tokenizer files ({', '.join(_TOKENIZER_FILES[:3])}, ...) in this directory"
                )
            facts = ModelFacts(name, str(cfg["model_type"]), _position_limit(cfg), True)
        elif looks_like_path:
            raise SpecError(f"model.name: {name}: no such model directory")
        else:
            cfg = _hub_config(name, spec.model.revision)
            facts = ModelFacts(name, str(cfg["model_type"]), _position_limit(cfg), False)
    limit = facts.position_limit
    if limit is not None and spec.data.max_length > limit:
        raise SpecError(
            f"data.max_length: {spec.data.max_length} is above the model's position limit of {limit} tokens "
            f"(max_position_embeddings in its config.json); set data.max_length to {limit} or less"
        )
    return facts
