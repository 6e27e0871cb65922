"""Edge-of-range notes for `best` and the run summary (the rule lives in autotune.search.bounds)."""

from __future__ import annotations

from typing import Any

from autotune.errors import SpecError
from autotune.search.bounds import find_edges
from autotune.spec import parse_spec_yaml


def edge_notes(store: Any, study: str, params: dict[str, Any] | None = None) -> list[str]:
    """One line per searched parameter whose best value sits at a bound that can be widened."""
    row = store.get_study(study)
    if row is None:
        return []
    if params is None:
        best = store.best(study)
        if best is None:
            return []
        params = best["params"]
    try:
        spec = parse_spec_yaml(row.spec_yaml, f"stored spec of {study}")
    except SpecError:
        return []  # a spec stored by another version: say nothing rather than fail `best`
    return [e.message() for e in find_edges(params, spec)]


def print_run_notes(url: str, study: str) -> list[str]:
    """After a run: the edge notes, printed to stderr under the summary line."""
    import sys

    from autotune.storage import Store

    store = Store.open(url, create=False)
    try:
        notes = edge_notes(store, study)
    finally:
        store.close()
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    return notes
