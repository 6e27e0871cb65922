"""SQLAlchemy engines for our tables, and the Optuna storage beside them.

SQLite: WAL mode (readers never block the writer) and a busy timeout, so several local workers
share one file without "database is locked". PostgreSQL: psycopg 3 with pre-ping.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL

from autotune.storage.url import url_string

SQLITE_BUSY_TIMEOUT_S = 60  # long trials write rarely; a minute of patience beats a lost result


def engine_kwargs(url: URL) -> dict[str, Any]:
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True, "pool_size": 2, "max_overflow": 2}


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
    cur.execute("PRAGMA synchronous=NORMAL")  # safe under WAL: a crash loses no committed data
    cur.close()


def make_engine(url: URL) -> Engine:
    engine = create_engine(url_string(url), **engine_kwargs(url))
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", sqlite_pragmas)
    return engine
