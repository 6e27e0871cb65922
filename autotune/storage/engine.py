"""SQLAlchemy engines for our tables, and the Optuna storage beside them.

SQLite: WAL mode (readers never block the writer) and a busy timeout, so several local workers
share one file without "database is locked". PostgreSQL: psycopg 3 with pre-ping.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from autotune.storage.retry import wait_for_connections
from autotune.storage.url import url_string

_PG_INIT_LOCK = 0x6175746F74756E  # "autotun" in ASCII: one advisory lock key for schema set-up
# Long trials write rarely; a minute of patience beats a lost result. Past it, "database is locked"
# is retried as a transient error (storage/retry.py). AUTOTUNE_SQLITE_BUSY_S shortens it for tests.
SQLITE_BUSY_TIMEOUT_S = float(os.environ.get("AUTOTUNE_SQLITE_BUSY_S", "60"))


def engine_kwargs(url: URL) -> dict[str, Any]:
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True, "pool_size": 2, "max_overflow": 2}


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={round(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cur.execute("PRAGMA synchronous=NORMAL")  # safe under WAL: a crash loses no committed data
    cur.close()


def make_engine(url: URL) -> Engine:
    engine = create_engine(url_string(url), **engine_kwargs(url))
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", sqlite_pragmas)
    wait_for_connections(engine)  # a server that is away is waited for (storage/retry.py)
    return engine


@contextlib.contextmanager
def sqlite_file_lock(url: URL, suffix: str) -> Iterator[None]:
    """An exclusive flock on ``DB.suffix`` beside a SQLite file (every process using a SQLite
    database is on this machine); a no-op for an in-memory database."""
    db = url.database or ""
    if db in ("", ":memory:"):
        yield
        return
    import fcntl

    with open(f"{db}.{suffix}", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def init_lock(url: URL, engine: Engine) -> Iterator[None]:
    """Serialise schema creation across processes: N workers started at the same instant on an
    empty database would otherwise race to create the same tables. SQLite: flock on a lock
    file beside the database; never on the database file itself, because closing any other
    descriptor of that file drops SQLite's own POSIX locks. PostgreSQL: an advisory lock."""
    if url.get_backend_name() == "sqlite":
        with sqlite_file_lock(url, "autotune-lock"):
            yield
        return
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_INIT_LOCK})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_INIT_LOCK})
            conn.commit()


def db_reason(err: SQLAlchemyError) -> str:
    """The first line of the driver's message (never the URL, which SQLAlchemy adds itself)."""
    if isinstance(err, OperationalError) and err.orig is not None:
        text_ = str(err.orig).strip().splitlines()[0] if str(err.orig).strip() else err.orig.__class__.__name__
    else:
        text_ = err.__class__.__name__
    return text_[:200]
