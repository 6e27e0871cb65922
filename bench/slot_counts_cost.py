"""The driver's and storage's cost per trial, with the loop's slot counting as it was (five counts
before each ask: finished, running, and the confirmation phase's three) and as it is (one query,
``claims.slots_taken``), side by side, A B A B, on SQLite and PostgreSQL.

A sleep-free stand-in trial (bench/scaling.py's, reporting one evaluation) through the real
driver: Optuna's TPE and RDBStorage, heartbeats, the study lock, our tables, and the default
confirmation phase (its 2 runs are trials too). ms per trial = wall time / trials run, imports and
a warm-up study paid before the clock starts.

Writes bench/results/slot_counts_cost.json and ends with
``slot_counts_cost postgres_ms_per_trial five_counts=X one_query=Y ratio=R paired=P faster_in=K/N``.

Run on an idle machine: python bench/slot_counts_cost.py [--trials 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def five_counts(store: Any, name: str) -> Any:
    """The counting before this change, query for query: the running rows (one transaction),
    Store.count_finished (another), then storage/confirm.py's ``counts`` (three counts in a third)."""
    from sqlalchemy import func, select

    from autotune.storage import claims
    from autotune.storage.tables import COUNTED, COUNTED_STATES, trials
    from autotune.trial import TrialState

    here, search = trials.c.study_name == name, trials.c.confirm_of.is_(None)
    running = trials.c.state == TrialState.RUNNING.value
    done = (COUNTED,)
    confirming = (trials.c.confirm_of.is_not(None), trials.c.requeued.is_(False),
                  trials.c.state.in_([*COUNTED_STATES, TrialState.RUNNING.value]))  # fmt: skip
    with store._tx(write=False) as conn:
        all_running = conn.execute(select(func.count()).where(here, running)).scalar_one()
    finished = store.count_finished(name)
    with store._tx(write=False) as conn:
        s_done, s_running, _ = (conn.execute(select(func.count()).where(here, *c)).scalar_one()
                                for c in (done, (search, running), confirming))  # fmt: skip
    return claims.Taken(s_done, s_running, finished - s_done, all_running - s_running)


def one_study(url: str, n: int) -> float:
    """ms per trial of one study of ``n`` search trials (and its 2 confirmation runs)."""
    import scaling

    from autotune.storage import Store
    from autotune.study.driver import run_study

    name = f"cost-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    run_study(scaling._spec(name, n, confirm_top=2), url, show_progress=False, trial_fn=scaling._sleep_trial(0.0))
    wall = time.perf_counter() - t0
    store = Store.open(url, create=False)
    ran = len(store.trials(name))
    store.close()
    return 1000 * wall / ran


def paired_rounds(
    url: str, variants: dict[str, Callable[[], None]], rounds: int, trials: int
) -> dict[str, list[float]]:
    """ms per trial of each variant, A B A B (this VM drifts between rounds: PostgreSQL 65-105 ms,
    so pairs taken side by side resist it); ``variants`` maps a name to what swaps it in. The
    before/after benches (this one, sampler_sync_cost.py) share it."""
    one_study(url, 3)  # warm-up: imports, the sampler, the first connections
    ms: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(rounds):
        for v, install in variants.items():
            install()
            ms[v].append(one_study(url, trials))
    return ms


@contextlib.contextmanager
def backends() -> Iterator[dict[str, str]]:
    """The databases a before/after bench runs on: SQLite in a temporary folder and, where a server
    answers, a fresh PostgreSQL database, dropped afterwards."""
    import scaling

    with tempfile.TemporaryDirectory() as tmp:
        pg = scaling._pg_url()
        try:
            yield {"sqlite": f"sqlite:///{tmp}/cost.db", **({"postgres": pg} if pg else {})}
        finally:
            if pg:
                scaling._drop_pg(pg)


def paired_summary(ms: dict[str, list[float]], old: str, new: str) -> dict[str, Any]:
    pairs = [b / a for a, b in zip(ms[old], ms[new], strict=True)]
    med = {v: statistics.median(xs) for v, xs in ms.items()}
    return {"runs": ms, "median": med, "median_paired_ratio": statistics.median(pairs),
            f"pairs_{new}_faster": sum(r < 1 for r in pairs)}  # fmt: skip


def compare(
    variants: dict[str, Callable[[], None]],
    old: str,
    new: str,
    rounds: int,
    trials: int,
    count: Callable[[str, int], Any] | None = None,
    count_key: str = "per_trial",
) -> dict[str, dict[str, Any]]:
    """Each backend's ``paired_rounds`` of ``variants``, summarised ``old`` against ``new``; with
    ``count``, also each variant's ``count(url, trials)`` (statements per trial...) under
    ``count_key``, in one more study each, apart from the timed ones (a counting listener costs
    time). The before/after benches share it; each restores what it swapped afterwards."""
    out: dict[str, dict[str, Any]] = {}
    with backends() as urls:
        for backend, url in urls.items():
            r = paired_summary(paired_rounds(url, variants, rounds, trials), old, new)
            if count is not None:
                counts = {}
                for v, install in variants.items():
                    install()
                    counts[v] = count(url, trials)
                r[count_key] = counts
            out[backend] = r
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from autotune.storage import claims
    from autotune.storage.retry import retried

    now = claims.slots_taken

    def use(fn: Any) -> Callable[[], None]:
        return lambda: setattr(claims, "slots_taken", fn)

    variants = {"five_counts": use(retried(five_counts)), "one_query": use(now)}
    out: dict[str, Any] = {"trials": args.trials, "rounds": args.rounds}
    try:
        out["ms_per_trial"] = compare(variants, "five_counts", "one_query", args.rounds, args.trials)
        for r in out["ms_per_trial"].values():
            r["ratio_one_query_to_five"] = r["median"]["one_query"] / r["median"]["five_counts"]
    finally:
        claims.slots_taken = now  # type: ignore[assignment]
    (HERE / "results" / "slot_counts_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    for backend, r in out["ms_per_trial"].items():
        m = r["median"]
        print(f"slot_counts_cost {backend}_ms_per_trial five_counts={m['five_counts']:.1f} "
              f"one_query={m['one_query']:.1f} ratio={r['ratio_one_query_to_five']:.3f} "
              f"paired={r['median_paired_ratio']:.3f} "
              f"faster_in={r['pairs_one_query_faster']}/{args.rounds}")  # fmt: skip


if __name__ == "__main__":
    main()
