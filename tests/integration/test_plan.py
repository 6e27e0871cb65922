"""Issue 13: bad models and spec properties fail before any trial, repeated crashes stop the run,
predictions gate configs and the time budget, relative paths and data fingerprints."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autotune.storage import Store
from tests.conftest import REPO, tiny_spec
from tests.integration.workers import env, fast_spec

CliFn = Callable[..., tuple[int, str, str]]


def _one_line(result: tuple[int, str, str], code: int, expected: str) -> None:
    rc, _, err = result
    lines = [ln for ln in err.splitlines() if ln.startswith("autotune:")]
    assert rc == code, f"exit {rc}: {err}"
    assert len(lines) == 1, err
    assert expected in lines[0], err
    assert "Traceback" not in err, err


def _nothing_running(url: str, name: str) -> None:
    store = Store.open(url, create=False)
    try:
        assert not store.running(name)
    finally:
        store.close()


def test_empty_model_directory_fails_validate_and_run(
    cli: CliFn, write_spec: Callable[..., Path], tmp_path: Path, db_url: str
) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    spec = write_spec(tiny_spec(name="empty", model={"name": str(empty)}))
    _one_line(cli("validate", str(spec)), 2, "no config.json")
    _one_line(cli("run", str(spec), "--storage", db_url, "--no-progress"), 2, "no config.json")
    assert not Path(db_url.removeprefix("sqlite:///")).exists()  # failed before any study existed


def test_config_without_tokenizer(cli: CliFn, write_spec: Callable[..., Path], tmp_path: Path) -> None:
    model = tmp_path / "no-tokenizer"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "max_position_embeddings": 512}))
    spec = write_spec(tiny_spec(name="notok", model={"name": str(model)}))
    _one_line(cli("validate", str(spec)), 2, "no tokenizer files")


def test_max_length_above_the_position_limit(cli: CliFn, write_spec: Callable[..., Path]) -> None:
    spec = write_spec(tiny_spec(name="long", data={"max_length": 4096}))
    _one_line(cli("validate", str(spec)), 2, "position limit of 2048")


def test_hub_id_offline_is_one_line(
    cli: CliFn, write_spec: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = write_spec(tiny_spec(name="hub", model={"name": "someone/not-cached-model"}))
    _one_line(cli("validate", str(spec)), 2, "cannot be reached")


def test_missing_target_module_stops_before_any_trial(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    spec = write_spec(tiny_spec(name="tm", lora={"target_modules": ["no_such_proj"]}))
    _one_line(cli("run", str(spec), "--storage", db_url, "--no-progress"), 2, "no module named 'no_such_proj'")


def test_repeated_identical_crash_stops_the_run(tmp_path: Path, db_url: str) -> None:
    path = tmp_path / "crash.yaml"
    path.write_text(json.dumps(fast_spec("crash", n_trials=6)))
    proc = subprocess.run(
        [sys.executable, "-m", "autotune", "run", str(path), "--no-progress"],
        env=env(db_url, AUTOTUNE_FAULTS="crash"),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    _one_line((proc.returncode, proc.stdout, proc.stderr), 3, "the same crash 3 times in a row: RuntimeError")
    store = Store.open(db_url, create=False)
    states = [r["state"] for r in store.trials("crash")]
    store.close()
    assert states == ["crashed"] * 3, states  # not 6 trials x 3 attempts
    _nothing_running(db_url, "crash")


def test_memory_limit_below_every_config(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    spec = write_spec(tiny_spec(name="mem", n_trials=3))
    rc, _, err = cli("run", str(spec), "--storage", db_url, "--no-progress", "--memory-limit", "0.01MB")
    assert rc == 3, err
    assert "every config of the search space is predicted above the memory limit" in err, err
    store = Store.open(db_url, create=False)
    rows = store.trials("mem")
    assert rows, rows
    assert all(r["state"] == "oom" and r["error"].startswith("predicted ") for r in rows), rows
    assert all(r["optimizer_steps"] in (None, 0) and r["predicted_memory_mb"] > 0.01 for r in rows)
    assert store.count_finished("mem") == 0  # not counted toward n_trials
    store.close()


def test_time_budget_stops_starting_trials(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    spec = write_spec(tiny_spec(name="tb", n_trials=50))
    rc, _, err = cli("run", str(spec), "--storage", db_url, "--no-progress", "--time-budget", "1s")
    assert rc == 0, err
    assert "time budget: the next trial is predicted to take" in err, err
    store = Store.open(db_url, create=False)
    assert store.count_finished("tb") < 50
    assert not store.running("tb")
    store.close()


def test_resume_takes_its_own_time_budget(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    spec = write_spec(tiny_spec(name="tbr", n_trials=2))
    assert cli("run", str(spec), "--storage", db_url, "--no-progress")[0] == 0
    rc, _, err = cli("resume", "tbr", "--storage", db_url, "--no-progress", "--n-trials", "50", "--time-budget", "1s")
    assert rc == 0, err
    assert "time budget: the next trial is predicted to take" in err, err
    store = Store.open(db_url, create=False)
    assert 2 <= store.count_finished("tbr") < 50
    assert not store.running("tbr")
    store.close()
    rc, _, err = cli("resume", "tbr", "--storage", db_url, "--time-budget", "soon")
    assert rc == 2 and "--time-budget" in err and "Traceback" not in err, err


def test_resume_reuses_the_stored_probe(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run probes once and stores it with the study; resume predicts from the stored
    probe without probing again (a probe here would fail: it is replaced by one that raises)."""
    from autotune.costs import probe

    spec = write_spec(
        tiny_spec(name="cal", n_trials=2, budget={"memory_limit_mb": 100000})
    )  # a limit asks for the probe
    assert cli("run", str(spec), "--storage", db_url, "--no-progress")[0] == 0

    def no_probe(*_: object, **__: object) -> None:
        raise AssertionError("probed again")

    monkeypatch.setattr(probe, "calibrate", no_probe)
    rc, _, err = cli("resume", "cal", "--storage", db_url, "--no-progress", "--n-trials", "4")
    assert rc == 0, err
    assert "calibration probe failed" not in err, err
    store = Store.open(db_url, create=False)
    rows = store.trials("cal")
    store.close()
    assert len(rows) == 4
    assert all(r["predicted_memory_mb"] is not None and r["predicted_time_s"] for r in rows), rows


