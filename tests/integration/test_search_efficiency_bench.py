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
    share = float(m.group(1))
    assert 0 < share <= 1.0
    assert m.group(6) == "1"
    rows = se._read(tmp_path / "race_smoke_tpe_asha.csv")
    trials = [r for r in rows if r["trial"] != "end"]
    assert 1 <= len(trials) <= 4
    # compute is cumulative and counts every trial's examples, pruned ones' partial work included
    assert int(trials[-1]["compute"]) == sum(int(r["examples_seen"]) for r in trials)
