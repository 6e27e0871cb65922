"""The search-efficiency bench (bench/search_efficiency.py) still runs end to end: a tiny grid on
a shortened smoke study, then one seed of the default search racing it, with the compute it
counts checked against the trials table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bench import search_efficiency as se
from tests.conftest import REPO

LAST = re.compile(
    r"^tpe_asha_share=(\S+) random_asha_share=(\S+) random_share=(\S+) grid_share=(\S+) reached=(\d+)/(\d+)$"
)


def test_race_runs_on_the_smoke_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text())
    # the conftest's test-sized tiny model and data: each trial well under a second on a free core
    spec["model"]["tiny"] = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64}
    spec["data"] = {**spec["data"], "max_length": 24, "max_examples": 400}
    spec["budget"] = {"train_examples": 256, "evals": 2}
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(spec))
    grid_csv = tmp_path / "grid.csv"
    common = ["--spec", str(path), "--grid-csv", str(grid_csv), "--ranks", "4", "--batches", "64"]
    se.main(["grid", *common, "--reseed", "0"])
    assert len(se.read_grid(grid_csv, 0)) == 3  # rank 4 x batch 64 x 3 learning rates
    race = ["race", *common, "--seeds", "1", "--max-trials", "4", "--strategies", "tpe_asha"]
    se.main([*race, "--out-dir", str(tmp_path), "--cache-dir", str(tmp_path / "cache"), "--check-storage"])
    out = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("storage check:") for line in out)
    m = LAST.match(out[-1])
    assert m, out[-1]
    assert m.group(6) == "1"
    rows = se._read(tmp_path / "race_smoke_tpe_asha.csv")
    trials = [r for r in rows if r["trial"] != "end"]
    assert 1 <= len(trials) <= 4
    # compute is cumulative and counts every trial's examples, pruned ones' partial work included
    assert int(trials[-1]["compute"]) == sum(int(r["examples_seen"]) for r in trials)
    # the share printed is the race file's own: the compute at the first trial whose best is within
    # 1% of the grid's best (within the grid's compute), over the grid's compute; 1.0 if none is
    grid = se.read_grid(grid_csv, 0)
    grid_best, grid_compute = min(float(r["score"]) for r in grid), sum(int(r["examples_seen"]) for r in grid)
    hits = [int(r["compute"]) for r in trials if r["best"] and float(r["best"]) <= grid_best * 1.01]
    reached = bool(hits) and hits[0] <= grid_compute
    expected = hits[0] / grid_compute if reached else 1.0
    assert float(m.group(1)) == pytest.approx(expected, abs=5e-4), (m.group(1), trials)
    assert m.group(5) == ("1" if reached else "0")
    # a second race warm-started from the first one's trials (what `run --warm-start` does): the
    # priors are in the Optuna study, not counted as this race's trials or compute
    se.main([*race, "--out-dir", str(tmp_path), "--tag", "_warm", "--cache-dir", str(tmp_path / "cache"),
             "--warm-from-race", str(tmp_path / "race_smoke_tpe_asha.csv"), "--warm-offset", "0"])  # fmt: skip
    warm = [r for r in se._read(tmp_path / "race_smoke_warm_tpe_asha.csv") if r["trial"] != "end"]
    assert 1 <= len(warm) <= 4
    assert int(warm[0]["compute"]) == int(warm[0]["examples_seen"])


def test_surrogate_scores_lie_between_the_grid_neighbours() -> None:
    """``replay --surrogate``: an lr between two grid values gets each evaluation's score
    interpolated on the log scale; a grid lr gets its own run back."""
    table = {
        (8, 16, 1e-3): {"curve": "256:2.0 512:1.5", "score": "1.5", "examples_seen": "512"},
        (8, 16, 1e-2): {"curve": "256:1.0 512:0.5", "score": "0.5", "examples_seen": "512"},
    }
    assert se._row_at(table, 8, 16, 1e-3) is table[(8, 16, 1e-3)]
    mid = se._row_at(table, 8, 16, 10**-2.5)  # the log-middle
    assert mid["curve"] == "256:1.50000 512:1.00000"
    assert float(mid["score"]) == pytest.approx(1.0)


def test_surrogate_replay_runs_over_the_committed_quickstart_grid(capsys: pytest.CaptureFixture[str]) -> None:
    se.main(["replay", "--spec", str(REPO / "studies" / "quickstart.yaml"), "--surrogate", "--seeds", "2",
             "--strategies", "tpe_asha"])  # fmt: skip
    out = capsys.readouterr().out
    assert "SURROGATE" in out
    assert re.search(r"replay tpe_asha: median share \d\.\d+ .* reached \d/2", out), out
