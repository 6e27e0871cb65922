"""1 vs 2 workers on a sleep-bound objective: what the driver and storage cost per trial.

The worker is replaced (through the driver's ``trial_fn`` seam) by a trial that sleeps SLEEP_S
and reports one evaluation; no torch work happens. Everything else is real: Optuna's sampler and
RDBStorage, heartbeats, our tables, the counting and reaping logic. Measured:

- speedup_2_workers: wall time of N trials with one worker over wall time with two processes
  sharing the study (SQLite), both timed from a common start signal after imports to the end of
  the last worker's loop; the median of R pairs taken in turn (``--repeats``, the runs kept in
  ``*_runs``). The workers' exit (interpreter shutdown) is timed apart (``worker_exit_s_runs``),
  as one worker runs in this process and pays none; ``speedup_2_workers_with_exit_runs`` counts it.
- sqlite_ms_per_trial / postgres_ms_per_trial: (one worker's wall time - N * SLEEP_S) / N, the
  median of R studies.
- distinct_configs_K_workers: distinct configurations among the N trials trained with K = 1, 2, 4
  workers (duplicates of a running or finished trial are recorded, not trained). Before workers
  had seed streams of their own, 2 workers gave N/2 + a few: they marched in lockstep.

- worker_startup_s: one fresh process's start-up to its first trial (imports, set-up, preflight),
  paid once per worker and kept out of the throughput figures (the parent's one worker is warm).
- ray_*: the same trials with ``--backend ray`` on a local Ray, 1 and 2 actors (trials/s, the
  driver's ms per trial, the speedup of 2 actors), beside 2 workers' trials/s.

Writes bench/results/scaling.json and ends with:
    speedup_2_workers=X sqlite_ms_per_trial=Y postgres_ms_per_trial=Z ...

Run: python bench/scaling.py [--trials 40] [--sleep 0.2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
PG_ADMIN = os.environ.get("AUTOTUNE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _spec(name: str, n: int, confirm_top: int = 0) -> Any:
    """N search trials. No confirmation phase unless asked: its runs (2 by default) are trials too,
    and counted against N they read as 10 ms per trial more (0.4 s of sleep over 40 trials)."""
    from autotune.spec import parse_spec

    return parse_spec(
        {
            "name": name,
            "model": {"name": "tiny"},
            "data": {"source": "builtin:smoke"},
            "budget": {"evals": 1, "confirm_top": confirm_top},
            "pruner": "none",
            "sampler": "tpe",
            "n_trials": n,
        }
    )


def _sleep_trial(sleep_s: float) -> Any:
    import gc

    from autotune.trial import EvalPoint, TrialResult, TrialState

    # What the real worker does when it is loaded (study/driver.default_trial_fn), which this
    # trial stands in for: the ~490k objects of transformers (the preflight) leave the collector.
    # Without it each worker process spent 4.6 s at exit in the interpreter's last collection
    # (py-spy: gc_collect_main), which "2 workers" timed and "1 worker" (in this process) did not.
    gc.freeze()

    def run(config: Any, report: Any, interrupt: threading.Event | None) -> Any:
        time.sleep(sleep_s)
        score = random.random()
        report(1, score)
        return TrialResult(
            state=TrialState.COMPLETE,
            val_loss=score,
            train_loss=score,
            score=score,
            wall_time_s=sleep_s,
            train_time_s=sleep_s,
            curve=[EvalPoint(1, 1, 1, score, score, score)],
        )

    return run


def _child(url: str, name: str, n: int, sleep_s: float, ready: Any, go: Any, ended: Any) -> None:
    from autotune.study.driver import resume_study

    # The same warm-up the one-worker run had in the parent: a worker's start-up (imports, the
    # preflight's transformers and meta model: 5.4 s in a profile) is paid once per process, not
    # per trial, and is measured apart (worker_startup_s). Timing it inside "2 workers" but not
    # inside "1 worker" made 2 workers read 0.63-0.75x.
    one_worker(url, 3, 0.0)
    ready.set()
    go.wait()
    resume_study(url, name, n_trials=n, show_progress=False, trial_fn=_sleep_trial(sleep_s))
    ended.put(time.monotonic())  # the study's end, as this worker saw it; its exit comes after


def distinct_configs(url: str, name: str) -> int:
    from autotune.storage import Store

    store = Store.open(url, create=False)
    rows = [r for r in store.trials(name) if r["state"] not in ("duplicate", "running")]
    store.close()
    return len({json.dumps(r["params"], sort_keys=True) for r in rows})


def one_worker(url: str, n: int, sleep_s: float) -> tuple[float, int]:
    from autotune.study.driver import run_study

    name = f"scale-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    run_study(_spec(name, n), url, show_progress=False, trial_fn=_sleep_trial(sleep_s))
    return time.perf_counter() - t0, distinct_configs(url, name)


def many_workers(url: str, n: int, sleep_s: float, k: int) -> tuple[float, int, float]:
    """(wall time from the go signal until the last worker's loop returned, distinct configs, the
    workers' exit: from then until all were joined). The exit, like the start-up, is paid once
    per process and is not in one worker's time either (it runs in this process), so it is kept
    out of the wall time and reported apart (``worker_exit_s``)."""
    from autotune.study.setup import prepare_study

    name = f"scale{k}-{uuid.uuid4().hex[:6]}"
    prepare_study(url, name, n, spec=_spec(name, n))
    ctx = mp.get_context("spawn")
    go, ended = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(k)]
    procs = [ctx.Process(target=_child, args=(url, name, n, sleep_s, r, go, ended)) for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        r.wait()
    time.sleep(0.5)  # both children past their imports
    t0 = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of this machine
    go.set()
    last = max(ended.get() for _ in procs)
    for p in procs:
        p.join()
    return last - t0, distinct_configs(url, name), time.monotonic() - last


def worker_startup_s(url: str) -> float:
    """A fresh process's `autotune worker` start-up up to its first trial: imports, set-up and
    the preflight (transformers on the meta device), what each process pays once."""
    import subprocess
    import sys

    here = str(Path(__file__).parent)
    code = (
        f"import time,sys; t=time.perf_counter(); sys.path.insert(0, {here!r}); import scaling; "
        f"scaling.one_worker({url!r}, 1, 0.0); print(time.perf_counter()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def ray_driver(n: int, sleep_s: float, actors: int) -> float:
    """The same sleep trials on ``actors`` Ray actors of a local Ray (--backend ray), timed from
    the first ask: the driver's threads, Optuna and storage are real; the trial sleeps on an actor.
    Ray's own start (several seconds) is left out, as the workers' imports are."""
    import ray

    from autotune.study import ray_backend
    from autotune.study.limits import RunLimits

    ray.init(num_cpus=max(2, actors), include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/ray.db"
            opts = ray_backend.RayOptions(workers=actors)
            fn = _sleep_trial(sleep_s)
            ray_backend.run(url, "warm", _spec("warm", 2), RunLimits(), None, opts, False, None, fn)
            t0 = time.perf_counter()
            ray_backend.run(url, "rayscale", _spec("rayscale", n), RunLimits(), None, opts, False, None, fn)
            return time.perf_counter() - t0
    finally:
        ray.shutdown()


def _pg_url() -> str | None:
    try:
        import psycopg
        from sqlalchemy.engine import make_url

        name = f"autotune_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    except Exception:  # no server: report nan, do not fail the benchmark
        return None


def _drop_pg(url: str) -> None:
    import psycopg
    from sqlalchemy.engine import make_url

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--sleep", type=float, default=0.2)
    # This VM's speed drifts within an hour, more between runs than within one (the *_runs lists
    # of results/scaling*.json), so each figure is the median of R, 1 and 2 workers taken in turn,
    # and the runs are kept.
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, s, reps = args.trials, args.sleep, args.repeats
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{tmp}/scaling.db"
        one_worker(sqlite, 3, s)  # warm-up: tables, imports, data check
        t1s, t2s, exits, d1, d2 = [], [], [], n, n
        for _ in range(reps):
            t, d1 = one_worker(sqlite, n, s)
            t1s.append(t)
            t, d2, x = many_workers(sqlite, n, s, 2)
            t2s.append(t)
            exits.append(x)
        t1, t2 = statistics.median(t1s), statistics.median(t2s)
        _, d4, _ = many_workers(sqlite, n, s, 4)
        startup = worker_startup_s(sqlite)
    try:
        ray1, ray2 = ray_driver(n, s, 1), ray_driver(n, s, 2)
    except ImportError:  # the ray extra is not installed
        ray1 = ray2 = float("nan")
    pg = _pg_url()
    tpgs = [float("nan")]
    if pg is not None:
        try:
            one_worker(pg, 3, s)
            tpgs = [one_worker(pg, n, s)[0] for _ in range(reps)]
        finally:
            _drop_pg(pg)
    tpg = statistics.median(tpgs)
    out = {
        "command": " ".join(["python bench/scaling.py", *sys.argv[1:]]),
        "trials": n,
        "sleep_s": s,
        "sqlite_1_worker_s": t1,
        "sqlite_2_workers_s": t2,
        "postgres_1_worker_s": tpg,
        "speedup_2_workers": statistics.median([a / b for a, b in zip(t1s, t2s, strict=True)]),
        "sqlite_ms_per_trial": (t1 - n * s) / n * 1000,
        "postgres_ms_per_trial": (tpg - n * s) / n * 1000,
        "repeats": reps,
        "speedup_2_workers_runs": [a / b for a, b in zip(t1s, t2s, strict=True)],
        "sqlite_ms_per_trial_runs": [(t - n * s) / n * 1000 for t in t1s],
        "postgres_ms_per_trial_runs": [(t - n * s) / n * 1000 for t in tpgs],
        "distinct_configs_1_worker": d1,
        "distinct_configs_2_workers": d2,
        "distinct_configs_4_workers": d4,
        "worker_startup_s": startup,
        "worker_exit_s_runs": exits,
        "speedup_2_workers_with_exit_runs": [a / (b + x) for a, b, x in zip(t1s, t2s, exits, strict=True)],
        "ray_1_actor_s": ray1,
        "ray_2_actors_s": ray2,
        "ray_trials_per_s_2_actors": n / ray2,
        "workers_trials_per_s_2": n / t2,
        "ray_driver_ms_per_trial": (ray1 - n * s) / n * 1000,
        "ray_speedup_2_actors": ray1 / ray2,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scaling.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    print(
        f"speedup_2_workers={out['speedup_2_workers']:.2f} sqlite_ms_per_trial={out['sqlite_ms_per_trial']:.1f} "
        f"postgres_ms_per_trial={out['postgres_ms_per_trial']:.1f} "
        f"distinct_configs_1_2_4_workers={d1}/{d2}/{d4} of {n} worker_startup_s={startup:.1f}"
    )
    print(
        f"ray: trials_per_s_2_actors={out['ray_trials_per_s_2_actors']:.2f} (2 workers: "
        f"{out['workers_trials_per_s_2']:.2f}) driver_ms_per_trial={out['ray_driver_ms_per_trial']:.1f} "
        f"speedup_2_actors={out['ray_speedup_2_actors']:.2f}"
    )


if __name__ == "__main__":
    main()
