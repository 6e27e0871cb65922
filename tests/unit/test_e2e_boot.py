"""bench/e2e_boot.py: a paired comparison's bootstrap over study seeds and fresh training seeds."""

from __future__ import annotations

import math

import pytest

from bench import e2e_boot


def test_ten_study_seeds_on_one_noisy_pair_of_configs_are_not_ten_wins() -> None:
    # every study seed recommends A where the other strategy recommends B; A is better on two of
    # three fresh seeds and worse on the third: the sign test would count 10 of 10 seeds better
    scores = {"O": [1.0, 1.0, 1.0], "A": [0.90, 0.92, 1.20], "B": [1.0, 1.0, 1.0]}
    b = e2e_boot.boot([("A", "B")] * 10, "O", scores)
    assert b is not None
    assert b["mean_diff"] == pytest.approx((0.90 + 0.92 + 1.20) / 3 - 1)
    assert b["ci95"][0] < 0 < b["ci95"][1]  # the fresh seeds cannot tell A from B
    assert 0.2 < b["share_better"] < 0.9


def test_a_config_better_on_every_fresh_seed_wins_every_replicate() -> None:
    scores = {"O": [1.0, 1.1, 0.9], "A": [0.95, 1.04, 0.85], "B": [1.0, 1.1, 0.9]}
    b = e2e_boot.boot([("A", "B"), ("B", "B"), ("A", "B")], "O", scores, seed=3)
    assert b is not None
    assert b["share_better"] + b["share_worse"] < 1.0  # a replicate drawing only the tie seed is 0
    assert b["share_worse"] == 0.0 and b["ci95"][1] <= 0.0


def test_a_seed_without_a_finite_regret_is_left_out_and_none_without_any() -> None:
    scores = {"O": [1.0, 1.0], "A": [0.9, 0.9], "none": [math.inf, math.inf], "D": [0.8, math.inf]}
    b = e2e_boot.boot([("A", "O"), ("none", "O"), ("D", "O")], "O", scores)
    assert b is not None and b["mean_diff"] == pytest.approx(-0.1)  # only the first seed counts
    assert e2e_boot.boot([("none", "O")], "O", scores) is None


def test_pooled_tasks_weigh_the_same_whatever_their_seeds() -> None:
    exact = {"O": [1.0, 1.0, 1.0], "A": [0.9, 0.9, 0.9], "B": [1.1, 1.1, 1.1]}
    better = {"pairs": [["A", "O"]] * 10, "oracle": "O", "scores": exact}  # -0.1, no noise
    worse = {"pairs": [["B", "O"]] * 2, "oracle": "O", "scores": exact}  # +0.1 on two seeds
    p = e2e_boot.pooled([better, worse])
    assert p is not None and p["tasks"] == 2
    assert p["mean_diff"] == pytest.approx(0.0)
    assert p["ci95"] == pytest.approx([0.0, 0.0])
    assert e2e_boot.pooled([better, worse], seed=1) == e2e_boot.pooled([better, worse], seed=1)
