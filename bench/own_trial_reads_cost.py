"""The driver's and storage's cost per trial with Optuna's own reads and writes of this process's
trial (as it was) and with them answered locally (as it is), side by side, A B C D A B C D, on
SQLite and PostgreSQL. Four variants, each adding one change to the one before:

- ``optuna``: Optuna's calls as they are. ``Trial.__init__`` and the tell each read the whole trial
  back from the database (six statements on PostgreSQL); TPE with ``constant_liar`` asks for a
  fresh sync of the study's trials when it samples (seven); each param is its own transaction.
- ``local_reads``: ``optuna_private.read_own_trials_locally`` (the new trial from the cache that
  its insert filled, the tell's from the objective's own ``Trial``) and
  ``serve_sampling_from_last_sync`` (the sampler's reads from the ask's sync).
- ``local_reads_one_param_write``: also ``params_in_one_write`` (the params in one transaction).
- ``stale_check_per_interval``: also ``stale_trials_check`` reading the database once per heartbeat
  interval rather than before every ask (two statements); the package as it is.

The same sleep-free stand-in trial and driver as bench/slot_counts_cost.py (Optuna's TPE and
RDBStorage, heartbeats, the study lock, our tables, the default confirmation phase). ms per trial =
wall time / trials run, imports and a warm-up study paid before the clock starts. Also counts the
SQL statements and the commits per trial of each variant, in one more study each, apart from the
timed ones (the counting listener costs time).

Writes bench/results/own_trial_reads_cost.json and ends with one line per backend:
``own_trial_reads_cost postgres_ms_per_trial optuna=W local_reads=X one_param_write=Y
stale_check_per_interval=Z paired=P faster_in=K/N statements=A->B->C->D`` (paired: the last
variant over the first).

Run on an idle machine: python bench/own_trial_reads_cost.py [--trials 40] [--rounds 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def counted(url: str, n: int) -> dict[str, float]:
    """SQL statements and commits per trial of one study of ``n`` search trials."""
    from slot_counts_cost import one_study
    from sqlalchemy import event
    from sqlalchemy.engine import Connection, Engine

    seen = {"statements": 0, "commits": 0}

    def statement(*_: Any) -> None:
        seen["statements"] += 1

    def commit(*_: Any) -> None:
        seen["commits"] += 1

    event.listen(Engine, "before_cursor_execute", statement)
    event.listen(Connection, "commit", commit)
    try:
        ms = one_study(url, n)
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
        event.remove(Connection, "commit", commit)
    return {k: v / (n + 2) if ms else 0.0 for k, v in seen.items()}  # n search trials, 2 confirmation runs


@contextlib.contextmanager
def _no_batch(trial: Any) -> Iterator[None]:
    yield


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    from slot_counts_cost import compare, paired_summary

    from autotune import optuna_private

    real = (optuna_private.read_own_trials_locally, optuna_private.serve_sampling_from_last_sync,
            optuna_private.params_in_one_write, optuna_private.stale_trials_check)  # fmt: skip

    def every_ask(storage: Any, grace_s: float, every_s: float, since: Any) -> None:
        real[3](storage, grace_s, 0.0, since)

    def use(reads: bool, one_write: bool, per_interval: bool) -> Callable[[], None]:
        def install() -> None:
            off = lambda study: None  # noqa: E731
            optuna_private.read_own_trials_locally = real[0] if reads else off
            optuna_private.serve_sampling_from_last_sync = real[1] if reads else off
            optuna_private.params_in_one_write = real[2] if one_write else _no_batch  # type: ignore[assignment]
            optuna_private.stale_trials_check = real[3] if per_interval else every_ask  # type: ignore[assignment]

        return install

    variants = {"optuna": use(False, False, False), "local_reads": use(True, False, False),
                "local_reads_one_param_write": use(True, True, False),
                "stale_check_per_interval": use(True, True, True)}  # fmt: skip
    out: dict[str, Any] = {"command": " ".join(["python bench/own_trial_reads_cost.py", *sys.argv[1:]]),
                           "trials": args.trials, "rounds": args.rounds}  # fmt: skip
    try:
        out["ms_per_trial"] = compare(variants, "optuna", "stale_check_per_interval", args.rounds, args.trials,
                                      counted)  # fmt: skip
        for r in out["ms_per_trial"].values():
            for v in ("local_reads", "local_reads_one_param_write"):
                r[f"median_paired_ratio_{v}"] = paired_summary(r["runs"], "optuna", v)["median_paired_ratio"]
    finally:
        use(True, True, True)()
    (HERE / "results" / "own_trial_reads_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    for backend, r in out["ms_per_trial"].items():
        m, st = r["median"], [f"{c['statements']:.1f}" for c in r["per_trial"].values()]
        print(f"own_trial_reads_cost {backend}_ms_per_trial optuna={m['optuna']:.1f} "
              f"local_reads={m['local_reads']:.1f} one_param_write={m['local_reads_one_param_write']:.1f} "
              f"stale_check_per_interval={m['stale_check_per_interval']:.1f} "
              f"paired={r['median_paired_ratio']:.3f} "
              f"faster_in={r['pairs_stale_check_per_interval_faster']}/{args.rounds} "
              f"statements={'->'.join(st)}")  # fmt: skip


if __name__ == "__main__":
    main()
