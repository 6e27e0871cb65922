"""A database that goes away for a while (issue 21): a restart of the PostgreSQL server, a SQLite
file locked past its busy timeout. The workers wait and go on; no trial is lost, doubled, stored
as crashed or left running; one that stays away past AUTOTUNE_DB_RETRY_S ends the run with one
line and exit 4, and `resume` finishes exactly the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autotune.storage import Store
from tests.conftest import REPO
from tests.integration.workers import audit, env, fast_spec, wait_for

FAST_HEARTBEAT = {"AUTOTUNE_HEARTBEAT_S": "1", "AUTOTUNE_GRACE_S": "3"}  # grace far below the outage


def _run(spec_path: Path, url: str, *extra: str, **environ: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autotune", "run", str(spec_path), "--no-progress", *extra],
        env=env(url, **environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _running(url: str, study: str) -> int:
    try:
        store = Store.open(url, create=False)
    except Exception:
        return 0  # not created yet, or the server is away
    try:
        return len(store.running(study))
    finally:
        store.close()


def _cluster() -> tuple[str, str]:
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        pytest.skip("restarting the PostgreSQL server needs root and pg_ctlcluster (Debian's postgresql-common)")
    rows = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True).stdout.split("\n")
    online = [r.split() for r in rows if r.split() and r.split()[2] == "5432" and r.split()[3] == "online"]
    if not online:
        pytest.skip("no online cluster on port 5432 to restart")
    return online[0][0], online[0][1]


@pytest.mark.slow
@pytest.mark.postgres
def test_a_postgres_server_stopped_for_10_s_mid_run_is_ridden_out(pg_url: str, tmp_path: Path) -> None:
    version, name = _cluster()
    total = 8
    path = tmp_path / "pgo.yaml"
    path.write_text(json.dumps(fast_spec("pgo", n_trials=total)))
    proc = _run(path, pg_url, "--workers", "2", "--devices", "cpu", AUTOTUNE_FAULTS="slow=0.5", **FAST_HEARTBEAT)
    try:
        wait_for(lambda: _running(pg_url, "pgo") == 2, 180, "both workers mid-trial")
        subprocess.run(["pg_ctlcluster", version, name, "stop"], check=True)
        time.sleep(10)
    finally:
        subprocess.run(["pg_ctlcluster", version, name, "start"], check=True)
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    a = audit(pg_url, "pgo")
    states = [r["state"] for r in a["rows"]]
    figure = f"exit {proc.returncode}, finished {a['finished']}/{total}, states {states}"
    assert proc.returncode == 0, figure + "\n" + err
    assert a["finished"] == total, figure
    assert "crashed" not in states, figure + "\n" + err
    assert a["our_running"] == 0 and a["optuna_running"] == 0, figure
    assert a["duplicated_numbers"] == 0 and a["missing_rows"] == 0, figure
    assert "autotune: database unreachable (" in err, err  # said once per worker that saw it
    assert err.count(f"study 'pgo': {total}/{total} trials finished with 2 workers") == 1, err  # one summary
    print(figure)


def _hold_lock(db: Path, seconds: float, started: threading.Event) -> None:
    """Another process's exclusive write lock on the SQLite file, for ``seconds``."""
    code = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(float(sys.argv[2])); c.execute('COMMIT')"
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    started.set()
    p.wait(timeout=seconds + 60)


@pytest.mark.slow
def test_a_sqlite_file_locked_past_the_busy_timeout_is_waited_for(tmp_path: Path) -> None:
    total = 4
    db = tmp_path / "l.db"
    url = f"sqlite:///{db}"
    path = tmp_path / "l.yaml"
    path.write_text(json.dumps(fast_spec("lk", n_trials=total)))
    proc = _run(path, url, AUTOTUNE_FAULTS="slow=0.5", AUTOTUNE_SQLITE_BUSY_S="0.5", **FAST_HEARTBEAT)
    try:
        wait_for(lambda: _running(url, "lk") == 1, 180, "a trial mid-way")
        locked = threading.Event()
        holder = threading.Thread(target=_hold_lock, args=(db, 5.0, locked))
        holder.start()
        assert locked.wait(30)
        holder.join()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    a = audit(url, "lk")
    states = [r["state"] for r in a["rows"]]
    assert proc.returncode == 0, err
    assert a["finished"] == total and "crashed" not in states and a["our_running"] == 0, (states, err)
    assert "database is locked" in err and "autotune: database back after" in err, err


