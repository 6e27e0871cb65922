"""`autotune studies`: one row per study (trials by state, best, created/updated, live workers),
on SQLite and PostgreSQL; a missing database is one line; nothing is created."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import update

from autotune.storage import Store
from autotune.storage.tables import trials
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def test_one_row_per_study_with_trials_best_and_workers(
    cli: CliFn, write_spec: Callable[..., Path], any_db_url: str
) -> None:
    for name, n in (("alpha", 2), ("beta", 3)):
        code, _, err = cli("run", str(write_spec(tiny_spec(name, n_trials=n), f"{name}.yaml")), "--storage",
                           any_db_url, "--no-progress")  # fmt: skip
        assert code == 0, err
    # a trial left running by this very process (a live worker) in beta
    store = Store.open(any_db_url, create=False)
    try:
        with store.engine.begin() as conn:
            conn.execute(
                update(trials)
                .where(trials.c.study_name == "beta", trials.c.trial_number == 0)
                .values(state="running", worker=f"{socket.gethostname()}:{os.getpid()}")
            )
        best_alpha = store.best("alpha")
    finally:
        store.close()
    code, out, err = cli("studies", "--storage", any_db_url, "--format", "json")
    assert code == 0, err
    recs = {r["name"]: r for r in json.loads(out)}
    assert set(recs) == {"alpha", "beta"}
    assert recs["alpha"]["task"] == "causal-lm" and recs["alpha"]["model"] == "tiny"
    assert sum(recs["alpha"]["trials"].values()) == 2 and sum(recs["beta"]["trials"].values()) == 3
    assert recs["beta"]["trials"]["running"] == 1
    assert best_alpha is not None and recs["alpha"]["best_score"] == best_alpha["score"]
    assert recs["alpha"]["workers_running"] == 0 and recs["beta"]["workers_running"] == 1
    assert recs["alpha"]["created_at"] <= recs["alpha"]["updated_at"]

    code, out, _ = cli("studies", "--storage", any_db_url)
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].split()[:3] == ["name", "task", "model"] and len(lines) == 4
    code, out, _ = cli("studies", "--storage", any_db_url, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in rows] == ["alpha", "beta"] and rows[1]["workers_running"] == "1"


def test_a_missing_database_is_one_line_and_nothing_is_created(cli: CliFn, tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    code, out, err = cli("studies", "--storage", f"sqlite:///{db}")
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1 and "no database" in err
    assert not db.exists()


def test_an_empty_database_says_so(cli: CliFn, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert cli("db", "upgrade", "--storage", url)[0] == 0
    code, out, err = cli("studies", "--storage", url)
    assert code == 0 and out == "" and err.strip().startswith("autotune: no studies in")
