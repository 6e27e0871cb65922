"""bench/e2e_rules.py: a confirmation's choice among its confirmed configs, replayed from race rows."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from autotune.spec import load_spec, parse_spec
from bench import e2e_rules

QI_SPEC = Path(__file__).resolve().parents[2] / "bench/specs/quickstart-interior.yaml"


def _row(trial: str, rank: int, lr: float, score: str, examples: int, state: str = "complete") -> dict[str, str]:
    return {"strategy": "confirm2x1@0.2", "seed": "7", "trial": trial, "rank": str(rank), "batch_size": "16",
            "learning_rate": f"{lr:.6g}", "state": state, "score": score, "examples_seen": str(examples),
            "compute": "0", "params": ""}  # fmt: skip


def _study(second_target: str, second_state: str = "complete") -> list[dict[str, str]]:
    # quickstart-interior seed 7's shape: the search's best short trial (A) loses its target run to
    # the runner-up (B), by less than it won the short trials by
    return [
        _row("1", 16, 9.6e-3, "1.20", 1024),  # B's first short trial: its best counts
        _row("2", 8, 1e-3, "2.20", 256, state="pruned"),
        _row("3", 16, 4.3e-3, "0.986", 1024),  # A
        _row("4", 16, 9.6e-3, "1.088", 1024),  # B again
        _row("5", 16, 4.3e-3, "1.040", 1696),  # A at the target
        _row("6", 16, 9.6e-3, second_target, 1728, state=second_state),  # B at the target
        {**_row("rec", 16, 9.6e-3, "0.956", 0), "examples_seen": ""},
        {**_row("end", 0, 0, "", 0), "rank": "", "learning_rate": "", "examples_seen": ""},
    ]


def test_target_follows_the_target_runs_and_all_weighs_the_short_trial_as_much_as_one_run() -> None:
    configs = e2e_rules.confirmed_configs(_study("0.956"), short_examples=1024)
    by_lr = {c["config"][2]: c for c in configs}
    assert by_lr["0.0043"]["short"] == 0.986 and by_lr["0.0043"]["target"] == [1.040]
    assert by_lr["0.0096"]["short"] == 1.088 and by_lr["0.0096"]["target"] == [0.956]  # the best of its two
    assert by_lr["0.0096"]["trial"] == 4
    assert e2e_rules.pick(configs, "target") == (16, 16, "0.0096", "")  # 0.956 < 1.040
    assert e2e_rules.pick(configs, "all") == (16, 16, "0.0043", "")  # (0.986 + 1.040) / 2 < (1.088 + 0.956) / 2


def test_a_target_run_that_failed_scores_worst_under_both_rules() -> None:
    configs = e2e_rules.confirmed_configs(_study("", second_state="oom"), short_examples=1024)
    for rule in e2e_rules.RULES:
        assert e2e_rules.pick(configs, rule) == (16, 16, "0.0043", "")


def test_equal_means_go_to_the_earlier_search_trial_as_the_study_ranks_them() -> None:
    configs: list[dict[str, Any]] = [
        {"config": (8, 16, "0.001", ""), "short": 1.0, "trial": 9, "target": [0.9]},
        {"config": (4, 16, "0.001", ""), "short": 1.0, "trial": 2, "target": [0.9]},
    ]
    assert e2e_rules.pick(configs, "target") == e2e_rules.pick(configs, "all") == (4, 16, "0.001", "")
    assert e2e_rules.pick([], "all") is None


def test_hedge_trains_the_best_config_at_a_smaller_step_and_keeps_whichever_scores_lower_at_the_target() -> None:
    configs = e2e_rules.confirmed_configs(_study("0.956"), short_examples=1024)  # best short: A, lr 4.3e-3
    asked: list[Any] = []

    def at_target(score: float) -> Any:
        def run(key: Any) -> float:
            asked.append(key)
            return score

        return run

    # quickstart-interior's spec: 1,024 examples a trial, lr from 1e-3; a target of 1,682: lr x 0.78
    spec, target = _Bench(Path()).spec, 1682
    assert e2e_rules.hedge(configs, spec, target, at_target(1.0)) == (16, 16, "0.0033551", "")  # 1.0 < A's 1.040
    assert asked == [(16, 16, "0.0033551", "")]  # the runner-up B is not run again
    assert e2e_rules.hedge(configs, spec, target, at_target(1.1)) == (16, 16, "0.0043", "")
    # at the range's low end there is nothing to hedge with, and nothing is trained
    asked.clear()
    data = yaml.safe_load(QI_SPEC.read_text())
    data["search"]["learning_rate"]["low"] = 4.3e-3
    at_low = parse_spec(data, "test")
    assert e2e_rules.hedge(configs, at_low, target, at_target(0.5)) == (16, 16, "0.0043", "")
    assert asked == []


def test_hedge3_runs_the_runner_up_too_and_keeps_the_lowest_of_the_three_target_scores() -> None:
    configs = e2e_rules.confirmed_configs(_study("0.956"), short_examples=1024)  # A 1.040, B 0.956 at the target
    spec, target, asked = _Bench(Path()).spec, 1682, []

    def at_target(score: float) -> Any:
        def run(key: Any) -> float:
            asked.append(key)
            return score

        return run

    hedged = (16, 16, "0.0033551", "")  # A's lr x 0.78
    assert e2e_rules.hedge3(configs, spec, target, at_target(0.9)) == hedged  # 0.9 below both
    assert asked == [hedged]  # A and B ran at the target in the study: only the hedge is new
    # the runner-up B (0.956) beats the hedge (1.0); the 2-slot hedge rule, which never runs B, keeps the hedge
    assert e2e_rules.hedge3(configs, spec, target, at_target(1.0)) == (16, 16, "0.0096", "")
    assert e2e_rules.hedge(configs, spec, target, at_target(1.0)) == hedged
    assert e2e_rules.hedge3([], spec, target, at_target(1.0)) is None


def test_short_keeps_the_search_order_whatever_the_target_runs_say() -> None:
    configs = e2e_rules.confirmed_configs(_study("0.5"), short_examples=1024)
    assert e2e_rules.pick(configs, "short") == (16, 16, "0.0043", "")
    assert e2e_rules.pick(configs, "all") == e2e_rules.pick(configs, "target") == (16, 16, "0.0096", "")


class _Bench:
    """What ``replay`` reads of ``end_to_end.Bench``: the spec, the target, the race table and runs."""

    def __init__(self, race_csv: Path) -> None:
        self.spec = load_spec(QI_SPEC)
        self.target, self.race_csv = 1682, race_csv
        self.trained: list[tuple[str, Any, int]] = []

    def oracle(self) -> Any:
        return (16, 16, "0.00316228", "")

    def confirmed(self, key: Any) -> dict[str, float]:
        return {"score": 1.0 if key == self.oracle() else 1.1}

    def run(self, kind: str, key: Any, seed: int) -> dict[str, str]:
        self.trained.append((kind, key, seed))
        return {}

    def score(self, key: Any, seed: int) -> float:
        return 0.9


def test_replay_trains_the_hedge_with_the_task_training_seed_whatever_the_study_seed(tmp_path: Path) -> None:
    race = tmp_path / "race.csv"
    with race.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(_study("0.956")[0]))
        w.writeheader()
        w.writerows(_study("0.956"))  # study seed 7
    bench = _Bench(race)
    res = e2e_rules.replay(cast(Any, bench), "confirm2x1", seeds=10)
    assert list(res["seeds"]) == ["7"] and res["replay_mismatches"] == []  # the rec row is the target rule's pick
    assert bench.trained == [("hedge", (16, 16, "0.0033551", ""), 0)]  # the task's seed (0), not the study's (7)
    assert res["seeds"]["7"]["hedge"]["config"] == (16, 16, "0.0033551", "")  # 0.9 < A's 1.040
    assert res["seeds"]["7"]["target"]["regret"] == pytest.approx(0.1)
    # another config with the same regret is a changed pick but a tie, not a win
    h = res["hedge_vs_target"]
    assert (h["changed"], h["better_in"], h["worse_in"], h["sign_test_p"]) == (1, 0, 0, 1.0)


def test_a_real_hedge_study_is_checked_against_the_replay(tmp_path: Path) -> None:
    def table(rec_lr: float, first_score: str = "1.20") -> list[dict[str, str]]:
        real = [{**r, "strategy": e2e_rules.HEDGED} for r in _study("0.956")[:4]]  # the same search...
        real[0]["score"] = first_score
        real += [  # ...then A and its hedge at the target, and the study's own answer
            {**_row("5", 16, 4.3e-3, "1.040", 1696), "strategy": e2e_rules.HEDGED},
            {**_row("6", 16, 3.3551e-3, "0.9", 1696), "strategy": e2e_rules.HEDGED},
            {**_row("rec", 16, rec_lr, "0.9", 0), "strategy": e2e_rules.HEDGED, "examples_seen": ""},
        ]
        return _study("0.956") + real

    def replayed(rows: list[dict[str, str]]) -> dict[str, Any]:
        race = tmp_path / "race.csv"
        with race.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        return e2e_rules.replay(cast(Any, _Bench(race)), "confirm2x1", seeds=10)

    same = replayed(table(3.3551e-3))
    assert same["hedge_raced"] == [7] and same["hedge_race_mismatches"] == []
    assert replayed(table(4.3e-3))["hedge_race_mismatches"] == [7]  # another answer than the replay's
    # the study scales the full-precision lr, the replay the printed one: the last digit may differ
    assert replayed(table(3.35511e-3))["hedge_race_mismatches"] == []
    # the same search scored a little differently (another session's float order) is drift, not another search
    drifted = replayed(table(3.3551e-3, first_score="1.26"))
    assert drifted["hedge_race_mismatches"] == []
    assert drifted["hedge_race_score_drift"] == pytest.approx(1 - 1.20 / 1.26)
    other = table(3.3551e-3)
    other[len(_study("0.956")) + 1]["state"] = "complete"  # its second search trial was pruned
    assert replayed(other)["hedge_race_mismatches"] == [7]  # another search
