"""The end-to-end bench (bench/end_to_end.py) on a test-sized task, so that it cannot rot: a grid
of 3 configs at the target budget, the oracle's re-seeds, one study seed per strategy, the fresh
confirmations; every figure of the summary recomputed here from the tables it wrote."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench import end_to_end as e2e
from tests.conftest import tiny_spec

LAST = re.compile(
    r"^e2e task=(\S+) default_regret@0\.2=(\S+) random_asha_regret@0\.2=(\S+) grid_pick_regret=(\S+) "
    r"noise=(\S+) reached=(\d+)/1$"
)


def test_the_bench_runs_end_to_end_and_its_regrets_are_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tiny_spec("e2etask", search={"rank": {"choices": [4]}, "batch_size": {"choices": [64]}})
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "results"
    argv = ["--spec", str(path), "--out-dir", str(out), "--cache-dir", str(tmp_path / "cache"), "--seeds", "1"]
    e2e.main(["all", *argv, "--strategies", "default", "random_asha", "grid_random"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    m = LAST.match(last)
    assert m, last

    runs = e2e._read(out / "e2e_e2etask_runs.csv")
    score = {(e2e._row_key(r), int(r["train_seed"])): float(r["score"]) for r in runs}
    grid = [k for (k, s) in score if s == 0]
    assert len(grid) == 3  # rank 4 x batch 64 x the lr range's ends and log-middle
    assert all((k, s) in score for k in grid for s in (1, 2))  # the oracle re-seeds the top (all 3 here)
    oracle = min(grid, key=lambda k: statistics.mean(score[(k, s)] for s in (0, 1, 2)))
    pick = min(grid, key=lambda k: score[(k, 0)])

    def fresh(k: tuple[int, int, str, str]) -> float:
        return statistics.mean(score[(k, s)] for s in e2e.FRESH_SEEDS)

    res = json.loads((out / "e2e_e2etask.json").read_text())
    assert tuple(res["oracle"]["config"]) == oracle
    assert res["grid_pick"]["regret"] == pytest.approx(fresh(pick) / fresh(oracle) - 1)
    assert float(m.group(4)) == pytest.approx(fresh(pick) / fresh(oracle) - 1, abs=5e-5)
    spreads = [(max(xs) - min(xs)) / statistics.mean(xs) for xs in ([score[(k, s)] for s in (0, 1, 2)] for k in grid)]
    assert res["noise_median_spread_top8"] == pytest.approx(statistics.median(spreads))

    # each study stopped at the first trial that reached 40% of the grid's compute
    cap = 0.4 * sum(int(r["examples"]) for r in runs if r["kind"] == "grid")
    race = e2e._read(out / "e2e_e2etask_race.csv")
    for strategy in ("default", "random_asha"):
        rows = [r for r in race if r["strategy"] == strategy and r["trial"] != "end"]
        computes = [int(r["compute"]) for r in rows]
        assert computes == sorted(computes) and computes[-1] >= cap > (computes[-2] if len(rows) > 1 else 0)
        # the recommendation at 0.2: the best complete trial finished within 20% of the grid's compute
        within = [r for r in rows if int(r["compute"]) <= 0.2 * cap / 0.4 and r["state"] == "complete"]
        rec = res["strategies"][strategy]["seeds"][0]["0.2"]
        if within:
            best = min(within, key=lambda r: float(r["score"]))
            assert tuple(rec["config"]) == e2e._row_key(best)
            assert rec["regret"] == pytest.approx(fresh(tuple(rec["config"])) / fresh(oracle) - 1)
        else:
            assert rec["config"] is None
    # a regret's standard error: the fresh seeds' pooled relative variance, over every config
    # trained with all three, for the difference of two 3-seed means
    fresh_keys = {k for (k, s) in score if s == e2e.FRESH_SEEDS[0]}
    rel = [statistics.variance(xs) / statistics.mean(xs) ** 2
           for xs in ([score[(k, s)] for s in e2e.FRESH_SEEDS] for k in fresh_keys)]  # fmt: skip
    assert res["regret_se"] == pytest.approx((statistics.mean(rel) * 2 / 3) ** 0.5)
    # the default against each other strategy on the same study seed: the difference of regrets
    at = {st: t["seeds"][0]["0.2"]["regret"] for st, t in res["strategies"].items()}
    for other in ("random_asha", "grid_random"):  # a seed without a recommendation (inf) is no pair
        c = res["paired@0.2"][f"default vs {other}"]
        d = [at["default"] - at[other]] if math.isfinite(at["default"]) and math.isfinite(at[other]) else []
        assert c["diffs"] == pytest.approx(d)
        assert (c["better_in"], c["worse_in"]) == (sum(x < 0 for x in d), sum(x > 0 for x in d))
    pick_diff = [at["default"] - res["grid_pick"]["regret"]] if math.isfinite(at["default"]) else []
    assert res["paired@0.2"]["default vs grid_pick"]["diffs"] == pytest.approx(pick_diff)
    # beside each sign test, the bootstrap over fresh seeds reads the same configs' fresh scores
    for c in res["paired@0.2"].values():
        (a, b), *_ = c["pairs"]
        assert len(res["fresh_scores"][a]) == len(res["fresh_scores"][b]) == 3
        if c["diffs"]:  # one study seed: the bootstrap's point estimate is that seed's difference
            assert c["boot"]["mean_diff"] == pytest.approx(c["diffs"][0])
        else:
            assert c["boot"] is None

    # a second summary trains nothing again: every run is read back from the table
    n = len(runs)
    e2e.main(["summary", *argv, "--strategies", "default", "random_asha", "grid_random"])
    assert len(e2e._read(out / "e2e_e2etask_runs.csv")) == n

    # --fresh-seeds 4: each recommendation gets its fourth seed (104), and the regrets use all four
    e2e.main(["summary", *argv, "--strategies", "default", "random_asha", "grid_random", "--fresh-seeds", "4"])
    runs = e2e._read(out / "e2e_e2etask_runs.csv")
    score = {(e2e._row_key(r), int(r["train_seed"])): float(r["score"]) for r in runs}
    res = json.loads((out / "e2e_e2etask_fresh4.json").read_text())  # the 3-seed summary stays as it was
    assert res["fresh_seeds"] == [101, 102, 103, 104]

    def fresh4(k: tuple[int, int, str, str]) -> float:
        return statistics.mean(score[(k, s)] for s in (101, 102, 103, 104))

    assert res["grid_pick"]["regret"] == pytest.approx(fresh4(pick) / fresh4(oracle) - 1)


def _task(tmp_path: Path, spec: dict[str, Any]) -> tuple[Path, Path, list[str]]:
    """The task written as a spec file, the bench's output folder, and its one-seed arguments."""
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "results"
    return (
        path,
        out,
        ["--spec", str(path), "--out-dir", str(out), "--cache-dir", str(tmp_path / "cache"), "--seeds", "1"],
    )


