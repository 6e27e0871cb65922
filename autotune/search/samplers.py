"""Samplers and pruners by name: closed registries of small factories.

A sampler factory takes the spec and the seed of this worker's stream (``claims.seed_for_slot``:
the study's seed for the first worker, a derived one for each other worker), so parallel workers
never draw the same sequence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna

from autotune.search.space import distributions, grid
from autotune.search.space_filling import SpaceFillingStartup, startup_trials
from autotune.spec import StudySpec


def _startup(spec: StudySpec) -> dict[str, Any]:
    n = spec.sampler.n_startup_trials
    return {} if n is None else {"n_startup_trials": n}


def _tpe(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    n_startup = startup_trials(spec)
    # multivariate: rank, batch size and learning rate interact (the best lr moves with batch size).
    # constant_liar: a running trial counts as a bad result, so parallel workers do not pile onto
    # the region another worker is already training (Optuna's TPESampler docs; a no-op for one
    # worker, whose only running trial is the one being sampled).
    tpe = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True, n_startup_trials=n_startup)
    # The start-up points: one Sobol table per study (the study's seed), shared by every worker;
    # after them, a best next to a bound is tried on the bound, then one step along each parameter
    # from the best, downhill first (search/sweep.py: issue 10's race); TPE when all are tried.
    return SpaceFillingStartup(tpe, distributions(spec), n_startup, spec.seed, edge_probe=True, neighbours=True)


def _gp(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    # Optuna 5's GPSampler conditions on running trials by itself (its acquisition takes their
    # params), so parallel workers spread out without more from us.
    return optuna.samplers.GPSampler(seed=seed, **_startup(spec))


def _cmaes(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    # CMA-ES handles numeric ranges; categorical choices fall back to this independent sampler.
    return optuna.samplers.CmaEsSampler(
        seed=seed,
        independent_sampler=optuna.samplers.RandomSampler(seed),
        warn_independent_sampling=False,
        **_startup(spec),
    )


def _qmc(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    # Every worker walks the same scrambled sequence (the study's seed): QMCSampler takes the next
    # index from a counter in the study, which the driver's study lock makes atomic, so workers
    # draw consecutive points of one low-discrepancy sequence. Only the independent sampler (for
    # parameters outside the sequence) uses this worker's own stream.
    return optuna.samplers.QMCSampler(
        seed=spec.seed, independent_sampler=optuna.samplers.RandomSampler(seed), warn_independent_sampling=False
    )


# (spec, seed of this worker's stream) -> a sampler. The registry's entries are these; a caller may
# pass its own to ``make_sampler`` (``run_study(sampler=...)``: a benchmark racing a variant).
SamplerFactory = Callable[[StudySpec, int], optuna.samplers.BaseSampler]

SAMPLERS: dict[str, SamplerFactory] = {
    "tpe": _tpe,
    "random": lambda spec, seed: optuna.samplers.RandomSampler(seed=seed),
    "grid": lambda spec, seed: optuna.samplers.GridSampler(grid(spec), seed=seed),
    "gp": _gp,
    "qmc": _qmc,
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


def make_sampler(
    spec: StudySpec, seed: int | None = None, factory: SamplerFactory | None = None
) -> optuna.samplers.BaseSampler:
    """The spec's sampler (or ``factory``'s, in its place), drawing from ``seed`` (default: the
    study's seed)."""
    return (factory or SAMPLERS[spec.sampler.name])(spec, spec.seed if seed is None else seed)


def make_pruner(spec: StudySpec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.pruner.name](spec)
