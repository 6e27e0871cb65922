"""What a ``TrialResult`` writes into a row: the columns a trial (store.py) and an `autotune train`
fit (fits.py) share, written once for both. No torch, no optuna."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from autotune.trial import TrialResult


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def result_values(r: TrialResult) -> dict[str, Any]:
    """The columns a trial's row (``autotune_trials``) and a fit's row (``autotune_fits``, written
    by storage/fits.py) both take from a ``TrialResult``: state, losses (a non-finite one stored as
    NULL), times, memory, device, versions, error, and the time it finished."""
    return dict(
        state=r.state.value,
        val_loss=finite(r.val_loss),
        train_loss=finite(r.train_loss),
        score=finite(r.score),
        accuracy=r.accuracy,
        wall_time_s=r.wall_time_s,
        train_time_s=r.train_time_s,
        eval_time_s=r.eval_time_s,
        peak_memory_mb=r.peak_memory_mb,
        memory_kind=r.memory_kind,
        device=r.device,
        versions=r.versions,
        error=r.error,
        finished_at=now(),
    )
