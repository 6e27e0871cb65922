"""Riding out a database that is briefly away: a restart, a failover, a maintenance window.

A transient error (the server refuses or drops the connection, is shutting down or starting up;
SQLite's "database is locked" past the busy timeout) is retried with backoff for up to
``AUTOTUNE_DB_RETRY_S`` seconds (default 120); past that, ``DatabaseUnavailable`` ends the run
with one line and its own exit status (errors.EXIT_DB_UNAVAILABLE). Three places wait this way:
- every new connection, ours and Optuna's (``wait_for_connections``: SQLAlchemy's ``do_connect``
  event), so a pooled connection found dead at checkout (pre-ping) waits for the server;
- every read and write of our tables (``retried`` around each Store method and storage function),
  for a statement cut off mid-flight; a write retried after a lost acknowledgement is recognised
  by the function itself (``Store.trial_finished``, ``Store.trial_started``), so it lands once;
- the driver's loop (study/driver.py), around Optuna's ask and tell.
Any other error is not transient and propagates at once. No torch, no optuna.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Engine, event

from autotune.errors import DatabaseUnavailable
from autotune.storage.url import redact

P = ParamSpec("P")
T = TypeVar("T")

ENV_VAR = "AUTOTUNE_DB_RETRY_S"
DEFAULT_RETRY_S = 120.0
FIRST_WAIT_S, MAX_WAIT_S = 0.25, 5.0  # backoff: 0.25, 0.5, 1, 2, 4, 5, 5 ... seconds

# Lower-cased fragments of the messages psycopg, libpq and sqlite3 give for a server that is away
# for now, not for a wrong URL, a missing database or a bad password (those are the user's).
_TRANSIENT = (
    "connection refused",
    "could not connect to server",
    "server closed the connection unexpectedly",
    "connection reset",
    "connection timed out",
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is in recovery mode",
    "terminating connection due to administrator command",
    "consuming input failed",
    "ssl syscall error",
    "the connection is closed",
    "connection is lost",
    "broken pipe",
    "database is locked",
)
_NOT_TRANSIENT = ("password authentication failed", "does not exist", "no pg_hba.conf entry")

_state = threading.local()
_outage = {"since": None, "back": 0.0}  # this process's view: when the last outage began and ended
_lock = threading.Lock()


def retry_s() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_VAR, DEFAULT_RETRY_S)))
    except ValueError:
        return DEFAULT_RETRY_S


def _messages(err: BaseException) -> list[str]:
    out, seen = [], set()
    stack: list[BaseException | None] = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append(str(e))
        stack += [e.__cause__, e.__context__, getattr(e, "orig", None)]
    return out


def is_transient(err: BaseException) -> bool:
    """True for an error that says the database is away for now (see the module docstring)."""
    if isinstance(err, DatabaseUnavailable):
        return False
    text = " ".join(_messages(err)).lower()
    return not any(m in text for m in _NOT_TRANSIENT) and any(m in text for m in _TRANSIENT)


def reason(err: BaseException) -> str:
    """The first line of the driver's own message (SQLAlchemy's wrapper adds the SQL and a link)."""
    e: BaseException | None = err
    while e is not None and getattr(e, "orig", None) is None and e.__cause__ is not None:
        e = e.__cause__
    inner = getattr(e, "orig", None) or e or err
    lines = [ln for ln in str(inner).strip().splitlines() if ln.strip()]
    return " ".join(lines[0].split())[:160] if lines else inner.__class__.__name__


def since_outage_s() -> float:
    """Seconds since this process last saw the database come back (inf: never away)."""
    with _lock:
        if _outage["since"] is not None:
            return 0.0
        back = float(_outage["back"] or 0.0)
    return time.monotonic() - back if back else float("inf")


def _down(err: BaseException, what: str, limit: float) -> None:
    with _lock:
        first = _outage["since"] is None
        if first:
            _outage["since"] = time.monotonic()
    if first:
        print(
            f"autotune: database unreachable ({reason(err)}); {what} waits for it, up to {limit:.0f} s ({ENV_VAR})",
            file=sys.stderr,
            flush=True,
        )


def _up() -> None:
    with _lock:
        since = _outage["since"]
        if since is None:
            return
        _outage["since"], _outage["back"] = None, time.monotonic()
    print(f"autotune: database back after {time.monotonic() - float(since):.0f} s", file=sys.stderr, flush=True)


class Outage:
    """One wait for the database: ``failed(err)`` sleeps the next backoff step, or raises
    ``DatabaseUnavailable`` once ``AUTOTUNE_DB_RETRY_S`` has passed since the first failure;
    ``ok()`` after a success (the next failure starts a new wait)."""

    def __init__(self, what: str, where: str = "the database") -> None:
        self.what, self.where = what, where
        self.deadline: float | None = None
        self.wait = FIRST_WAIT_S

    def failed(self, err: BaseException) -> None:
        limit = retry_s()
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + limit
        _down(err, self.what, limit)
        if now >= self.deadline:
            raise DatabaseUnavailable(
                f"{self.where} is unreachable: gave up after {limit:.0f} s ({reason(err)}); "
                f"set {ENV_VAR} to wait longer, and `autotune resume` finishes the study"
            ) from None
        time.sleep(min(self.wait, max(0.0, self.deadline - now)))
        self.wait = min(MAX_WAIT_S, self.wait * 2)

    def ok(self) -> None:
        if self.deadline is not None:
            self.deadline, self.wait = None, FIRST_WAIT_S
        _up()


def call(fn: Callable[[], T], what: str, where: str = "the database") -> T:
    """``fn()``, retried on transient errors with backoff until ``AUTOTUNE_DB_RETRY_S`` has passed
    since the first failure; then ``DatabaseUnavailable`` (one line, naming ``where``)."""
    if getattr(_state, "depth", 0):  # inside another retried call: the outer one waits
        return fn()
    _state.depth = 1
    try:
        outage = Outage(what, where)
        while True:
            try:
                out = fn()
            except Exception as err:
                if not is_transient(err):
                    raise
                outage.failed(err)
                continue
            outage.ok()
            return out
    finally:
        _state.depth = 0


def retried(fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` run through ``call``: one read or write of our tables, re-run whole on a transient
    error (each opens its own transaction, so a re-run starts clean)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        url = getattr(args[0], "url", None) if args else None  # a Store, or a function's store
        where = f"database {redact(url)}" if url is not None else "the database"
        return call(lambda: fn(*args, **kwargs), f"{fn.__name__}", where)

    return wrapper


def wait_for_connections(engine: Engine) -> None:
    """Make every new connection of ``engine`` wait for an away server (``call``), so pooled work
    resumes by itself when it is back. SQLAlchemy's ``do_connect`` event returns the connection."""

    where = f"database {redact(engine.url)}"

    def connect(dialect: Any, _rec: Any, cargs: Any, cparams: Any) -> Any:
        return call(lambda: dialect.loaded_dbapi.connect(*cargs, **cparams), "a new connection", where)

    event.listen(engine, "do_connect", connect)
