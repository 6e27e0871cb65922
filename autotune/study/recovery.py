"""What happens to a trial whose worker died or stopped: the retry policy and the reaping.

An interrupted trial always runs again; a crashed one (or one whose worker died) up to
``MAX_CRASH_RETRIES`` times with the same params; OOM and divergence never (the point is
infeasible). A retry is an Optuna ``enqueue_trial`` of the same params that remembers, in user
attrs, which trial it re-runs and which attempt it is.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import optuna

from autotune import optuna_private
from autotune.storage import Store, claims
from autotune.trial import TrialState

RETRY_ATTR = "autotune_retry_of"  # user attr on a re-queued trial: the number it re-runs
ATTEMPT_ATTR = "autotune_attempt"
# user attrs a retry keeps: a confirmation run (study/confirm.py) re-runs as the same confirmation
CONFIRM_ATTR = "autotune_confirm_of"
SEED_ATTR = "autotune_train_seed"
MAX_CRASH_RETRIES = 2


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def should_retry(state: TrialState, params: dict[str, Any], user_attrs: dict[str, Any]) -> bool:
    if not params:
        return False
    return state == TrialState.INTERRUPTED or int(user_attrs.get(ATTEMPT_ATTR, 0)) < MAX_CRASH_RETRIES


def enqueue_retry(study: optuna.Study, number: int, params: dict[str, Any], user_attrs: dict[str, Any]) -> None:
    """Queue the same params again, remembering the original trial and the attempt count."""
    attrs = {
        RETRY_ATTR: int(user_attrs.get(RETRY_ATTR, number)),
        ATTEMPT_ATTR: int(user_attrs.get(ATTEMPT_ATTR, 0)) + 1,
        **{k: user_attrs[k] for k in (CONFIRM_ATTR, SEED_ATTR) if k in user_attrs},
    }
    study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)


def requeue_or_fail(
    study: optuna.Study,
    store: Store,
    name: str,
    trial: optuna.trial.FrozenTrial,
    state: TrialState,
    why: str,
) -> None:
    """A trial whose worker died: mark it (if still ours to mark) and queue its retry."""
    retry = should_retry(state, trial.params, trial.user_attrs)
    if store.fail_running(name, trial.number, state, why, requeued=retry) and retry:
        enqueue_retry(study, trial.number, trial.params, trial.user_attrs)


def requeue_after_finish(
    study: optuna.Study, store: Store, name: str, trial: optuna.Trial, params: dict[str, Any], state: TrialState
) -> None:
    """A trial this worker stopped (interrupted) or that crashed in-process: queue its retry."""
    if should_retry(state, params, trial.user_attrs):
        enqueue_retry(study, trial.number, params, trial.user_attrs)
        store.set_requeued(name, trial.number)


def on_stale_heartbeat(store: Store, name: str) -> Any:
    """Optuna's heartbeat callback: a trial whose worker stopped sending heartbeats (killed, or
    paused past the grace period) is failed and re-queued by whichever worker notices."""

    def callback(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        why = "worker stopped sending heartbeats (killed or paused)"
        requeue_or_fail(study, store, name, trial, TrialState.CRASHED, why)

    return callback


def reap_dead_local_workers(
    study: optuna.Study, store: Store, name: str, running: list[dict[str, Any]] | None = None
) -> int:
    """Trials left RUNNING by a process of this host that no longer exists are failed now (the
    heartbeat would only catch them after the grace period). ``running``: the rows, when the
    caller has just read them; without it, a full reap that also applies the heartbeats."""
    reaped = 0
    for row in store.running(name) if running is None else running:
        if not claims.worker_gone(row["worker"]):
            continue
        try:
            ft = optuna_private.frozen_trial(study, row["trial_number"])
            optuna_private.fail_if_running(study, ft)
        except (KeyError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # not in Optuna's tables yet, or another worker reaped it first
        requeue_or_fail(study, store, name, ft, TrialState.CRASHED, f"worker {row['worker']} died")
        reaped += 1
    if running is None:
        optuna.storages.fail_stale_trials(study)  # races between reapers are handled inside
    return reaped
