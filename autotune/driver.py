"""The study driver: Optuna asks, the worker trains, we score, tell and record.

The worker (torch, transformers, peft) is imported only when a study starts running, so importing
this module stays light. Failures are data: every trial ends as a stored state, and the study
goes on.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import optuna
import psutil
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from sqlalchemy import event

from autotune import planning
from autotune.datasets import Examples
from autotune.guard import RunGuard
from autotune.inputs import check_inputs
from autotune.progress import Progress
from autotune.samplers import make_pruner, make_sampler
from autotune.search_space import distributions, grid_size
from autotune.spec import SpecError, StudySpec, parse_spec_yaml
from autotune.storage import StorageError, Store
from autotune.storage.engine import engine_kwargs, sqlite_pragmas
from autotune.storage.url import url_string
from autotune.trial import TrialFn, TrialResult, TrialState, trial_config

RETRY_ATTR = "autotune_retry_of"  # user attr on a re-queued trial: the number it re-runs
ATTEMPT_ATTR = "autotune_attempt"
MAX_CRASH_RETRIES = 2  # a crash is retried with the same params this many times; OOM/diverged never
HEARTBEAT_INTERVAL_S = int(os.environ.get("AUTOTUNE_HEARTBEAT_S", "10"))
GRACE_PERIOD_S = int(os.environ.get("AUTOTUNE_GRACE_S", "60"))
WAIT_POLL_S = 0.25  # a worker with nothing to ask for polls for re-queued work this often


@dataclass(frozen=True)
class RunSummary:
    study_name: str
    finished: int
    total: int
    ran: int
    interrupted: bool
    best_score: float | None
    stop_reason: str | None = None  # why the run ended early (autotune.guard)
    exit_code: int = 0


class _TrialFailed(Exception):
    """Ends an objective call as an Optuna FAIL (caught by optimize)."""


class _Interrupt:
    """First SIGINT/SIGTERM: stop the running trial at its next step. Second: exit at once."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.event.is_set():
            os._exit(128 + signum)
        self.event.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Interrupt]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        for sig in (signal.SIGINT.value, signal.SIGTERM.value):
            self._old[sig] = signal.signal(sig, self._handle)
        try:
            yield self
        finally:
            for sig, old in self._old.items():
                signal.signal(sig, old)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _labels(examples: Examples) -> list[str] | None:
    return list(examples.labels) if examples.labels else None


def _spec_core(text: str) -> dict[str, Any]:
    data = parse_spec_yaml(text).model_dump(mode="json")
    data.pop("n_trials", None)
    for limit in ("study_time_s", "memory_limit_mb"):  # limits of a run, not the study's identity
        data["budget"].pop(limit, None)
    return data