def test_a_confirm_strategy_spends_its_share_and_recommends_what_its_study_confirmed(tmp_path: Path) -> None:
    spec = tiny_spec("e2econf", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    _path, out, argv = _task(tmp_path, spec)
    e2e.main(["race", *argv, "--strategies", "confirm1x2"])
    runs = e2e._read(out / "e2e_e2econf_runs.csv")
    grid_compute = sum(int(r["examples"]) for r in runs if r["kind"] == "grid")
    target = max(int(r["examples"]) for r in runs if r["kind"] == "grid")
    race = e2e._read(out / "e2e_e2econf_race.csv")
    for share in e2e.READINGS:
        rows = [r for r in race if r["strategy"] == f"confirm1x2@{share}"]
        trials = [r for r in rows if r["trial"] not in ("end", "rec")]
        rec = next(r for r in rows if r["trial"] == "rec")
        assert int(rec["compute"]) <= share * grid_compute  # search and confirmation within the share
        if not trials:
            assert not rec["rank"]  # the confirmation alone would not fit: no recommendation
            continue
        confirm_runs = trials[-2:]  # the confirmation comes last: 1 config x 2 seeds at the target
        assert all(int(r["examples_seen"]) >= target * 0.9 for r in confirm_runs)
        search = [r for r in trials[:-2] if r["state"] == "complete"]
        best = min(search, key=lambda r: float(r["score"]))
        assert e2e._row_key(rec) == e2e._row_key(best) == e2e._row_key(confirm_runs[0])
        mean = statistics.mean(float(r["score"]) for r in confirm_runs)
        assert float(rec["score"]) == pytest.approx(mean, abs=1e-5)


def test_the_warm_strategy_counts_its_earlier_study_and_recommends_its_own_trial(tmp_path: Path) -> None:
    spec = tiny_spec("e2ewarm", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    path, out, argv = _task(tmp_path, spec)
    e2e.main(["race", *argv, "--strategies", "warm"])
    race = e2e._read(out / "e2e_e2ewarm_race.csv")
    prior = [r for r in race if r["strategy"] == "warm_prior" and r["trial"] != "end"]
    own = [r for r in race if r["strategy"] == "warm" and r["trial"] != "end"]
    assert len(prior) == spec["n_trials"]  # the earlier study ran to its own n_trials
    assert all(int(r["examples_seen"]) <= spec["budget"]["train_examples"] // 2 + 64 for r in prior)  # half budget
    spent = int(prior[-1]["compute"])
    assert own and int(own[0]["compute"]) > spent  # the earlier study's examples are counted first
    recs = e2e.recommendations(e2e.Bench(e2e.load_spec(str(path)), out, str(tmp_path / "cache")), "warm", 0)
    own_keys = {e2e._row_key(r) for r in own if r["state"] == "complete"}
    assert all(k is None or k in own_keys for k in recs.values())  # never a prior's config by its score


def test_grid_parts_share_the_grid_and_a_confirm_race_runs_only_the_readings_asked(tmp_path: Path) -> None:
    spec = tiny_spec("e2eparts", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    path, out, argv = _task(tmp_path, spec)
    e2e.main(["grid", *argv, "--part", "1/2"])  # the second process of two: every other config from the 2nd
    keys = e2e.grid_configs(e2e.load_spec(str(path)))
    trained = {e2e._row_key(r) for r in e2e._read(out / "e2e_e2eparts_runs.csv")}
    assert trained == set(keys[1::2])
    e2e.main(["race", *argv, "--strategies", "confirm1x1", "--readings", "0.4"])  # the rest of the grid, then 0.4
    assert {e2e._row_key(r) for r in e2e._read(out / "e2e_e2eparts_runs.csv") if r["kind"] == "grid"} == set(keys)
    labels = {r["strategy"] for r in e2e._read(out / "e2e_e2eparts_race.csv")}
    assert labels == {"confirm1x1@0.4"}
    bench = e2e.Bench(e2e.load_spec(str(path)), out, str(tmp_path / "cache"))
    assert set(e2e.recommendations(bench, "confirm1x1", 0)) == {0.4}  # 0.1 and 0.2 were not run: no regret


def test_the_rungs_strategy_trains_every_trial_toward_the_target_budget(tmp_path: Path) -> None:
    """Multi-fidelity to the target: a trial's full budget is the target, evaluated as often per
    example as the short trials, so the recommendation was itself trained at the target."""
    spec = tiny_spec("e2erungs", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    path, out, argv = _task(tmp_path, spec)
    loaded = e2e.load_spec(str(path))
    bench = e2e.Bench(loaded, out, str(tmp_path / "cache"))
    rspec = e2e.strategy_spec(loaded, "rungs")
    b = loaded.budget
    assert rspec.budget.train_examples == bench.target > b.train_examples
    assert rspec.budget.evals == max(b.evals, round(bench.target * b.evals / b.train_examples))
    e2e.main(["race", *argv, "--strategies", "rungs", "--max-share", "0.2"])
    rows = [r for r in e2e._read(out / "e2e_e2erungs_race.csv") if r["strategy"] == "rungs" and r["trial"] != "end"]
    complete = [r for r in rows if r["state"] == "complete"]
    assert complete and all(int(r["examples_seen"]) >= bench.target for r in complete)
    within = [r for r in complete if int(r["compute"]) <= 0.2 * bench.grid_compute()]
    recs = e2e.recommendations(bench, "rungs", 0)
    assert 0.4 not in recs  # raced to 0.2 of the grid's compute: that reading was not run
    rec = recs[0.2]
    assert rec == (e2e._row_key(min(within, key=lambda r: float(r["score"]))) if within else None)


def test_only_seeds_races_those_and_leaves_another_process_rows_alone(tmp_path: Path) -> None:
    spec = tiny_spec("e2eonly", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    path, out, argv = _task(tmp_path, spec)
    e2e.main(["grid", *argv])
    race_csv = out / "e2e_e2eonly_race.csv"
    # another process is midway through random_asha seed 0: its rows have no end row yet
    other = {"strategy": "random_asha", "seed": 0, "trial": 1, "rank": 4, "batch_size": 32, "learning_rate": "0.01",
             "state": "complete", "score": "1.0", "examples_seen": 64, "compute": 64, "params": ""}  # fmt: skip
    e2e._append(race_csv, e2e.RACE_FIELDS, other)
    argv = [a if a != "1" else "2" for a in argv]  # --seeds 2
    e2e.main(["race", *argv, "--strategies", "default", "--max-share", "0.2", "--only-seeds", "1"])
    rows = e2e._read(race_csv)
    assert {int(r["seed"]) for r in rows if r["strategy"] == "default"} == {1}
    assert [r for r in rows if r["strategy"] == "random_asha"] == [{k: str(v) for k, v in other.items()}]

    # the summary reads each strategy on the seeds it raced (a seed without its end row is not
    # raced: no regret, not an infinite one) and pairs two strategies on the seeds both raced
    bench = e2e.Bench(e2e.load_spec(str(path)), out, str(tmp_path / "cache"))
    assert e2e.recommendations(bench, "default", 0) == {}
    assert e2e.recommendations(bench, "random_asha", 0) == {}  # still racing in the other process
    assert set(e2e.recommendations(bench, "default", 1)) == {0.1, 0.2}  # raced to 0.2: 0.4 not run
    e2e.main(["summary", *argv, "--strategies", "default", "random_asha", "grid_random", "--readings", "0.2"])
    res = json.loads((out / "e2e_e2eonly.json").read_text())
    st = res["strategies"]
    assert (st["default"]["seeds@0.2"], st["random_asha"]["seeds@0.2"], st["grid_random"]["seeds@0.2"]) == (1, 0, 2)
    assert st["random_asha"]["median_regret@0.2"] is None
    assert "default vs random_asha" not in res["paired@0.2"]  # no seed raced by both
    seed1 = [st["default"]["seeds"][1]["0.2"]["regret"] - st["grid_random"]["seeds"][1]["0.2"]["regret"]]
    assert res["paired@0.2"]["default vs grid_random"]["diffs"] == pytest.approx(
        [d for d in seed1 if math.isfinite(d)]
    )  # seed 1 alone: grid_random's seed 0 has no partner


def test_a_race_stopped_by_a_signal_leaves_its_seed_unfinished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT during a seed's study: the race exits without that seed's end row, so the next run
    races the seed again from the start instead of counting the cut study as finished; a seed the
    race stops itself, at its share, gets its end row."""
    import os
    import signal

    from autotune.study import driver

    spec = tiny_spec("e2esig", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    _path, out, argv = _task(tmp_path, spec)
    e2e.main(["grid", *argv])  # the grid first: it trains outside any study
    real = driver.default_trial_fn

    def interrupted_worker() -> Any:
        worker = real()

        def run(c: Any, report: Any, interrupt: Any) -> Any:
            os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C (or the SIGTERM of a killed race) mid-trial
            return worker(c, report, interrupt)

        return run

    monkeypatch.setattr(driver, "default_trial_fn", interrupted_worker)
    with pytest.raises(SystemExit, match="stopped by a signal"):
        e2e.main(["race", *argv, "--strategies", "default", "--max-share", "0.1"])
    race_csv = out / "e2e_e2esig_race.csv"
    assert not [r for r in e2e._read(race_csv) if r["trial"] == "end"]

    monkeypatch.setattr(driver, "default_trial_fn", real)
    e2e.main(["race", *argv, "--strategies", "default", "--max-share", "0.1"])
    assert [r["strategy"] for r in e2e._read(race_csv) if r["trial"] == "end"] == ["default"]


def test_the_paired_comparison_counts_seeds_and_gives_an_exact_sign_test() -> None:
    """5 of 5 seeds better is the least that a sign test over 5 seeds puts under 0.1; 4 of 5 is not
    a win that these seeds resolve. Ties and seeds without a recommendation count for neither."""
    five = e2e.paired([0.0, 0.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.1, 0.3, 0.1])
    assert (five["better_in"], five["worse_in"], five["sign_test_p"]) == (5, 0, pytest.approx(0.0625))
    four = e2e.paired([0.0, 0.0, 0.0, 0.0, 0.5], [0.1, 0.2, 0.1, 0.3, 0.1])
    assert (four["better_in"], four["worse_in"], four["sign_test_p"]) == (4, 1, pytest.approx(0.375))
    assert four["median_diff"] == pytest.approx(-0.1)
    ties = e2e.paired([0.0, 0.1, float("inf")], [0.0, 0.2, 0.1])
    assert (ties["better_in"], ties["worse_in"], ties["sign_test_p"]) == (1, 0, 1.0)


def test_confirm_parts_share_the_fresh_runs_and_more_fresh_seeds_summarise_apart(tmp_path: Path) -> None:
    spec = tiny_spec("e2efresh", search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [32, 64]}})
    _path, out, argv = _task(tmp_path, spec)
    e2e.main(["grid", *argv])
    with pytest.raises(SystemExit, match="oracle"):  # it would plan for an oracle of stand-in scores
        e2e.main(["confirm", *argv, "--strategies", "grid_random", "--readings", "0.2", "--part", "0/2"])
    e2e.main(["oracle", *argv])
    runs_csv = out / "e2e_e2efresh_runs.csv"
    before = len(e2e._read(runs_csv))
    e2e.main(["confirm", *argv, "--strategies", "grid_random", "--readings", "0.2", "--part", "0/2"])
    first = e2e._read(runs_csv)[before:]
    assert first and all(int(r["train_seed"]) in e2e.FRESH_SEEDS for r in first)
    e2e.main(["confirm", *argv, "--strategies", "grid_random", "--readings", "0.2", "--part", "1/2"])
    rows = e2e._read(runs_csv)
    keys = [(e2e._row_key(r), int(r["train_seed"])) for r in rows]
    assert len(keys) == len(set(keys))  # the two parts trained no config and seed twice
    second = rows[before + len(first) :]
    assert second  # each part had its share
    e2e.main(["summary", *argv, "--strategies", "grid_random", "--readings", "0.2"])
    three = (out / "e2e_e2efresh.json").read_text()
    assert len(e2e._read(runs_csv)) == len(rows)  # the parts left the summary nothing to train

    more = [*argv, "--strategies", "grid_random", "--readings", "0.2", "--fresh-seeds", "4"]
    e2e.main(["confirm", *more, "--part", "1/2"])
    e2e.main(["summary", *more])  # trains part 0's share of seed 104 itself
    assert (out / "e2e_e2efresh.json").read_text() == three  # the 3-seed summary is not overwritten
    four = json.loads((out / "e2e_e2efresh_fresh4.json").read_text())
    assert four["fresh_seeds"] == [101, 102, 103, 104]
    assert {int(r["train_seed"]) for r in e2e._read(runs_csv)} >= {104}
