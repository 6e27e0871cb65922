"""Every call autotune makes into Optuna's private API, in one place.

Optuna has no public way to fail one RUNNING trial of another process by number, nor a typed
error for a late ``tell``; these helpers wrap what we need so an Optuna upgrade that changes
them breaks here, loudly, and in ``tests/unit/test_optuna_private.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    reads on every ask (``Study.get_trials`` deep-copies each trial and skips the cache)."""
    return study._get_trials(deepcopy=False, states=tuple(states), use_cache=True)


def contains(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` (a param as stored, external form) lies in ``dist``: inside a range, one of
    the choices. Optuna has this check only as the private ``_contains`` on internal values."""
    return bool(dist._contains(dist.to_internal_repr(value)))