@pytest.mark.slow
def test_a_database_away_past_the_limit_ends_the_run_and_resume_finishes_it(tmp_path: Path) -> None:
    total = 4
    db = tmp_path / "g.db"
    url = f"sqlite:///{db}"
    path = tmp_path / "g.yaml"
    path.write_text(json.dumps(fast_spec("gv", n_trials=total)))
    proc = _run(path, url, AUTOTUNE_FAULTS="slow=0.5", AUTOTUNE_SQLITE_BUSY_S="0.5", AUTOTUNE_DB_RETRY_S="2")
    try:
        wait_for(lambda: _running(url, "gv") == 1, 180, "a trial mid-way")
        locked = threading.Event()
        holder = threading.Thread(target=_hold_lock, args=(db, 12.0, locked))
        holder.start()
        assert locked.wait(30)
        _, err = proc.communicate(timeout=120)
        holder.join()
    finally:
        if proc.poll() is None:
            proc.kill()
    last = err.strip().splitlines()[-1]
    assert proc.returncode == 4, err
    assert last.startswith(f"autotune: database sqlite:///{db} is unreachable: gave up after 2 s"), err
    assert "Traceback" not in err, err
    before = Store.open(url, create=False).count_finished("gv")
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "resume", "gv", "--no-progress"],
        env=env(url),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    a = audit(url, "gv")
    assert done.returncode == 0, done.stderr
    assert before < total and a["finished"] == total, (before, a["finished"])
    assert a["our_running"] == 0 and a["optuna_running"] == 0 and a["duplicated_numbers"] == 0, a
    # the trial the outage cut off is run again once, with the same params
    cut = [r for r in a["rows"] if r["requeued"]]
    assert all(sum(x["retry_of"] == r["trial_number"] for x in a["rows"]) == 1 for r in cut), a["rows"]


@pytest.mark.slow
def test_a_full_disk_stops_the_run_in_one_line_and_trials_says_the_worker_is_gone(tmp_path: Path) -> None:
    """Not transient (it does not pass by waiting): one line, exit 2, as before. The trial that
    was running cannot be stored as ended; `trials` says that its worker is gone."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)]).returncode:
        pytest.skip("a tiny tmpfs needs root and mount")
    try:
        url = f"sqlite:///{disk / 'f.db'}"
        path = tmp_path / "f.yaml"
        path.write_text(json.dumps(fast_spec("full", n_trials=4)))
        proc = _run(path, url, AUTOTUNE_FAULTS="slow=1.0")
        try:
            wait_for(lambda: _running(url, "full") == 1, 180, "a trial mid-way")
            with open(disk / "filler", "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass  # ENOSPC: the disk is full
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        (disk / "filler").unlink()
        lines = err.strip().splitlines()
        assert proc.returncode == 2, err
        assert lines[-1].startswith("autotune: error: database sqlite:///") and "disk is full" in lines[-1], err
        listed = subprocess.run(
            [sys.executable, "-m", "autotune", "trials", "full"], env=env(url), capture_output=True, text=True, cwd=REPO
        )
        assert listed.returncode == 0, listed.stderr
        # whichever write the full disk refused first, a trial left running is named as such
        store = Store.open(url, create=False)
        running = [r["trial_number"] for r in store.running("full")]
        store.close()
        print(f"full disk: exit {proc.returncode}, left running {running}")
        for n in running:
            assert f"note: trial {n} is running, but its worker" in listed.stderr, listed.stderr
            assert "is gone; `autotune resume full` runs it again" in listed.stderr, listed.stderr
    finally:
        subprocess.run(["umount", str(disk)], check=False)
