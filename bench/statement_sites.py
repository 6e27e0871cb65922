"""Where a trial's SQL statements come from: every statement of one study counted by its call site
(the innermost frames of autotune and Optuna that issued it), per trial, on PostgreSQL (SQLite
when no server answers).

The same sleep-free stand-in trial and driver as bench/slot_counts_cost.py (Optuna's TPE and
RDBStorage, heartbeats, the study lock, our tables, the default confirmation phase). Counts, not
times: it may run beside other work. The next cut of the per-trial cost starts from this list.

Writes bench/results/statement_sites.json and ends with
``statement_sites backend=B statements_per_trial=X sites=N``.

Run: python bench/statement_sites.py [--trials 40]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import traceback
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def _site() -> str:
    """The innermost four frames of autotune or Optuna, innermost first, as path:function."""
    frames = [f for f in traceback.extract_stack() if "/autotune/" in f.filename or "/optuna/" in f.filename]
    short = [f"{f.filename.split('/site-packages/')[-1].split('/autotune/', 1)[-1]}:{f.name}" for f in frames[-4:]]
    return " < ".join(reversed(short))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    args = ap.parse_args()
    import scaling
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autotune.study.driver import run_study

    sites: collections.Counter[tuple[str, str]] = collections.Counter()

    def statement(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        sites[(sql.split()[0].upper(), _site())] += 1

    pg = scaling._pg_url()
    with tempfile.TemporaryDirectory() as tmp:
        url = pg or f"sqlite:///{tmp}/sites.db"
        try:
            # a warm-up study first: the first connections and the schema are not per-trial costs
            run_study(scaling._spec(f"w-{uuid.uuid4().hex[:6]}", 3, confirm_top=2), url, show_progress=False,
                      trial_fn=scaling._sleep_trial(0.0))  # fmt: skip
            event.listen(Engine, "before_cursor_execute", statement)
            try:
                run_study(scaling._spec(f"s-{uuid.uuid4().hex[:6]}", args.trials, confirm_top=2), url,
                          show_progress=False, trial_fn=scaling._sleep_trial(0.0))  # fmt: skip
            finally:
                event.remove(Engine, "before_cursor_execute", statement)
        finally:
            if pg:
                scaling._drop_pg(pg)
    n = args.trials + 2  # the search's trials and the 2 confirmation runs
    per_trial = sum(sites.values()) / n
    out = {
        "command": " ".join(["python bench/statement_sites.py", *sys.argv[1:]]),
        "backend": "postgres" if pg else "sqlite",
        "trials": n,
        "statements_per_trial": per_trial,
        "sites": [{"per_trial": c / n, "kind": kind, "site": site} for (kind, site), c in sites.most_common()],
    }
    (HERE / "results" / "statement_sites.json").write_text(json.dumps(out, indent=2) + "\n")
    for s in out["sites"][:15]:
        print(f"{s['per_trial']:6.2f} {s['kind']:7s} {s['site']}")
    print(f"statement_sites backend={out['backend']} statements_per_trial={per_trial:.1f} sites={len(sites)}")


if __name__ == "__main__":
    main()
