"""R11: a canary password in the storage URL appears in no output, log, CSV, table or argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from autotune.storage import Store
from tests.conftest import REPO
from tests.integration.workers import env, fast_spec, wait_for

CANARY = "CanaryPw7f3a9"

pytestmark = pytest.mark.postgres


def _argv_of_all_processes() -> str:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(out)


@pytest.mark.slow
def test_r11_canary_password_never_leaks(pg_url: str, tmp_path: Path) -> None:
    # The server trusts local connections, so any password works: a perfect canary.
    url = make_url(pg_url).set(password=CANARY).render_as_string(hide_password=False)
    spec = tmp_path / "r11.yaml"
    spec.write_text(json.dumps(fast_spec("r11", n_trials=4)))
    seen: list[str] = []

    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "run", str(spec), "--workers", "2", "--devices", "cpu"],
        env=env(url, AUTOTUNE_FAULTS="slow=0.1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    store = Store.open(url, create=True)
    try:
        wait_for(lambda: store.running("r11") or proc.poll() is not None, 120, "a worker to start a trial")
        argv_snapshot = _argv_of_all_processes()  # the workers are alive now
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen += [argv_snapshot, out.decode(), err.decode()]
    assert proc.returncode == 0, err.decode()[-2000:]

    # Every command a user would run, with the URL given both ways.
    csv_path = tmp_path / "r11.csv"
    for argv, via_env in (
        (["best", "r11", "--format", "json"], True),
        (["trials", "r11", "--format", "csv"], True),
        (["export", "r11", "--csv", str(csv_path)], True),
        (["db", "current"], True),
        (["best", "r11"], False),
        (["db", "upgrade"], False),
        (["best", "missing-study"], False),
    ):
        extra = [] if via_env else ["--storage", url]
        r = subprocess.run(
            [sys.executable, "-m", "autotune", *argv, *extra],
            env=env(url),
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        seen += [r.stdout, r.stderr]
    seen.append(csv_path.read_text())

    # Every table in the database, ours and Optuna's, as text.
    engine = create_engine(store.engine.url)
    with engine.connect() as conn:
        for table in inspect(conn).get_table_names():
            seen += [str(row) for row in conn.execute(text(f'SELECT * FROM "{table}"'))]
    engine.dispose()
    store.close()
    leaks = [s[:200] for s in seen if CANARY in s]
    figure = f"R11: canary found in {len(leaks)} of {len(seen)} outputs/argv/rows/files checked"
    assert not leaks, figure + f": {leaks}"
    assert len(seen) > 20, figure
    print(figure)
