"""On-disk cache of tokenized data, shared by trials and worker processes of a study.

Keyed by the tokenizer (its full serialised form), the data content, the fields, the task and
max length: any change to one of them is a miss. Writes go to a temporary file and are renamed
into place, so concurrent workers never read a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from autotune.inputs.examples import Examples
from autotune.paths import cache_root
from autotune.trial import TrialConfig
from autotune.worker import data as wdata

# Counters a test (or a curious user) can read: how the last lookups went in this process.
STATS = {"hits": 0, "misses": 0}
_FORMAT = 2  # bump when TokenizedData's layout changes


def default_cache_dir() -> Path:
    return cache_root() / "tokenized"


def _tokenizer_fingerprint(tokenizer: Any) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))
    extra = [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, type(tokenizer).__name__]
    return hashlib.sha256((text + repr(extra)).encode()).hexdigest()


def cache_key(tokenizer: Any, examples: Examples, c: TrialConfig) -> str:
    h = hashlib.sha256()
    h.update(
        json.dumps(
            # where the data lives is left out: its content is hashed below
            [_FORMAT, c.task, c.data.model_dump(mode="json", exclude={"source", "validation"}), examples.labels]
        ).encode()
    )
    h.update(_tokenizer_fingerprint(tokenizer).encode())
    for split in (examples.train, examples.validation):
        h.update(json.dumps(split, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]


def tokenize_cached(tokenizer: Any, examples: Examples, c: TrialConfig) -> wdata.TokenizedData:
    root = Path(c.cache_dir) if c.cache_dir else default_cache_dir()
    path = root / f"{cache_key(tokenizer, examples, c)}.pt"
    if path.is_file():
        try:
            loaded = torch.load(path, weights_only=False)
            if isinstance(loaded, wdata.TokenizedData):
                STATS["hits"] += 1
                return loaded
        except Exception:  # a corrupt or foreign file is a miss, never a failed trial
            pass
    STATS["misses"] += 1
    data = wdata.tokenize(
        tokenizer,
        examples,
        task=c.task,
        text_field=c.data.text_field,
        text_pair_field=c.data.text_pair_field,
        prompt_field=c.data.prompt_field,
        completion_field=c.data.completion_field,
        label_field=c.data.label_field,
        max_length=c.data.max_length,
    )
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            torch.save(data, fh)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory only costs speed
    return data
