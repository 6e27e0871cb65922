from __future__ import annotations

import pytest

from autotune.errors import StorageError
from autotune.storage import Store
from autotune.storage.store import naive_utc
from autotune.trial import EvalPoint, TrialResult, TrialState


def _result(score: float, state: TrialState = TrialState.COMPLETE) -> TrialResult:
    return TrialResult(
        state=state,
        val_loss=score - 0.1,
        train_loss=1.0,
        score=score,
        wall_time_s=2.5,
        train_time_s=2.0,
        eval_time_s=0.3,
        samples_per_s=100.0,
        tokens_per_s=2000.0,
        peak_memory_mb=12.5,
        memory_kind="cpu_rss_above_baseline",
        device="cpu",
        precision="fp32",
        optimizer_steps=8,
        examples_seen=128,
        curve=[EvalPoint(1, 4, 64, score + 0.5, 1.2, score + 0.62), EvalPoint(2, 8, 128, score - 0.1, 1.0, score)],
        versions={"torch": "x"},
    )


def test_round_trip(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", ["a", "b"])
    row = store.require_study("s")
    assert row.spec_yaml == "name: s\n"
    assert row.labels == ["a", "b"]
    for n, sc in enumerate([3.0, 2.0, 2.5]):
        store.trial_started("s", n, {"rank": 8, "batch_size": 16, "learning_rate": 1e-3}, "host:1")
        assert store.trial_finished("s", n, _result(sc))
    best = store.best("s")
    assert best is not None
    assert best["trial_number"] == 1
    assert best["score"] == 2.0
    rows = store.trials("s")
    assert [r["state"] for r in rows] == ["complete"] * 3
    assert rows[0]["rank"] == 8
    assert rows[0]["peak_memory_mb"] == 12.5
    assert rows[0]["versions"] == {"torch": "x"}
    curve = store.curve("s", 1)
    assert [(p["eval_index"], p["examples_seen"]) for p in curve] == [(1, 64), (2, 128)]
    assert store.count_finished("s") == 3
    store.close()


def test_a_study_was_updated_when_its_last_trial_ended(any_db_url: str) -> None:
    """The study's row is not written per trial (every worker would update that one row); its
    ``updated_at`` is the latest of the row's write and its trials' starts and ends."""
    import time

    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", None)
    created = store.require_study("s").updated_at
    time.sleep(0.05)
    store.trial_started("s", 0, {"rank": 4}, "host:1")
    started = store.require_study("s").updated_at
    time.sleep(0.05)
    assert store.trial_finished("s", 0, _result(1.0))
    finished = store.require_study("s").updated_at
    assert created.tzinfo is None and created < started < finished
    assert finished == naive_utc(max(r["finished_at"] for r in store.trials("s")))
    store.close()


def test_result_of_a_reaped_trial_is_dropped(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", None)
    store.trial_started("s", 0, {"rank": 4}, "host:1")
    assert store.fail_running("s", 0, TrialState.CRASHED, "worker died", requeued=True)
    assert not store.trial_finished("s", 0, _result(1.0))  # the paused worker woke up too late
    assert store.trials("s")[0]["state"] == "crashed"
    assert store.count_finished("s") == 0  # re-queued: its retry will count


def test_counting_rules(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", None)
    states = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.OOM, TrialState.DIVERGED, TrialState.INTERRUPTED]
    for n, st in enumerate(states):
        store.trial_started("s", n, {"rank": 4}, "h:1")
        store.trial_finished("s", n, _result(1.0, st))
    store.set_requeued("s", 4)
    store.trial_started("s", 5, {"rank": 4}, "h:1")  # still running
    assert store.count_finished("s") == 4
    assert [r["trial_number"] for r in store.running("s")] == [5]


def test_nan_and_inf_are_stored_as_null(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", None)
    store.trial_started("s", 0, {"rank": 4}, "h:1")
    r = _result(float("nan"), TrialState.DIVERGED)
    r.train_loss = float("inf")
    store.trial_finished("s", 0, r)
    row = store.trials("s")[0]
    assert row["score"] is None
    assert row["train_loss"] is None
    assert row["state"] == "diverged"


def test_unknown_study_and_missing_database(any_db_url: str, tmp_path) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("known", "name: known\n", None)
    with pytest.raises(StorageError, match=r"no study named .other.*known"):
        store.require_study("other")
    with pytest.raises(StorageError, match="no database at"):
        Store.open(f"sqlite:///{tmp_path / 'absent.db'}", create=False)
