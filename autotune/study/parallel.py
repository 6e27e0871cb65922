"""Several worker processes on this machine sharing one study.

The parent creates the study (so N workers never race on an empty database), then starts N
``autotune worker`` processes and supervises them: one per GPU with ``CUDA_VISIBLE_DEVICES`` set,
or on a CPU a share of the cores each. The storage URL reaches them through the environment, never
their command line. Ctrl-C (or SIGTERM) is forwarded once: each worker stops its trial at the next
step, stores it as interrupted and re-queues it; a second Ctrl-C kills them at once. A worker that
dies (killed, crashed, or gave up on a database that stayed away) is restarted while the study is
unfinished; its trial is re-run by the heartbeat/reaping logic in the driver. The workers print no
summary of their own (``SUPERVISED_ENV``): the parent prints the run's one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from autotune.errors import EXIT_STOPPED, EXIT_USER_ERROR, DatabaseUnavailable, SpecError
from autotune.interrupt import TwoStageStop
from autotune.spec import StudySpec
from autotune.storage import ENV_VAR, Store
from autotune.study import setup
from autotune.study.limits import RunLimits
from autotune.study.progress import finished_line, make_bar
from autotune.study.summary import SUPERVISED_ENV, RunSummary

POLL_S = 0.5
MAX_RESTARTS_PER_WORKER = 20  # a worker that keeps dying (a bug, not a kill) must not loop forever
STOP_WAIT_S = 30  # how long workers get to store their trials when the run must end


@dataclass
class _Worker:
    index: int
    device: str | None  # GPU id, or None on CPU
    threads: int | None
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0


def plan_devices(devices: str, workers: int) -> list[tuple[str | None, int | None]]:
    """(GPU id or None, torch threads or None) for each worker."""
    if devices not in ("auto", "cpu"):
        ids = [d.strip() for d in devices.split(",") if d.strip()]
        if not ids or not all(d.isdigit() for d in ids):
            raise SpecError(f"--devices: expected auto, cpu or GPU ids like 0,1; got {devices!r}")
        n = max(workers, len(ids))
        return [(ids[i % len(ids)], None) for i in range(n)]
    if devices == "auto":
        import torch  # only to count GPUs

        count = torch.cuda.device_count()
        if count:
            n = max(workers, count)
            return [(str(i % count), None) for i in range(n)]
    cores = os.cpu_count() or 1
    per = max(1, cores // workers)  # split the cores instead of N workers fighting over all of them
    return [(None, per) for _ in range(workers)]


def _env(url: str, w: _Worker) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV_VAR] = url  # the URL may hold a password: environment only, never argv
    env["PYTHONUNBUFFERED"] = "1"
    env[SUPERVISED_ENV] = "1"
    # One GPU per worker; a CPU worker sees none (so torch never picks a GPU behind its back).
    env["CUDA_VISIBLE_DEVICES"] = w.device if w.device is not None else ""
    if w.threads is not None:
        for var in ("AUTOTUNE_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(w.threads)
    return env


def _argv(name: str, total: int, cache_dir: str | None, limits: RunLimits) -> list[str]:
    argv = [sys.executable, "-m", "autotune", "worker", name, "--n-trials", str(total), "--no-progress"]
    argv += limits.argv()
    if cache_dir:
        argv += ["--cache-dir", cache_dir]
    return argv


def run_parallel(
    url: str,
    name: str,
    *,
    spec: StudySpec | None = None,
    n_trials: int | None,
    workers: int,
    devices: str,
    show_progress: bool,
    cache_dir: str | None,
    limits: RunLimits | None = None,
) -> RunSummary:
    """Create the study from ``spec`` (or continue the stored study ``name`` when ``spec`` is None;
    an unknown study creates nothing), set up once in this process, then run it with ``workers``
    processes (see ``supervise``)."""
    limits = limits or RunLimits()
    total = setup.prepare_study(url, name, n_trials, spec=spec, limits=limits)
    return supervise(url, name, total, plan_devices(devices, workers), show_progress, cache_dir, limits)


def supervise(
    url: str,
    name: str,
    total: int,
    plan: list[tuple[str | None, int | None]],
    show_progress: bool,
    cache_dir: str | None,
    limits: RunLimits | None = None,
) -> RunSummary:
    """Start one worker process per plan entry and watch them until none is left; restart a
    worker that dies while the study is unfinished."""
    pool = [_Worker(i, dev, thr) for i, (dev, thr) in enumerate(plan)]
    argv = _argv(name, total, cache_dir, limits or RunLimits())

    def start(w: _Worker) -> None:
        # A new session: a terminal's Ctrl-C reaches only us, and we forward it exactly once.
        w.proc = subprocess.Popen(argv, env=_env(url, w), start_new_session=True)

    def alive() -> list[subprocess.Popen[bytes]]:
        return [w.proc for w in pool if w.proc is not None and w.proc.poll() is None]

    def forward() -> None:  # first Ctrl-C: each worker stores its trial as interrupted
        for p in alive():
            p.send_signal(signal.SIGINT)

    def kill() -> None:  # second Ctrl-C: now
        for p in alive():
            p.kill()

    stop = TwoStageStop(on_first=forward, on_second=kill)
    store = Store.open(url, create=True)
    view = _View(store, name, total, show_progress)
    user_error = stopped = False
    try:
        with stop.installed():
            for w in pool:
                start(w)
            while True:
                running = 0
                for w in pool:
                    assert w.proc is not None
                    rc = w.proc.poll()
                    if rc is None:
                        running += 1
                        continue
                    user_error = user_error or rc == EXIT_USER_ERROR  # the worker printed its one line
                    stopped = stopped or rc == EXIT_STOPPED  # a repeated crash or a prediction: its line too
                    died = rc not in (0, EXIT_USER_ERROR, EXIT_STOPPED) and not stop.event.is_set()
                    if died and w.restarts < MAX_RESTARTS_PER_WORKER and store.count_finished(name) < total:
                        w.restarts += 1
                        print(f"autotune: worker {w.index} exited with {rc}; restarting it", file=sys.stderr)
                        start(w)
                        running += 1
                view.refresh({w.proc.pid: w.index for w in pool if w.proc is not None})
                if not running:
                    break
                time.sleep(POLL_S)
        finished, best = store.count_finished(name), store.best(name)
    except DatabaseUnavailable:
        # the database stayed away past the limit for the parent too: the workers stop as on a
        # Ctrl-C (each stores its trial if it can), and the run ends with the one line
        forward()
        deadline = time.monotonic() + STOP_WAIT_S
        while alive() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        kill()
        raise
    finally:
        view.close()
        store.close()
    best_score = None if best is None else best["score"]
    return RunSummary(
        name,
        finished,
        total,
        0,
        stop.event.is_set(),
        best_score,
        len(pool),
        user_error,
        stop_reason="a worker stopped the run (its reason is printed above)" if stopped else None,
        stop_code=EXIT_STOPPED if stopped else None,
    )


class _View:
    """Progress across workers, read from the database: done / total, best, each worker's trial."""

    def __init__(self, store: Store, name: str, total: int, enabled: bool) -> None:
        self.store, self.name, self.total, self.enabled = store, name, total, enabled
        self.bar = make_bar(total, store.count_finished(name)) if enabled else None
        self.seen = {r["trial_number"] for r in store.trials(name) if r["state"] != "running"}

    def refresh(self, pid_to_index: dict[int, int]) -> None:
        if not self.enabled:
            return
        rows = self.store.trials(self.name)
        best = self.store.best(self.name)
        best_score = None if best is None else best["score"]
        for r in rows:
            if r["state"] != "running" and r["trial_number"] not in self.seen:
                self.seen.add(r["trial_number"])
                if self.bar is None:
                    print(finished_line(r["trial_number"], r["state"], r["score"], best_score), file=sys.stderr)
        if self.bar is not None:
            running = []
            for r in rows:
                if r["state"] == "running":
                    pid = (r["worker"] or "").rpartition(":")[2]
                    idx = pid_to_index.get(int(pid)) if pid.isdigit() else None
                    running.append(f"w{idx if idx is not None else '?'}: trial {r['trial_number']}")
            self.bar.n = min(self.store.count_finished(self.name), self.total)
            best_txt = "-" if best_score is None else f"{best_score:.4f}"
            self.bar.set_postfix_str(f"best={best_txt} " + " | ".join(running), refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
