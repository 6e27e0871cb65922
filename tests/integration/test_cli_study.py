"""A real tiny study through the CLI on SQLite: run, best, trials, resume, export, failures."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pandas as pd
import pytest

from autotune.storage import Store
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


@pytest.fixture
def study(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> tuple[Path, str]:
    spec = write_spec(tiny_spec(name="it"))
    code, _, err = cli("run", str(spec), "--storage", db_url, "--n-trials", "4", "--no-progress")
    assert code == 0, err
    return spec, db_url


def test_run_best_resume_export(study: tuple[Path, str], cli: CliFn, tmp_path: Path) -> None:
    _, url = study
    store = Store.open(url, create=False)
    rows = store.trials("it")
    assert len(rows) == 4
    assert store.count_finished("it") == 4
    assert all(r["state"] in ("complete", "pruned") for r in rows), [r["state"] for r in rows]

    code, out, err = cli("best", "it", "--storage", url, "--format", "json")
    assert code == 0, err
    best = json.loads(out)
    complete = [r for r in rows if r["state"] == "complete"]
    expect = min(complete, key=lambda r: r["score"])
    assert best["trial"] == expect["trial_number"]
    assert best["score"] == pytest.approx(expect["score"])
    assert set(best["params"]) == {"rank", "batch_size", "learning_rate"}
    assert best["score"] == pytest.approx(best["val_loss"] + 0.1 * best["train_loss"])
    assert best["wall_time_s"] > 0
    assert best["peak_memory_mb"] is not None

    code, out, _ = cli("best", "it", "--storage", url, "--format", "yaml")
    assert code == 0
    assert "learning_rate:" in out
    code, out, _ = cli("trials", "it", "--storage", url, "--format", "table")
    assert code == 0
    assert len(out.strip().splitlines()) == 2 + 4

    # Resume to a larger total without the spec file.
    code, _, err = cli("resume", "it", "--storage", url, "--n-trials", "6", "--no-progress")
    assert code == 0, err
    assert store.count_finished("it") == 6
    assert len(optuna.load_study(study_name="it", storage=url).trials) == 6

    csv_path = tmp_path / "results.csv"
    code, _, err = cli("export", "it", "--storage", url, "--csv", str(csv_path))
    assert code == 0, err
    df = pd.read_csv(csv_path)
    required = [
        "trial",
        "state",
        "rank",
        "batch_size",
        "learning_rate",
        "val_loss",
        "train_loss",
        "score",
        "wall_time_s",
        "train_time_s",
        "eval_time_s",
        "peak_memory_mb",
        "samples_per_s",
        "tokens_per_s",
        "device",
    ]
    assert [c for c in required if c not in df.columns] == []
    db_rows = {r["trial_number"]: r for r in store.trials("it")}
    assert sorted(df["trial"]) == sorted(db_rows)
    for rec in df.to_dict("records"):
        row = db_rows[rec["trial"]]
        assert rec["state"] == row["state"]
        assert rec["rank"] == row["rank"]
        assert rec["learning_rate"] == pytest.approx(row["learning_rate"])
        if row["score"] is not None:
            assert rec["score"] == pytest.approx(row["score"])
    store.close()


def test_curve_is_stored_for_every_evaluation(study: tuple[Path, str]) -> None:
    _, url = study
    store = Store.open(url, create=False)
    for row in store.trials("it"):
        curve = store.curve("it", row["trial_number"])
        assert curve, f"trial {row['trial_number']} has no curve"
        if row["state"] == "complete":
            assert len(curve) == 2
            assert curve[-1]["score"] == pytest.approx(row["score"])
    store.close()


def test_inspection_commands_do_not_import_torch(study: tuple[Path, str], tmp_path: Path) -> None:
    _, url = study
    for argv in (
        ["best", "it"],
        ["best", "it", "--format", "peft"],
        ["best", "it", "--format", "spec"],
        ["trials", "it"],
        ["export", "it", "--csv", str(tmp_path / "x.csv")],
        ["validate", "studies/smoke.yaml"],
    ):
        extra = [] if argv[0] == "validate" else ["--storage", url]
        code = (
            "import sys; from autotune.cli.main import main; rc = main(%r); "
            "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules); "
            "print(rc, heavy)"
        ) % (argv + extra)
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.stdout.strip().endswith("0 []"), f"{argv[0]}: {proc.stdout} {proc.stderr[-500:]}"


def test_oom_and_nan_become_stored_states(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's own fault hooks (autotune/worker/faults.py): an OOM at batch 32, a NaN loss at 16.
    monkeypatch.setenv("AUTOTUNE_FAULTS", "oom@batch_size=32,nan@batch_size=16")
    spec = write_spec(
        tiny_spec(
            name="faults",
            sampler="grid",
            search={
                "rank": {"choices": [4]},
                "batch_size": {"choices": [8, 16, 32]},
                "learning_rate": {"choices": [5e-3]},
            },
        )
    )
    code, _, err = cli("run", str(spec), "--storage", db_url, "--no-progress")
    assert code == 0, err
    store = Store.open(db_url, create=False)
    states = {r["batch_size"]: r for r in store.trials("faults")}
    assert {bs: r["state"] for bs, r in states.items()} == {8: "complete", 16: "diverged", 32: "oom"}
    assert "out of memory" in states[32]["error"]
    assert "non-finite" in states[16]["error"]
    best = store.best("faults")
    assert best is not None
    assert best["batch_size"] == 8
    # Optuna sees the failures as infeasible points, so the sampler avoids them.
    by_bs = {t.params["batch_size"]: t for t in optuna.load_study(study_name="faults", storage=db_url).trials}
    assert by_bs[32].constraints == {"failed": 1.0}
    assert by_bs[16].constraints == {"failed": 1.0}
    assert by_bs[8].constraints in ({}, {"failed": 0.0})
    assert math.isfinite(by_bs[8].value)
    store.close()


def test_user_errors_are_one_line(cli: CliFn, write_spec: Callable[..., Path], db_url: str, tmp_path: Path) -> None:
    bad = write_spec({**tiny_spec(), "lerning_rate": 1}, "bad.yaml")
    cases = [
        ("run", str(bad), "--storage", db_url),
        ("run", str(tmp_path / "missing.yaml")),
        ("best", "nope", "--storage", db_url),
        ("best", "x", "--storage", "mysql://u:pw@h/db"),
        (
            "run",
            str(write_spec(tiny_spec(data={"source": str(tmp_path / "none.jsonl")}), "d.yaml")),
            "--storage",
            db_url,
        ),
    ]
    for argv in cases:
        code, _, err = cli(*argv)
        assert code == 2, (argv, err)
        assert err.startswith("autotune: error: "), err
        assert err.count("\n") == 1, err
        assert "Traceback" not in err, err
        assert "pw" not in err, err
