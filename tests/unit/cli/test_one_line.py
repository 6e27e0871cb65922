"""The one error line: a URL in a driver's message is redacted, and the colon after it stays a
colon (it was read as part of the database name and printed as "%3A", issue 21)."""

from __future__ import annotations

from autotune.cli.main import _one_line


def test_a_url_followed_by_a_colon_is_redacted_without_mangling() -> None:
    err = ValueError("database postgresql+psycopg://u:secret@127.0.0.1:5432/study: connection failed: refused")
    line = _one_line(err)
    assert "secret" not in line
    assert line == "database postgresql+psycopg://u:***@127.0.0.1:5432/study: connection failed: refused"


def test_validate_notes_ranks_off_tensor_core_multiples_on_a_gpu_study(tmp_path: object, capsys: object) -> None:
    import json
    from pathlib import Path

    from autotune.cli.main import main
    from tests.conftest import tiny_spec

    path = Path(str(tmp_path)) / "s.yaml"
    path.write_text(json.dumps(tiny_spec(precision="bf16", search={"rank": {"choices": [4, 8, 12]}})))
    assert main(["validate", str(path), "--no-data"]) == 0
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "ranks 4, 12 are not multiples of 8" in err and "lora.align_rank: 8" in err
    path.write_text(json.dumps(tiny_spec(precision="bf16", lora={"align_rank": 8})))
    assert main(["validate", str(path), "--no-data"]) == 0
    assert "not multiples of 8" not in capsys.readouterr().err  # type: ignore[attr-defined]
