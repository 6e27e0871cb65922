"""Reads and writes of autotune's tables. No torch, no optuna: the inspection commands use this."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, inspect, select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from autotune.errors import StorageError
from autotune.storage import confirm, migrate
from autotune.storage.engine import db_reason, init_lock, make_engine
from autotune.storage.retry import retried
from autotune.storage.rows import finite, now, result_values
from autotune.storage.tables import COUNTED, curves, studies, trials
from autotune.storage.url import parse_url, redact
from autotune.trial import TrialResult, TrialState
from autotune.version import __version__

# Searched params that also have an indexed column of their own; all of them are in ``params``.
_PARAM_COLUMNS = frozenset({"rank", "batch_size", "learning_rate"})


@dataclass(frozen=True)
class StudyRow:
    study_name: str
    spec_yaml: str
    labels: list[str] | None
    autotune_version: str
    created_at: dt.datetime
    updated_at: dt.datetime  # UTC: the study's row written, or its latest trial started or finished


def naive_utc(v: Any) -> dt.datetime | None:
    """A stored time as naive UTC: SQLite gives naive times (and strings from an aggregate),
    PostgreSQL aware ones."""
    if v is None:
        return None
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    return v.replace(tzinfo=None) if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)


def last_activity(name: str) -> Any:
    """The latest start or end of the study's trials, as one SQL expression: the study's row is
    not written per trial (every worker would update that one row, under its lock, per trial)."""
    return select(func.max(func.coalesce(trials.c.finished_at, trials.c.started_at))).where(trials.c.study_name == name)


class Store:
    """autotune's tables in one database: studies, trials, curves.

    Every method opens its own short transaction. A database that cannot be reached or is locked
    past the busy timeout raises StorageError (one line, the URL redacted); any other SQLAlchemy
    error is a bug and propagates as it is."""

    def __init__(self, url: URL, engine: Engine) -> None:
        self.url = url
        self.engine = engine

    @contextlib.contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        """A connection (``write``: a transaction, committed at the end); the one place where
        database errors are translated."""
        try:
            with self.engine.begin() if write else self.engine.connect() as conn:
                yield conn
        except OperationalError as err:
            raise StorageError(f"database {redact(self.url)}: {db_reason(err)}") from err

    # ---------------------------------------------------------------- opening

    @classmethod
    def open_existing(cls, raw_url: str, study: str) -> Store:
        """Open a database that must already hold ``study``; create and migrate nothing. An
        unknown database or study is one StorageError line naming the study."""
        try:
            store = cls.open(raw_url, create=False)
        except StorageError as err:
            raise StorageError(f"no study named '{study}': {err}") from None
        try:
            store.require_study(study)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, raw_url: str, *, create: bool) -> Store:
        """Open the database; with ``create`` bring our tables to the head revision first.

        Without ``create`` (the inspection commands) an empty or foreign database is a clear
        error instead of a silently created file."""
        url = parse_url(raw_url)
        if not create and url.get_backend_name() == "sqlite":
            db = url.database or ""
            import os

            if db not in ("", ":memory:") and not os.path.isfile(db):
                raise StorageError(f"no database at {redact(url)} (run a study first, or check --storage)")
        engine = make_engine(url)
        store = cls(url, engine)
        try:
            if create:
                store.upgrade()
            elif not inspect(engine).has_table("autotune_studies"):
                raise StorageError(f"{redact(url)} holds no autotune tables (run `autotune db upgrade` or a study)")
        except SQLAlchemyError as err:
            engine.dispose()
            raise StorageError(f"cannot use database {redact(url)}: {db_reason(err)}") from None
        return store

    def upgrade(self) -> None:
        with self.init_lock():
            migrate.upgrade(self.engine)

    def init_lock(self) -> contextlib.AbstractContextManager[None]:
        """Serialise schema set-up across processes (see ``engine.init_lock``)."""
        return init_lock(self.url, self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # ---------------------------------------------------------------- studies

    @retried
    def save_study(self, name: str, spec_yaml: str, labels: list[str] | None) -> None:
        """Record a new study's spec (and seq-cls label names); a no-op if it exists already."""
        at = now()
        # IntegrityError: another worker created it first; theirs is the same spec. The suppress
        # sits outside the transaction so that PostgreSQL's aborted transaction is rolled back.
        with contextlib.suppress(IntegrityError), self._tx(write=True) as conn:
            conn.execute(
                insert(studies).values(
                    study_name=name,
                    spec_yaml=spec_yaml,
                    labels=labels,
                    autotune_version=__version__,
                    created_at=at,
                    updated_at=at,
                )
            )

    @retried
    def get_study(self, name: str) -> StudyRow | None:
        """The study's row, or None."""
        with self._tx(write=False) as conn:
            row = conn.execute(select(studies).where(studies.c.study_name == name)).mappings().first()
            last = None if row is None else conn.execute(last_activity(name)).scalar()
        if row is None:
            return None
        times = (naive_utc(row["updated_at"]), naive_utc(last))
        return StudyRow(
            row["study_name"],
            row["spec_yaml"],
            row["labels"],
            row["autotune_version"],
            row["created_at"],
            max(t for t in times if t is not None),
        )

    @retried
    def study_names(self) -> list[str]:
        with self._tx(write=False) as conn:
            return list(conn.execute(select(studies.c.study_name).order_by(studies.c.id)).scalars())

    def require_study(self, name: str) -> StudyRow:
        """The study's row; StorageError naming the studies that do exist otherwise."""
        row = self.get_study(name)
        if row is None:
            known = self.study_names()
            hint = f" (studies here: {', '.join(known[:5])})" if known else " (this database has no studies)"
            raise StorageError(f"no study named '{name}' in {redact(self.url)}{hint}")
        return row

    # ---------------------------------------------------------------- trials

    @retried
    def trial_started(
        self,
        name: str,
        number: int,
        params: dict[str, Any],
        worker: str,
        retry_of: int | None = None,
        **extra: Any,
    ) -> None:
        """Insert the row of a trial that starts now (state running) with its sampled params.
        Params that have a column of their own (rank, batch size, learning rate) fill it too;
        ``extra`` sets or overrides other columns (``claims.claim_trial``: seed, duplicate)."""
        values = dict(
            state=TrialState.RUNNING.value,
            params=params,
            **{k: v for k, v in params.items() if k in _PARAM_COLUMNS},
            worker=worker,
            retry_of=retry_of,
            requeued=False,
            started_at=now(),
            finished_at=None,
        )
        values.update(extra)
        # Optuna numbers trials uniquely, so a plain insert: one statement per trial start. A
        # retried insert (storage/retry.py) whose first try was committed but not acknowledged
        # finds its own row: that is success, not a conflict.
        try:
            with self._tx(write=True) as conn:
                conn.execute(insert(trials).values(study_name=name, trial_number=number, **values))
        except IntegrityError:
            with self._tx(write=False) as conn:
                row = conn.execute(
                    select(trials.c.worker, trials.c.params).where(
                        trials.c.study_name == name, trials.c.trial_number == number
                    )
                ).first()
            if row is None or row.worker != worker or row.params != params:
                raise

    @retried
    def trial_finished(self, name: str, number: int, r: TrialResult) -> bool:
        """Store a result, only if the trial is still ours (running). False means a reaper failed
        it meanwhile (this worker was paused past the grace period): the result is dropped, as
        its retry is already queued."""
        values = dict(
            result_values(r),
            setup_time_s=r.setup_time_s,
            samples_per_s=r.samples_per_s,
            tokens_per_s=r.tokens_per_s,
            precision=r.precision,
            optimizer_steps=r.optimizer_steps,
            examples_seen=r.examples_seen,
            target_modules=r.target_modules,
            gradient_checkpointing=r.gradient_checkpointing,
            rank_used=r.rank_used,
            gpu_slot=r.gpu_slot,
            cotenants=r.cotenants,
        )
        with self._tx(write=True) as conn:
            n = conn.execute(
                update(trials)
                .where(
                    trials.c.study_name == name,
                    trials.c.trial_number == number,
                    trials.c.state == TrialState.RUNNING.value,
                )
                .values(**values)
            ).rowcount
            if not n:
                # our own earlier try, committed but not acknowledged (the connection dropped): the
                # row holds this very result (a reaper writes neither times nor examples)
                mine = conn.execute(
                    select(trials.c.state, trials.c.wall_time_s, trials.c.examples_seen).where(
                        trials.c.study_name == name, trials.c.trial_number == number
                    )
                ).first()
                return mine is not None and tuple(mine) == (r.state.value, r.wall_time_s, r.examples_seen)
            if r.curve:
                conn.execute(
                    insert(curves),
                    [
                        dict(
                            study_name=name,
                            trial_number=number,
                            eval_index=p.step,
                            optimizer_steps=p.optimizer_steps,
                            examples_seen=p.examples_seen,
                            val_loss=finite(p.val_loss),
                            train_loss=finite(p.train_loss),
                            score=finite(p.score),
                            accuracy=p.accuracy,
                        )
                        for p in r.curve
                    ],
                )
        return True

    @retried
    def fail_running(self, name: str, number: int, state: TrialState, error: str, requeued: bool) -> bool:
        """Mark a trial that died (reaped) or was stopped; True if it was still running."""
        with self._tx(write=True) as conn:
            return bool(
                conn.execute(
                    update(trials)
                    .where(
                        trials.c.study_name == name,
                        trials.c.trial_number == number,
                        trials.c.state == TrialState.RUNNING.value,
                    )
                    .values(state=state.value, error=error, requeued=requeued, finished_at=now())
                ).rowcount
            )

    @retried
    def set_requeued(self, name: str, number: int) -> None:
        """Mark that a retry of this trial was queued, so it no longer counts itself."""
        with self._tx(write=True) as conn:
            conn.execute(
                update(trials).where(trials.c.study_name == name, trials.c.trial_number == number).values(requeued=True)
            )

    @retried
    def count_finished(self, name: str) -> int:
        """Trials that count toward the study's total: finished states, plus crashes whose
        retries are spent. Interrupted and re-queued trials do not count: their re-run will; nor
        do configs stopped by their memory prediction before any training."""
        with self._tx(write=False) as conn:
            return int(
                conn.execute(
                    select(func.count()).select_from(trials).where(trials.c.study_name == name, COUNTED)
                ).scalar_one()
            )

    @retried
    def running(self, name: str) -> list[dict[str, Any]]:
        """Trials in state running: number, worker (host:pid), params, retry_of."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                select(trials.c.trial_number, trials.c.worker, trials.c.params, trials.c.retry_of).where(
                    trials.c.study_name == name, trials.c.state == TrialState.RUNNING.value
                )
            )
            return [dict(r._mapping) for r in rows]

    @retried
    def trials(self, name: str) -> list[dict[str, Any]]:
        """Every trial row of the study (all columns), in trial-number order."""
        with self._tx(write=False) as conn:
            rows = conn.execute(select(trials).where(trials.c.study_name == name).order_by(trials.c.trial_number))
            return [dict(r._mapping) for r in rows]

    def best(self, name: str) -> dict[str, Any] | None:
        """The study's recommendation, or None (``storage/confirm.best``: the confirmed mean after a
        confirmation phase, else the complete search trial with the lowest score)."""
        return confirm.best(self, name)

    @retried
    def curve(self, name: str, number: int) -> list[dict[str, Any]]:
        """One trial's evaluations (autotune_curves rows) in order."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                select(curves)
                .where(curves.c.study_name == name, curves.c.trial_number == number)
                .order_by(curves.c.eval_index)
            )
            return [dict(r._mapping) for r in rows]
