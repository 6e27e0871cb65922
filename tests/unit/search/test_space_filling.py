"""TPE's start-up: sized to the study, spread over the space (issue 10)."""

from __future__ import annotations

import math
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.search.samplers import make_sampler
from autotune.search.space import distributions
from autotune.search.space_filling import startup_trials, unit_to_value
from autotune.spec import StudySpec, parse_spec
from tests.conftest import tiny_spec

LR = (3e-4, 3e-3)


def _spec(n_trials: int, seed: int = 0, **sampler: Any) -> StudySpec:
    return parse_spec(
        tiny_spec(
            n_trials=n_trials,
            seed=seed,
            sampler={"name": "tpe", **sampler},
            search={
                "rank": {"choices": [4, 8, 16, 32]},
                "batch_size": {"choices": [16, 32, 64]},
                "learning_rate": {"low": LR[0], "high": LR[1], "log": True},
            },
        )
    )


def _first_params(spec: StudySpec, n: int) -> list[dict[str, Any]]:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=make_sampler(spec))
    dists = distributions(spec)
    out = []
    for _ in range(n):
        t = study.ask(dists)
        out.append(t.params)
        # a smooth objective, so TPE has something to model once it starts
        study.tell(t, math.log(t.params["learning_rate"]) ** 2 + t.params["rank"] / 100)
    return out


@pytest.mark.parametrize(("n_trials", "expected"), [(4, 3), (8, 3), (12, 4), (30, 10), (200, 10)])
def test_startup_follows_the_study_size(n_trials: int, expected: int) -> None:
    assert startup_trials(_spec(n_trials)) == expected


def test_an_explicit_startup_count_wins() -> None:
    assert startup_trials(_spec(12, n_startup_trials=7)) == 7


def test_a_12_trial_tpe_study_is_not_random_search() -> None:
    # issue 10: with Optuna's 10 start-up trials, the first 10 configs of tpe and random matched
    spec = _spec(12)
    tpe = _first_params(spec, 10)
    rnd_spec = parse_spec({**spec.model_dump(mode="json"), "sampler": {"name": "random"}})
    rnd = _first_params(rnd_spec, 10)
    assert sum(a != b for a, b in zip(tpe, rnd, strict=True)) >= 8


@pytest.mark.parametrize("seed", range(5))
def test_startup_points_cover_the_space(seed: int) -> None:
    first = _first_params(_spec(12, seed=seed), 4)  # 4 start-up trials
    assert sorted(p["rank"] for p in first) == [4, 8, 16, 32]
    assert len({p["batch_size"] for p in first}) >= 2
    # one learning rate in each quarter of the log range
    quarters = sorted(
        int(4 * (math.log(p["learning_rate"]) - math.log(LR[0])) / (math.log(LR[1]) - math.log(LR[0]))) for p in first
    )
    assert quarters == [0, 1, 2, 3]


def test_unit_to_value_maps_slices_and_ranges() -> None:
    cat = CategoricalDistribution([16, 32, 64])
    assert [unit_to_value(u, cat) for u in (0.0, 0.34, 0.99, 1.0)] == [16, 32, 64, 64]
    lr = FloatDistribution(1e-4, 1e-2, log=True)
    assert unit_to_value(0.0, lr) == pytest.approx(1e-4)
    assert unit_to_value(0.5, lr) == pytest.approx(1e-3)
    assert unit_to_value(1.0, lr) <= 1e-2
    ints = IntDistribution(8, 64, step=8)
    assert {unit_to_value(u / 100, ints) for u in range(100)} == set(range(8, 65, 8))
    logint = IntDistribution(2, 64, log=True)
    vals = {unit_to_value(u / 1000, logint) for u in range(1000)}
    assert min(vals) == 2 and max(vals) == 64
