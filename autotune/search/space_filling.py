"""TPE's start-up trials, sized to the study and spread over the space.

Optuna's TPESampler explores with ``n_startup_trials`` (default 10) independent uniform draws
before it models anything. In a 12-trial study that is random search for 10 trials (issue 10:
the first 10 configurations of ``tpe`` and ``random`` with the same seed were identical), and a
few uniform draws clump: two of four may share a rank and a batch size. So the start-up count
follows ``n_trials``, and the start-up points come from one scrambled Sobol sequence (scipy's
``qmc.Sobol``): any 2^m consecutive points from its start fall one per 1/2^m slice of every
parameter (Owen 1998, scrambled nets), so four start-up trials try four ranks and both ends of
the learning-rate range. Optuna's own QMCSampler cannot serve here: it samples categorical
parameters (our rank and batch size) independently at random.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import qmc

from autotune import optuna_private
from autotune.search.sweep import next_probe
from autotune.spec import StudySpec

MAX_STARTUP = 10  # Optuna's default: enough for the long studies it was chosen for
MIN_STARTUP = 3  # fewer, and TPE's good/bad split rests on one or two points


def startup_trials(spec: StudySpec) -> int:
    """The spec's ``sampler.n_startup_trials``, else a third of the study within 3..10."""
    if spec.sampler.n_startup_trials is not None:
        return spec.sampler.n_startup_trials
    return max(MIN_STARTUP, min(MAX_STARTUP, round(spec.n_trials / 3)))


def unit_to_value(u: float, dist: BaseDistribution) -> Any:
    """Map a point of [0, 1) to a value of ``dist``: equal slices per choice, log or linear."""
    u = min(max(u, 0.0), math.nextafter(1.0, 0.0))
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[int(u * len(dist.choices))]
    assert isinstance(dist, FloatDistribution | IntDistribution)
    lo, hi = float(dist.low), float(dist.high)
    if isinstance(dist, IntDistribution):
        n = (dist.high - dist.low) // dist.step + 1
        if not dist.log:
            return dist.low + dist.step * int(u * n)
        return min(
            dist.high, max(dist.low, round(math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo))) - 0.5))
        )
    if dist.log:
        return float(min(hi, math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))))
    if dist.step is not None:
        n = round((hi - lo) / dist.step) + 1
        return lo + dist.step * min(n - 1, int(u * n))
    return lo + u * (hi - lo)


class SpaceFillingStartup(BaseSampler):
    """Sobol points for the first ``n_startup`` finished trials, then ``after`` (TPE, whose own
    start-up count is the same, so it takes over exactly where this stops). With ``edge_probe``,
    a best next to a numeric bound is first tried on the bound, and with ``neighbours`` the best
    is then swept one step per parameter (``sweep.next_probe``).

    The package's only caller (samplers._tpe) sets both switches; the other combinations exist so
    the search-efficiency bench can race the default against its earlier forms (bench/
    search_efficiency.py ``--tpe``), through ``run_study(sampler=...)``."""

    def __init__(
        self, after: BaseSampler, space: dict[str, BaseDistribution], n_startup: int, seed: int,
        edge_probe: bool = False, neighbours: bool = False,
    ) -> None:  # fmt: skip
        self._after = after
        self._space = dict(space)
        self._n_startup = n_startup
        self._edge_probe = edge_probe
        self._neighbours = neighbours
        # Optuna asks infer_relative_search_space, then sample_relative, for the same trial: the
        # probe (all trials read, a plane fitted) is worked out once per trial number
        self._last_probe: tuple[int, dict[str, Any] | None] | None = None
        m = max(1, math.ceil(math.log2(max(2, n_startup))))
        # a power of two keeps the net balanced (and scipy quiet); one table serves every worker
        self._points: np.ndarray = qmc.Sobol(d=max(1, len(space)), scramble=True, seed=seed).random_base2(m)

    def _in_startup(self, study: Study, trial: FrozenTrial) -> bool:
        # Issued trials count, running ones too: N parallel workers share the start-up instead of
        # each drawing past its end (with one worker the only running trial is this one).
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        issued = optuna_private.trials_cached(study, states)
        return sum(t.number != trial.number for t in issued) < self._n_startup

    def _probe(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        if not self._edge_probe:
            return None
        if self._last_probe is None or self._last_probe[0] != trial.number:
            self._last_probe = (trial.number, next_probe(study, trial, self._space, self._n_startup, self._neighbours))
        return self._last_probe[1]

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if self._in_startup(study, trial) or self._probe(study, trial) is not None:
            return dict(self._space)
        return self._after.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not self._in_startup(study, trial):
            probe = self._probe(study, trial)
            if probe is not None and set(search_space) == set(self._space):
                return {k: probe[k] for k in search_space}
            return self._after.sample_relative(study, trial, search_space)
        if not search_space:
            return self._after.sample_relative(study, trial, search_space)
        # the trial number picks the point: parallel workers asking at once get distinct points
        row = self._points[trial.number % len(self._points)]
        names = list(self._space)
        return {k: unit_to_value(float(row[names.index(k)]), d) for k, d in search_space.items() if k in self._space}

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
