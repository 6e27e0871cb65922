"""Everything the report shows, read once from the database: no torch, no plotting.

autotune's tables come through ``Store`` (opened with ``create=False``: reading never creates a
database); the curves of all trials come in one query instead of one per trial, which is what
keeps a 1,000-trial report within its time budget. Optuna's study (for parameter importance) is
loaded lazily and may be absent: a database written by ``Store`` alone still gets a report.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from autotune.errors import SpecError, StorageError
from autotune.spec import StudySpec, parse_spec_yaml
from autotune.storage import Store, StudyRow
from autotune.storage.tables import curves as curves_table

# Failure states, in the order the report lists them after complete and pruned.
STATE_ORDER = ("complete", "pruned", "oom", "diverged", "timeout", "crashed", "interrupted", "running")


@dataclass(frozen=True)
class CurvePoint:
    examples_seen: int
    score: float


@dataclass
class ReportData:
    study: StudyRow
    spec: StudySpec | None  # None when the stored spec no longer parses (shown as raw YAML)
    spec_error: str | None
    trials: list[dict[str, Any]]
    curves: dict[int, list[CurvePoint]]
    optuna_study: Any = None  # optuna.Study or None
    optuna_note: str | None = None
    best: dict[str, Any] | None = field(default=None)

    @property
    def complete(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t["state"] == "complete" and finite(t["score"]) is not None]

    def state_counts(self) -> list[tuple[str, int, float]]:
        """(state, trials, compute seconds) for every state present, in STATE_ORDER."""
        counts = Counter(t["state"] for t in self.trials)
        secs: dict[str, float] = {}
        for t in self.trials:
            secs[t["state"]] = secs.get(t["state"], 0.0) + (finite(t["wall_time_s"]) or 0.0)
        order = [s for s in STATE_ORDER if s in counts] + sorted(s for s in counts if s not in STATE_ORDER)
        return [(s, counts[s], secs[s]) for s in order]

    @property
    def compute_s(self) -> float:
        return sum(finite(t["wall_time_s"]) or 0.0 for t in self.trials)


def finite(v: Any) -> float | None:
    """A finite float, or None (the tables store non-finite values as NULL already)."""
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def pareto_front(points: list[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """Points (cost, score, trial) that no other point beats on both: sorted by cost, each with
    a lower score than every cheaper one. Ties on cost keep the lower score (then trial)."""
    front: list[tuple[float, float, int]] = []
    for cost, score, trial in sorted(points, key=lambda p: (p[0], p[1], p[2])):
        if not front or score < front[-1][1]:
            front.append((cost, score, trial))
    return front


def cost_points(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float, int]]:
    out = []
    for r in rows:
        cost, score = finite(r.get(key)), finite(r.get("score"))
        if cost is not None and score is not None:
            out.append((cost, score, int(r["trial_number"])))
    return out


def _all_curves(store: Store, name: str) -> dict[int, list[CurvePoint]]:
    c = curves_table.c
    query = (
        select(c.trial_number, c.examples_seen, c.score)
        .where(c.study_name == name)
        .order_by(c.trial_number, c.eval_index)
    )
    out: dict[int, list[CurvePoint]] = {}
    with store.engine.connect() as conn:
        for number, seen, score in conn.execute(query):
            if score is not None and math.isfinite(score):
                out.setdefault(int(number), []).append(CurvePoint(int(seen), float(score)))
    return out


def _load_optuna(store: Store, name: str) -> tuple[Any, str | None]:
    """The Optuna study beside our tables, or None with the reason. optuna is imported here only:
    it is the one heavy import the report needs, and only for parameter importance."""
    import logging

    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    from autotune.storage.engine import engine_kwargs
    from autotune.storage.url import url_string

    optuna.logging.set_verbosity(logging.WARNING)
    try:
        storage = optuna.storages.RDBStorage(
            url_string(store.url), engine_kwargs=engine_kwargs(store.url), skip_table_creation=True
        )
        return optuna.load_study(study_name=name, storage=storage), None
    except (KeyError, RuntimeError, ValueError, SQLAlchemyError) as err:
        reason = str(err).splitlines()[0][:200] if str(err).strip() else err.__class__.__name__
        return None, f"no Optuna study '{name}' in this database ({reason})"


def gather(url: str, name: str, *, with_optuna: bool = True) -> ReportData:
    store = Store.open(url, create=False)
    try:
        study = store.require_study(name)
        rows = store.trials(name)
        if not rows:
            raise StorageError(f"study '{name}' has no trials yet: nothing to report")
        curves = _all_curves(store, name)
        best = store.best(name)
        spec: StudySpec | None = None
        spec_error: str | None = None
        try:
            spec = parse_spec_yaml(study.spec_yaml, origin=f"stored spec of '{name}'")
        except SpecError as err:
            spec_error = str(err)
        opt, note = _load_optuna(store, name) if with_optuna else (None, "importance not computed")
    finally:
        store.close()
    return ReportData(study, spec, spec_error, rows, curves, opt, note, best)
