"""``--backend ray`` on a real local Ray started by the test (no mock): the same guarantees as
``--workers`` (distinct configs, exactly n_trials, an actor killed mid-trial re-queued, Ctrl-C then
``resume``), and packing trials onto a GPU by predicted memory, decided on fake GPUs declared to Ray
(the decision is what CPU can check; its speed needs a GPU: bench/gpu_packing.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.spec import parse_spec
from autotune.storage import Store
from autotune.study import ray_backend
from autotune.study.limits import RunLimits
from autotune.study.packing import Ledger
from autotune.study.ray_backend import RayOptions
from tests.conftest import NO_CONFIRM, REPO, tiny_spec
from tests.integration.workers import env, fast_spec, wait_for

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")
pytestmark = pytest.mark.slow  # each Ray start costs seconds; CI runs these in its slow run

CliFn = Callable[..., tuple[int, str, str]]


@pytest.fixture
def local_ray() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _trials(url: str, name: str) -> list[dict[str, Any]]:
    store = Store.open_existing(url, name)
    try:
        return store.trials(name)
    finally:
        store.close()


def test_two_actors_run_exactly_n_distinct_trials(local_ray: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = parse_spec(fast_spec("ray-smoke", n_trials=12))
    s = ray_backend.run(url, "ray-smoke", spec, RunLimits(), None, RayOptions(workers=2), show_progress=False)
    assert s.finished == 12 and not s.interrupted
    rows = [r for r in _trials(url, "ray-smoke") if r["state"] != "duplicate"]
    assert len(rows) == 12 and all(r["state"] == "complete" for r in rows)
    configs = {json.dumps(r["params"], sort_keys=True) for r in rows}
    assert len(configs) == 12  # no config trained twice
    assert all(r["gpu_slot"] and r["gpu_slot"].endswith(":cpu") for r in rows)
    assert len({r["worker"] for r in rows}) == 1  # one driver wrote them all


def test_an_actor_killed_mid_trial_is_retried_and_nothing_is_lost(local_ray: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    data = fast_spec("ray-kill", n_trials=6)
    data["budget"] = {"train_examples": 4096, "evals": 2, "max_eval_examples": 16, **NO_CONFIRM}  # seconds per trial
    spec = parse_spec(data)
    out: dict[str, Any] = {}
    opts = RayOptions(workers=2)

    def go() -> None:
        out["s"] = ray_backend.run(url, "ray-kill", spec, RunLimits(), None, opts, show_progress=False)

    t = threading.Thread(target=go)
    t.start()

    def running() -> Any:
        try:
            return [r for r in _trials(url, "ray-kill") if r["state"] == "running"]
        except Exception:
            return None

    wait_for(running, 120, "a running trial")
    local_ray.kill(local_ray.get_actor("autotune:ray-kill:0:0"), no_restart=True)
    t.join(300)
    assert not t.is_alive()
    assert out["s"].finished == 6
    rows = _trials(url, "ray-kill")
    crashed = [r for r in rows if r["state"] == "crashed"]
    assert len(crashed) == 1 and "actor" in (crashed[0]["error"] or "")
    retry = [r for r in rows if r["retry_of"] == crashed[0]["trial_number"]]
    assert len(retry) == 1 and retry[0]["state"] == "complete" and retry[0]["params"] == crashed[0]["params"]
    assert sum(r["state"] == "complete" for r in rows) == 6


@pytest.mark.timeout(600)  # two Ray starts and two CLI processes: minutes on a loaded 2-core machine
def test_ctrl_c_stores_interrupted_then_resume_finishes(tmp_path: Path, write_spec: Callable[..., Path]) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    data = fast_spec("ray-int", n_trials=3)
    # long enough to be caught mid-trial
    data["budget"] = {"train_examples": 3072, "evals": 2, "max_eval_examples": 16, **NO_CONFIRM}
    path = write_spec(data)
    cmd = [sys.executable, "-m", "autotune", "run", str(path), "--backend", "ray", "--no-progress"]
    proc = subprocess.Popen(cmd, env=env(url), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def running() -> Any:
        try:
            return [r for r in _trials(url, "ray-int") if r["state"] == "running"]
        except Exception:
            return None

    wait_for(running, 120, "a running trial")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert time.monotonic() - t0 < 30  # exits in seconds
    assert any(r["state"] == "interrupted" for r in _trials(url, "ray-int"))
    done = subprocess.run(
        [sys.executable, "-m", "autotune", "resume", "ray-int", "--backend", "ray", "--no-progress"],
        env=env(url), cwd=REPO, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    rows = _trials(url, "ray-int")
    assert sum(r["state"] == "complete" for r in rows) == 3
    assert not [r for r in rows if r["state"] == "running"]


def test_the_ledger_packs_small_trials_and_keeps_a_large_one_alone() -> None:
    ledger, stop = Ledger(1000.0), threading.Event()
    with ledger.hold("g0", 300, stop) as a, ledger.hold("g0", 300, stop) as b:
        assert a is not None and b is not None and a.cotenants == 1 and b.cotenants == 1
        assert not ledger.fits("g0", 800)  # 300 + 300 + 800 > 1000: the large one waits
        assert ledger.fits("g1", 800)  # another GPU has room
    assert ledger.fits("g0", 800)
    with ledger.hold("g0", 1500, stop) as big:  # alone on a GPU, a trial always starts
        assert big is not None and big.cotenants == 0
        stop.set()
        with ledger.hold("g0", 10, stop) as late:
            assert late is None  # Ctrl-C while waiting for room: it never starts


def test_packing_on_fake_gpus_shares_a_gpu_only_when_predictions_fit(
    tmp_path: Path, cli: CliFn, write_spec: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray refuses a declared GPU that CUDA_VISIBLE_DEVICES hides (`--devices cpu` in an earlier
    # in-process CLI test sets it to "")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # wide enough that activations set the peak: batch 64 needs several times batch 8's memory
    data = tiny_spec(
        "ray-pack",
        model={"name": "tiny", "tiny": {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "intermediate_size": 512}},
        data={"source": "builtin:smoke", "max_length": 48, "max_examples": 400},
        search={"rank": {"choices": [4, 8]}, "batch_size": {"choices": [8, 64]},
                "learning_rate": {"choices": [1e-3, 3e-3]}},
        budget={"train_examples": 1024, "evals": 1, "max_eval_examples": 16},
        sampler="grid", n_trials=8,
    )  # fmt: skip
    rc, out, err = cli("estimate", str(write_spec(data)), "--format", "json")
    assert rc == 0, err
    peaks = {(c["rank"], c["batch_size"]): c["peak_memory_mb"] for c in json.loads(out)["configs"]}
    small, large = max(peaks[(r, 8)] for r in (4, 8)), min(peaks[(r, 64)] for r in (4, 8))
    assert large > 2 * small, peaks  # the test needs the two sizes apart
    # one fake GPU whose 90% holds two small trials (and their study correction's slack) but not
    # a small and a large one
    capacity = int(min(2.6 * small, small + 0.9 * large) / 0.9)  # Ray takes whole units
    ray.init(num_cpus=2, num_gpus=1, resources={"autotune_gpu_mb": capacity}, include_dashboard=False,
             log_to_driver=False)  # fmt: skip
    try:
        url = f"sqlite:///{tmp_path / 'p.db'}"
        s = ray_backend.run(url, "ray-pack", parse_spec(data), RunLimits(), None, RayOptions(), show_progress=False)
    finally:
        ray.shutdown()
    assert s.finished == 8
    rows = [r for r in _trials(url, "ray-pack") if r["state"] == "complete"]
    assert {r["gpu_slot"] for r in rows} == {rows[0]["gpu_slot"]} and rows[0]["gpu_slot"].endswith(":gpu0")
    large_rows = [r for r in rows if r["params"]["batch_size"] == 64]
    small_rows = [r for r in rows if r["params"]["batch_size"] == 8]
    assert large_rows and all(r["cotenants"] == 0 for r in large_rows)  # a large trial ran alone
    assert any(r["cotenants"] >= 1 for r in small_rows)  # small ones shared the GPU
