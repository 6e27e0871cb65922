"""Shared fixtures: tiny specs that run in seconds, and in-process CLI calls."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

# Keep every test's tokenized-data cache inside its tmp dir, never in the user's home.
os.environ.setdefault("AUTOTUNE_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "autotune-test-cache"))


# The search alone: the confirmation phase (on by default, budget.confirm_top) has its own tests;
# a test that replaces a spec's whole budget adds this to keep counting only search trials.
NO_CONFIRM: dict[str, int] = {"confirm_top": 0}


def tiny_spec(name: str = "t", **over: Any) -> dict[str, Any]:
    """A causal-LM spec on the built-in smoke data, sized for a test: each trial < 1 s."""
    spec: dict[str, Any] = {
        "name": name,
        "task": "causal-lm",
        "model": {
            "name": "tiny",
            "tiny": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64},
        },
        "data": {"source": "builtin:smoke", "max_length": 24, "max_examples": 400},
        "lora": {"target_modules": "all-linear", "dropout": 0.0},
        "search": {
            "rank": {"choices": [4, 8]},
            "batch_size": {"choices": [16, 32]},
            "learning_rate": {"low": 1e-3, "high": 1e-2, "log": True},
        },
        "budget": {"train_examples": 128, "evals": 2, "max_eval_examples": 64, **NO_CONFIRM},
        "sampler": "tpe",
        "pruner": "none",
        "seed": 0,
        "n_trials": 3,
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


@pytest.fixture(autouse=True)
def _kept_adapters_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study keeps its recommendation's adapter by default (budget.keep_adapters): never in the
    repository, whatever the test's working directory (worker subprocesses inherit the variable)."""
    monkeypatch.setenv("AUTOTUNE_ADAPTERS_DIR", str(tmp_path / "kept-adapters"))


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[..., Path]:
    def _write(data: dict[str, Any], filename: str = "spec.yaml") -> Path:
        path = tmp_path / filename
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return _write


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in this process; returns (exit code, stdout, stderr)."""
    from autotune.cli.main import main

    def _run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


# ---------------------------------------------------------------- PostgreSQL

PG_ADMIN_URL = os.environ.get("AUTOTUNE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def pg_server() -> str:
    import psycopg

    try:
        psycopg.connect(PG_ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError as err:
        pytest.skip(f"no PostgreSQL server answers at {PG_ADMIN_URL} ({str(err).splitlines()[0]})")
    return PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_server: str) -> Any:
    """A fresh database for one test, dropped afterwards."""
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    yield url
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The storage contract runs on every backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


def optuna_url(url: str) -> str:
    """The URL as autotune hands it to Optuna (psycopg 3 for PostgreSQL)."""
    from autotune.storage.url import parse_url, url_string

    return url_string(parse_url(url))
