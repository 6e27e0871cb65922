"""Reads and writes of autotune's tables. No torch, no optuna: the inspection commands use this."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, insert, inspect, select, text, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from autotune import __version__
from autotune.storage import migrate
from autotune.storage.engine import make_engine
from autotune.storage.tables import curves, studies, trials
from autotune.storage.url import StorageError, parse_url, redact
from autotune.trial import FINISHED_STATES, TrialResult, TrialState

_PG_INIT_LOCK = 0x6175746F74756E  # "autotun" in ASCII: one advisory lock key for schema set-up


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


@dataclass(frozen=True)
class StudyRow:
    study_name: str
    spec_yaml: str
    labels: list[str] | None
    autotune_version: str
    created_at: dt.datetime
    updated_at: dt.datetime


class Store:
    def __init__(self, url: URL, engine: Engine) -> None:
        self.url = url
        self.engine = engine

    # ---------------------------------------------------------------- opening

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
            raise StorageError(f"cannot use database {redact(url)}: {_db_reason(err)}") from None
        return store

    def upgrade(self) -> None:
        with self.init_lock():
            migrate.upgrade(self.engine)

    @contextlib.contextmanager
    def init_lock(self) -> Iterator[None]:
        """Serialise schema creation across processes: N workers started at the same instant on an
        empty database would otherwise race to create the same tables. SQLite: flock on a lock
        file beside the database; never on the database file itself, because closing any other
        descriptor of that file drops SQLite's own POSIX locks. PostgreSQL: an advisory lock."""
        if self.url.get_backend_name() == "sqlite":
            db = self.url.database or ""
            if db in ("", ":memory:"):
                yield
                return
            import fcntl

            with open(f"{db}.autotune-lock", "a+b") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
            return
        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_INIT_LOCK})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_INIT_LOCK})
                conn.commit()

    def close(self) -> None:
        self.engine.dispose()

    # ---------------------------------------------------------------- studies

    def save_study(self, name: str, spec_yaml: str, labels: list[str] | None) -> None:
        now = _now()
        # IntegrityError: another worker created it first; theirs is the same spec. The suppress
        # sits outside the transaction so that PostgreSQL's aborted transaction is rolled back.
        with contextlib.suppress(IntegrityError), self.engine.begin() as conn:
            conn.execute(
                insert(studies).values(
                    study_name=name,
                    spec_yaml=spec_yaml,
                    labels=labels,
                    autotune_version=__version__,
                    created_at=now,
                    updated_at=now,
                )
            )

    def get_study(self, name: str) -> StudyRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(studies).where(studies.c.study_name == name)).mappings().first()
        if row is None:
            return None
        return StudyRow(
            row["study_name"],
            row["spec_yaml"],
            row["labels"],
            row["autotune_version"],
            row["created_at"],
            row["updated_at"],
        )

    def study_names(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.execute(select(studies.c.study_name).order_by(studies.c.id)).scalars())

    def require_study(self, name: str) -> StudyRow:
        row = self.get_study(name)
        if row is None:
            known = self.study_names()
            hint = f" (studies here: {', '.join(known[:5])})" if known else " (this database has no studies)"
            raise StorageError(f"no study named '{name}' in {redact(self.url)}{hint}")
        return row

    # ---------------------------------------------------------------- trials

    def trial_started(
        self, name: str, number: int, params: dict[str, Any], worker: str, retry_of: int | None = None
    ) -> None:
        values = dict(
            state=TrialState.RUNNING.value,
            params=params,
            rank=params.get("rank"),
            batch_size=params.get("batch_size"),
            learning_rate=params.get("learning_rate"),
            worker=worker,
            retry_of=retry_of,
            requeued=False,
            started_at=_now(),
            finished_at=None,
        )
        # Optuna numbers trials uniquely, so a plain insert: one statement per trial start.
        with self.engine.begin() as conn:
            conn.execute(insert(trials).values(study_name=name, trial_number=number, **values))

    def trial_finished(self, name: str, number: int, r: TrialResult) -> bool:
        """Store a result, only if the trial is still ours (running). False means a reaper failed
        it meanwhile (this worker was paused past the grace period): the result is dropped, as
        its retry is already queued."""
        values = dict(
            state=r.state.value,
            val_loss=_finite(r.val_loss),
            train_loss=_finite(r.train_loss),
            score=_finite(r.score),
            accuracy=r.accuracy,
            wall_time_s=r.wall_time_s,
            setup_time_s=r.setup_time_s,
            train_time_s=r.train_time_s,
            eval_time_s=r.eval_time_s,
            samples_per_s=r.samples_per_s,
            tokens_per_s=r.tokens_per_s,
            peak_memory_mb=r.peak_memory_mb,
            memory_kind=r.memory_kind,
            device=r.device,
            precision=r.precision,
            optimizer_steps=r.optimizer_steps,
            examples_seen=r.examples_seen,
            versions=r.versions,
            error=r.error,
            finished_at=_now(),
        )
        with self.engine.begin() as conn:
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
                return False
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
                            val_loss=_finite(p.val_loss),
                            train_loss=_finite(p.train_loss),
                            score=_finite(p.score),
                            accuracy=p.accuracy,
                        )
                        for p in r.curve
                    ],
                )
            conn.execute(update(studies).where(studies.c.study_name == name).values(updated_at=_now()))
        return True

    def fail_running(self, name: str, number: int, state: TrialState, error: str, requeued: bool) -> bool:
        """Mark a trial that died (reaped) or was stopped; True if it was still running."""
        with self.engine.begin() as conn:
            return bool(
                conn.execute(
                    update(trials)
                    .where(
                        trials.c.study_name == name,
                        trials.c.trial_number == number,
                        trials.c.state == TrialState.RUNNING.value,
                    )
                    .values(state=state.value, error=error, requeued=requeued, finished_at=_now())
                ).rowcount
            )

    def set_requeued(self, name: str, number: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(trials).where(trials.c.study_name == name, trials.c.trial_number == number).values(requeued=True)
            )

    def infeasible_twin(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """An earlier trial with exactly these params that ran out of memory or diverged."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(trials.c.trial_number, trials.c.state, trials.c.params).where(
                    trials.c.study_name == name, trials.c.state.in_([TrialState.OOM.value, TrialState.DIVERGED.value])
                )
            )
            for r in rows:
                if r.params == params:
                    return dict(r._mapping)
        return None

    def count_finished(self, name: str) -> int:
        """Trials that count toward the study's total: finished states, plus crashes whose
        retries are spent. Interrupted and re-queued trials do not count: their re-run will; nor
        do configs stopped by their memory prediction before any training."""
        counted = [s.value for s in FINISHED_STATES] + [TrialState.CRASHED.value]
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(trials)
                    .where(
                        trials.c.study_name == name,
                        trials.c.state.in_(counted),
                        trials.c.requeued.is_(False),
                        trials.c.not_run.is_not(True),  # skipped by its prediction (autotune.planning)
                    )
                ).scalar_one()
            )

    def running(self, name: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(trials.c.trial_number, trials.c.worker, trials.c.params, trials.c.retry_of).where(
                    trials.c.study_name == name, trials.c.state == TrialState.RUNNING.value
                )
            )
            return [dict(r._mapping) for r in rows]

    def trials(self, name: str) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(trials).where(trials.c.study_name == name).order_by(trials.c.trial_number))
            return [dict(r._mapping) for r in rows]

    def best(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    select(trials)
                    .where(
                        trials.c.study_name == name,
                        trials.c.state == TrialState.COMPLETE.value,
                        trials.c.score.is_not(None),
                    )
                    .order_by(trials.c.score, trials.c.trial_number)
                    .limit(1)
                )
                .mappings()
                .first()
            )
        return dict(row) if row is not None else None

    def curve(self, name: str, number: int) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(curves)
                .where(curves.c.study_name == name, curves.c.trial_number == number)
                .order_by(curves.c.eval_index)
            )
            return [dict(r._mapping) for r in rows]


def _db_reason(err: SQLAlchemyError) -> str:
    if isinstance(err, OperationalError) and err.orig is not None:
        text = str(err.orig).strip().splitlines()[0] if str(err.orig).strip() else err.orig.__class__.__name__
    else:
        text = err.__class__.__name__
    return text[:200]