def test_resume_predicts_with_what_the_study_measured(cli: CliFn, write_spec: Callable[..., Path], db_url: str) -> None:
    """The correction of the probe's figures is learned from the study's stored trials, so a
    resumed run (or a worker that joins later) starts with it: here the first run's trials are
    made to have measured 2x the probe's memory and 1.5x its time; resume's trial is predicted so."""
    from sqlalchemy import update

    from autotune.costs.model import Calibration, CostModel
    from autotune.costs.probe import device_key
    from autotune.spec import parse_spec
    from autotune.storage.plan import load_calibration
    from autotune.storage.tables import trials

    data = tiny_spec(name="corr", n_trials=2, budget={"memory_limit_mb": 100000})  # a limit asks for the probe
    assert cli("run", str(write_spec(data)), "--storage", db_url, "--no-progress")[0] == 0
    store = Store.open(db_url, create=False)
    try:
        stored = load_calibration(store, "corr", device_key(parse_spec(data)))
        assert stored is not None
        model = CostModel(Calibration.from_json(stored))

        def raw(r: dict[str, object]) -> Any:
            params: Any = r["params"]
            return model.predict(int(params["rank"]), int(params["batch_size"]))

        first = store.trials("corr")
        assert [r["state"] for r in first] == ["complete", "complete"]
        with store.engine.begin() as conn:
            for r in first:
                conn.execute(
                    update(trials)
                    .where(trials.c.study_name == "corr", trials.c.trial_number == r["trial_number"])
                    .values(peak_memory_mb=2 * raw(r).peak_memory_mb, wall_time_s=1.5 * raw(r).trial_time_s)
                )
        rc, _, err = cli("resume", "corr", "--storage", db_url, "--no-progress", "--n-trials", "3")
        assert rc == 0, err
        new = store.trials("corr")[2]
    finally:
        store.close()
    assert new["predicted_memory_mb"] == pytest.approx(2 * raw(new).peak_memory_mb, rel=1e-6)
    assert new["predicted_time_s"] == pytest.approx(1.5 * raw(new).trial_time_s, rel=1e-6)


