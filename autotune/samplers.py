"""Samplers and pruners by name: closed registries of small factories."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna

from autotune.search_space import distributions, grid
from autotune.spec import StudySpec
from autotune.startup import SpaceFillingStartup, startup_trials


def _tpe(spec: StudySpec) -> optuna.samplers.BaseSampler:
    n_startup = startup_trials(spec)
    # multivariate: rank, batch size and learning rate interact (the best lr moves with batch size).
    tpe = optuna.samplers.TPESampler(seed=spec.seed, multivariate=True, n_startup_trials=n_startup)
    return SpaceFillingStartup(tpe, distributions(spec), n_startup, spec.seed)


def _gp(spec: StudySpec) -> optuna.samplers.BaseSampler:
    kw: dict[str, Any] = (
        {} if spec.sampler.n_startup_trials is None else {"n_startup_trials": spec.sampler.n_startup_trials}
    )
    return optuna.samplers.GPSampler(seed=spec.seed, **kw)


def _cmaes(spec: StudySpec) -> optuna.samplers.BaseSampler:
    kw: dict[str, Any] = (
        {} if spec.sampler.n_startup_trials is None else {"n_startup_trials": spec.sampler.n_startup_trials}
    )
    # CMA-ES handles numeric ranges; categorical choices fall back to this independent sampler.
    return optuna.samplers.CmaEsSampler(
        seed=spec.seed,
        independent_sampler=optuna.samplers.RandomSampler(spec.seed),
        warn_independent_sampling=False,
        **kw,
    )


SAMPLERS: dict[str, Callable[[StudySpec], optuna.samplers.BaseSampler]] = {
    "tpe": _tpe,
    "random": lambda spec: optuna.samplers.RandomSampler(seed=spec.seed),
    "grid": lambda spec: optuna.samplers.GridSampler(grid(spec), seed=spec.seed),
    "gp": _gp,
    "qmc": lambda spec: optuna.samplers.QMCSampler(seed=spec.seed, warn_independent_sampling=False),
    "cmaes": _cmaes,
}

PRUNERS: dict[str, Callable[[StudySpec], optuna.pruners.BasePruner]] = {
    "asha": lambda spec: optuna.pruners.SuccessiveHalvingPruner(
        min_resource=spec.pruner.min_resource, reduction_factor=spec.pruner.reduction_factor
    ),
    "median": lambda spec: optuna.pruners.MedianPruner(n_warmup_steps=spec.pruner.n_warmup_steps),
    "hyperband": lambda spec: optuna.pruners.HyperbandPruner(
        min_resource=spec.pruner.min_resource,
        max_resource=spec.budget.evals,
        reduction_factor=spec.pruner.reduction_factor,
    ),
    "none": lambda spec: optuna.pruners.NopPruner(),
}


def make_sampler(spec: StudySpec) -> optuna.samplers.BaseSampler:
    return SAMPLERS[spec.sampler.name](spec)


def make_pruner(spec: StudySpec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.pruner.name](spec)
