from __future__ import annotations

import os

import pytest

from autotune.errors import SpecError
from autotune.study.limits import RunLimits
from autotune.study.parallel import _argv, _env, _Worker, plan_devices


def test_gpu_ids_pin_one_worker_per_gpu() -> None:
    assert plan_devices("0,1,3", 1) == [("0", None), ("1", None), ("3", None)]
    assert plan_devices("0,1", 4) == [("0", None), ("1", None), ("0", None), ("1", None)]


def test_cpu_workers_split_the_cores() -> None:
    cores = os.cpu_count() or 1
    plan = plan_devices("cpu", 2)
    assert plan == [(None, max(1, cores // 2))] * 2


@pytest.mark.parametrize("bad", ["gpu", "0,x", ","])
def test_bad_devices(bad: str) -> None:
    with pytest.raises(SpecError, match="--devices"):
        plan_devices(bad, 1)


def test_worker_gets_the_url_by_environment_only() -> None:
    url = "postgresql://u:secret@h/db"
    env = _env(url, _Worker(0, "1", None))
    argv = _argv("study", 10, None, RunLimits(study_time_s=60.0))
    assert env["AUTOTUNE_STORAGE"] == url
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert not any("secret" in a for a in argv)
    assert "--storage" not in argv
    assert argv[-2:] == ["--time-budget", "60.000s"]
    cpu_env = _env(url, _Worker(1, None, 3))
    assert cpu_env["AUTOTUNE_THREADS"] == cpu_env["OMP_NUM_THREADS"] == "3"
