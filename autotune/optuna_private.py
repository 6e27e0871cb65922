"""Every call autotune makes into Optuna's private API, in one place.

Optuna has no public way to fail one RUNNING trial of another process by number, nor a typed
error for a late ``tell``; these helpers wrap what we need so an Optuna upgrade that changes
them breaks here, loudly, and in ``tests/unit/test_optuna_private.py``.
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
import time
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
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
    # the class's method: serve_sampling_from_last_sync may stand in for the instance's
    return optuna.Study._get_trials(study, deepcopy=False, states=tuple(states), use_cache=True)


def read_own_trials_locally(study: optuna.Study) -> None:
    """Optuna reads the whole trial back from the database twice per trial of this process: in
    ``Trial.__init__``, right after the ask created it, and at the start of the tell, right after
    the objective returned. Each read is six statements on PostgreSQL (the trial and five tables of
    its attributes; ``bench/own_trial_reads_cost.py``). Both are served here from what this process
    already holds: the new trial as ``_CachedStorage`` cached it when it was inserted, and at the
    tell the objective's own ``Trial`` view (its params, reports and user attributes, all written
    through it).

    Each local answer is given once per trial (the tell that follows a failed tell reads the
    database again), and only for a trial created here (a waiting trial popped from the queue is
    read as before: its attributes were written by another process). What the local view cannot
    know, a reaper having failed the trial meanwhile, the tell's write still refuses: Optuna's
    ``set_trial_state_values`` checks the stored state under a row lock and raises
    ``UpdateFinishedTrialError`` (``is_late_tell``)."""
    storage = study._storage
    if not isinstance(storage, optuna.storages._CachedStorage):
        return
    create, read = storage.create_new_trial, storage.get_trial
    lock = threading.Lock()
    created: set[int] = set()
    live: dict[int, optuna.Trial] = {}

    def create_new_trial(study_id: int, template_trial: FrozenTrial | None = None) -> int:
        trial_id = create(study_id, template_trial)
        if template_trial is None:  # a template's attributes come from elsewhere: read them back
            with lock:
                created.add(trial_id)
        return trial_id

    def get_trial(trial_id: int) -> FrozenTrial:
        with lock:
            fresh = trial_id in created
            created.discard(trial_id)
            own = live.pop(trial_id, None)
        if own is not None:
            return copy.deepcopy(own._cached_frozen_trial)
        if fresh:
            with storage._lock:
                where = storage._trial_id_to_study_id_and_number.get(trial_id)
                cached = None if where is None else storage._studies[where[0]].trials.get(where[1])
            if cached is not None:
                return copy.deepcopy(cached)
        return read(trial_id)

    def hold(trial: optuna.Trial) -> None:
        with lock:
            live[trial._trial_id] = trial

    storage.create_new_trial = create_new_trial  # type: ignore[method-assign]
    storage.get_trial = get_trial  # type: ignore[method-assign]
    study._autotune_hold = hold  # type: ignore[attr-defined]


def tell_from_own_view(trial: optuna.Trial) -> None:
    """The coming tell of ``trial`` reads it from ``trial`` itself (``read_own_trials_locally``);
    a no-op on a study without it. The objective calls it as it ends (``driver._Loop.objective``),
    not before: reads during the trial must see the database (the grid sampler's ``grid_id``,
    written around the Trial, is read back through ``get_trial``)."""
    hold = getattr(trial.study, "_autotune_hold", None)
    if hold is not None:
        hold(trial)


@contextlib.contextmanager
def sampling_from_last_sync(study: optuna.Study) -> Iterator[None]:
    """While this thread draws a trial's params, every read of the study's trials (the sampler's,
    TPE's own with ``constant_liar``, which asks Optuna for a fresh database sync each time) is
    served from the sync Optuna's ask made milliseconds before, as ``trials_cached`` does for ours.
    On PostgreSQL such a sync is seven statements (``bench/own_trial_reads_cost.py``). Only the
    params are drawn in here: the pruner's reads during training still see the database."""
    local = study._thread_local
    before = getattr(local, "autotune_sampling", False)
    local.autotune_sampling = True
    try:
        yield
    finally:
        local.autotune_sampling = before


def serve_sampling_from_last_sync(study: optuna.Study) -> None:
    """Install what ``sampling_from_last_sync`` switches on, once per study object."""
    real = study._get_trials

    def _get_trials(
        deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        if not getattr(study._thread_local, "autotune_sampling", False):
            return real(deepcopy=deepcopy, states=states, use_cache=use_cache)
        trials = trials_cached(study, [s for s in TrialState if states is None or s in states])
        return copy.deepcopy(trials) if deepcopy else trials

    study._get_trials = _get_trials  # type: ignore[method-assign]


@contextlib.contextmanager
def params_in_one_write(trial: optuna.Trial) -> Iterator[None]:
    """The params ``trial`` is asked for inside this are stored together, in one transaction as it
    ends, instead of one transaction each (Optuna's ``set_trial_param``: the trial read, the
    insert and a commit, per param; ``bench/own_trial_reads_cost.py``). Optuna's own checks run
    on each, as before (the trial still running, the distribution the study's); if the block
    raises, nothing is stored. Only on Optuna's RDB storage behind its cache; elsewhere a no-op."""
    storage = trial.storage
    if not isinstance(storage, optuna.storages._CachedStorage):
        yield
        return
    pending: list[tuple[str, float, BaseDistribution]] = []
    trial.storage = _ParamBuffer(storage, pending)  # type: ignore[assignment]
    try:
        yield
    finally:
        trial.storage = storage
    if not pending:
        return
    from optuna.storages._rdb.storage import _create_scoped_session

    backend = storage._backend
    with storage._lock:
        study_id, _ = storage._trial_id_to_study_id_and_number[trial._trial_id]
        known = storage._studies[study_id].param_distribution
        with _create_scoped_session(backend.scoped_session, True) as session:
            write_params(backend, session, trial._trial_id, pending, known)
        for name, _, dist in pending:
            known.setdefault(name, dist)


def write_params(
    backend: Any,
    session: Any,
    trial_id: int,
    pending: Sequence[tuple[str, float, BaseDistribution]],
    known: Mapping[str, BaseDistribution],
) -> None:
    """Optuna's ``_set_trial_param_without_commit`` for several params at once, its checks kept: the
    trial still running, each distribution compatible with the study's (``known``, else the study's
    first stored param of that name). Optuna's reads the trial row again for each param, and each
    read flushes the insert before it; here one read, then the rows added together (one INSERT on
    PostgreSQL), 6 statements per trial -> 2 for three params (bench/param_write_cost.py)."""
    from optuna.distributions import check_distribution_compatibility, distribution_to_json, json_to_distribution
    from optuna.storages._rdb import models

    row = models.TrialModel.find_or_raise_by_id(trial_id, session)
    backend.check_trial_is_updatable(trial_id, row.state)
    for name, _, dist in pending:
        previous = known.get(name)
        if previous is None:
            first = (
                session.query(models.TrialParamModel)
                .join(models.TrialModel)
                .filter(models.TrialModel.study_id == row.study_id, models.TrialParamModel.param_name == name)
                .first()
            )
            previous = None if first is None else json_to_distribution(first.distribution_json)
        if previous is not None:
            check_distribution_compatibility(previous, dist)
    session.add_all([
        models.TrialParamModel(trial_id=trial_id, param_name=name, param_value=value,
                               distribution_json=distribution_to_json(dist))
        for name, value, dist in pending
    ])  # fmt: skip


class _ParamBuffer:
    """``Trial.storage`` inside ``params_in_one_write``: keeps the params, passes the rest on."""

    def __init__(self, storage: Any, pending: list[tuple[str, float, BaseDistribution]]) -> None:
        self._storage = storage
        self._pending = pending

    def set_trial_param(self, trial_id: int, name: str, value: float, dist: BaseDistribution) -> None:
        self._pending.append((name, value, dist))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


def contains(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` (a param as stored, external form) lies in ``dist``: inside a range, one of
    the choices. Optuna has this check only as the private ``_contains`` on internal values."""
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):  # not one of the choices, or not a number at all
        return False


def stale_trials_check(
    storage: optuna.storages.RDBStorage, grace_s: float, every_s: float, since_outage_s: Callable[[], float]
) -> None:
    """Optuna's stale-trial check (run before every ask, and by a waiting worker's reap), narrowed:

    - For ``grace_s`` after this process saw the database come back (``since_outage_s``, from
      storage/retry.py) it finds nothing: no worker could send a heartbeat while the database was
      away, so a trial still training would otherwise be failed and re-run as if its worker had died.
    - It reads the database at most once per ``every_s`` (the heartbeat interval): a trial turns
      stale on the heartbeat's clock, not the trial rate's, so a dead worker's trial is still found
      within one interval of its grace period running out. Per trial it was two statements and
      a transaction (bench/own_trial_reads_cost.py).

    Optuna has no public hook between its heartbeat check and the failing of the trials it finds."""
    find = storage._get_stale_trial_ids
    lock = threading.Lock()
    last: dict[int, float] = {}

    def stale_ids(study_id: int) -> list[int]:
        if since_outage_s() < grace_s:
            return []
        now = time.monotonic()
        with lock:
            if now - last.get(study_id, -math.inf) < every_s:
                return []
            last[study_id] = now
        return find(study_id)

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
