"""Try the bound when the best trial sits next to it.

Short LoRA trials are under-trained, and their optimum lies at the edge of the searched range
more often than inside it: on issue 10's held-out task all 8 best grid points had the highest
learning rate, and on the quickstart grid the 6 best do. TPE then needs many trials to land
within a few percent of the bound, because its kernels around a good point spread both ways and
half of that mass falls outside the range. So whenever the best complete trial lies in the outer
tenth of a numeric range (``edges.NEAR``, the rule `autotune best` uses to say "widen"), the
next trial is that best configuration with the parameter moved onto the bound, once per best.
Categorical choices (rank, batch size) are left alone: their outermost choice is a value TPE
samples like any other.
"""

from __future__ import annotations

import math
from typing import Any

from optuna.distributions import BaseDistribution, FloatDistribution, IntDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune.edges import NEAR


def _position(v: float, d: FloatDistribution | IntDistribution) -> float:
    lo, hi = float(d.low), float(d.high)
    if d.log:
        return (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (v - lo) / (hi - lo)


def probe_params(best: dict[str, Any], space: dict[str, BaseDistribution]) -> list[dict[str, Any]]:
    """``best`` with one numeric parameter moved onto the bound it lies next to, per such one."""
    out = []
    for name, d in space.items():
        if not isinstance(d, FloatDistribution | IntDistribution) or name not in best or d.high <= d.low:
            continue
        pos = _position(float(best[name]), d)
        if 1 - NEAR <= pos < 1:
            out.append({**best, name: d.high})
        elif 0 < pos <= NEAR:
            out.append({**best, name: d.low})
    return out


def next_probe(
    study: Study, trial: FrozenTrial, space: dict[str, BaseDistribution], n_startup: int
) -> dict[str, Any] | None:
    """The probe ``trial`` should run, if any: after the start-up, the best complete trial with a
    parameter moved onto the bound it lies next to, unless some trial already has those params."""
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    complete = [t for t in finished if t.state == TrialState.COMPLETE and t.value is not None]
    if not complete or len(finished) < n_startup:  # the start-up points cover the space first
        return None
    sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
    best = min(complete, key=lambda t: sign * float(t.value))  # type: ignore[arg-type]
    # Every trial issued so far, running ones too: a probe is tried once, by one worker.
    tried = [t.params for t in trials if t.number != trial.number]
    for candidate in probe_params(best.params, space):
        if candidate not in tried:
            return candidate
    return None
