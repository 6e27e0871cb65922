"""Helpers for tests that run real worker processes against a shared database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import StorageError
from autotune.spec import parse_spec
from autotune.storage import Store
from autotune.study.setup import prepare_study
from tests.conftest import REPO, optuna_url, tiny_spec


def fast_spec(name: str, **over: Any) -> dict[str, Any]:
    """Trials of a few optimizer steps on a one-layer model: well under a second each."""
    base = tiny_spec(name=name, budget={"train_examples": 64, "evals": 1, "max_eval_examples": 16})
    base["search"] = {
        "rank": {"choices": [4, 8]},
        "batch_size": {"choices": [16, 32]},
        "learning_rate": {"low": 1e-3, "high": 1e-2, "log": True},
    }
    base.update(over)
    return base


def create_study(url: str, spec: dict[str, Any], total: int) -> None:
    prepare_study(url, spec["name"], total, spec=parse_spec(spec))


def env(url: str, **extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e.update({"AUTOTUNE_STORAGE": url, "PYTHONUNBUFFERED": "1", "AUTOTUNE_THREADS": "1", "OMP_NUM_THREADS": "1"})
    e.update(extra)
    return e


def start_worker(url: str, study: str, total: int, log_dir: Path, tag: str, **extra: str) -> subprocess.Popen[bytes]:
    out = open(log_dir / f"worker-{tag}.log", "wb")  # noqa: SIM115 - closed by the OS when the test ends
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", "worker", study, "--n-trials", str(total), "--no-progress"],
        env=env(url, **extra),
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )


def running_of(url: str, study: str, pid: int) -> dict[str, Any] | None:
    try:
        store = Store.open(url, create=False)
    except StorageError:
        return None  # the process under test has not created the database yet
    try:
        for row in store.running(study):
            if (row["worker"] or "").endswith(f":{pid}"):
                return row
        return None
    except StorageError:
        return None  # the database is there, its tables not yet ("no such table")
    finally:
        store.close()


def wait_for(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def audit(url: str, study: str) -> dict[str, Any]:
    """What a user would check after a storm: lost, duplicated and stuck trials."""
    store = Store.open(url, create=False)
    rows = store.trials(study)
    finished = store.count_finished(study)
    store.close()
    trials = optuna.load_study(study_name=study, storage=optuna_url(url)).trials
    numbers = [t.number for t in trials]
    ours = [r["trial_number"] for r in rows]
    return {
        "finished": finished,
        "optuna_trials": len(trials),
        "optuna_running": sum(t.state == optuna.trial.TrialState.RUNNING for t in trials),
        "optuna_waiting": sum(t.state == optuna.trial.TrialState.WAITING for t in trials),
        "our_running": sum(r["state"] == "running" for r in rows),
        "duplicated_numbers": len(numbers) - len(set(numbers)) + len(ours) - len(set(ours)),
        "missing_rows": len(set(numbers) - set(ours)),  # an Optuna trial with no autotune row: lost
        "rows": rows,
    }
