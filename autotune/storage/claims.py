"""How workers of one study coordinate through the database: worker slots (distinct sampler
seeds), a study lock around ask-and-claim (never more than n_trials), and the claim of a trial
that notices an identical configuration already run or running (no training twice).

Plain functions over a ``Store``; torch- and optuna-free like the rest of ``autotune.storage``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, select
from sqlalchemy.exc import IntegrityError

from autotune.storage.engine import sqlite_file_lock
from autotune.storage.retry import retried
from autotune.storage.store import Store
from autotune.storage.tables import COUNTED, studies, trials, workers
from autotune.trial import FINISHED_STATES, TrialState

# Rows a new proposal must not repeat: running, finished, or crashed with its retries spent.
# Interrupted and re-queued rows are superseded by their retry; duplicates point at an original.
# Optuna's heartbeat (study/setup.py): a running trial beats this often, and one silent for the
# grace period is failed and re-queued; `autotune studies` reads the same figures.
HEARTBEAT_INTERVAL_S = int(os.environ.get("AUTOTUNE_HEARTBEAT_S", "10"))
GRACE_PERIOD_S = int(os.environ.get("AUTOTUNE_GRACE_S", "60"))

_LIVE = [s.value for s in FINISHED_STATES] + [TrialState.RUNNING.value, TrialState.CRASHED.value]
_SHARED_RESULT = ("val_loss", "train_loss", "score", "accuracy")


@retried
def claim_worker_slot(store: Store, name: str, worker: str, seed_for: Callable[[int], int]) -> tuple[int, int]:
    """Join ``name`` as the next worker: (slot, seed). Slots count 0, 1, 2... in order of joining,
    across machines and restarts; ``seed_for(slot)`` gives the seed recorded with it."""
    for _ in range(100):  # a lost race on the unique (study, slot) just takes the next slot
        with store._tx(write=False) as conn:
            last = conn.execute(select(func.max(workers.c.slot)).where(workers.c.study_name == name)).scalar()
        slot = 0 if last is None else int(last) + 1
        seed = seed_for(slot)
        row = dict(study_name=name, slot=slot, seed=seed, worker=worker, started_at=dt.datetime.now(dt.UTC))
        try:
            with store._tx(write=True) as conn:
                conn.execute(insert(workers).values(**row))
        except IntegrityError:
            continue
        return slot, seed
    raise RuntimeError(f"could not claim a worker slot in study {name!r}")


@contextlib.contextmanager
def study_lock(store: Store, name: str) -> Iterator[None]:
    """Serialise "count the taken slots, ask Optuna, claim the trial" across every worker of a
    study. PostgreSQL: a row lock on the study's row, held in a transaction of its own.
    SQLite: an flock beside the database file (every worker of a SQLite study is on this
    machine); SQLite's own write lock cannot be used, because Optuna writes the asked trial
    through another connection while it is held."""
    if store.url.get_backend_name() == "sqlite":
        with sqlite_file_lock(store.url, "autotune-study-lock"):
            yield
        return
    with store._tx(write=True) as conn:
        conn.execute(select(studies.c.id).where(studies.c.study_name == name).with_for_update())
        yield


@dataclass(frozen=True)
class Taken:
    """The slots of a study's total that are taken, split into the search's trials and the
    confirmation's runs (``confirm_of`` set). Finished counts as ``Store.count_finished`` does."""

    search_finished: int
    search_running: int
    confirm_finished: int
    confirm_running: int

    @property
    def finished(self) -> int:
        return self.search_finished + self.confirm_finished

    @property
    def running(self) -> int:
        return self.search_running + self.confirm_running


