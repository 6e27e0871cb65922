"""Reads and writes of ``autotune_fits``: one row per `autotune train` fit. No torch, no optuna.

A fit is inserted as ``running`` before training starts, so a process killed mid-fit leaves a
row that says so; it is finished with its state (complete, interrupted, oom, ...) afterwards.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import insert, select, update

from autotune.errors import StorageError
from autotune.storage.retry import retried
from autotune.storage.rows import result_values
from autotune.storage.store import Store
from autotune.storage.tables import fits, trials
from autotune.trial import TrialResult, TrialState


@retried
def trial_row(store: Store, name: str, number: int) -> dict[str, Any]:
    """A stored trial, or one line naming what exists."""
    with store._tx(write=False) as conn:
        row = (
            conn.execute(select(trials).where(trials.c.study_name == name, trials.c.trial_number == number))
            .mappings()
            .first()
        )
    if row is None:
        raise StorageError(f"study '{name}' has no trial {number}")
    return dict(row)


@retried
def top_complete(store: Store, name: str, k: int) -> list[dict[str, Any]]:
    """The ``k`` complete trials with the lowest score (ties: the earlier trial first)."""
    with store._tx(write=False) as conn:
        rows = conn.execute(
            select(trials)
            .where(
                trials.c.study_name == name,
                trials.c.state == TrialState.COMPLETE.value,
                trials.c.score.is_not(None),
            )
            .order_by(trials.c.score, trials.c.trial_number)
            .limit(k)
        ).mappings()
        return [dict(r) for r in rows]


@retried
def fit_started(store: Store, name: str, number: int, params: dict[str, Any], train_examples: int) -> int:
    with store._tx(write=True) as conn:
        res = conn.execute(
            insert(fits).values(
                study_name=name,
                trial_number=number,
                train_examples=train_examples,
                state=TrialState.RUNNING.value,
                params=params,
                created_at=dt.datetime.now(dt.UTC),
            )
        )
        key = res.inserted_primary_key
        assert key is not None
        return int(key[0])


@retried
def fit_finished(store: Store, fit_id: int, r: TrialResult) -> None:
    with store._tx(write=True) as conn:
        conn.execute(update(fits).where(fits.c.id == fit_id).values(**result_values(r)))


@retried
def fit_saved(store: Store, fit_id: int, output_path: str) -> None:
    with store._tx(write=True) as conn:
        conn.execute(update(fits).where(fits.c.id == fit_id).values(output_path=output_path))


@retried
def fit_rows(store: Store, name: str) -> list[dict[str, Any]]:
    with store._tx(write=False) as conn:
        rows = conn.execute(select(fits).where(fits.c.study_name == name).order_by(fits.c.id)).mappings()
        return [dict(r) for r in rows]
