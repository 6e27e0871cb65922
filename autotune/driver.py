"""The study driver: Optuna asks, the worker trains, we score, tell and record.

Read ``run_study`` -> ``_run`` -> ``_Loop.objective`` -> ``_conclude``. Recovery (retries,
reaping dead workers) lives in ``autotune.recovery``; what parallel runs share with this one
(Ctrl-C, the summary) in ``autotune.session``. The worker (torch, transformers, peft) is
imported only when a study starts running, so importing this module stays light. Failures are
data: every trial ends as a stored state, and the study goes on. See docs/architecture.md.
"""

from __future__ import annotations

import gc
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from sqlalchemy import event

from autotune import optuna_private, recovery
from autotune.datasets import Examples
from autotune.inputs import check_inputs
from autotune.progress import Progress
from autotune.samplers import make_pruner, make_sampler
from autotune.search_space import distributions, grid_size
from autotune.session import RunSummary, TwoStageStop
from autotune.spec import SpecError, StudySpec, parse_spec_yaml
from autotune.storage import StorageError, Store
from autotune.storage.engine import engine_kwargs, sqlite_pragmas
from autotune.storage.url import url_string
from autotune.trial import TrialFn, TrialResult, TrialState, trial_config

HEARTBEAT_INTERVAL_S = int(os.environ.get("AUTOTUNE_HEARTBEAT_S", "10"))
GRACE_PERIOD_S = int(os.environ.get("AUTOTUNE_GRACE_S", "60"))
WAIT_POLL_S = 0.25  # a worker with nothing to ask for polls for re-queued work this often
_WAITING = optuna.trial.TrialState.WAITING


class _TrialFailed(Exception):
    """Ends an objective call as an Optuna FAIL (caught by optimize)."""


def _labels(examples: Examples) -> list[str] | None:
    return list(examples.labels) if examples.labels else None


def _spec_core(text: str) -> dict[str, Any]:
    data = parse_spec_yaml(text).model_dump(mode="json")
    data.pop("n_trials", None)
    return data


def open_study(spec: StudySpec, store: Store, study_name: str) -> optuna.Study:
    """Create or load the Optuna study in the same database, with heartbeats so a dead
    worker's trial is failed and re-queued by the living."""
    with store.init_lock():
        storage = optuna.storages.RDBStorage(
            url_string(store.url),
            engine_kwargs=engine_kwargs(store.url),
            heartbeat_interval=HEARTBEAT_INTERVAL_S,
            grace_period=GRACE_PERIOD_S,
            heartbeat_stale_trial_callback=recovery.on_stale_heartbeat(store, study_name),
        )
        if store.url.get_backend_name() == "sqlite":
            # Optuna's own engine gets the same WAL/busy-timeout/synchronous pragmas as ours; the
            # pool is emptied so every later connection is made with them. On this machine that
            # took Optuna alone from 104 to 69 ms per trial (bench/scaling.py notes).
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
    """Create (or continue) the study named by ``spec`` (or ``study_name``) in the database at
    ``raw_url`` and run trials in this process until it holds ``n_trials`` (default: the spec's)
    finished trials in total. Returns the run's summary; a Ctrl-C ends it early with
    ``interrupted`` set. Raises SpecError/DataError (bad inputs, or a spec that differs from the
    stored one) and StorageError before any trial starts.

    ``trial_fn`` replaces the worker (benchmarks of the driver alone); by default it is
    ``autotune.worker.run_trial.run_trial``, imported when the first trial starts."""
    name = study_name or spec.name
    labels = _labels(check_inputs(spec))
    store = Store.open(raw_url, create=True)
    try:
        _save_spec(store, spec, name, labels)
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


def _total(spec: StudySpec, n_trials: int) -> int:
    # The grid sampler stops the study once the grid is done.
    return min(n_trials, grid_size(spec)) if spec.sampler.name == "grid" else n_trials


def prepare_study(spec: StudySpec, raw_url: str, name: str, n_trials: int, *, resume: bool = False) -> int:
    """Check the inputs, create tables and the study once, reap dead local workers; return the
    total to reach. Used before starting several workers, so they never race on set-up."""
    _quiet()
    labels = _labels(check_inputs(spec))
    store = Store.open(raw_url, create=True)
    try:
        if not resume:
            _save_spec(store, spec, name, labels)
        study = open_study(spec, store, name)
        recovery.reap_dead_local_workers(study, store, name)
    finally:
        store.close()
    return _total(spec, n_trials)


def resume_study(
    raw_url: str,
    study_name: str,
    *,
    n_trials: int | None = None,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
) -> RunSummary:
    """Continue a stored study without its spec file: the spec comes from the database. Takes
    and returns what ``run_study`` does; raises StorageError (one line) when the database or the
    study does not exist, and creates nothing then."""
    store = open_existing_study(raw_url, study_name)
    try:
        spec = load_stored_spec(store, study_name)
        check_inputs(spec)
        return _run(spec, store, study_name, n_trials or spec.n_trials, show_progress, cache_dir, trial_fn)
    finally:
        store.close()


def open_existing_study(raw_url: str, study_name: str) -> Store:
    """The store of an existing database that holds ``study_name``, its tables migrated to this
    version. An unknown database or study is a StorageError, and nothing is created."""
    store = Store.open_existing(raw_url, study_name)
    try:
        store.upgrade()
    except BaseException:
        store.close()
        raise
    return store


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