@retried
def slots_taken(store: Store, name: str) -> Taken:
    """What the loop counts before each ask, in one query where there were five counts in three
    transactions (bench/slot_counts_cost.py: the difference is inside the machine's noise)."""
    finished = COUNTED
    running = trials.c.state == TrialState.RUNNING.value
    search, confirm = trials.c.confirm_of.is_(None), trials.c.confirm_of.is_not(None)
    with store._tx(write=False) as conn:
        row = conn.execute(
            select(
                func.count().filter(and_(search, finished)),
                func.count().filter(and_(search, running)),
                func.count().filter(and_(confirm, finished)),
                func.count().filter(and_(confirm, running)),
            ).where(trials.c.study_name == name)
        ).one()
    return Taken(*(int(n) for n in row))


def claim_trial(
    store: Store,
    name: str,
    number: int,
    params: dict[str, Any],
    worker: str,
    *,
    retry_of: int | None,
    sampler_seed: int | None,
    confirm_of: int | None = None,
    train_seed: int | None = None,
) -> dict[str, Any] | None:
    """Insert trial ``number``'s row. If an identical configuration is already running or
    finished (and this is not a retry of it), the row is stored as ``duplicate`` of that trial,
    sharing its result, and that trial's row is returned; else the row is ``running`` and None
    is returned. Call under ``study_lock`` so two workers never claim the same config."""
    # a retry re-runs its original, and a confirmation re-trains a search trial's config on purpose
    twin = None if retry_of is not None or confirm_of is not None else _twin(store, name, params)
    extra: dict[str, Any] = {"sampler_seed": sampler_seed, "confirm_of": confirm_of, "train_seed": train_seed}
    if twin is not None:
        extra.update({k: twin[k] for k in _SHARED_RESULT})
        extra.update(
            state=TrialState.DUPLICATE.value,
            duplicate_of=twin["trial_number"],
            finished_at=dt.datetime.now(dt.UTC),
            error=f"duplicate of trial {twin['trial_number']} ({twin['state']}): not trained again",
        )
    store.trial_started(name, number, params, worker, retry_of, **extra)
    return twin


@retried
def _twin(store: Store, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The earliest live trial with exactly these params."""
    cols = [trials.c.trial_number, trials.c.state, trials.c.params, *(trials.c[k] for k in _SHARED_RESULT)]
    query = select(*cols).where(
        trials.c.study_name == name,
        trials.c.state.in_(_LIVE),
        trials.c.requeued.is_(False),
        trials.c.confirm_of.is_(None),  # a run at the target budget is not this budget's result
    )
    for key in ("rank", "batch_size"):  # narrow with the indexed-width columns; params decides
        if key in params:
            query = query.where(trials.c[key] == params[key])
    with store._tx(write=False) as conn:
        for row in conn.execute(query.order_by(trials.c.trial_number)):
            if row.params == params:
                return dict(row._mapping)
    return None


@retried
def distinct_configs(store: Store, name: str) -> int:
    """How many distinct configurations the study has run or is running."""
    with store._tx(write=False) as conn:
        rows = conn.execute(
            select(trials.c.params).where(
                trials.c.study_name == name, trials.c.state.in_(_LIVE), trials.c.confirm_of.is_(None)
            )
        ).scalars()
        return len({repr(sorted(p.items())) for p in rows})


def seed_for_slot(study_seed: int, slot: int) -> int:
    """Slot 0 samples with the study's own seed (a one-worker study draws exactly what it always
    did); slot k > 0 with a seed derived from (study seed, k), in NumPy's 32-bit seed range."""
    if slot == 0:
        return study_seed
    return zlib.crc32(f"autotune-worker:{study_seed}:{slot}".encode())


def is_local(worker: str | None) -> bool:
    """Whether ``worker`` (host:pid) names a process of this host."""
    import socket

    host, _, pid = (worker or "").rpartition(":")
    return host == socket.gethostname() and pid.isdigit()


def worker_gone(worker: str | None) -> bool:
    """True when ``worker`` (host:pid, as stored with a trial) was a process of this host that no
    longer exists: its running trial will not finish (reaped by the next run, shown by `trials`)."""
    import os
    import socket

    import psutil

    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    return not psutil.pid_exists(int(pid))