def open_study(spec: StudySpec, store: Store, study_name: str) -> optuna.Study:
    """Create or load the Optuna study in the same database, with heartbeats so a dead
    worker's trial is failed and re-queued by the living."""

    def on_stale(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        _requeue_or_fail(
            study,
            store,
            study_name,
            trial.number,
            trial.params,
            trial.user_attrs,
            TrialState.CRASHED,
            "worker stopped sending heartbeats (killed or paused)",
        )

    with store.init_lock():
        return _open_study_locked(spec, store, study_name, on_stale)


def _open_study_locked(spec: StudySpec, store: Store, study_name: str, on_stale: Any) -> optuna.Study:
    storage = optuna.storages.RDBStorage(
        url_string(store.url),
        engine_kwargs=engine_kwargs(store.url),
        heartbeat_interval=HEARTBEAT_INTERVAL_S,
        grace_period=GRACE_PERIOD_S,
        heartbeat_stale_trial_callback=on_stale,
    )
    if store.url.get_backend_name() == "sqlite":
        # Optuna's own engine gets the same WAL/busy-timeout/synchronous pragmas as ours; the
        # pool is emptied so every later connection is made with them. On this machine that took
        # Optuna alone from 104 to 69 ms per trial (bench/scaling.py notes).
        event.listen(storage.engine, "connect", sqlite_pragmas)
        storage.engine.dispose()
    return optuna.create_study(
        study_name=study_name,
        storage=storage,
        sampler=make_sampler(spec),
        pruner=make_pruner(spec),
        direction="minimize",
        load_if_exists=True,
    )


def _should_retry(state: TrialState, params: dict[str, Any], user_attrs: dict[str, Any]) -> bool:
    """Retry policy: an interrupted trial always runs again; a crashed one (or one whose worker
    died) up to MAX_CRASH_RETRIES times; OOM and divergence never (the point is infeasible)."""
    if not params:
        return False
    return state == TrialState.INTERRUPTED or int(user_attrs.get(ATTEMPT_ATTR, 0)) < MAX_CRASH_RETRIES


def _enqueue_retry(study: optuna.Study, number: int, params: dict[str, Any], user_attrs: dict[str, Any]) -> None:
    """Queue the same params again, remembering the original trial and the attempt count."""
    attrs = {
        RETRY_ATTR: int(user_attrs.get(RETRY_ATTR, number)),
        ATTEMPT_ATTR: int(user_attrs.get(ATTEMPT_ATTR, 0)) + 1,
    }
    study.enqueue_trial(params, user_attrs=attrs, skip_if_exists=False)


def _requeue_or_fail(
    study: optuna.Study,
    store: Store,
    name: str,
    number: int,
    params: dict[str, Any],
    user_attrs: dict[str, Any],
    state: TrialState,
    why: str,
) -> None:
    """A trial whose worker died: mark it (if still ours to mark) and queue its retry."""
    retry = _should_retry(state, params, user_attrs)
    if store.fail_running(name, number, state, why, requeued=retry) and retry:
        _enqueue_retry(study, number, params, user_attrs)


def reap_dead_local_workers(
    study: optuna.Study, store: Store, name: str, running: list[dict[str, Any]] | None = None
) -> int:
    """Trials left RUNNING by a process of this host that no longer exists are failed now
    (the heartbeat would only catch them after the grace period). ``running``: the rows, when
    the caller has just read them."""
    host = socket.gethostname()
    reaped = 0
    for row in store.running(name) if running is None else running:
        w = row["worker"] or ""
        h, _, pid = w.rpartition(":")
        if h != host or not pid.isdigit() or int(pid) == os.getpid() or psutil.pid_exists(int(pid)):
            continue
        tid = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, row["trial_number"])
        with contextlib.suppress(Exception):
            ft = study._storage.get_trial(tid)
            if ft.state == optuna.trial.TrialState.RUNNING:
                study._storage.set_trial_state_values(tid, state=optuna.trial.TrialState.FAIL)
            _requeue_or_fail(
                study,
                store,
                name,
                row["trial_number"],
                ft.params,
                ft.user_attrs,
                TrialState.CRASHED,
                f"worker {w} died",
            )
            reaped += 1
    if running is None:  # a full reap: also what the heartbeats say (optimize does it per trial)
        with contextlib.suppress(Exception):
            optuna.storages.fail_stale_trials(study)
    return reaped


def _suggest(trial: optuna.Trial, name: str, dist: Any) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, list(dist.choices))
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


def run_study(
    spec: StudySpec,
    raw_url: str,
    *,
    study_name: str | None = None,
    n_trials: int | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
) -> RunSummary:
    """Run trials until the study holds ``n_trials`` finished trials in total.

    ``trial_fn`` replaces the worker (benchmarks of the driver alone); by default it is
    ``autotune.worker.run_trial.run_trial``, imported when the first trial starts."""
    name = study_name or spec.name
    labels = _labels(check_inputs(spec))
    store = Store.open(raw_url, create=True)
    try:
        _save_spec(store, spec, name, labels)
        planning.before_study(store, spec, name, labels)
        return _run(spec, store, name, n_trials or spec.n_trials, show_progress, cache_dir, trial_fn)
    finally:
        store.close()


def _save_spec(store: Store, spec: StudySpec, name: str, labels: list[str] | None) -> None:
    existing = store.get_study(name)
    if existing is None:
        store.save_study(name, spec.to_yaml(), labels)
    elif _spec_core(existing.spec_yaml) != _spec_core(spec.to_yaml()):
        raise SpecError(
            f"study '{name}' already exists with a different spec: use --study-name for a new "
            f"study, or `autotune resume {name}` to continue it"
        )


