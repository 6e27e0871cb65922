"""The one error line: a URL in a driver's message is redacted, and the colon after it stays a
colon (it was read as part of the database name and printed as "%3A", issue 21)."""

from __future__ import annotations

from autotune.cli.main import _one_line


def test_a_url_followed_by_a_colon_is_redacted_without_mangling() -> None:
    err = ValueError("database postgresql+psycopg://u:secret@127.0.0.1:5432/study: connection failed: refused")
    line = _one_line(err)
    assert "secret" not in line
    assert line == "database postgresql+psycopg://u:***@127.0.0.1:5432/study: connection failed: refused"
