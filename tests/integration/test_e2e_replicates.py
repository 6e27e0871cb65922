"""bench/e2e_replicates.py: a hedge2x2 study replayed from a hedge2x1 study, checked against the
real hedge2x2 study of the same seed on a test-sized task."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import yaml

from bench import e2e_replicates
from bench import end_to_end as e2e
from tests.conftest import tiny_spec


def _row(trial: str, compute: int, examples: int = 128, state: str = "complete", score: str = "1.0") -> dict[str, str]:
    return {"strategy": "hedge2x1@0.2", "seed": "0", "trial": trial, "rank": "4", "batch_size": "16",
            "learning_rate": "0.001", "state": state, "score": score, "examples_seen": str(examples),
            "compute": str(compute), "params": ""}  # fmt: skip


def test_the_prefix_ends_after_the_first_trial_that_leaves_no_room_for_another() -> None:
    rows = [_row("1", 128), _row("2", 160, examples=32, state="pruned"), _row("3", 288), _row("4", 416),
            _row("5", 768, examples=352), _row("rec", 768), _row("end", 768)]  # fmt: skip
    # room 400: after trial 2 (160 + 128 <= 400) another fits; after trial 3 (288 + 128 > 400) it does not
    assert [r["trial"] for r in e2e_replicates.prefix(rows, 128, 400)] == ["1", "2", "3"]
    assert [r["trial"] for r in e2e_replicates.prefix(rows, 128, 10_000)] == ["1", "2", "3", "4"]  # no target run
    assert e2e_replicates.prefix(rows, 128, 127) == []  # not even one short trial: no search


def _task(tmp_path: Path, name: str) -> tuple[Path, Path, str, list[str]]:
    """A test-sized task of 36 grid configs, so that 20% of the grid's compute holds 4 target runs
    and a few short trials: its spec file, results folder, model cache and one-seed bench arguments."""
    spec = tiny_spec(name, search={"rank": {"choices": [4, 8, 16, 32]}, "batch_size": {"choices": [16, 32, 64]}})
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(spec))
    out, cache = tmp_path / "results", str(tmp_path / "cache")
    return path, out, cache, ["--spec", str(path), "--out-dir", str(out), "--cache-dir", cache, "--seeds", "1"]


def test_the_replay_picks_what_a_real_hedge2x2_study_recommends(tmp_path: Path) -> None:
    path, out, cache, argv = _task(tmp_path, "e2erep")
    e2e.main(["race", *argv, "--readings", "0.2", "--strategies", "hedge2x1", "hedge2x2"])

    e2e_replicates.main(["--specs", str(path), "--out-dir", str(out), "--cache-dir", cache, "--seeds", "1"])

    res = json.loads((out / "e2e_replicates.json").read_text())
    task = res["tasks"]["e2erep"]
    assert task["real_checked"] == [0] and task["real_mismatches"] == []  # the real study searched the prefix
    seed = task["seeds"]["0"]
    runs = e2e._read(out / "e2e_e2erep_runs.csv")
    score = {(e2e._row_key(r), int(r["train_seed"])): float(r["score"]) for r in runs}
    for label, mean in seed["confirmed"].items():  # each confirmed config: its mean over training seeds 0 and 1
        rank, batch, lr = label.split("/")
        key = e2e._key(rank, batch, lr)
        assert mean == statistics.fmean(score[(key, s)] for s in (0, 1))
    assert len(seed["confirmed"]) == 2 and seed["pick"] == min(seed["confirmed"], key=seed["confirmed"].get)
    race = e2e._read(out / "e2e_e2erep_race.csv")
    real = [r for r in race if r["strategy"] == "hedge2x2@0.2"]
    assert seed["search_trials"] == sum(
        int(r["examples_seen"]) <= 128 for r in real if r["trial"] not in ("rec", "end")
    )
    rec = next(r for r in race if r["strategy"] == "hedge2x1@0.2" and r["trial"] == "rec")
    assert seed["shipped"] == "/".join(str(x) for x in e2e._row_key(rec) if x != "")

    def fresh(label: str) -> float:  # a config's mean over the 3 fresh seeds, from the runs table
        rank, batch, lr = label.split("/")
        return statistics.fmean(score[(e2e._key(rank, batch, lr), s)] for s in (101, 102, 103))

    assert seed["regret"] == pytest.approx(fresh(seed["pick"]) / fresh(task["oracle"]) - 1)
    assert seed["shipped_regret"] == pytest.approx(fresh(seed["shipped"]) / fresh(task["oracle"]) - 1)


def test_keep_search_is_set_against_a_hedge2x1_study_given_the_same_compute(tmp_path: Path) -> None:
    path, out, cache, argv = _task(tmp_path, "e2ewide")
    e2e.main(["race", *argv, "--readings", "0.2", "--strategies", "hedge2x1"])
    grid = [r for r in e2e._read(out / "e2e_e2ewide_runs.csv") if r["kind"] == "grid"]
    compute = sum(int(r["examples"]) for r in grid)
    share = 0.2 + 2 * max(int(r["examples"]) for r in grid) / compute  # keep-search's: 0.2 plus two target runs
    e2e.main(["race", *argv, "--readings", str(share), "--strategies", "hedge2x1"])

    e2e_replicates.main(["--specs", str(path), "--out-dir", str(out), "--cache-dir", cache, "--seeds", "1",
                         "--keep-search"])  # fmt: skip

    task = json.loads((out / "e2e_replicates_keepsearch.json").read_text())["tasks"]["e2ewide"]
    assert task["wider_seeds"] == 1 and task["wider_mismatches"] == []  # the wider study began with the 0.2 search
    race = e2e._read(out / "e2e_e2ewide_race.csv")
    rec = next(r for r in race if r["strategy"] == task["wider"] and r["trial"] == "rec")
    assert int(rec["compute"]) <= share * compute + 1e-6  # its search and confirmation within the same share
    seed = task["seeds"]["0"]
    assert seed["wider"] == "/".join(str(x) for x in e2e._row_key(rec) if x != "")
    assert task["hedge2x2_vs_wider"]["pairs"] == [[seed["pick"], seed["wider"]]]
