"""The driver's and storage's cost per trial with a trial's params written as they were (Optuna's
``_set_trial_param_without_commit`` once per param, inside one transaction: it reads the trial row
again for each param, and each read flushes the insert before it) and as they are
(``optuna_private.write_params``: one read of the trial, the rows added together), side by side,
A B A B, on SQLite and PostgreSQL.

The same sleep-free stand-in trial and driver as bench/slot_counts_cost.py (three searched params:
rank, batch size, learning rate). ms per trial = wall time / trials run, imports and a warm-up
study paid before the clock starts. Also counts the SQL statements and commits per trial of each
variant in one more study each, apart from the timed ones (the counting listener costs time).

Writes bench/results/param_write_cost.json and ends with one line per backend:
``param_write_cost postgres_ms_per_trial per_param=X one_read=Y paired=P faster_in=K/N
statements=A->B``.

Run on an idle machine: python bench/param_write_cost.py [--trials 40] [--rounds 8]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def per_param(
    backend: Any, session: Any, trial_id: int, pending: Sequence[tuple[str, float, Any]], known: Mapping[str, Any]
) -> None:
    """The write before this change, call for call."""
    for name, value, dist in pending:
        backend._set_trial_param_without_commit(session, trial_id, name, value, dist, known.get(name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    from own_trial_reads_cost import counted
    from slot_counts_cost import compare

    from autotune import optuna_private

    now = optuna_private.write_params

    def use(fn: Any) -> Callable[[], None]:
        return lambda: setattr(optuna_private, "write_params", fn)

    variants = {"per_param": use(per_param), "one_read": use(now)}
    out: dict[str, Any] = {"command": " ".join(["python bench/param_write_cost.py", *sys.argv[1:]]),
                           "trials": args.trials, "rounds": args.rounds}  # fmt: skip
    try:
        out["ms_per_trial"] = compare(variants, "per_param", "one_read", args.rounds, args.trials, counted)
    finally:
        optuna_private.write_params = now  # type: ignore[assignment]
    (HERE / "results" / "param_write_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    for backend, r in out["ms_per_trial"].items():
        m, st = r["median"], [f"{c['statements']:.1f}" for c in r["per_trial"].values()]
        print(f"param_write_cost {backend}_ms_per_trial per_param={m['per_param']:.1f} one_read={m['one_read']:.1f} "
              f"paired={r['median_paired_ratio']:.3f} faster_in={r['pairs_one_read_faster']}/{args.rounds} "
              f"statements={'->'.join(st)}")  # fmt: skip


if __name__ == "__main__":
    main()
