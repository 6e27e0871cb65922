"""Spec -> Optuna distributions. Pure: no torch, no storage."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.spec import SEARCH_PARAMS, ParamRange, StudySpec, searched_params


def _dist(name: str, rng: ParamRange) -> BaseDistribution:
    integer = SEARCH_PARAMS[name].integer
    if rng.choices is not None and SEARCH_PARAMS[name].boolean:
        return CategoricalDistribution([bool(v) for v in rng.choices])
    if rng.choices is not None and SEARCH_PARAMS[name].names is not None:
        return CategoricalDistribution([str(v) for v in rng.choices])
    if rng.choices is not None:
        vals: list[Any] = [int(v) for v in rng.choices] if integer else [float(v) for v in rng.choices]
        return CategoricalDistribution(vals)
    assert rng.low is not None and rng.high is not None
    if integer:
        return IntDistribution(int(rng.low), int(rng.high), log=rng.log, step=int(rng.step or 1))
    return FloatDistribution(rng.low, rng.high, log=rng.log, step=rng.step)


def distributions(spec: StudySpec) -> dict[str, BaseDistribution]:
    """The searched parameters, in order: rank, batch_size, learning_rate, then extras."""
    return {name: _dist(name, rng) for name, rng in searched_params(spec)}


def suggest(trial: optuna.Trial, spec: StudySpec) -> dict[str, Any]:
    """Ask ``trial`` for every searched parameter, in ``distributions`` order: the driver's
    objective, and any caller that drives Optuna by hand (the search-efficiency bench's replay)."""
    return {name: _suggest_one(trial, name, d) for name, d in distributions(spec).items()}


def _suggest_one(trial: optuna.Trial, name: str, dist: BaseDistribution) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, list(dist.choices))
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


def grid(spec: StudySpec) -> dict[str, list[Any]]:
    """The grid sampler's search space: every declared choice (the spec guarantees choices)."""
    out: dict[str, list[Any]] = {}
    for name, d in distributions(spec).items():
        assert isinstance(d, CategoricalDistribution)
        out[name] = list(d.choices)
    return out


def grid_size(spec: StudySpec) -> int:
    n = 1
    for choices in grid(spec).values():
        n *= len(choices)
    return n
