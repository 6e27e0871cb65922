"""A best next to a bound is tried on the bound (issue 10: short LoRA trials peak at the edge)."""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.edge_probe import probe_params
from autotune.samplers import make_sampler
from autotune.search_space import distributions
from autotune.spec import StudySpec, parse_spec
from tests.conftest import tiny_spec

LR = (3e-4, 3e-3)
SPACE = {
    "rank": CategoricalDistribution([4, 8, 16, 32]),
    "learning_rate": FloatDistribution(*LR, log=True),
    "warmup": IntDistribution(0, 100),
}


def _spec(n_trials: int = 12, seed: int = 0) -> StudySpec:
    return parse_spec(
        tiny_spec(
            n_trials=n_trials,
            seed=seed,
            search={
                "rank": {"choices": [4, 8, 16, 32]},
                "batch_size": {"choices": [16, 32, 64]},
                "learning_rate": {"low": LR[0], "high": LR[1], "log": True},
            },
        )
    )


def test_only_a_numeric_value_in_the_outer_tenth_is_moved_to_its_bound() -> None:
    near_top = {"rank": 32, "learning_rate": 2.8e-3, "warmup": 50}  # 97% of the log range
    assert probe_params(near_top, SPACE) == [{**near_top, "learning_rate": 3e-3}]
    near_bottom = {"rank": 4, "learning_rate": 1e-3, "warmup": 3}
    assert probe_params(near_bottom, SPACE) == [{**near_bottom, "warmup": 0}]
    inside = {"rank": 32, "learning_rate": 1e-3, "warmup": 50}  # rank 32 is a choice: left to TPE
    assert probe_params(inside, SPACE) == []
    on_bound = {"rank": 8, "learning_rate": 3e-3, "warmup": 100}  # already there: nothing to try
    assert probe_params(on_bound, SPACE) == []


def _objective(p: dict[str, Any]) -> float:
    # better with a higher learning rate and a smaller batch: the short-trial LoRA landscape
    return -math.log(p["learning_rate"]) + p["batch_size"] / 1000 + abs(p["rank"] - 16) / 1000


def test_the_default_search_tries_the_bound_once_a_best_lies_next_to_it() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = _spec()
    study = optuna.create_study(sampler=make_sampler(spec))
    dists = distributions(spec)
    seen: list[dict[str, Any]] = []
    for _ in range(spec.n_trials):
        t = study.ask(dists)
        seen.append(t.params)
        study.tell(t, _objective(t.params))
    top = [p for p in seen if p["learning_rate"] == LR[1]]
    assert top, "no trial on the learning rate's upper bound"
    # each probe is its best's own rank and batch: the configs stay distinct
    assert len({tuple(sorted(p.items())) for p in seen}) == len(seen)
    best = study.best_params
    assert best["learning_rate"] == LR[1]


def test_a_running_probe_is_not_handed_to_a_second_worker() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = _spec()
    study = optuna.create_study(sampler=make_sampler(spec))
    dists = distributions(spec)
    for _ in range(3):  # the start-up
        t = study.ask(dists)
        study.tell(t, _objective(t.params))
    best = {"rank": 8, "batch_size": 16, "learning_rate": 2.9e-3}
    study.add_trial(optuna.trial.create_trial(params=best, distributions=dists, value=-100.0))
    first, second = study.ask(dists), study.ask(dists)  # two workers ask before either ends
    assert first.params == {**best, "learning_rate": LR[1]}
    assert second.params != first.params