def _suggest(trial: optuna.Trial, name: str, dist: BaseDistribution) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, list(dist.choices))
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


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

    def objective(self, trial: optuna.Trial) -> float:
        params = {pname: _suggest(trial, pname, d) for pname, d in distributions(self.spec).items()}
        self.store.trial_started(
            self.name, trial.number, params, recovery.worker_id(), retry_of=trial.user_attrs.get(recovery.RETRY_ATTR)
        )
        self.progress.trial_started(trial.number, params)

        def report(step: int, value: float) -> bool:
            try:
                trial.report(value, step)
            except optuna.exceptions.UpdateFinishedTrialError:
                return True  # failed by heartbeat while this worker was paused: stop now
            self.progress.evaluated(step, value)
            return trial.should_prune()

        twin = self.store.infeasible_twin(self.name, params)
        if twin is not None:
            # OOM and divergence are properties of the point: never spend a trial on it again.
            why = f"not run: trial {twin['trial_number']} with the same params ended {twin['state']}"
            result = TrialResult(state=TrialState(twin["state"]), error=why)
        else:
            result = self.trial_fn(trial_config(self.spec, params, self.cache_dir), report, self.stop.event)
        return _conclude(self, trial, params, result)

    def has_work(self, total: int) -> bool | None:
        """True: ask for a trial. False: the study is done. None: others hold the rest; wait."""
        done = self.store.count_finished(self.name)
        if done >= total:
            return False
        running = self.store.running(self.name)
        if done + len(running) >= total and not self.study.get_trials(deepcopy=False, states=(_WAITING,)):
            recovery.reap_dead_local_workers(self.study, self.store, self.name)  # a dead one's trial comes back
            return None
        if running:
            recovery.reap_dead_local_workers(self.study, self.store, self.name, running)
        return True


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
    total = _total(spec, total)
    study = open_study(spec, store, name)
    recovery.reap_dead_local_workers(study, store, name)
    best = lambda: store.best(name)  # noqa: E731
    progress = Progress(total, store.count_finished(name), enabled=show_progress, n_evals=spec.budget.evals, best=best)
    # Import the worker (torch, transformers, peft: seconds) before the first trial is asked for:
    # the imports are process start-up, not part of a trial's time, and a Ctrl-C during them
    # leaves no trial behind.
    loop = _Loop(spec, store, name, study, progress, trial_fn or _default_trial_fn(), TwoStageStop(), cache_dir)
    ran = 0
    with loop.stop.installed():
        while not loop.stop.event.is_set() and (work := loop.has_work(total)) is not False:
            if work is None:
                time.sleep(WAIT_POLL_S)
                continue
            try:
                study.optimize(loop.objective, n_trials=1, catch=(_TrialFailed,), gc_after_trial=False)
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as err:
                # This worker was paused past the grace period and its trial was failed and
                # re-queued meanwhile: Optuna refuses the late tell.
                if not optuna_private.is_late_tell(err):
                    raise
            ran += 1
    progress.close()
    row = store.best(name)
    return RunSummary(
        name, store.count_finished(name), total, ran, loop.stop.event.is_set(), row["score"] if row else None
    )


def _conclude(loop: _Loop, trial: optuna.Trial, params: dict[str, Any], result: TrialResult) -> float:
    """Store the result and translate its state for Optuna."""
    state, store, name, progress = result.state, loop.store, loop.name, loop.progress
    if not store.trial_finished(name, trial.number, result):
        # This worker was paused past the grace period: another worker failed the trial and
        # queued its retry meanwhile. The stale result is dropped, never stored twice.
        progress.trial_finished(trial.number, state, None)
        raise _TrialFailed("result dropped: the trial was failed by heartbeat meanwhile")
    if state in (TrialState.INTERRUPTED, TrialState.CRASHED):
        recovery.requeue_after_finish(loop.study, store, name, trial, params, state)
        progress.trial_finished(trial.number, state, None)
        raise _TrialFailed(result.error or state.value)
    progress.trial_finished(trial.number, state, result.score)
    sampler = loop.spec.sampler.name
    if state == TrialState.COMPLETE:
        assert result.score is not None
        if sampler == "gp":
            # GP models the constraint itself and wants it on every trial; TPE reads a missing
            # constraint as feasible, and the write costs a storage round trip per trial.
            trial.set_constraint("failed", 0.0)
        return result.score
    if state == TrialState.PRUNED:
        raise optuna.TrialPruned(result.error or "pruned")
    # OOM, diverged, timeout: infeasible points. Samplers that read constraints (TPE, GP) learn to
    # avoid them; CMA-ES cannot use an infinite value, so it sees a plain failure instead.
    if sampler == "cmaes":
        raise _TrialFailed(result.error or state.value)
    trial.set_constraint("failed", 1.0)
    return math.inf


def load_stored_spec(store: Store, name: str) -> StudySpec:
    """The spec stored with study ``name``; StorageError if the study or its spec is unusable."""
    row = store.require_study(name)
    try:
        return parse_spec_yaml(row.spec_yaml, f"stored spec of {name}")
    except SpecError as err:
        raise StorageError(str(err)) from None
