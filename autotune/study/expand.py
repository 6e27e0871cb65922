"""`search.expand_bounds: true`: when a study's best sits at a bound, widen it and search on.

Each widening is a follow-up study (`NAME-wide1`, `NAME-wide2`) with the bound moved as
`autotune best` suggests, warm-started from the study before it (its trials fit the wider space),
for half the study's trials (at least 3). At most ``MAX_EXPANSIONS`` widenings, never past the
hard limits in autotune.search.bounds; each is announced on stderr. A new study rather than a changed
one: Optuna's samplers assume a study's distributions never change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from autotune.search.bounds import MAX_EXPANSIONS, find_edges, widen
from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.study.summary import RunSummary
from autotune.study.warm_start import warm_start

# (spec, study name, n_trials) -> the run's summary: a follow-up runs as the first study ran, in
# this process (driver.run_study) or with the same N worker processes (parallel.run_parallel).
RunFn = Callable[[StudySpec, str, int], RunSummary]


def expand_after(spec: StudySpec, url: str, name: str, run: RunFn) -> RunSummary | None:
    """Run the follow-up studies with ``run``; return the last one's summary (None when none was
    needed).
    A widening that finds nothing better than the best so far ends the expansion: the bound was
    not what held the search back (on the quickstart, widening lr to 9.5e-3 and batch to 8 found
    only worse configs, and the old rule went on to widen the new study's own worse best)."""
    last: RunSummary | None = None
    best_name, best = name, _best(url, name)
    for k in range(1, MAX_EXPANSIONS + 1):
        edges = find_edges(best["params"], spec) if best is not None else []
        if best is None or not edges:
            break
        spec = widen(spec, edges)
        new = f"{name.split('-wide')[0]}-wide{k}"
        what = "; ".join(f"{e.param} {e.side} bound {e.bound:g} -> {e.widen_to:g}" for e in edges)
        print(f"expand_bounds: best of '{best_name}' at the edge; widening {what} in study '{new}'", file=sys.stderr)
        warm_start(spec, url, new, best_name)
        last = run(spec, new, max(3, spec.n_trials // 2))
        if last.interrupted:
            break
        found = _best(url, new)
        if found is None or found["score"] >= best["score"]:
            seen = "no complete trial" if found is None else f"best {found['score']:.5g}"
            print(
                f"expand_bounds: '{new}' found nothing better ({seen}); the best stays trial "
                f"{best['trial_number']} of '{best_name}' (score {best['score']:.5g})",
                file=sys.stderr,
            )
            break
        best_name, best = new, found
    return last


def _best(url: str, name: str) -> dict[str, Any] | None:
    store = Store.open(url, create=False)
    try:
        return store.best(name)
    finally:
        store.close()
