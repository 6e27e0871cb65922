"""The confirmation phase (budget.confirm_top / confirm_seeds / keep_adapters) on tiny studies:
the best configs are re-trained at the target budget with other training seeds, the study
recommends by their mean, `best` says so, and the best adapter is kept and loads; with
budget.confirm_hedge the runner-up's slot goes to the best config at a smaller learning rate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from autotune.storage import Store
from autotune.storage.confirm import confirmed
from autotune.storage.tables import trials
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def _spec(tmp_path: Path, name: str = "c", **budget: object) -> Path:
    spec = tiny_spec(name, n_trials=4, budget={"target_examples": 256, **budget})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_confirmation_retrains_the_best_configs_at_the_target_and_recommends_by_their_mean(
    tmp_path: Path, cli: CliFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOTUNE_ADAPTERS_DIR", str(tmp_path / "kept"))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    path = _spec(tmp_path, confirm_top=2, confirm_seeds=2, keep_adapters=1, confirm_hedge=False)
    code, _out, err = cli("run", str(path), "--storage", url, "--no-progress")
    assert code == 0, err
    store = Store.open(url, create=False)
    try:
        rows = store.trials("c")
        search = [r for r in rows if r["confirm_of"] is None]
        runs = [r for r in rows if r["confirm_of"] is not None]
        assert len(search) == 4  # n_trials is the search's; the runs come on top
        complete = sorted((r for r in search if r["state"] == "complete"), key=lambda r: r["score"])
        leaders = {r["trial_number"] for r in complete[:2]}
        assert {r["confirm_of"] for r in runs} == leaders
        assert len(runs) == 4 and all(r["state"] == "complete" for r in runs)
        # each run: its leader's params, the target budget, training seeds 0 and 1
        by_number = {r["trial_number"]: r for r in rows}
        for r in runs:
            assert r["params"] == by_number[r["confirm_of"]]["params"]
            assert r["examples_seen"] >= 256 > by_number[r["confirm_of"]]["examples_seen"]
        for lead in leaders:
            assert sorted(r["train_seed"] for r in runs if r["confirm_of"] == lead) == [0, 1]
        # the seeds differ, so the runs of one config differ: the spread is measured, not zero
        groups = confirmed(store, "c")
        assert all(g.runs == 2 and g.spread > 0 for g in groups)
        best = store.best("c")
        assert best is not None
        assert best["trial_number"] == groups[0].trial_number
        assert best["confirmed_score"] == pytest.approx(min(g.mean for g in groups))
        # keep_adapters: 1: the best config's first run kept, the other one deleted
        kept = [r for r in runs if r["adapter_dir"]]
        assert len(kept) == 1 and kept[0]["confirm_of"] == groups[0].trial_number and kept[0]["train_seed"] == 0
        assert not (tmp_path / "kept" / "c" / f"trial-{_other_first_run(runs, groups[1].trial_number)}").exists()
        kept_dir = Path(kept[0]["adapter_dir"])
    finally:
        store.close()
    info = json.loads((kept_dir / "autotune_train.json").read_text())
    assert info["trial"] == groups[0].trial_number and info["budget"]["train_examples"] == 256

    from autotune.train import load_trained

    model, _tok, _info = load_trained(kept_dir)
    assert sum("lora_" in n for n, _ in model.named_parameters()) > 0

    code, out, _ = cli("best", "c", "--storage", url)
    assert code == 0
    assert "confirmed_score" in out and "confirmed_runs" in out and str(kept_dir) in out
    code, out, _ = cli("best", "c", "--storage", url, "--format", "json")
    rec = json.loads(out)
    assert rec["confirmed_runs"] == 2 and rec["confirmed_spread"] > 0


def _other_first_run(runs: list[dict[str, object]], lead: int) -> int:
    return next(int(str(r["trial_number"])) for r in runs if r["confirm_of"] == lead and r["train_seed"] == 0)


def test_the_hedge_retrains_the_best_config_at_a_smaller_learning_rate_and_can_be_the_answer(
    tmp_path: Path, cli: CliFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOTUNE_ADAPTERS_DIR", str(tmp_path / "kept"))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    path = _spec(tmp_path, confirm_top=2, keep_adapters=2)  # confirm_hedge: on by default
    code, _out, err = cli("run", str(path), "--storage", url, "--no-progress")
    assert code == 0, err
    store = Store.open(url, create=False)
    try:
        rows = store.trials("c")
        search = [r for r in rows if r["confirm_of"] is None and r["state"] == "complete"]
        lead = min(search, key=lambda r: (r["score"], r["trial_number"]))
        runs = sorted((r for r in rows if r["confirm_of"] is not None), key=lambda r: r["trial_number"])
        # both runs re-train the best search trial: once as it was, once with lr * sqrt(128 / 256),
        # not below the range's low end (1e-3)
        assert [r["confirm_of"] for r in runs] == [lead["trial_number"]] * 2
        lrs = sorted(r["params"]["learning_rate"] for r in runs)
        scaled = max(float(f"{lead['params']['learning_rate'] * 0.5**0.5:.6g}"), 1e-3)
        assert lrs == sorted([lead["params"]["learning_rate"], scaled]) and scaled < lrs[1]
        assert all(r["examples_seen"] >= 256 and r["state"] == "complete" for r in runs)
        groups = confirmed(store, "c")
        assert len(groups) == 2 and sum(g.hedge_of is not None for g in groups) == 1
        hedge = next(r for r in runs if r["params"] != lead["params"])
        # make the hedge's target run the better one: the answer is then its config, not the search
        # trial's, and `best` says whose config it scaled
        with store._tx(write=True) as conn:
            conn.execute(
                trials.update()
                .where(trials.c.study_name == "c", trials.c.trial_number == hedge["trial_number"])
                .values(score=min(r["score"] for r in runs) - 0.5)
            )
        best = store.best("c")
        assert best is not None
        assert best["trial_number"] == hedge["trial_number"] and best["hedge_of"] == lead["trial_number"]
        assert best["params"] == hedge["params"] and best["confirmed_runs"] == 1
    finally:
        store.close()
    info = json.loads((Path(hedge["adapter_dir"]) / "autotune_train.json").read_text())
    assert info["params"] == hedge["params"] and info["hedge_of"] == lead["trial_number"]
    code, out, _ = cli("best", "c", "--storage", url, "--format", "json")
    rec = json.loads(out)
    assert code == 0 and rec["trial"] == hedge["trial_number"] and rec["hedge_of"] == lead["trial_number"]
    assert rec["params"]["learning_rate"] == scaled


def test_resume_with_more_trials_confirms_only_new_leaders(tmp_path: Path, cli: CliFn) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    path = _spec(tmp_path, confirm_top=1)
    assert cli("run", str(path), "--storage", url, "--no-progress")[0] == 0
    code, _out, err = cli("resume", "c", "--storage", url, "--n-trials", "7", "--no-progress")
    assert code == 0, err
    store = Store.open(url, create=False)
    try:
        rows = store.trials("c")
    finally:
        store.close()
    search = [r for r in rows if r["confirm_of"] is None]
    runs = [r for r in rows if r["confirm_of"] is not None]
    assert len(search) == 7
    # one run per leader: the first round's, and one more only if the leader changed
    assert len({r["confirm_of"] for r in runs}) == len(runs) in (1, 2)


def test_keep_adapters_needs_confirmation(tmp_path: Path, cli: CliFn) -> None:
    path = _spec(tmp_path, keep_adapters=1)
    code, _out, err = cli("validate", str(path))
    assert code == 2 and "confirm_top" in err and len(err.strip().splitlines()) == 1


def test_the_summary_counts_the_runs_in_the_total(tmp_path: Path, cli: CliFn) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    path = _spec(tmp_path, confirm_top=1, confirm_seeds=2)
    code, _out, err = cli("run", str(path), "--storage", url, "--no-progress")
    assert code == 0 and "6/6 trials finished" in err, err  # 4 search trials + 1 config x 2 seeds
