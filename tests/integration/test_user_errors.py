"""R9: malformed specs, bad paths, bad columns, bad storage URLs: each one clear line on stderr,
exit status 2, no traceback, and no study created."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text

from tests.conftest import REPO, tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def _spec(**over: Any) -> dict[str, Any]:
    return tiny_spec(name="r9", **over)


def _with(path: list[str], value: Any) -> dict[str, Any]:
    spec = _spec()
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return spec


SPEC_CASES: list[tuple[str, Any, str]] = [
    ("unknown top-level field", {**_spec(), "trails": 3}, "trails: unknown field"),
    ("unknown nested field", _with(["lora", "alpha"], 16), "lora.alpha: unknown field"),
    ("missing model", {k: v for k, v in _spec().items() if k != "model"}, "model: required field is missing"),
    ("missing data", {k: v for k, v in _spec().items() if k != "data"}, "data: required field is missing"),
    ("missing name", {k: v for k, v in _spec().items() if k != "name"}, "name: required field is missing"),
    ("bad task", _with(["task"], "summarise"), "task:"),
    ("bad sampler", _with(["sampler"], "bayesian"), "sampler.name:"),
    ("bad pruner", _with(["pruner"], "early"), "pruner.name:"),
    ("bad precision", _with(["precision"], "fp8"), "precision:"),
    ("zero trials", _with(["n_trials"], 0), "n_trials:"),
    ("negative budget", _with(["budget", "train_examples"], -5), "budget.train_examples:"),
    ("zero evals", _with(["budget", "evals"], 0), "budget.evals:"),
    ("fractional rank", _with(["search", "rank"], {"choices": [4.5]}), "whole numbers"),
    ("rank zero", _with(["search", "rank"], {"choices": [0, 4]}), "whole numbers"),
    ("lr above 1", _with(["search", "learning_rate"], {"low": 0.1, "high": 2.0}), "learning_rate values"),
    ("lr reversed", _with(["search", "learning_rate"], {"low": 1e-3, "high": 1e-4}), "must be below high"),
    ("lr log from 0", _with(["search", "learning_rate"], {"low": 0, "high": 1e-3, "log": True}), "low > 0"),
    ("empty choices", _with(["search", "batch_size"], {"choices": []}), "must not be empty"),
    ("choices and range", _with(["search", "rank"], {"choices": [4], "low": 2, "high": 8}), "not both"),
    ("duplicate choices", _with(["search", "rank"], {"choices": [4, 4]}), "distinct"),
    ("grid over a range", {**_spec(), "sampler": "grid"}, "grid sampler needs choices"),
    ("both weights zero", _with(["objective"], {"val_weight": 0, "train_weight": 0}), "cannot both be 0"),
    ("negative dropout", _with(["lora", "dropout"], -0.1), "lora.dropout:"),
    ("bad study name", _with(["name"], "my study!"), "name:"),
    ("prompt without completion", _with(["data", "prompt_field"], "q"), "go together"),
    ("text pair on an LM", _with(["data", "text_pair_field"], "b"), "seq-cls only"),
    ("heads do not divide", _with(["model", "tiny"], {"hidden_size": 30, "num_heads": 4}), "multiple of num_heads"),
    ("spec is a list", ["a", "b"], "must be a YAML mapping"),
    ("max_length too small", _with(["data", "max_length"], 2), "data.max_length:"),
    ("unknown target preset", _with(["lora", "target_modules"], 7), "lora.target_modules:"),
]


@pytest.mark.parametrize(("label", "spec", "expected"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_malformed_spec(label: str, spec: Any, expected: str, cli: CliFn, tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))
    _assert_one_line(cli("run", str(path), "--storage", db_url), expected, db_url)


def _data_case(tmp_path: Path, kind: str) -> tuple[dict[str, Any], str]:
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"text": f"row {i}", "label": i % 2}) + "\n" for i in range(20)))
    if kind == "missing file":
        return _with(["data", "source"], str(tmp_path / "nope.jsonl")), "no such file or directory"
    if kind == "missing column":
        return _with(["data", "text_field"], "body") | {
            "data": {"source": str(good), "text_field": "body"}
        }, "missing column 'body'"
    if kind == "missing label column":
        return {**_spec(task="seq-cls"), "data": {"source": str(good), "label_field": "y"}}, "missing column 'y'"
    if kind == "empty file":
        empty = tmp_path / "empty.jsonl"
        empty.write_text("")
        return _with(["data", "source"], str(empty)), "no examples"
    if kind == "bad json":
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"text": "ok"}\n{oops\n')
        return _with(["data", "source"], str(bad)), "invalid JSON on line 2"
    if kind == "unknown extension":
        odd = tmp_path / "data.parquetx"
        odd.write_text("x")
        return _with(["data", "source"], str(odd)), "cannot tell the format"
    if kind == "missing validation file":
        return {**_spec(), "data": {"source": str(good), "validation": str(tmp_path / "val.jsonl")}}, "no such file"
    if kind == "unknown builtin":
        return _with(["data", "source"], "builtin:wikipedia"), "unknown built-in dataset"
    if kind == "missing model dir":
        return _with(["model", "name"], str(tmp_path / "no-model")), "no such model directory"
    raise AssertionError(kind)


DATA_CASES = [
    "missing file",
    "missing column",
    "missing label column",
    "empty file",
    "bad json",
    "unknown extension",
    "missing validation file",
    "unknown builtin",
    "missing model dir",
]


@pytest.mark.parametrize("kind", DATA_CASES)
def test_bad_data_and_paths(kind: str, cli: CliFn, tmp_path: Path, db_url: str) -> None:
    spec, expected = _data_case(tmp_path, kind)
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))
    _assert_one_line(cli("run", str(path), "--storage", db_url), expected, db_url)


URL_CASES = [
    ("not a url", "not a database URL"),
    ("mysql://root:pw@127.0.0.1/test", "unsupported database 'mysql'"),
    ("postgresql+psycopg2://u:pw@127.0.0.1/x", "psycopg 3"),
    ("postgresql://u:pw@127.0.0.1", "name a database"),
    ("sqlite:////no/such/dir/x.db", "does not exist"),
]


@pytest.mark.parametrize(("url", "expected"), URL_CASES, ids=[c[0] for c in URL_CASES])
def test_bad_storage_url(url: str, expected: str, cli: CliFn, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(_spec()))
    code, _, err = cli("run", str(path), "--storage", url)
    assert code == 2, err
    assert err.startswith("autotune: error: "), err
    assert err.count("\n") == 1, err
    assert expected in err, err
    assert "Traceback" not in err, err
    assert ":pw@" not in err, err


def test_a_server_that_does_not_answer_is_waited_for_then_named_in_one_line(
    cli: CliFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connection refused is what a restarting server says too (issue 21): the run waits up to
    AUTOTUNE_DB_RETRY_S, says so once, then ends with one line and its own exit status, 4."""
    monkeypatch.setenv("AUTOTUNE_DB_RETRY_S", "1")
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(_spec()))
    code, _, err = cli("run", str(path), "--storage", "postgresql://postgres:pw@127.0.0.1:1/test")
    lines = err.strip().splitlines()
    assert code == 4, err
    assert len(lines) == 2, err
    assert lines[0].startswith("autotune: database unreachable (") and "up to 1 s (AUTOTUNE_DB_RETRY_S)" in lines[0]
    assert lines[1].startswith(
        "autotune: database postgresql+psycopg://postgres:***@127.0.0.1:1/test is unreachable"
    ), err
    assert "gave up after 1 s" in lines[1], err
    assert "Traceback" not in err and ":pw@" not in err, err


