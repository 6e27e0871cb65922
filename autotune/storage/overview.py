"""`autotune studies`: one row per study in a database, read without creating anything and
without optuna: name, task, model, trials by state, the recommendation's score and accuracy,
when it was created and last touched, and how many of its trials a live worker is running.

A running trial is live when its worker beat Optuna's heartbeat within the grace period
(``claims.GRACE_PERIOD_S``), read from Optuna's own ``trial_heartbeats`` table (its RDB schema:
trial_heartbeats.trial_id -> trials.trial_id -> studies.study_id, pinned by
tests/unit/test_optuna_private.py), or, on this host, when its process still exists."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import yaml
from sqlalchemy import func, inspect, select, text

from autotune.storage import claims
from autotune.storage.retry import retried
from autotune.storage.store import Store, last_activity, naive_utc
from autotune.storage.tables import studies, trials

_HEARTBEATS = text(
    "SELECT t.number, h.heartbeat FROM trial_heartbeats h "
    "JOIN trials t ON h.trial_id = t.trial_id JOIN studies s ON t.study_id = s.study_id "
    "WHERE s.study_name = :name"
)


@retried
def overview(store: Store) -> list[dict[str, Any]]:
    """One dict per study, in name order (empty when the database holds none)."""
    with store._tx(write=False) as conn:
        names = inspect(conn).get_table_names()
        if studies.name not in names:
            return []
        rows = conn.execute(select(studies).order_by(studies.c.study_name)).mappings().all()
        has_beats = "trial_heartbeats" in names
        now = _db_now(conn)
        out = []
        for s in rows:
            name = s["study_name"]
            states: Counter[str] = Counter()
            for state, n in conn.execute(
                select(trials.c.state, func.count()).where(trials.c.study_name == name).group_by(trials.c.state)
            ):
                states[str(state)] = int(n)
            last = conn.execute(last_activity(name)).scalar()
            running = conn.execute(
                select(trials.c.trial_number, trials.c.worker).where(
                    trials.c.study_name == name, trials.c.state == "running"
                )
            ).all()
            beats = {int(n): naive_utc(b) for n, b in conn.execute(_HEARTBEATS, {"name": name})} if has_beats else {}
            live = sum(_live(r.trial_number, r.worker, beats, now) for r in running)
            spec = yaml.safe_load(s["spec_yaml"]) or {}
            out.append(
                {
                    "name": name,
                    "task": spec.get("task"),
                    "model": (spec.get("model") or {}).get("name"),
                    "trials": dict(sorted(states.items())),
                    "created_at": s["created_at"],
                    "updated_at": max(x for x in (naive_utc(s["updated_at"]), naive_utc(last)) if x is not None),
                    "workers_running": live,
                }
            )
    for rec in out:
        best = store.best(rec["name"])
        rec["best_score"] = None if best is None else best.get("confirmed_score", best["score"])
        rec["best_accuracy"] = None if best is None else best.get("confirmed_accuracy", best["accuracy"])
    return out


def _db_now(conn: Any) -> dt.datetime | None:
    # the database's clock, which wrote the heartbeats (Optuna: func.current_timestamp()), as naive
    # UTC; PostgreSQL's LOCALTIMESTAMP is in the session's time zone, as the heartbeats are
    sql = "SELECT LOCALTIMESTAMP" if conn.dialect.name == "postgresql" else "SELECT CURRENT_TIMESTAMP"
    return naive_utc(conn.execute(text(sql)).scalar())


def _live(number: int, worker: str | None, beats: dict[int, dt.datetime | None], now: dt.datetime | None) -> bool:
    if claims.worker_gone(worker):
        return False  # a process of this host that no longer exists
    beat = beats.get(int(number))
    if beat is None or now is None:
        return claims.is_local(worker)  # no heartbeat row yet: a live local process counts
    return (now - beat).total_seconds() <= claims.GRACE_PERIOD_S + claims.HEARTBEAT_INTERVAL_S
