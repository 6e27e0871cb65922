"""What the run loop (driver.py) does about a database that went away in the middle of a call:
the study lock it held is gone with its connection, and a tell that was cut off is told again
(storage/retry.py waits for the database; this is the Optuna side). Light: optuna only."""

from __future__ import annotations

import contextlib

import optuna

from autotune import optuna_private
from autotune.storage import retry


def close_quietly(lock: contextlib.ExitStack) -> None:
    """Release the study lock. A PostgreSQL lock lives in a transaction, so a connection that the
    database dropped has released it already: that is not an error."""
    try:
        lock.close()
    except Exception as err:
        if not retry.is_transient(err):
            raise


def tell_again(study: optuna.Study, told: tuple[int, optuna.trial.TrialState, float | None] | None) -> None:
    """What the objective told Optuna, told again (an earlier try that did land is refused as a
    late tell, which is fine: it is told once)."""
    assert told is not None
    number, state, value = told
    try:
        if state == optuna.trial.TrialState.COMPLETE:
            study.tell(number, value)
        else:
            study.tell(number, state=state)
    except Exception as err:
        if not optuna_private.is_late_tell(err):
            raise