def prepare_study(spec: StudySpec, raw_url: str, name: str, n_trials: int, *, resume: bool = False) -> int:
    """Check the inputs, create tables and the study once, reap dead local workers; return the
    total to reach. Used before starting several workers, so they never race on set-up."""
    _quiet()
    labels = _labels(check_inputs(spec))
    store = Store.open(raw_url, create=True)
    try:
        if not resume:
            _save_spec(store, spec, name, labels)
        planning.before_study(store, spec, name, labels)
        study = open_study(spec, store, name)
        reap_dead_local_workers(study, store, name)
    finally:
        store.close()
    return min(n_trials, grid_size(spec)) if spec.sampler.name == "grid" else n_trials


def resume_study(
    raw_url: str,
    study_name: str,
    *,
    n_trials: int | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
) -> RunSummary:
    """Continue a stored study without its spec file: the spec comes from the database."""
    store = Store.open(raw_url, create=True)
    try:
        row = store.require_study(study_name)
        spec = parse_spec_yaml(row.spec_yaml, f"stored spec of {study_name}")
        planning.before_study(store, spec, study_name, _labels(check_inputs(spec)))
        return _run(spec, store, study_name, n_trials or spec.n_trials, show_progress, cache_dir, trial_fn)
    finally:
        store.close()


def _quiet() -> None:
    # Optuna logs every failed trial as a warning with a traceback; ours are expected states
    # (crash, interruption, a late result after a pause) and are reported by our progress lines.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # Heartbeats are "experimental" in Optuna since 2.9; we rely on them on purpose.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # peft calls a transformers API deprecated in transformers 5; nothing for a user to act on.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def _default_trial_fn() -> TrialFn:
    from autotune.worker.run_trial import run_trial  # lazy: torch loads only to train

    # torch, transformers and peft leave ~460k objects tracked by the cyclic collector, and each
    # full collection walks them all: 0.25 s here, a few times per study, in set-up and in the
    # step loop alike. They live as long as the process, so they leave the collector's sight.
    gc.freeze()
    return run_trial


def _run(
    spec: StudySpec,
    store: Store,
    name: str,
    total: int,
    show_progress: bool,
    cache_dir: str | None,
    trial_fn: TrialFn | None,
) -> RunSummary:
    _quiet()
    if spec.sampler.name == "grid":
        total = min(total, grid_size(spec))  # the grid sampler stops the study once the grid is done
    study = open_study(spec, store, name)
    reap_dead_local_workers(study, store, name)
    dists = distributions(spec)
    me = worker_id()
    stop = _Interrupt()
    progress = Progress(
        total,
        store.count_finished(name),
        enabled=show_progress,
        n_evals=spec.budget.evals,
        best=lambda: store.best(name),
    )
    ran = 0
    # Import the worker (torch, transformers, peft: seconds) before the first trial is asked for:
    # the imports are process start-up, not part of a trial's time, and a Ctrl-C during them
    # leaves no trial behind.
    run = trial_fn or _default_trial_fn()
    guard = RunGuard()
    gate = planning.make_gate(spec, store, name, guard, cache_dir) if trial_fn is None else None

    def objective(trial: optuna.Trial) -> float:
        params = {pname: _suggest(trial, pname, dist) for pname, dist in dists.items()}
        retry_of = trial.user_attrs.get(RETRY_ATTR)
        store.trial_started(name, trial.number, params, me, retry_of=retry_of)
        progress.trial_started(trial.number, params)

        def report(step: int, value: float) -> bool:
            try:
                trial.report(value, step)
            except optuna.exceptions.UpdateFinishedTrialError:
                return True  # failed by heartbeat while this worker was paused: stop now
            progress.evaluated(step, value)
            return trial.should_prune()

        skip = gate.before(trial.number, params) if gate is not None else None
        twin = store.infeasible_twin(name, params) if skip is None else None
        if skip is not None:
            result = skip
        elif twin is not None:
            # OOM and divergence are properties of the point: never spend a trial on it again.
            why = f"not run: trial {twin['trial_number']} with the same params ended {twin['state']}"
            result = TrialResult(state=TrialState(twin["state"]), error=why)
        else:
            result = run(trial_config(spec, params, cache_dir), report, stop.event)
        guard.observe(result)
        return _conclude(study, store, name, trial, params, result, spec, progress)

    with stop.installed():
        while not stop.event.is_set() and guard.stop is None:
            done = store.count_finished(name)
            if done >= total:
                break
            running = store.running(name)
            if done + len(running) >= total and not _has_waiting(study):
                # Other workers hold the rest: wait for them (a dead one's trial comes back queued).
                time.sleep(WAIT_POLL_S)
                reap_dead_local_workers(study, store, name)
                continue
            if running:
                reap_dead_local_workers(study, store, name, running)
            try:
                study.optimize(objective, n_trials=1, catch=(_TrialFailed,), gc_after_trial=False)
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as err:
                # This worker was paused past the grace period and its trial was failed and
                # re-queued meanwhile: Optuna refuses the late tell ("Cannot tell a FAIL trial").
                if isinstance(err, ValueError) and "Cannot tell" not in str(err):
                    raise
            ran += 1
    progress.close()
    planning.final_stop(store, name, guard, stop.event.is_set())
    best = store.best(name)
    return RunSummary(
        name,
        store.count_finished(name),
        total,
        ran,
        stop.event.is_set(),
        best["score"] if best else None,
        guard.stop.reason if guard.stop else None,
        guard.stop.exit_code if guard.stop else 0,
    )


