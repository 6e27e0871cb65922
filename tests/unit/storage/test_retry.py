"""Transient database errors are waited out (storage/retry.py); a retried write lands once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from autotune.errors import DatabaseUnavailable, StorageError
from autotune.storage import Store, retry
from autotune.trial import TrialResult, TrialState

TRANSIENT = [
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused',
    "FATAL:  the database system is shutting down",
    "FATAL:  the database system is starting up",
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally",
    "consuming input failed: server closed the connection unexpectedly",
    "database is locked",
]
NOT_TRANSIENT = [
    'FATAL:  password authentication failed for user "postgres"',
    'FATAL:  database "nope" does not exist',
    "database or disk is full",
    'relation "autotune_trials" does not exist',
    "no such table: autotune_trials",
]


def _op(message: str) -> OperationalError:
    return OperationalError("SELECT 1", {}, sqlite3.OperationalError(message))


@pytest.mark.parametrize("message", TRANSIENT)
def test_a_server_away_for_now_is_transient(message: str) -> None:
    assert retry.is_transient(_op(message))
    wrapped = StorageError(f"database sqlite:///x.db: {message}")  # Store._tx's translation keeps the text
    wrapped.__cause__ = _op(message)
    assert retry.is_transient(wrapped)


@pytest.mark.parametrize("message", NOT_TRANSIENT)
def test_a_wrong_url_or_a_full_disk_is_not(message: str) -> None:
    assert not retry.is_transient(_op(message))


def test_a_call_waits_for_the_database_then_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", sleeps.append)
    tries = iter([_op("database is locked"), _op("the database system is starting up"), None])

    def flaky() -> str:
        err = next(tries)
        if err is not None:
            raise err
        return "done"

    assert retry.call(flaky, "a test") == "done"
    assert sleeps == [retry.FIRST_WAIT_S, 2 * retry.FIRST_WAIT_S]  # backoff
    assert retry.since_outage_s() < 5  # the process knows the database has just come back


def test_past_the_limit_it_gives_up_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(retry.ENV_VAR, "0")
    with pytest.raises(DatabaseUnavailable, match=r"^db is unreachable: gave up after 0 s \(database is locked\)"):
        retry.call(lambda: (_ for _ in ()).throw(_op("database is locked")), "a test", "db")
    with pytest.raises(ValueError):  # anything else is not waited for
        retry.call(lambda: (_ for _ in ()).throw(ValueError("a bug")), "a test")


def _result(wall: float) -> TrialResult:
    return TrialResult(state=TrialState.COMPLETE, score=1.0, val_loss=0.9, train_loss=1.0, wall_time_s=wall,
                       examples_seen=64)  # fmt: skip


def test_a_result_whose_acknowledgement_was_lost_is_written_once(tmp_path: Path) -> None:
    """A retried write (storage/retry.retried) runs the method again after a commit the client
    never heard back from: the second try must see its own row, not a reaper's."""
    store = Store.open(f"sqlite:///{tmp_path / 'r.db'}", create=True)
    store.save_study("s", "name: s\n", None)
    store.trial_started("s", 0, {"rank": 4}, "host:1")
    store.trial_started("s", 0, {"rank": 4}, "host:1")  # the retry of an insert that did land
    with pytest.raises(IntegrityError):
        store.trial_started("s", 0, {"rank": 4}, "host:2")  # another worker's: a real conflict
    assert store.trial_finished("s", 0, _result(3.25))
    assert store.trial_finished("s", 0, _result(3.25))  # the retry: our own result, told once
    assert [r["state"] for r in store.trials("s")] == ["complete"]
    store.trial_started("s", 1, {"rank": 8}, "host:1")
    assert store.fail_running("s", 1, TrialState.CRASHED, "worker died", requeued=True)
    assert not store.trial_finished("s", 1, _result(2.0))  # a reaper's row: the late result is dropped
    store.close()
