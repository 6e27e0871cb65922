"""Several worker processes on this machine sharing one study.

The parent creates the study (so N workers never race on an empty database), then starts N
``autotune worker`` processes and supervises them: one per GPU with ``CUDA_VISIBLE_DEVICES`` set,
or on a CPU a share of the cores each. The storage URL reaches them through the environment, never
their command line. Ctrl-C (or SIGTERM) is forwarded once: each worker stops its trial at the next
step, stores it as interrupted and re-queues it; a second Ctrl-C kills them at once. A worker that
dies (killed, crashed) is restarted while the study is unfinished; its trial is re-run by the
heartbeat/reaping logic in the driver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType

from autotune import driver
from autotune.cli.outcome import best_hint
from autotune.guard import EXIT_STOPPED
from autotune.spec import SpecError, StudySpec
from autotune.storage import ENV_VAR, Store

POLL_S = 0.5
MAX_RESTARTS_PER_WORKER = 20  # a worker that keeps dying (a bug, not a kill) must not loop forever


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
    # One GPU per worker; a CPU worker sees none (so torch never picks a GPU behind its back).
    env["CUDA_VISIBLE_DEVICES"] = w.device if w.device is not None else ""
    if w.threads is not None:
        for var in ("AUTOTUNE_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(w.threads)
    return env


def _argv(name: str, total: int, cache_dir: str | None) -> list[str]:
    argv = [sys.executable, "-m", "autotune", "worker", name, "--n-trials", str(total), "--no-progress"]
    if cache_dir:
        argv += ["--cache-dir", cache_dir]
    return argv


def run_parallel(
    spec: StudySpec,
    url: str,
    *,
    study_name: str | None,
    n_trials: int | None,
    workers: int,
    devices: str,
    show_progress: bool,
    cache_dir: str | None,
) -> int:
    name = study_name or spec.name
    total = driver.prepare_study(spec, url, name, n_trials or spec.n_trials)
    return supervise(url, name, total, plan_devices(devices, workers), show_progress, cache_dir)


def resume_parallel(
    url: str,
    study: str,
    *,
    n_trials: int | None,
    workers: int,
    devices: str,
    show_progress: bool,
    cache_dir: str | None,
) -> int:
    store = Store.open(url, create=True)
    try:
        spec = driver.load_stored_spec(store, study)
    finally:
        store.close()
    total = driver.prepare_study(spec, url, study, n_trials or spec.n_trials, resume=True)
    return supervise(url, study, total, plan_devices(devices, workers), show_progress, cache_dir)


def supervise(
    url: str,
    name: str,
    total: int,
    plan: list[tuple[str | None, int | None]],
    show_progress: bool,
    cache_dir: str | None,
) -> int:
    pool = [_Worker(i, dev, thr) for i, (dev, thr) in enumerate(plan)]
    argv = _argv(name, total, cache_dir)
    state = {"stopping": False}

    def start(w: _Worker) -> None:
        # A new session: a terminal's Ctrl-C reaches only us, and we forward it exactly once.
        w.proc = subprocess.Popen(argv, env=_env(url, w), start_new_session=True)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if state["stopping"]:
            for w in pool:
                if w.proc is not None and w.proc.poll() is None:
                    w.proc.kill()
            os._exit(128 + signum)
        state["stopping"] = True
        for w in pool:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.send_signal(signal.SIGINT)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    store = Store.open(url, create=True)
    view = _View(store, name, total, show_progress, len(pool))
    failed_user_error = False
    try:
        for w in pool:
            start(w)
        while True:
            alive = 0
            for w in pool:
                assert w.proc is not None
                rc = w.proc.poll()
                if rc is None:
                    alive += 1
                    continue
                if rc in (2, EXIT_STOPPED):
                    failed_user_error = True  # the worker printed its one line (a spec error or a stop)
                died = rc not in (0, 2, EXIT_STOPPED) and not state["stopping"]
                if died and w.restarts < MAX_RESTARTS_PER_WORKER and store.count_finished(name) < total:
                    w.restarts += 1
                    print(f"autotune: worker {w.index} exited with {rc}; restarting it", file=sys.stderr)
                    start(w)
                    alive += 1
            view.refresh({w.proc.pid: w.index for w in pool if w.proc is not None})
            if not alive:
                break
            time.sleep(POLL_S)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        view.close()
    finished = store.count_finished(name)
    best = store.best(name)
    store.close()
    best_txt = "-" if best is None else f"{best['score']:.4f}"
    print(
        f"study '{name}': {finished}/{total} trials finished with {len(pool)} workers, best score {best_txt}; "
        + best_hint(name, url),
        file=sys.stderr,
    )
    if failed_user_error:
        return 2
    if state["stopping"]:
        return 130
    return 0 if finished >= total else 1


class _View:
    """Progress across workers, read from the database: done / total, best, each worker's trial."""

    def __init__(self, store: Store, name: str, total: int, enabled: bool, n_workers: int) -> None:
        self.store, self.name, self.total, self.enabled = store, name, total, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.seen: set[int] = set()
        self.bar = None
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=min(store.count_finished(name), total),
                desc="trials",
                unit="trial",
                file=sys.stderr,
                dynamic_ncols=True,
            )
        self.seen = {r["trial_number"] for r in store.trials(name) if r["state"] != "running"}

    def refresh(self, pid_to_index: dict[int, int]) -> None:
        if not self.enabled:
            return
        rows = self.store.trials(self.name)
        best = self.store.best(self.name)
        best_txt = "-" if best is None else f"{best['score']:.4f}"
        for r in rows:
            if r["state"] != "running" and r["trial_number"] not in self.seen:
                self.seen.add(r["trial_number"])
                if self.bar is None:
                    score = "-" if r["score"] is None else f"{r['score']:.4f}"
                    print(
                        f"trial {r['trial_number']} {r['state']} score={score} best={best_txt}",
                        file=sys.stderr,
                        flush=True,
                    )
        if self.bar is not None:
            running = []
            for r in rows:
                if r["state"] == "running":
                    pid = (r["worker"] or "").rpartition(":")[2]
                    idx = pid_to_index.get(int(pid)) if pid.isdigit() else None
                    running.append(f"w{idx if idx is not None else '?'}: trial {r['trial_number']}")
            self.bar.n = min(self.store.count_finished(self.name), self.total)
            self.bar.set_postfix_str(f"best={best_txt} " + " | ".join(running), refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
