"""The Python API (autotune/api.py) as a notebook uses it: the README's "From Python" block runs
as written; errors are the typed exceptions with the CLI's lines; Ctrl-C during `run` stops the
study, re-queues its trial, returns, and `resume` finishes it; importing it loads no torch."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import autotune
from autotune.errors import SpecError, StorageError
from autotune.storage import Store
from tests.conftest import REPO, tiny_spec


def _readme_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_the_readme_from_python_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _readme_blocks()
    assert blocks
    (tmp_path / "studies").mkdir()
    shutil.copy(REPO / "studies" / "smoke.yaml", tmp_path / "studies" / "smoke.yaml")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), scope)
    study = scope["study"]
    assert isinstance(study, autotune.Study)
    best = scope["best"]
    assert isinstance(best, autotune.BestTrial) and best.score > 0 and set(best.params) >= {"rank", "batch_size"}
    df = scope["df"]
    assert len(df) >= 4 and list(df.columns)[:2] == ["trial", "state"]  # type: ignore[attr-defined]
    assert (tmp_path / "smoke-report.html").stat().st_size > 1000
    assert (Path(str(scope["adapter"])) / "adapter_config.json").exists()
    table = scope["table"]
    assert len(table) == 12 and table.attrs["study_time_s"] > 0  # type: ignore[attr-defined]
    assert scope["again"].best == best  # type: ignore[attr-defined]


def test_errors_are_typed_with_the_cli_lines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(StorageError, match="no study named 'nope'"):
        autotune.load("nope", storage=url)
    assert not (tmp_path / "x.db").exists()
    bad = tiny_spec("bad", budget={"train_examples": 0})
    with pytest.raises(SpecError) as err:
        autotune.run(bad, storage=url)
    assert "train_examples" in str(err.value) and "\n" not in str(err.value)


def test_ctrl_c_stops_the_study_and_resume_finishes_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    spec = tiny_spec("ctrlc", n_trials=2, budget={"train_examples": 4000, "evals": 2})
    done = threading.Event()

    def interrupt_once_a_trial_runs() -> None:  # the notebook's interrupt, in the middle of a trial
        while not done.is_set():
            if (tmp_path / "c.db").exists():
                store = Store.open(url, create=False) if _has_tables(url) else None
                if store is not None:
                    try:
                        if store.running("ctrlc"):
                            time.sleep(0.3)
                            os.kill(os.getpid(), signal.SIGINT)
                            return
                    finally:
                        store.close()
            time.sleep(0.1)

    watcher = threading.Thread(target=interrupt_once_a_trial_runs, daemon=True)
    watcher.start()
    try:
        study = autotune.run(spec, storage=url, show_progress=False)
    finally:
        done.set()
    store = Store.open(url, create=False)
    try:
        states = [r["state"] for r in store.trials("ctrlc")]
    finally:
        store.close()
    assert "interrupted" in states  # stored, and (below) re-queued: resume runs it again
    # and this interpreter (the kernel) is still running: the next lines execute
    study.resume(show_progress=False)
    store = Store.open(url, create=False)
    try:
        assert store.count_finished("ctrlc") == 2
    finally:
        store.close()


def _has_tables(url: str) -> bool:
    try:
        Store.open(url, create=False).close()
        return True
    except StorageError:
        return False


def test_importing_the_api_loads_no_torch_nor_optuna() -> None:
    code = "import sys, autotune; autotune.run; print(sorted(m for m in ('torch', 'optuna') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
