from __future__ import annotations

import pytest

from autotune.errors import StorageError
from autotune.storage.url import DEFAULT_URL, ENV_VAR, parse_url, redact, resolve_url


def test_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert resolve_url(None) == DEFAULT_URL
    monkeypatch.setenv(ENV_VAR, "sqlite:///env.db")
    assert resolve_url(None) == "sqlite:///env.db"
    assert resolve_url("sqlite:///flag.db") == "sqlite:///flag.db"


def test_postgres_uses_psycopg3() -> None:
    assert parse_url("postgresql://u@localhost/db").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("raw", "msg"),
    [
        ("not a url", "not a database URL"),
        ("mysql://u@h/db", "unsupported database 'mysql'"),
        ("postgresql+psycopg2://u@h/db", "psycopg 3"),
        ("postgresql://u:pw@h", "name a database"),
        ("sqlite:////no/such/dir/x.db", "does not exist"),
    ],
)
def test_bad_urls(raw: str, msg: str) -> None:
    with pytest.raises(StorageError, match=msg) as err:
        parse_url(raw)
    assert "pw" not in str(err.value)


def test_redact_hides_password() -> None:
    assert "s3cret" not in redact("postgresql://user:s3cret@host:5432/db")
    assert "s3cret" not in redact("weird://user:s3cret@@host")