def _has_waiting(study: optuna.Study) -> bool:
    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))


def _conclude(
    study: optuna.Study,
    store: Store,
    name: str,
    trial: optuna.Trial,
    params: dict[str, Any],
    result: TrialResult,
    spec: StudySpec,
    progress: Progress,
) -> float:
    """Store the result and translate its state for Optuna."""
    state = result.state
    if not store.trial_finished(name, trial.number, result):
        # This worker was paused past the grace period: another worker failed the trial and
        # queued its retry meanwhile. The stale result is dropped, never stored twice.
        progress.trial_finished(trial.number, state, None)
        raise _TrialFailed("result dropped: the trial was failed by heartbeat meanwhile")
    if state in (TrialState.INTERRUPTED, TrialState.CRASHED):
        if not result.spec_error:  # a property of the spec fails every retry the same way
            _requeue_after_finish(study, store, name, trial, params, state)
        progress.trial_finished(trial.number, state, None)
        raise _TrialFailed(result.error or state.value)
    progress.trial_finished(trial.number, state, result.score)
    if state == TrialState.COMPLETE:
        assert result.score is not None
        if spec.sampler.name == "gp":
            # GP models the constraint itself and wants it on every trial; TPE reads a missing
            # constraint as feasible, and the write costs a storage round trip per trial.
            trial.set_constraint("failed", 0.0)
        return result.score
    if state == TrialState.PRUNED:
        raise optuna.TrialPruned(result.error or "pruned")
    # OOM, diverged, timeout: infeasible points. Samplers that read constraints (TPE, GP) learn to
    # avoid them; CMA-ES cannot use an infinite value, so it sees a plain failure instead.
    if spec.sampler.name == "cmaes":
        raise _TrialFailed(result.error or state.value)
    trial.set_constraint("failed", 1.0)
    return math.inf


def _requeue_after_finish(
    study: optuna.Study, store: Store, name: str, trial: optuna.Trial, params: dict[str, Any], state: TrialState
) -> None:
    if _should_retry(state, params, trial.user_attrs):
        _enqueue_retry(study, trial.number, params, trial.user_attrs)
        store.set_requeued(name, trial.number)


def load_stored_spec(store: Store, name: str) -> StudySpec:
    row = store.require_study(name)
    try:
        return parse_spec_yaml(row.spec_yaml, f"stored spec of {name}")
    except SpecError as err:
        raise StorageError(str(err)) from None
