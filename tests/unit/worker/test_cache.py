"""The on-disk tokenization cache: a hit on the second trial, a miss when max length changes."""

from __future__ import annotations

from pathlib import Path

import torch

from autotune.spec import parse_spec
from autotune.trial import trial_config
from autotune.worker import cache, state
from tests.conftest import tiny_spec

PARAMS = {"rank": 4, "batch_size": 16, "learning_rate": 1e-3}


def _tokenized(tmp_path: Path, max_length: int) -> object:
    config = trial_config(parse_spec(tiny_spec(data={"max_length": max_length})), PARAMS, cache_dir=str(tmp_path))
    state.DATA.clear()  # a new worker process: only the disk cache can help
    return state.prepare_data(config).data


def test_hit_on_second_trial_and_miss_when_max_length_changes(tmp_path: Path) -> None:
    before = dict(cache.STATS)
    first = _tokenized(tmp_path, 24)
    second = _tokenized(tmp_path, 24)
    third = _tokenized(tmp_path, 20)
    assert cache.STATS["misses"] - before["misses"] == 2  # first trial, then the new max length
    assert cache.STATS["hits"] - before["hits"] == 1  # the second trial
    assert torch.equal(first.train.input_ids, second.train.input_ids)  # type: ignore[attr-defined]
    assert third.train.input_ids.shape[1] <= 20  # type: ignore[attr-defined]
    assert len(list(tmp_path.glob("*.pt"))) == 2


def test_a_corrupt_entry_is_a_miss_not_a_failure(tmp_path: Path) -> None:
    _tokenized(tmp_path, 24)
    for f in tmp_path.glob("*.pt"):
        f.write_bytes(b"garbage")
    before = cache.STATS["misses"]
    _tokenized(tmp_path, 24)
    assert cache.STATS["misses"] == before + 1
