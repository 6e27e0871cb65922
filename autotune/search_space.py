"""Spec -> Optuna distributions. Pure: no torch, no storage."""

from __future__ import annotations

from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.spec import SEARCH_PARAMS, ParamRange, StudySpec, searched_params


def _dist(name: str, rng: ParamRange) -> BaseDistribution:
    integer = SEARCH_PARAMS[name].integer
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
