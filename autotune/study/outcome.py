"""How a trial's end is stored and told to Optuna: its result (``conclude``), a duplicate of an
earlier trial (``duplicate``), an infeasible point (``infeasible``). Failures are data: OOM,
divergence and timeouts become constraints the sampler learns from; interruptions and crashes
are re-queued; a pruned trial is Optuna's ``TrialPruned``. Split from study/driver.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import optuna

from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.study import recovery
from autotune.study.progress import Progress
from autotune.trial import TrialResult, TrialState

T = TypeVar("T")

INFEASIBLE = (TrialState.OOM, TrialState.DIVERGED, TrialState.TIMEOUT)


class TrialFailed(Exception):
    """Ends an objective call as an Optuna FAIL (caught by optimize)."""


class Loop(Protocol):
    """What of the driver's loop (``driver._Loop``) a trial's end needs."""

    spec: StudySpec
    store: Store
    name: str
    study: optuna.Study
    progress: Progress

    def db(self, fn: Callable[[], T], what: str) -> T: ...


def duplicate(loop: Loop, trial: optuna.Trial, twin: dict[str, Any]) -> float:
    """A proposal identical to trial ``twin``: stored as its duplicate (not trained, not counted)
    and told to Optuna as that trial's outcome, so the sampler learns the point is known."""
    loop.progress.trial_finished(trial.number, TrialState.DUPLICATE, twin["score"])
    state = TrialState(twin["state"])
    if state == TrialState.COMPLETE and twin["score"] is not None:
        return float(twin["score"])
    if state == TrialState.PRUNED:
        raise optuna.TrialPruned(f"duplicate of pruned trial {twin['trial_number']}")
    why = f"duplicate of trial {twin['trial_number']} ({state.value})"
    if state in INFEASIBLE:
        return infeasible(loop, trial, why)
    raise TrialFailed(why)


def conclude(loop: Loop, trial: optuna.Trial, params: dict[str, Any], result: TrialResult) -> float:
    """Store the result and translate its state for Optuna."""
    state, store, name, progress = result.state, loop.store, loop.name, loop.progress
    if not store.trial_finished(name, trial.number, result):
        # This worker was paused past the grace period: another worker failed the trial and
        # queued its retry meanwhile. The stale result is dropped, never stored twice.
        progress.trial_finished(trial.number, state, None)
        raise TrialFailed("result dropped: the trial was failed by heartbeat meanwhile")
    if state in (TrialState.INTERRUPTED, TrialState.CRASHED):
        if not result.spec_error:  # a property of the spec fails every retry the same way
            loop.db(lambda: recovery.requeue_after_finish(loop.study, store, name, trial, params, state), "the retry")
        progress.trial_finished(trial.number, state, None)
        raise TrialFailed(result.error or state.value)
    progress.trial_finished(trial.number, state, result.score)
    sampler = loop.spec.sampler.name
    if state == TrialState.COMPLETE:
        assert result.score is not None
        if sampler == "gp":
            # GP models the constraint itself and wants it on every trial; TPE reads a missing
            # constraint as feasible, and the write costs a storage round trip per trial.
            loop.db(lambda: trial.set_constraint("failed", 0.0), "the constraint")
        return result.score
    if state == TrialState.PRUNED:
        raise optuna.TrialPruned(result.error or "pruned")
    return infeasible(  # OOM, diverged, timeout
        loop, trial, result.error or state.value
    )


def infeasible(loop: Loop, trial: optuna.Trial, why: str) -> float:
    """OOM, diverged, timeout (or a duplicate of one): an infeasible point. Samplers that read
    constraints (TPE, GP) learn to avoid it; CMA-ES cannot use an infinite value, so it sees a
    plain failure instead."""
    if loop.spec.sampler.name == "cmaes":
        raise TrialFailed(why)
    loop.db(lambda: trial.set_constraint("failed", 1.0), "the constraint")
    return math.inf
