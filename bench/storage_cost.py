"""PostgreSQL's cost per trial, before and after the two changes of issue 23, side by side.

The same sleep-free trials as bench/scaling.py (its ``one_worker``: the real driver, Optuna's
RDBStorage, heartbeats and our tables; the trial itself returns at once), on a fresh database,
one worker, in three variants run in turns so that a disturbance of the machine hits all three:

- ``pre_ping``: as before: SQLAlchemy's ``pool_pre_ping`` (a ``SELECT 1`` round trip at each of a
  trial's ~20 connection checkouts) and Optuna's stale-trial check before every trial;
- ``idle_ping``: a connection pinged only after a second idle in the pool (storage/engine.py
  ``ping_after_idle``), the stale-trial check still before every trial;
- ``now``: the idle ping and the stale-trial check at most once per heartbeat interval
  (optuna_private.no_stale_trials_after_outage).

Writes bench/results/storage_cost.json (ms per trial per round, medians, ratios to pre_ping)
and ends with ``postgres_ms_per_trial pre_ping=X idle_ping=Y now=Z``.

Run on an idle machine: python bench/storage_cost.py [--trials 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scaling  # noqa: E402

from autotune import optuna_private  # noqa: E402
from autotune.storage import engine  # noqa: E402
from autotune.study import setup  # noqa: E402

VARIANTS = ("pre_ping", "idle_ping", "now")


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """Put back what a variant had before (the module attributes the driver reads at run time)."""
    kwargs, ping, stale = engine.engine_kwargs, setup.ping_after_idle, optuna_private.no_stale_trials_after_outage
    try:
        if name == "pre_ping":
            engine.engine_kwargs = lambda url: {**kwargs(url), "pool_pre_ping": url.get_backend_name() != "sqlite"}
            setup.engine_kwargs = engine.engine_kwargs
            engine.ping_after_idle = setup.ping_after_idle = lambda _engine: None  # type: ignore[assignment]
        if name in ("pre_ping", "idle_ping"):
            optuna_private.no_stale_trials_after_outage = (  # type: ignore[assignment]
                lambda storage, grace_s, since_outage_s, every_s=0.0: stale(storage, grace_s, since_outage_s, 0.0)
            )
        yield
    finally:
        engine.engine_kwargs = setup.engine_kwargs = kwargs
        engine.ping_after_idle = setup.ping_after_idle = ping
        optuna_private.no_stale_trials_after_outage = stale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    url = scaling._pg_url()
    if url is None:
        sys.exit("no PostgreSQL server answers at AUTOTUNE_TEST_PG")
    ms: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        for v in VARIANTS:  # warm-up: imports, the schema, the first study's set-up
            with variant(v):
                scaling.one_worker(url, 3, 0.0)
        for _ in range(args.rounds):
            for v in VARIANTS:
                with variant(v):
                    t0 = time.perf_counter()
                    scaling.one_worker(url, args.trials, 0.0)
                    ms[v].append((time.perf_counter() - t0) / args.trials * 1000)
    finally:
        scaling._drop_pg(url)
    med = {v: statistics.median(xs) for v, xs in ms.items()}
    out = {
        "trials": args.trials,
        "rounds": args.rounds,
        "ms_per_trial": ms,
        "median_ms_per_trial": med,
        "ratio_to_pre_ping": {v: med[v] / med["pre_ping"] for v in VARIANTS},
    }
    (HERE / "results" / "storage_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    print("postgres_ms_per_trial " + " ".join(f"{v}={med[v]:.1f}" for v in VARIANTS))


if __name__ == "__main__":
    main()