def test_relative_paths_and_fingerprint_on_resume(
    cli: CliFn, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    data = proj / "train.jsonl"
    data.write_text("".join(json.dumps({"text": f"count {i} {i + 1} {i + 2}"}) + "\n" for i in range(120)))
    spec = tiny_spec(name="fp", n_trials=1, data={"source": "train.jsonl", "max_examples": None})
    (proj / "spec.yaml").write_text(json.dumps(spec))
    monkeypatch.chdir(tmp_path)  # not the spec's directory
    rc, _, err = cli("run", "proj/spec.yaml", "--storage", db_url, "--no-progress")
    assert rc == 0, err
    store = Store.open(db_url, create=False)
    assert str(data) in store.require_study("fp").spec_yaml  # stored resolved
    store.close()
    data.write_text(data.read_text() + json.dumps({"text": "one more line"}) + "\n")
    _one_line(
        cli("resume", "fp", "--storage", db_url, "--n-trials", "2", "--no-progress"),
        2,
        "has changed since study 'fp' started",
    )


def test_estimate_smoke_lists_every_config(cli: CliFn) -> None:
    rc, out, err = cli("estimate", str(REPO / "studies" / "smoke.yaml"), "--format", "json")
    assert rc == 0, err
    got = json.loads(out)
    pairs = {(c["rank"], c["batch_size"]) for c in got["configs"]}
    assert pairs == {(r, b) for r in (4, 8, 16, 32) for b in (16, 32, 64)}
    assert all(c["peak_memory_mb"] > 0 and c["trial_time_s"] > 0 for c in got["configs"])
    assert got["study"]["predicted_time_s"] > 0


def test_estimate_table_says_what_cpu_figures_leave_out(cli: CliFn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOTUNE_MMAP_THRESHOLD", raising=False)
    rc, out, err = cli("estimate", str(REPO / "studies" / "smoke.yaml"))
    assert rc == 0, err
    rows = [ln for ln in out.splitlines() if ln.split()[-1:] in (["yes"], ["NO"], ["-"])]
    assert len(rows) == 12 and "/12 configs fit" in out, out
    assert "note: on CPU memory is the bytes a trial allocates" in err, err
    assert "available RAM / 3.2" in err, err  # the default CPU limit allows for glibc's heap slack


def test_a_probe_stored_under_another_memory_figure_is_probed_again(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A study whose probe and trials measured CPU memory as RSS (before the allocated-bytes
    meter) is resumed: its probe is run again, and its RSS peaks teach the correction nothing."""
    from sqlalchemy import update

    from autotune.costs import probe
    from autotune.costs.model import Calibration, CostModel
    from autotune.spec import parse_spec
    from autotune.storage.plan import load_calibration, save_calibration
    from autotune.storage.tables import trials
    from autotune.worker.memory import memory_kind

    data = tiny_spec(name="kind", n_trials=2, budget={"memory_limit_mb": 100000})  # a limit asks for the probe
    assert cli("run", str(write_spec(data)), "--storage", db_url, "--no-progress")[0] == 0
    key = probe.device_key(parse_spec(data))
    store = Store.open(db_url, create=False)
    try:
        stored = load_calibration(store, "kind", key)
        assert stored is not None
        save_calibration(store, "kind", key, {**stored, "memory_kind": "cpu_rss_above_baseline"})
        with store.engine.begin() as conn:  # RSS-era trials, at 2x the probe's memory
            conn.execute(
                update(trials)
                .where(trials.c.study_name == "kind")
                .values(memory_kind="cpu_rss_above_baseline", peak_memory_mb=2 * trials.c.predicted_memory_mb)
            )
        calls = []
        real = probe.calibrate
        monkeypatch.setattr(probe, "calibrate", lambda *a, **k: calls.append(1) or real(*a, **k))
        rc, _, err = cli("resume", "kind", "--storage", db_url, "--no-progress", "--n-trials", "3")
        assert rc == 0, err
        again = load_calibration(store, "kind", key)
        new = store.trials("kind")[2]
    finally:
        store.close()
    assert calls == [1]
    assert again is not None and Calibration.from_json(again).memory_kind == memory_kind("cpu")
    params = new["params"]
    raw = CostModel(Calibration.from_json(again)).predict(int(params["rank"]), int(params["batch_size"]))
    assert new["predicted_memory_mb"] == pytest.approx(raw.peak_memory_mb, rel=1e-6)  # not 2x


def test_a_pinned_config_runs_without_the_probe_unless_a_limit_asks(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str
) -> None:
    pinned = {"rank": {"choices": [4]}, "batch_size": {"choices": [16]}, "learning_rate": {"choices": [1e-3]}}
    rc, _out, err = cli("run", str(write_spec(tiny_spec("pinned", search=pinned, n_trials=1))), "--storage", db_url)
    assert rc == 0, err
    (row,) = Store.open_existing(db_url, "pinned").trials("pinned")
    assert row["state"] == "complete" and row["predicted_memory_mb"] is None  # no probe: nothing to choose
    limited = tiny_spec("pinned-limit", search=pinned, n_trials=1, budget={"train_examples": 128, "evals": 2,
                        "max_eval_examples": 64, "memory_limit_mb": 10000})  # fmt: skip
    rc, _out, err = cli("run", str(write_spec(limited, "l.yaml")), "--storage", db_url)
    assert rc == 0, err
    (row,) = Store.open_existing(db_url, "pinned-limit").trials("pinned-limit")
    assert row["predicted_memory_mb"] is not None  # a limit asks for the check


def test_a_cpu_study_whose_largest_config_fits_runs_without_the_probe(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a CPU with no limit, time budget or auto checkpointing, the full probe could only skip a
    config predicted above the RAM: one mini-trial of the largest config shows none comes near, so
    the study trains without it (the probe is replaced by one that raises) and stores no
    prediction. Where the largest config does come near, the full probe runs and predicts."""
    from autotune.costs import calibration, probe

    real_calibrate = probe.calibrate

    def no_probe(*_: object, **__: object) -> None:
        raise AssertionError("probed")

    monkeypatch.setattr(probe, "calibrate", no_probe)
    rc, _, err = cli("run", str(write_spec(tiny_spec("fits", n_trials=2))), "--storage", db_url, "--no-progress")
    assert rc == 0 and "calibration probe failed" not in err, err
    rows = Store.open_existing(db_url, "fits").trials("fits")
    assert [r["state"] for r in rows] == ["complete", "complete"]
    assert all(r["predicted_memory_mb"] is None for r in rows), rows

    monkeypatch.setattr(probe, "calibrate", real_calibrate)
    monkeypatch.setattr(calibration, "FIT_SHARE", 1e-9)  # the largest config "comes near" any limit
    rc, _, err = cli(
        "run", str(write_spec(tiny_spec("near", n_trials=2), "n.yaml")), "--storage", db_url, "--no-progress"
    )
    assert rc == 0, err
    rows = Store.open_existing(db_url, "near").trials("near")
    assert all(r["predicted_memory_mb"] is not None for r in rows), rows


def test_the_fit_check_leaves_a_gpu_study_to_the_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU, configs run out of memory and packing reads the predictions: the probe stays,
    and the check returns before it loads anything (its mini-trial would raise here)."""
    import torch

    from autotune.costs import calibration, probe
    from autotune.spec import parse_spec
    from autotune.worker import precision

    def no_trial(*_: object, **__: object) -> list[float]:
        raise AssertionError("measured")

    monkeypatch.setattr(precision, "pick_device", lambda: torch.device("cuda"))
    monkeypatch.setattr(probe, "largest_peaks_mb", no_trial)
    assert calibration.fits_without_predictions(parse_spec(tiny_spec()), None) is False
