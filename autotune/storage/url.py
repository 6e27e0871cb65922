"""Storage URLs: where they come from, which are allowed, and how they are shown.

A password is never printed, logged, exported or passed on a command line: ``redact`` is the only
way a URL reaches a user, and workers get the URL through the environment.
"""

from __future__ import annotations

import os

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from autotune.errors import StorageError

ENV_VAR = "AUTOTUNE_STORAGE"
DEFAULT_URL = "sqlite:///autotune.db"


def resolve_url(flag: str | None) -> str:
    """``--storage`` wins, then ``$AUTOTUNE_STORAGE``, then the embedded SQLite default."""
    return flag or os.environ.get(ENV_VAR) or DEFAULT_URL


def parse_url(raw: str) -> URL:
    """Validate a URL and normalise PostgreSQL to the psycopg 3 driver."""
    try:
        url = make_url(raw)
    except (ArgumentError, ValueError):
        raise StorageError(f"storage URL {redact(raw)!r} is not a database URL (try sqlite:///autotune.db)") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        if url.drivername != "sqlite":
            raise StorageError(f"storage URL {redact(raw)!r}: use plain sqlite:///PATH")
        db = url.database or ""
        if db and db != ":memory:":
            parent = os.path.dirname(os.path.abspath(db))
            if not os.path.isdir(parent):
                raise StorageError(f"storage URL {redact(raw)!r}: directory {parent} does not exist")
        return url
    if backend == "postgresql":
        if url.drivername not in ("postgresql", "postgresql+psycopg"):
            raise StorageError(f"storage URL {redact(raw)!r}: use postgresql:// or postgresql+psycopg:// (psycopg 3)")
        if not url.database:
            raise StorageError(f"storage URL {redact(raw)!r}: name a database, e.g. postgresql://user@host/db")
        return url.set(drivername="postgresql+psycopg")
    raise StorageError(f"storage URL {redact(raw)!r}: unsupported database '{backend}' (use sqlite or postgresql)")


def url_string(url: URL) -> str:
    """The full URL, password included: for engines only, never for display."""
    return url.render_as_string(hide_password=False)


def redact(raw: str | URL) -> str:
    try:
        url = raw if isinstance(raw, URL) else make_url(raw)
    except (ArgumentError, ValueError):
        # Not parseable: hide anything between '://' and '@' that looks like credentials.
        text = str(raw)
        if "@" in text and "://" in text:
            scheme, rest = text.split("://", 1)
            return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        return text
    return url.render_as_string(hide_password=True)
