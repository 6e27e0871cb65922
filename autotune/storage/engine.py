"""SQLAlchemy engines for our tables, and the Optuna storage beside them.

SQLite: WAL mode (readers never block the writer) and a busy timeout, so several local workers
share one file without "database is locked". PostgreSQL: psycopg 3, a pooled connection pinged
when it was idle a second or more.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError, OperationalError, SQLAlchemyError

from autotune.storage.retry import wait_for_connections
from autotune.storage.url import url_string

_PG_INIT_LOCK = 0x6175746F74756E  # "autotun" in ASCII: one advisory lock key for schema set-up
# Long trials write rarely; a minute of patience beats a lost result. Past it, "database is locked"
# is retried as a transient error (storage/retry.py). AUTOTUNE_SQLITE_BUSY_S shortens it for tests.
SQLITE_BUSY_TIMEOUT_S = float(os.environ.get("AUTOTUNE_SQLITE_BUSY_S", "60"))


# A pooled connection idle this long is pinged before use (ping_after_idle). SQLAlchemy's
# pool_pre_ping pings at every checkout: ~20 checkouts per trial, each a round trip, in a loop that
# reuses connections within milliseconds (bench/scaling.py; issue 23).
PING_IDLE_S = 1.0


def engine_kwargs(url: URL) -> dict[str, Any]:
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_size": 2, "max_overflow": 2}


def ping_after_idle(engine: Engine) -> None:
    """Ping a server connection at checkout when it sat in the pool for PING_IDLE_S or more: one
    that a restart killed meanwhile is replaced (the new one waits for the server, retry.py)
    instead of failing the statement. A connection that dies within the second after its last use
    fails its statement, which the callers retry as any statement cut off mid-flight."""
    if engine.url.get_backend_name() == "sqlite":
        return

    def checkin(_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    def checkout(conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")  # None: a new connection (the dict is cleared with a dead one)
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return
        try:
            cur = conn.cursor()
            cur.execute("SELECT 1")
            cur.close()
        except Exception as err:  # the pool replaces it: SQLAlchemy retries a checkout on this
            raise DisconnectionError(str(err)) from err

    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)


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
    ping_after_idle(engine)
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
