"""Setting a study up, before any trial: check the inputs, store the spec, open (or create) the
Optuna study beside our tables, and find an existing study for resume/worker/parallel runs."""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from sqlalchemy import event

from autotune import optuna_private
from autotune.errors import SpecError, StorageError
from autotune.inputs.check import check_inputs
from autotune.inputs.examples import Examples
from autotune.inputs.fingerprint import check_fingerprint, data_fingerprint
from autotune.search.samplers import SamplerFactory, make_pruner, make_sampler
from autotune.search.space import grid_size
from autotune.spec import StudySpec, parse_spec_yaml, searched_params
from autotune.storage import Store, claims, retry
from autotune.storage.engine import engine_kwargs, sqlite_pragmas
from autotune.storage.plan import load_fingerprint, save_fingerprint
from autotune.storage.url import url_string
from autotune.study import recovery
from autotune.study.limits import RunLimits

HEARTBEAT_INTERVAL_S = claims.HEARTBEAT_INTERVAL_S
GRACE_PERIOD_S = claims.GRACE_PERIOD_S


def labels_of(examples: Examples) -> list[str] | None:
    return list(examples.labels) if examples.labels else None


def spec_core(text: str) -> dict[str, Any]:
    data = parse_spec_yaml(text).model_dump(mode="json")
    data.pop("n_trials", None)
    for limit in ("study_time_s", "memory_limit_mb"):  # limits of a run, not the study's identity
        data["budget"].pop(limit, None)
    return data


def open_study(
    spec: StudySpec, store: Store, study_name: str, seed: int | None = None, sampler: SamplerFactory | None = None
) -> optuna.Study:
    """Create or load the Optuna study in the same database, with heartbeats so a dead
    worker's trial is failed and re-queued by the living; its sampler (the spec's, or
    ``sampler``'s) draws from ``seed``. A database away meanwhile is waited for (storage/retry.py)."""
    return retry.call(lambda: _open_study(spec, store, study_name, seed, sampler), "opening the Optuna study")


def _open_study(
    spec: StudySpec, store: Store, study_name: str, seed: int | None, sampler: SamplerFactory | None
) -> optuna.Study:
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
        # Optuna's calls (ask, tell, heartbeats) wait for a database that is away, as ours do;
        # right after it is back, no trial is failed as stale for a heartbeat the outage ate; and
        # the stale check reads the database once per heartbeat interval, not once per trial.
        retry.wait_for_connections(storage.engine)
        optuna_private.stale_trials_check(
            storage, GRACE_PERIOD_S + HEARTBEAT_INTERVAL_S, HEARTBEAT_INTERVAL_S, retry.since_outage_s
        )
        study = optuna.create_study(
            study_name=study_name,
            storage=storage,
            sampler=make_sampler(spec, seed, sampler),
            pruner=make_pruner(spec),
            direction="minimize",
            load_if_exists=True,
        )
        # Optuna's per-trial reads of what this process already holds are answered here
        # (twelve statements a trial on PostgreSQL, more with TPE; bench/own_trial_reads_cost.py).
        optuna_private.read_own_trials_locally(study)
        optuna_private.serve_sampling_from_last_sync(study)
        return study


def save_spec(store: Store, spec: StudySpec, name: str, labels: list[str] | None) -> None:
    existing = store.get_study(name)
    if existing is None:
        store.save_study(name, spec.to_yaml(), labels)
    elif spec_core(existing.spec_yaml) != spec_core(spec.to_yaml()):
        raise SpecError(
            f"study '{name}' already exists with a different spec: use --study-name for a new "
            f"study, or `autotune resume {name}` to continue it"
        )


def total_for(spec: StudySpec, n_trials: int) -> int:
    # A space of choices alone holds only so many distinct configurations, and a configuration is
    # never trained twice: the study ends once each has run (the grid sampler stops there too).
    finite = all(rng.choices is not None for _, rng in searched_params(spec))
    return min(n_trials, grid_size(spec)) if finite else n_trials


def begin(
    raw_url: str, name: str, spec: StudySpec | None = None, limits: RunLimits | None = None
) -> tuple[Store, StudySpec]:
    """The one set-up sequence before trials, for ``run``, ``resume``, ``worker`` and the parent of
    N workers. Returns the study's open store (the caller closes it) and its spec.

    With ``spec``: a new study, or the same spec continued. Its inputs are checked before a
    database is created, then the spec is stored (a different spec under the same name is a
    SpecError). Without: the stored study ``name``, its spec read from the database (StorageError,
    and nothing created, if there is none). Then ``limits`` over the spec's budget, and the model
    and data fingerprint checks (``before_study``)."""
    store = None if spec is not None else open_existing_study(raw_url, name)
    try:
        if spec is None:
            assert store is not None
            spec = load_stored_spec(store, name)
        spec = (limits or RunLimits()).apply(spec)
        labels = labels_of(check_inputs(spec))  # before a new database is created
        if store is None:
            store = Store.open(raw_url, create=True)
            save_spec(store, spec, name, labels)
        before_study(store, spec, name, labels)
    except BaseException:
        if store is not None:
            store.close()
        raise
    return store, spec


def prepare_study(
    raw_url: str, name: str, n_trials: int | None, *, spec: StudySpec | None = None, limits: RunLimits | None = None
) -> int:
    """``begin``, then create the Optuna study and reap dead local workers, in this process; return
    the total to reach. Used before starting several workers, so they never race on set-up."""
    quiet()
    store, spec = begin(raw_url, name, spec, limits)
    try:
        study = open_study(spec, store, name)
        recovery.reap_dead_local_workers(study, store, name)
    finally:
        store.close()
    return total_for(spec, n_trials or spec.n_trials)


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


def quiet() -> None:
    # Optuna logs every failed trial as a warning with a traceback; ours are expected states
    # (crash, interruption, a late result after a pause) and are reported by our progress lines.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # Heartbeats are "experimental" in Optuna since 2.9; we rely on them on purpose.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # peft calls a transformers API deprecated in transformers 5; nothing for a user to act on.
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


def load_stored_spec(store: Store, name: str) -> StudySpec:
    """The spec stored with study ``name``; StorageError if the study or its spec is unusable."""
    row = store.require_study(name)
    try:
        return parse_spec_yaml(row.spec_yaml, f"stored spec of {name}")
    except SpecError as err:
        raise StorageError(str(err)) from None


def before_study(store: Store, spec: StudySpec, name: str, labels: list[str] | None) -> None:
    """The model checked with transformers (no weights) and the data fingerprint stored or
    compared: every problem is one SpecError line before any trial."""
    from autotune.worker.preflight import preflight  # transformers: only when a study starts

    preflight(spec, labels)
    current = data_fingerprint(spec)
    stored = load_fingerprint(store, name)
    if stored is None:
        if current:
            save_fingerprint(store, name, current)
    else:
        check_fingerprint(stored, current, name)
