"""Every call autotune makes into Optuna's private API, in one place.

Optuna has no public way to fail one RUNNING trial of another process by number, nor a typed
error for a late ``tell``; these helpers wrap what we need so an Optuna upgrade that changes
them breaks here, loudly, and in ``tests/unit/test_optuna_private.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

# Optuna's message when a trial that is already finished (here: failed by a reaper while its
# worker was paused) is told again. optuna/study/_tell.py raises a plain ValueError with it.
_LATE_TELL = "Cannot tell"


def frozen_trial(study: optuna.Study, number: int) -> FrozenTrial:
    """The stored trial ``number`` of ``study`` (any state)."""
    tid = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)
    return study._storage.get_trial(tid)


def fail_if_running(study: optuna.Study, trial: FrozenTrial) -> None:
    """Mark a trial FAIL in Optuna's tables if it is still RUNNING there."""
    if trial.state == optuna.trial.TrialState.RUNNING:
        study._storage.set_trial_state_values(trial._trial_id, state=optuna.trial.TrialState.FAIL)


def is_late_tell(err: BaseException) -> bool:
    """True when Optuna refused to tell a trial that another worker had already finished."""
    return isinstance(err, optuna.exceptions.UpdateFinishedTrialError) or (
        isinstance(err, ValueError) and _LATE_TELL in str(err)
    )


def trials_cached(study: optuna.Study, states: Sequence[TrialState]) -> list[FrozenTrial]:
    """The study's trials in ``states``, without copies and from the sampler's cache: what a sampler
    reads on every ask (``Study.get_trials`` deep-copies each trial and skips the cache).

    Optuna syncs its trial cache with the database twice per ask: once to pop a waiting trial,
    and again at the sampler's first read ("Sync storage once every trial", ``Study.ask``). The
    second read comes milliseconds after the first, with only this process's new trial between
    them, which ``_CachedStorage`` already holds; so the sampler's view is filled from that cache.
    On PostgreSQL each sync is six statements (the trials and five tables of their attributes;
    ``bench/sampler_sync_cost.py``)."""
    local = study._thread_local
    storage = study._storage
    if local.cached_all_trials is None and isinstance(storage, optuna.storages._CachedStorage):
        with storage._lock:
            cache = storage._studies.get(study._study_id)
            if cache is not None:  # None: no sync in this process yet; Optuna's read below makes one
                local.cached_all_trials = sorted(cache.trials.values(), key=lambda t: t.number)
    return study._get_trials(deepcopy=False, states=tuple(states), use_cache=True)


def contains(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` (a param as stored, external form) lies in ``dist``: inside a range, one of
    the choices. Optuna has this check only as the private ``_contains`` on internal values."""
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):  # not one of the choices, or not a number at all
        return False


def no_stale_trials_after_outage(
    storage: optuna.storages.RDBStorage, grace_s: float, since_outage_s: Callable[[], float]
) -> None:
    """For ``grace_s`` after this process saw the database come back (``since_outage_s``, from
    storage/retry.py), Optuna's
    stale-trial check finds nothing: no worker could send a heartbeat while the database was away,
    so a trial still training would otherwise be failed and re-run as if its worker had died.
    Optuna has no public hook between its heartbeat check and the failing of the trials it finds."""
    find = storage._get_stale_trial_ids

    def stale_ids(study_id: int) -> list[int]:
        return [] if since_outage_s() < grace_s else find(study_id)

    storage._get_stale_trial_ids = stale_ids  # type: ignore[method-assign]


def unmask(err: BaseException) -> BaseException:
    """The error behind Optuna's ``AssertionError("Should not reach.")``: when its own tell fails
    (the database away or full), ``optimize``'s bookkeeping asserts in a ``finally`` and the real
    error is only the assertion's context (optuna/study/_optimize.py ``_run_trial``)."""
    if isinstance(err, AssertionError) and "Should not reach" in str(err) and err.__context__ is not None:
        return err.__context__
    return err


def is_storage_error(err: BaseException) -> bool:
    """A database error inside Optuna's RDBStorage (it wraps SQLAlchemy's as StorageInternalError)."""
    return isinstance(err, optuna.exceptions.StorageInternalError)
