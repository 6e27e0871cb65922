"""The best at the edge of the searched range is named, with the bound to widen (issue 10)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.search.bounds import find_edges, widen
from autotune.spec import StudySpec, parse_spec
from autotune.storage import Store
from autotune.trial import TrialResult, TrialState
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def _spec(**search: object) -> StudySpec:
    base = {
        "rank": {"choices": [4, 8, 16, 32]},
        "batch_size": {"choices": [16, 32, 64]},
        "learning_rate": {"low": 3e-4, "high": 3e-3, "log": True},
    }
    return parse_spec(tiny_spec(search={**base, **search}))


def test_the_held_out_case_names_both_bounds() -> None:
    # issue 10's held-out task: best at rank 32, batch 16, lr at the top of 3e-4..3e-3
    edges = {e.param: e for e in find_edges({"rank": 32, "batch_size": 16, "learning_rate": 2.9e-3}, _spec())}
    assert set(edges) == {"rank", "batch_size", "learning_rate"}
    assert (edges["rank"].side, edges["rank"].widen_to) == ("high", 64)
    assert (edges["batch_size"].side, edges["batch_size"].widen_to) == ("low", 8)
    lr = edges["learning_rate"]
    assert lr.side == "high" and lr.bound == 3e-3 and lr.widen_to == pytest.approx(3e-3 * 10**0.5)
    assert "widen search.learning_rate to 0.00948" in lr.message()


def test_an_inner_best_says_nothing() -> None:
    assert find_edges({"rank": 8, "batch_size": 32, "learning_rate": 1e-3}, _spec()) == []
    # the outer tenth of a log range counts; just inside it does not
    assert find_edges({"rank": 8, "batch_size": 32, "learning_rate": 3.5e-4}, _spec())[0].side == "low"
    assert find_edges({"rank": 8, "batch_size": 32, "learning_rate": 4.0e-4}, _spec()) == []


def test_hard_limits_stop_the_hint() -> None:
    spec = _spec(rank={"choices": [1, 2]}, learning_rate={"low": 1e-2, "high": 0.1, "log": True})
    # rank 1 and lr 0.1 cannot be widened further: no hint; a linear range widens by half its span
    assert find_edges({"rank": 1, "batch_size": 32, "learning_rate": 0.1}, spec) == []
    spec = _spec(lora_dropout={"low": 0.0, "high": 0.2})
    (e,) = find_edges({"rank": 8, "batch_size": 32, "learning_rate": 1e-3, "lora_dropout": 0.19}, spec)
    assert (e.param, e.widen_to) == ("lora_dropout", pytest.approx(0.3))


def test_best_prints_the_edge(cli: CliFn, db_url: str, tmp_path: Path) -> None:
    spec = _spec()
    store = Store.open(db_url, create=True)
    store.save_study("t", spec.to_yaml(), None)
    for n, (lr, score) in enumerate([(1e-3, 2.0), (2.95e-3, 1.5)]):
        store.trial_started("t", n, {"rank": 8, "batch_size": 32, "learning_rate": lr}, "host:1")
        store.trial_finished("t", n, TrialResult(state=TrialState.COMPLETE, score=score, val_loss=score))
    store.close()
    code, out, err = cli("best", "t", "--storage", db_url)
    assert code == 0, err
    assert "note: best learning_rate is at the highest end" in out
    code, out, _ = cli("best", "t", "--storage", db_url, "--format", "json")
    assert [e.split(":")[0] for e in json.loads(out)["edges"]] == [
        "best learning_rate is at the highest end of the searched range (0.003)"
    ]


def test_widen_moves_the_named_bounds() -> None:
    spec = _spec()
    edges = find_edges({"rank": 32, "batch_size": 16, "learning_rate": 2.9e-3}, spec)
    wide = widen(spec, edges)
    assert wide.search.rank.choices == [4, 8, 16, 32, 64]
    assert wide.search.batch_size.choices == [8, 16, 32, 64]
    assert wide.search.learning_rate.low == 3e-4
    assert wide.search.learning_rate.high == pytest.approx(3e-3 * 10**0.5)