def test_errors_at_the_real_entry_point_have_no_traceback(tmp_path: Path) -> None:
    """The same through a fresh `python -m autotune` process, for three kinds of error."""
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({**_spec(), "trails": 1}))
    for argv in (
        ["run", str(path)],
        ["best", "x", "--storage", "mysql://u:pw@h/db"],
        ["resume", "nope", "--storage", f"sqlite:///{tmp_path / 'a.db'}"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "autotune", *argv], capture_output=True, text=True, cwd=REPO, check=False
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stdout == "", proc.stderr


def _assert_one_line(result: tuple[int, str, str], expected: str, db_url: str) -> None:
    code, _, err = result
    assert code == 2, f"exit {code}: {err}"
    assert err.startswith("autotune: error: "), err
    assert err.count("\n") == 1, err
    assert expected in err, f"expected {expected!r} in {err!r}"
    assert "Traceback" not in err
    # No study was created: no database, or one with no study in it.
    path = Path(db_url.removeprefix("sqlite:///"))
    if path.exists() and path.stat().st_size:
        engine = create_engine(db_url)
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            for table in ("studies", "autotune_studies"):
                if table in tables:
                    assert conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one() == 0, table
        engine.dispose()


@pytest.mark.parametrize("command", ["resume", "best", "trials", "export", "worker"])
def test_an_unknown_study_creates_no_database(command: str, cli: CliFn, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    argv = [command, "nosuch", "--storage", f"sqlite:///{db}"]
    if command == "export":
        argv += ["--csv", str(tmp_path / "out.csv")]
    code, _, err = cli(*argv)
    assert code == 2, err
    assert "no study named 'nosuch'" in err, err
    assert err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_an_unknown_study_in_an_existing_database_changes_nothing(cli: CliFn, tmp_path: Path, db_url: str) -> None:
    code, _, err = cli("db", "upgrade", "--storage", db_url)
    assert code == 0, err
    db = Path(db_url.removeprefix("sqlite:///"))
    before = db.read_bytes()
    code, _, err = cli("resume", "nosuch", "--storage", db_url)
    assert code == 2, err
    assert "no study named 'nosuch'" in err, err
    assert db.read_bytes() == before


def test_a_database_that_breaks_mid_use_is_one_line(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    """An operational database error (here: a table dropped under us) is translated once, in
    Store, into a one-line user error."""
    code, _, err = cli("run", str(write_spec(_spec(n_trials=1))), "--storage", db_url, "--no-progress")
    assert code == 0, err
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE autotune_curves"))
        conn.execute(text("DROP TABLE autotune_trials"))
    engine.dispose()
    code, _, err = cli("trials", "r9", "--storage", db_url)
    assert code == 2, err
    assert "no such table" in err, err
    assert err.count("\n") == 1, err


def test_a_programming_error_is_not_a_user_error(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug (here: a malformed query) keeps its traceback instead of posing as exit 2."""
    from sqlalchemy.exc import ProgrammingError

    from autotune.storage import Store

    code, _, err = cli("run", str(write_spec(_spec(n_trials=1))), "--storage", db_url, "--no-progress")
    assert code == 0, err

    def broken(self: Store, name: str) -> None:
        raise ProgrammingError("SELECT nonsense", {}, Exception("syntax error"))

    monkeypatch.setattr(Store, "best", broken)
    with pytest.raises(ProgrammingError):
        cli("best", "r9", "--storage", db_url)
