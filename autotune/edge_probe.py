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
from collections.abc import Sequence
from typing import Any

from optuna.distributions import BaseDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
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


class EdgeProbe(BaseSampler):
    """``after`` (the start-up and TPE), except that a best next to a bound is tried on it."""

    def __init__(self, after: BaseSampler, space: dict[str, BaseDistribution], n_startup: int) -> None:
        self._after = after
        self._space = dict(space)
        self._n_startup = n_startup

    def _probe(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        trials = study.get_trials(deepcopy=False)
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        complete = [t for t in finished if t.state == TrialState.COMPLETE and t.value is not None]
        if not complete or len(finished) < self._n_startup:  # the start-up points cover the space first
            return None
        sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
        best = min(complete, key=lambda t: sign * float(t.value))  # type: ignore[arg-type]
        # Every trial issued so far, running ones too: a probe is tried once, by one worker.
        tried = [t.params for t in trials if t.number != trial.number]
        for candidate in probe_params(best.params, self._space):
            if candidate not in tried:
                return candidate
        return None

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if self._probe(study, trial) is not None:
            return dict(self._space)
        return self._after.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        probe = self._probe(study, trial)
        if probe is None or set(search_space) != set(self._space):
            return self._after.sample_relative(study, trial, search_space)
        return {k: probe[k] for k in search_space}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._after.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._after.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._after.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._after.reseed_rng()
