"""The driver's and storage's cost per trial with the sampler's trial view read from the database
again after Optuna's waiting-trial pop (as it was: ``Study._get_trials(use_cache=True)``) and
filled from ``_CachedStorage``'s cache that the pop has just synced (as it is:
``optuna_private.trials_cached``), side by side, A B A B, on SQLite and PostgreSQL.

The same sleep-free stand-in trial and driver as bench/slot_counts_cost.py (Optuna's TPE and
RDBStorage, heartbeats, the study lock, our tables, the default confirmation phase). ms per trial =
wall time / trials run, imports and a warm-up study paid before the clock starts. Also counts the
SQL statements per trial of each variant, in one more study each, apart from the timed ones (the
counting listener costs time).

Writes bench/results/sampler_sync_cost.json and ends with
``sampler_sync_cost postgres_ms_per_trial two_syncs=X one_sync=Y paired=P faster_in=K/N statements=A->B``.

Run on an idle machine: python bench/sampler_sync_cost.py [--trials 40] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def two_syncs(study: Any, states: Any) -> Any:
    """optuna_private.trials_cached before this change: Optuna's own cached read, which syncs (the
    class's method: optuna_private.serve_sampling_from_last_sync stands in for the instance's and
    calls trials_cached, so the instance's would recurse)."""
    import optuna

    return optuna.Study._get_trials(study, deepcopy=False, states=tuple(states), use_cache=True)


def statements_per_trial(url: str, n: int) -> float:
    from slot_counts_cost import one_study
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen = [0]

    def count(*_: Any) -> None:
        seen[0] += 1

    event.listen(Engine, "before_cursor_execute", count)
    try:
        ms = one_study(url, n)
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    return seen[0] / (n + 2) if ms else 0.0  # n search trials and the 2 confirmation runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    from slot_counts_cost import compare

    from autotune import optuna_private

    now = optuna_private.trials_cached

    def use(fn: Any) -> Callable[[], None]:
        return lambda: setattr(optuna_private, "trials_cached", fn)

    variants = {"two_syncs": use(two_syncs), "one_sync": use(now)}
    out: dict[str, Any] = {"command": " ".join(["python bench/sampler_sync_cost.py", *sys.argv[1:]]),
                           "trials": args.trials, "rounds": args.rounds}  # fmt: skip
    try:
        out["ms_per_trial"] = compare(variants, "two_syncs", "one_sync", args.rounds, args.trials,
                                      statements_per_trial, "statements_per_trial")  # fmt: skip
    finally:
        optuna_private.trials_cached = now
    (HERE / "results" / "sampler_sync_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    for backend, r in out["ms_per_trial"].items():
        m, st = r["median"], r["statements_per_trial"]
        print(f"sampler_sync_cost {backend}_ms_per_trial two_syncs={m['two_syncs']:.1f} one_sync={m['one_sync']:.1f} "
              f"paired={r['median_paired_ratio']:.3f} faster_in={r['pairs_one_sync_faster']}/{args.rounds} "
              f"statements={st['two_syncs']:.1f}->{st['one_sync']:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
