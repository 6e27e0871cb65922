"""bench/e2e_pooled.py: the default's paired comparisons of several tasks, pooled into one sign test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import e2e_pooled


def _task(diffs_random: list[float], diffs_pick: list[float], default: str = "confirm2x1") -> dict[str, Any]:
    def c(d: list[float]) -> dict[str, Any]:
        better, worse = sum(x < 0 for x in d), sum(x > 0 for x in d)
        return {"diffs": d, "median_diff": sorted(d)[len(d) // 2], "better_in": better, "worse_in": worse,
                "sign_test_p": 1.0}  # fmt: skip

    return {"paired@0.2": {f"{default} vs random_asha": c(diffs_random), f"{default} vs grid_pick": c(diffs_pick)}}


def test_seeds_pool_over_tasks_into_one_exact_sign_test_and_each_task_keeps_its_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 4 of 5 on each of two tasks is p = 0.375 on either alone; 9 of 10 over both is p = 0.0215
    (tmp_path / "e2e_a.json").write_text(json.dumps(_task([-0.1, -0.2, -0.01, -0.3, 0.05], [0.0, 0.1, 0.0, 0.0, 0.0])))
    (tmp_path / "e2e_b.json").write_text(
        json.dumps(_task([-0.001, -0.002, -0.003, -0.004, -0.005], [-0.1, 0.1, 0.2, 0.0, 0.0], default="default"))
    )
    e2e_pooled.main(["--tasks", "a", "b", "--out-dir", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "e2e_pooled tasks=2 vs_random_asha=9/1 p=0.0215 vs_grid_pick=1/3 p=0.6250"
    res = json.loads((tmp_path / "e2e_pooled.json").read_text())["compared"]
    r = res["random_asha"]
    assert (r["better_in"], r["worse_in"]) == (9, 1)
    assert r["sign_test_p"] == pytest.approx(2 * (1 + 10) / 2**10)
    assert {t: (v["better_in"], v["worse_in"]) for t, v in r["tasks"].items()} == {"a": (4, 1), "b": (5, 0)}
    assert r["tasks"]["b"]["default"] == "default"  # pooled under the other strategy's name, whatever the default
    assert (r["tasks_better"], r["tasks_worse"]) == (2, 0)
    assert (res["grid_pick"]["tasks_better"], res["grid_pick"]["tasks_worse"]) == (0, 2)  # zero diffs are ties: no seed


def test_a_task_without_its_summary_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"e2e_missing\.json does not exist"):
        e2e_pooled.main(["--tasks", "missing", "--out-dir", str(tmp_path)])


def test_out_names_the_file_so_that_a_pool_over_other_tasks_keeps_the_first(tmp_path: Path) -> None:
    (tmp_path / "e2e_a.json").write_text(json.dumps(_task([-0.1], [0.1])))
    e2e_pooled.main(["--tasks", "a", "--out-dir", str(tmp_path), "--out", "e2e_pooled_a.json"])
    assert json.loads((tmp_path / "e2e_pooled_a.json").read_text())["tasks"] == ["a"]
    assert not (tmp_path / "e2e_pooled.json").exists()


def test_fresh_seeds_pools_the_summaries_judged_on_that_many_seeds(tmp_path: Path) -> None:
    (tmp_path / "e2e_a.json").write_text(json.dumps(_task([-0.1], [0.1])))  # 3 fresh seeds: worse than the pick
    (tmp_path / "e2e_a_fresh6.json").write_text(json.dumps(_task([-0.1], [-0.1])))  # 6: better
    e2e_pooled.main(["--tasks", "a", "--out-dir", str(tmp_path), "--fresh-seeds", "6", "--out", "p6.json"])
    pick = json.loads((tmp_path / "p6.json").read_text())["compared"]["grid_pick"]
    assert (pick["better_in"], pick["worse_in"]) == (1, 0)
    with pytest.raises(SystemExit, match=r"e2e_a_fresh4\.json does not exist"):
        e2e_pooled.main(["--tasks", "a", "--out-dir", str(tmp_path), "--fresh-seeds", "4"])


def test_the_pooled_bootstrap_reads_each_tasks_pairs_and_fresh_scores(tmp_path: Path) -> None:
    a = _task([-0.1], [0.1])
    a["paired@0.2"]["confirm2x1 vs grid_pick"]["pairs"] = [["A", "O"]]
    a.update(fresh_scores={"A": [1.2, 1.1, 1.0], "O": [1.0, 1.0, 1.0]}, fresh_oracle="O")
    (tmp_path / "e2e_a.json").write_text(json.dumps(a))
    (tmp_path / "e2e_b.json").write_text(json.dumps(_task([-0.1], [0.1])))  # summarised before the bootstrap
    e2e_pooled.main(["--tasks", "a", "b", "--out-dir", str(tmp_path)])
    res = json.loads((tmp_path / "e2e_pooled.json").read_text())["compared"]
    pick = res["grid_pick"]
    assert pick["boot_tasks"] == ["a"] and pick["boot"]["tasks"] == 1
    assert pick["boot"]["mean_diff"] == pytest.approx(0.1)
    assert res["random_asha"]["boot"] is None and res["random_asha"]["boot_tasks"] == []
