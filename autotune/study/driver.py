"""The study driver: Optuna asks, the worker trains, we score, tell and record.

Read ``run_study`` -> ``_run`` -> ``_Loop.objective`` -> ``outcome.conclude``. Recovery lives in
``study/recovery``, a trial's end in ``study/outcome``, confirmation runs in ``study/confirm_run``,
what parallel runs share (Ctrl-C, the summary) in ``study/summary``. The worker (torch) is imported
only when a study runs. Failures are data: every trial ends as a stored state (architecture.md).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import optuna

from autotune import optuna_private
from autotune.errors import DatabaseUnavailable, StorageError
from autotune.interrupt import TwoStageStop
from autotune.search.samplers import SamplerFactory
from autotune.search.space import suggest
from autotune.spec import StudySpec
from autotune.storage import Store, claims, redact, retry
from autotune.study import confirm, confirm_run, outage, recovery, setup
from autotune.study.gate import Gate, make_gate
from autotune.study.guard import RunGuard, final_stop
from autotune.study.limits import RunLimits
from autotune.study.outcome import TrialFailed, conclude, duplicate
from autotune.study.progress import Progress
from autotune.study.slots import Slots, drive_slots
from autotune.study.summary import RunSummary
from autotune.trial import TrialFn, trial_config

T = TypeVar("T")

WAIT_POLL_S = 0.25  # a worker with nothing to ask for polls for re-queued work this often
# A sampler that keeps proposing configurations already run (a small space nearly covered) is
# stopped after this many duplicates in a row rather than asked forever.
MAX_DUPLICATES_IN_A_ROW = 50


def run_study(
    spec: StudySpec,
    raw_url: str,
    *,
    study_name: str | None = None,
    n_trials: int | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
    limits: RunLimits | None = None,
    sampler: SamplerFactory | None = None,
    slots: Slots | None = None,
) -> RunSummary:
    """Create (or continue) the study named by ``spec`` (or ``study_name``) in the database at
    ``raw_url`` and run trials in this process until it holds ``n_trials`` (default: the spec's)
    finished trials in total. Returns the run's summary; a Ctrl-C ends it early with
    ``interrupted`` set. Raises SpecError/DataError (bad inputs, or a spec that differs from the
    stored one) and StorageError before any trial starts.

    ``trial_fn`` replaces the worker (benchmarks of the driver alone); by default it is
    ``autotune.worker.run_trial.run_trial``, imported when the first trial starts. ``sampler``
    replaces the spec's sampler in this run (a benchmark racing a variant of the default).
    ``slots`` run the trials elsewhere, several at once (``study/ray_backend.py``)."""
    name = study_name or spec.name
    return _set_up_and_run(raw_url, name, spec, limits, n_trials, show_progress, cache_dir, trial_fn, sampler, slots)


def resume_study(
    raw_url: str,
    study_name: str,
    *,
    n_trials: int | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
    limits: RunLimits | None = None,
    slots: Slots | None = None,
) -> RunSummary:
    """Continue a stored study without its spec file: the spec comes from the database, with
    this run's ``limits`` over its budget. Takes and returns what ``run_study`` does; raises
    StorageError (one line) when the database or the study does not exist, and creates nothing
    then."""
    return _set_up_and_run(raw_url, study_name, None, limits, n_trials, show_progress, cache_dir, trial_fn, None, slots)


def _set_up_and_run(
    raw_url: str,
    name: str,
    spec: StudySpec | None,
    limits: RunLimits | None,
    n_trials: int | None,
    show_progress: bool,
    cache_dir: str | None,
    trial_fn: TrialFn | None,
    sampler: SamplerFactory | None = None,
    slots: Slots | None = None,
) -> RunSummary:
    store, spec = setup.begin(raw_url, name, spec, limits)
    try:
        return _run(spec, store, name, n_trials or spec.n_trials, show_progress, cache_dir, trial_fn, sampler, slots)
    finally:
        store.close()


def default_trial_fn() -> TrialFn:
    """The real worker, ``autotune.worker.run_trial.run_trial``, imported now (torch, transformers,
    peft): what a study runs unless a ``trial_fn`` stands in for it."""
    from autotune.worker.run_trial import run_trial  # lazy: torch loads only to train

    # torch, transformers and peft leave ~460k objects tracked by the cyclic collector, and each
    # full collection walks them all: 0.25 s here, a few times per study, in set-up and in the
    # step loop alike. They live as long as the process, so they leave the collector's sight.
    gc.freeze()
    return run_trial


@dataclass
class _Loop:
    """One worker's run: what every trial of it needs."""

    spec: StudySpec
    store: Store
    name: str
    study: optuna.Study
    progress: Progress
    trial_fn: TrialFn
    stop: TwoStageStop
    cache_dir: str | None
    seed: int
    total: int
    guard: RunGuard
    gate: Gate | None
    keeps: bool = False  # the real worker: confirmation runs can keep their adapters
    duplicates_in_a_row: int = 0
    told: tuple[int, optuna.trial.TrialState, float | None] | None = None
    gave_up: DatabaseUnavailable | None = None
    n_search: int = 0  # the search's trials; ``total`` adds the confirmation runs once planned
    planned: int = 0  # confirmation runs queued so far (budget.confirm_top)
    _target: confirm.Target | None = None
    _lock: contextlib.ExitStack | None = None

    def reserve(self) -> bool | None:
        """Take the study lock if a trial slot is free: True (ask now; ``objective`` releases the
        lock once its row is in). False: the study is done. None: others hold the rest; wait."""
        lock = contextlib.ExitStack()
        try:
            lock.enter_context(claims.study_lock(self.store, self.name))
            taken = claims.slots_taken(self.store, self.name)
            if self.spec.budget.confirm_top and not self._confirming(lock, taken):
                return None
        except BaseException:
            outage.close_quietly(lock)
            raise
        if taken.finished + taken.running < self.total:
            self._lock = lock
            return True
        lock.close()
        if taken.finished >= self.total:
            return False
        recovery.reap_dead_local_workers(self.study, self.store, self.name)  # a dead one's trial comes back
        return None

    def _confirming(self, lock: contextlib.ExitStack, taken: claims.Taken) -> bool:
        """With a confirmation phase: False (wait) while the last search trials run; once they
        have all finished, queue the runs of the best configs (``confirm.plan``) and count them
        in ``total``. True: go on (ask now, or end the study), with the lock held."""
        s_finished, s_running = taken.search_finished, taken.search_running
        self.total = self.n_search + self.planned  # runs of an earlier round count; their slots are theirs
        if s_finished + s_running < self.n_search:
            return True  # still searching
        if s_finished < self.n_search:
            lock.close()
            recovery.reap_dead_local_workers(self.study, self.store, self.name)
            return False
        self.planned = confirm.plan(self.study, self.store, self.name, self.spec, self.target().examples)
        self.total = self.n_search + self.planned
        self.progress.set_total(self.total)
        return True

    def target(self) -> confirm.Target:
        if self._target is None:
            self._target = confirm.target(self.spec)
        return self._target

    def db(self, fn: Callable[[], T], what: str) -> T:
        """``fn`` (a call into Optuna's storage), waiting for the database if it is away."""
        return retry.call(fn, what, f"database {redact(self.store.url)}")

    def release(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            outage.close_quietly(lock)

    def objective(self, trial: optuna.Trial) -> float:
        """The objective, remembering what it tells Optuna (``told``): if the database goes away
        during Optuna's own tell, the loop tells it again once the database is back. A database
        that stayed away past the limit (``gave_up``) ends the run, whatever Optuna does with it."""
        try:
            value = self._objective(trial)
        except DatabaseUnavailable as err:
            self.gave_up = err
            raise
        except optuna.TrialPruned:
            self.told = (trial.number, optuna.trial.TrialState.PRUNED, None)
            raise
        except TrialFailed:
            self.told = (trial.number, optuna.trial.TrialState.FAIL, None)
            raise
        finally:
            optuna_private.tell_from_own_view(trial)
        self.told = (trial.number, optuna.trial.TrialState.COMPLETE, value)
        return value

    def _objective(self, trial: optuna.Trial) -> float:
        with optuna_private.sampling_from_last_sync(self.study), optuna_private.params_in_one_write(trial):
            params = suggest(trial, self.spec)
        attrs, r = trial.user_attrs, recovery  # user_attrs: a deep copy per access
        retry_of, confirm_of, train_seed = (attrs.get(k) for k in (r.RETRY_ATTR, r.CONFIRM_ATTR, r.SEED_ATTR))
        twin = claims.claim_trial(
            self.store,
            self.name,
            trial.number,
            params,
            recovery.worker_id(),
            retry_of=retry_of,
            sampler_seed=self.seed,
            confirm_of=confirm_of,
            train_seed=train_seed,
        )
        self.release()
        if twin is not None:
            self.duplicates_in_a_row += 1
            return duplicate(self, trial, twin)
        self.duplicates_in_a_row = 0
        self.progress.trial_started(trial.number, params)
        if confirm_of is not None:
            return confirm_run.run(self, trial, params, int(confirm_of), int(train_seed or 0))

        def report(step: int, value: float) -> bool:
            # the database away at an evaluation: the trial waits for it (storage/retry.py), not crashed
            try:
                self.db(lambda: trial.report(value, step), "the trial's report")
            except optuna.exceptions.UpdateFinishedTrialError:
                return True  # failed by heartbeat while this worker was paused: stop now
            self.progress.evaluated(step, value)
            return self.db(trial.should_prune, "the pruner")

        # A config predicted not to fit (or to overrun the time budget) is stored without training.
        skip = self.gate.before(trial.number, params) if self.gate is not None else None
        if skip is not None:
            result = skip
        else:
            # memory.gradient_checkpointing: auto: on for the configs that fit only with it
            ckpt = True if self.gate is not None and trial.number in self.gate.checkpointed else None
            config = trial_config(self.spec, params, self.cache_dir, checkpointing=ckpt)
            result = self.trial_fn(config, report, self.stop.event)
        self.guard.observe(result)
        return conclude(self, trial, params, result)


def _run(
    spec: StudySpec,
    store: Store,
    name: str,
    total: int,
    show_progress: bool,
    cache_dir: str | None,
    trial_fn: TrialFn | None,
    sampler: SamplerFactory | None,
    slots: Slots | None = None,
) -> RunSummary:
    setup.quiet()
    total = setup.total_for(spec, total)
    me = recovery.worker_id()
    _slot, seed = claims.claim_worker_slot(store, name, me, lambda k: claims.seed_for_slot(spec.seed, k))
    study = setup.open_study(spec, store, name, seed, sampler)
    recovery.reap_dead_local_workers(study, store, name)
    best = lambda: store.best(name)  # noqa: E731
    progress = Progress(total, store.count_finished(name), enabled=show_progress, n_evals=spec.budget.evals, best=best)
    # Import the worker (torch, transformers, peft: seconds) before the first trial is asked for:
    # the imports are process start-up, not part of a trial's time, and a Ctrl-C during them
    # leaves no trial behind. Slots (``--backend ray``) run the worker elsewhere: nothing to import.
    run = trial_fn or (slots.trial_fns[0] if slots else default_trial_fn())
    guard = RunGuard()
    # Predictions need a calibration probe on the real worker (a slot's, with slots); a stand-in
    # trial_fn (benchmarks of the driver alone, tests) runs without them.
    gated = trial_fn is None and (slots is None or slots.gate)
    gate = make_gate(spec, store, name, guard, cache_dir, slots.probe if slots else None) if gated else None
    if slots is not None and slots.on_gate is not None:
        slots.on_gate(gate)  # packing reads its predictions
    loop = _Loop(spec, store, name, study, progress, run, TwoStageStop(), cache_dir, seed, total, guard, gate,
                 keeps=trial_fn is None and slots is None, n_search=total,
                 planned=confirm.planned(study, spec))  # fmt: skip
    with loop.stop.installed():
        ran = _drive(loop) if slots is None else drive_slots(loop, slots, _drive)
    progress.close()
    final_stop(store, name, guard, loop.stop.event.is_set())
    row = store.best(name)
    return RunSummary(
        name,
        store.count_finished(name),
        loop.total,  # with a confirmation phase: the search and its runs
        ran,
        loop.stop.event.is_set(),
        row["score"] if row else None,
        stop_reason=guard.stop.reason if guard.stop else None,
        stop_code=guard.stop.exit_code if guard.stop else None,
    )


def _drive(loop: _Loop) -> int:
    """Reserve, ask, train, tell until the study is done or stopped: the trials this loop ran."""
    study, guard, ran = loop.study, loop.guard, 0
    outage = retry.Outage("asking Optuna for a trial", f"database {redact(loop.store.url)}")
    while not loop.stop.event.is_set() and guard.stop is None and loop.duplicates_in_a_row < MAX_DUPLICATES_IN_A_ROW:
        work = loop.db(loop.reserve, "the study lock")
        if work is None:
            time.sleep(WAIT_POLL_S)
            continue
        if not work:
            break
        loop.told = None
        try:
            study.optimize(loop.objective, n_trials=1, catch=(TrialFailed,), gc_after_trial=False)
            outage.ok()
        except Exception as masked:
            err = optuna_private.unmask(masked)
            if loop.gave_up is not None:
                raise loop.gave_up from None
            if optuna_private.is_late_tell(err):
                # This worker was paused past the grace period and its trial was failed and
                # re-queued meanwhile: Optuna refuses the late tell.
                pass
            elif optuna_private.is_storage_error(err) and not retry.is_transient(err):
                # a database error in Optuna's own calls (a full disk, say): one line, as ours
                raise StorageError(f"database {redact(loop.store.url)}: {retry.reason(err)}") from err
            elif not retry.is_transient(err):
                raise
            elif loop.told is not None:  # the database went away in Optuna's tell: tell again
                loop.db(lambda: outage.tell_again(study, loop.told), "the tell")
            else:  # it went away in Optuna's ask, before any training: wait, then ask again
                outage.failed(err)
        finally:
            loop.release()  # if the ask itself failed, the lock is still ours
        ran += 1
    return ran
