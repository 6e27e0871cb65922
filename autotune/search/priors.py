"""Priors: finished trials of another study, added to this one's Optuna study as known points
(``--warm-start``, the bound expansion's follow-up studies, the search-efficiency bench's replay).

The pure Optuna side of a warm start: which params fit this space, and the ``FrozenTrial`` a prior
becomes, marked ``FROM_ATTR`` so the sweep (search/sweep.py) and the driver's duplicate check know
it is not this study's own trial. Reading the other study from storage is study/warm_start.py.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from autotune import optuna_private

FROM_ATTR = "autotune_warm_start_from"  # user attr on each added trial: "<study>#<trial number>"


def fits(params: dict[str, Any], dists: dict[str, BaseDistribution]) -> bool:
    """Whether a trial of another study (its params) is a point of this search space."""
    if set(params) != set(dists):
        return False
    return all(optuna_private.contains(d, params[k]) for k, d in dists.items())


def prior_trial(
    params: dict[str, Any], value: float, dists: dict[str, BaseDistribution], source: str
) -> optuna.trial.FrozenTrial:
    """One finished trial of another study as a prior of this one: params and score, no pruner
    state, marked ``FROM_ATTR`` so the driver and the sweep know it is not this study's own."""
    return optuna.trial.create_trial(params=params, distributions=dists, value=value, user_attrs={FROM_ATTR: source})
