"""The rows of the confirmation phase (``budget.confirm_top``): after the search, its best configs
re-trained at the target budget with ``budget.confirm_seeds`` training seeds, each run a trial
whose ``confirm_of`` names the search trial it re-trains. The study recommends the config with the
lowest mean over its runs. No torch, no optuna."""

from __future__ import annotations

import json
import statistics
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, select

from autotune.storage.retry import retried
from autotune.storage.tables import COUNTED_STATES, trials
from autotune.trial import TrialState


class Store(Protocol):
    """What these reads need of ``autotune.storage.Store`` (which calls them: no import back)."""

    def _tx(self, *, write: bool) -> AbstractContextManager[Connection]: ...


@dataclass(frozen=True)
class Confirmed:
    """One confirmed config's runs at the target budget."""

    trial_number: int  # the trial whose row stands for the config: the search trial re-trained, or a hedge's first run
    scores: tuple[float, ...]  # complete runs, in trial order
    accuracies: tuple[float, ...]
    runs: int  # runs that finished, complete or not (a diverged or OOM run scores worst)
    adapter_dir: str | None  # the kept adapter (budget.keep_adapters), if any
    numbers: tuple[int, ...] = ()  # the runs' trial numbers
    hedge_of: int | None = None  # budget.confirm_hedge: the search trial whose config it scales

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scores and len(self.scores) == self.runs else float("inf")

    @property
    def spread(self) -> float:
        """max - min over the runs: the seed noise this study measured for the config."""
        return max(self.scores) - min(self.scores) if len(self.scores) > 1 else 0.0

    @property
    def accuracy(self) -> float | None:
        return statistics.fmean(self.accuracies) if self.accuracies and len(self.accuracies) == self.runs else None


@retried
def confirmed(store: Store, name: str) -> list[Confirmed]:
    """Every confirmed config, best (lowest mean) first; ties: the earlier trial. A config is the
    runs of one search trial with one set of params: its own, or its hedge's (study/confirm.py)."""
    query = select(
        trials.c.trial_number, trials.c.confirm_of, trials.c.params, trials.c.state, trials.c.score,
        trials.c.accuracy, trials.c.adapter_dir,
    ).where(
        trials.c.study_name == name,
        trials.c.confirm_of.is_not(None),
        trials.c.state.in_(COUNTED_STATES),  # a run stopped by its prediction counts: it failed
        trials.c.requeued.is_(False),
    )  # fmt: skip
    groups: dict[tuple[int, str], list[Any]] = {}
    with store._tx(write=False) as conn:
        for row in conn.execute(query.order_by(trials.c.trial_number)):
            groups.setdefault((int(row.confirm_of), json.dumps(row.params, sort_keys=True)), []).append(row)
        of = {n for n, _ in groups}
        searched = {
            int(r.trial_number): r.params
            for r in conn.execute(
                select(trials.c.trial_number, trials.c.params).where(
                    trials.c.study_name == name, trials.c.trial_number.in_(of)
                )
            )
        }
    out = []
    for (number, _), rows in groups.items():
        done = [r for r in rows if r.state == TrialState.COMPLETE.value and r.score is not None]
        hedge = rows[0].params != searched.get(number)
        out.append(
            Confirmed(
                int(rows[0].trial_number) if hedge else number,
                tuple(float(r.score) for r in done),
                tuple(float(r.accuracy) for r in done if r.accuracy is not None),
                len(rows),
                next((r.adapter_dir for r in rows if r.adapter_dir), None),
                tuple(int(r.trial_number) for r in rows),
                number if hedge else None,
            )
        )
    return sorted(out, key=lambda c: (c.mean, c.trial_number))


@retried
def set_adapter_dir(store: Store, name: str, number: int, path: str | None) -> None:
    from sqlalchemy import update

    with store._tx(write=True) as conn:
        conn.execute(
            update(trials).where(trials.c.study_name == name, trials.c.trial_number == number).values(adapter_dir=path)
        )


@retried
def kept(store: Store, name: str) -> list[tuple[int, int, str]]:
    """(confirm trial, search trial, adapter directory) of every kept adapter."""
    with store._tx(write=False) as conn:
        rows = conn.execute(
            select(trials.c.trial_number, trials.c.confirm_of, trials.c.adapter_dir).where(
                trials.c.study_name == name, trials.c.adapter_dir.is_not(None)
            )
        )
        return [(int(r.trial_number), int(r.confirm_of), str(r.adapter_dir)) for r in rows]


def with_confirmation(row: dict[str, Any], c: Confirmed) -> dict[str, Any]:
    """A search trial's row with what its confirmation measured beside it."""
    return dict(
        row,
        confirmed_score=c.mean if c.mean != float("inf") else None,
        confirmed_spread=c.spread,
        confirmed_runs=c.runs,
        confirmed_accuracy=c.accuracy,
        adapter_dir=c.adapter_dir,
        hedge_of=c.hedge_of,
    )


def noise_note(ranked: list[Confirmed]) -> str | None:
    """One line when the two best confirmed configs cannot be told apart: their means differ by
    less than the larger of their seed spreads (max - min over the runs). With one run each (the
    default, ``confirm_seeds: 1``) there is no spread to compare with, and the line says so: on the
    quickstart one training seed put the hedge ahead in every study, and for rank 8 six fresh seeds
    put it 6% behind (docs/search.md, "A second seed for the two confirmed configs")."""
    if len(ranked) < 2 or ranked[1].mean == float("inf"):
        return None
    a, b = ranked[0], ranked[1]
    if a.runs < 2 and b.runs < 2:
        return (
            f"the two best confirmed configs (trials {a.trial_number} and {b.trial_number}) ran once each at the "
            f"target: their scores differ by {b.mean - a.mean:.4g}, and one training seed cannot say whether that "
            "is noise (budget.confirm_seeds: 2 measures it)"
        )
    noise = max(a.spread, b.spread)
    if b.mean - a.mean >= noise:
        return None
    return (
        f"the two best confirmed configs (trials {a.trial_number} and {b.trial_number}) cannot be told apart: "
        f"their means differ by {b.mean - a.mean:.4g}, less than their seed spread {noise:.4g}"
    )


@retried
def best(store: Store, name: str) -> dict[str, Any] | None:
    """The study's recommendation, or None. After a confirmation phase (budget.confirm_top):
    the search trial whose config has the lowest mean over its runs at the target budget, its
    row with ``confirmed_*`` beside it. Before: the complete search trial with the lowest score
    (ties: the earliest)."""
    done = confirmed(store, name)
    query = select(trials).where(
        trials.c.study_name == name,
        trials.c.state == TrialState.COMPLETE.value,
        trials.c.score.is_not(None),
        trials.c.confirm_of.is_(None),
    )
    if done:  # the config's own row: its search trial's, or a hedge's first run (whatever its state)
        query = select(trials).where(trials.c.study_name == name, trials.c.trial_number == done[0].trial_number)
    with store._tx(write=False) as conn:
        row = conn.execute(query.order_by(trials.c.score, trials.c.trial_number).limit(1)).mappings().first()
    if row is None:
        return None
    return with_confirmation(dict(row), done[0]) if done else dict(row)
