"""Reads and writes for the plan-before-spending columns (migrations 0003_plan, 0004_calibration):
the study's data fingerprint and calibration probe, and each trial's predicted peak memory and
time. No torch, no optuna."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select, update

from autotune.storage.retry import retried
from autotune.storage.store import Store
from autotune.storage.tables import studies, trials
from autotune.trial import TrialState


@retried
def load_fingerprint(store: Store, name: str) -> dict[str, Any] | None:
    with store._tx(write=False) as conn:
        value = conn.execute(select(studies.c.data_fingerprint).where(studies.c.study_name == name)).scalar()
    return dict(value) if value else None


@retried
def save_fingerprint(store: Store, name: str, fingerprint: dict[str, Any]) -> None:
    with store._tx(write=True) as conn:
        conn.execute(update(studies).where(studies.c.study_name == name).values(data_fingerprint=fingerprint))


@retried
def load_calibration(store: Store, name: str, key: str) -> dict[str, Any] | None:
    """The calibration probe this study ran on a device like this one (``key``), if any."""
    with store._tx(write=False) as conn:
        value = conn.execute(select(studies.c.calibration).where(studies.c.study_name == name)).scalar()
    return dict(value)[key] if value and key in value else None


@retried
def save_calibration(store: Store, name: str, key: str, calibration: dict[str, Any]) -> None:
    """Kept per device key: a study whose workers run on two kinds of GPU holds one of each."""
    with store._tx(write=True) as conn:
        value = conn.execute(select(studies.c.calibration).where(studies.c.study_name == name)).scalar()
        merged = {**(dict(value) if value else {}), key: calibration}
        conn.execute(update(studies).where(studies.c.study_name == name).values(calibration=merged))


@retried
def save_prediction(store: Store, name: str, number: int, memory_mb: float | None, time_s: float | None) -> None:
    with store._tx(write=True) as conn:
        conn.execute(
            update(trials)
            .where(trials.c.study_name == name, trials.c.trial_number == number)
            .values(predicted_memory_mb=memory_mb, predicted_time_s=time_s)
        )


@retried
def mark_not_run(store: Store, name: str, number: int) -> None:
    """This trial was stopped by its prediction before any training: it does not count."""
    with store._tx(write=True) as conn:
        conn.execute(
            update(trials).where(trials.c.study_name == name, trials.c.trial_number == number).values(not_run=True)
        )


@retried
def most_common_error(store: Store, name: str) -> tuple[str, int] | None:
    """The first line of the error most trials of the study ended with, and how many."""
    with store._tx(write=False) as conn:
        rows = conn.execute(
            select(trials.c.error).where(
                trials.c.study_name == name,
                trials.c.state != TrialState.COMPLETE.value,
                trials.c.error.is_not(None),
            )
        ).scalars()
        lines = Counter(str(e).strip().splitlines()[0] for e in rows if str(e).strip())
    return lines.most_common(1)[0] if lines else None


@retried
def count_complete(store: Store, name: str) -> int:
    with store._tx(write=False) as conn:
        rows = conn.execute(
            select(trials.c.trial_number).where(
                trials.c.study_name == name, trials.c.state == TrialState.COMPLETE.value
            )
        )
        return len(rows.all())
