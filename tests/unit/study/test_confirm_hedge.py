"""The hedge a confirmation phase runs in the runner-up's slot (budget.confirm_hedge): the best
config with its learning rate times sqrt(short budget / target budget), inside the range."""

from __future__ import annotations

import math
from typing import Any

import pytest

from autotune.spec import parse_spec
from autotune.study.confirm import hedge
from tests.conftest import tiny_spec


def _spec(**search: Any) -> Any:
    return parse_spec(tiny_spec(search=search), "test")  # train_examples 128


def test_the_learning_rate_shrinks_by_the_square_root_of_the_budget_ratio() -> None:
    params = {"rank": 8, "batch_size": 16, "learning_rate": 8e-3}
    h = hedge(_spec(), params, 512)  # a target 4x a short trial: half the step
    assert h == {"rank": 8, "batch_size": 16, "learning_rate": 4e-3}
    odd = hedge(_spec(), {**params, "learning_rate": 7.123456789e-3}, 300)
    assert odd is not None  # printed to 6 significant digits, so the CSV and `best` show it exactly
    assert odd["learning_rate"] == float(f"{7.123456789e-3 * math.sqrt(128 / 300):.6g}")


def test_not_below_the_range_and_nothing_when_already_there() -> None:
    assert hedge(_spec(), {"learning_rate": 1.2e-3}, 512) == {"learning_rate": 1e-3}  # low: 1e-3
    assert hedge(_spec(), {"learning_rate": 1e-3}, 512) is None


@pytest.mark.parametrize("target", [128, 64])
def test_nothing_when_the_target_is_no_longer_than_a_search_trial(target: int) -> None:
    assert hedge(_spec(), {"learning_rate": 5e-3}, target) is None


def test_nothing_for_a_learning_rate_of_choices_or_steps() -> None:
    choices = _spec(learning_rate={"choices": [1e-3, 3e-3]})
    assert hedge(choices, {"learning_rate": 3e-3}, 512) is None  # a grid's values, not a range
    stepped = _spec(learning_rate={"low": 1e-3, "high": 1e-2, "step": 1e-3})
    assert hedge(stepped, {"learning_rate": 5e-3}, 512) is None
