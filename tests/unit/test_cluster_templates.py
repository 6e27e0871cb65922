"""The cluster templates for the database-worker path parse, and say what matters: one
`autotune worker STUDY` per task or pod, one GPU each, the database URL from the environment or a
Secret and never on a command line (where `ps`, `squeue` or `kubectl describe` would show it)."""

from __future__ import annotations

import pathlib
import re
import shlex
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SBATCH = ROOT / "docker" / "slurm" / "autotune-array.sbatch"
K8S = ROOT / "docker" / "k8s" / "worker-job.yaml"


def _directives(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"#SBATCH\s+--([\w-]+)(?:=(\S+))?", line)
        if m:
            out[m.group(1)] = m.group(2) or ""
    return out


def test_the_slurm_array_runs_one_worker_per_task_with_one_gpu() -> None:
    text = SBATCH.read_text()
    assert text.startswith("#!/bin/bash")
    d = _directives(text)
    assert re.fullmatch(r"\d+-\d+(%\d+)?", d["array"]), d  # a job array
    assert d["gres"] == "gpu:1"
    commands = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    launch = [shlex.split(ln) for ln in commands if "autotune" in ln and "worker" in ln]
    assert launch == [["exec", "autotune", "worker", "$AUTOTUNE_STUDY", "--no-progress"]]
    assert any("AUTOTUNE_STORAGE:?" in ln for ln in commands)  # required from the environment
    for ln in commands:  # the URL is never spelled out or passed as a flag
        assert "--storage" not in ln and "postgresql://" not in ln


def test_the_k8s_job_is_indexed_with_a_gpu_per_pod_and_the_url_from_a_secret() -> None:
    job: dict[str, Any] = yaml.safe_load(K8S.read_text())
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] >= 1 and spec["backoffLimit"] >= 1
    (container,) = spec["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    env = {e["name"]: e for e in container["env"]}
    assert env["AUTOTUNE_STORAGE"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    argv = [*container.get("command", []), *container.get("args", [])]
    assert not any("postgresql://" in a or a.startswith("--storage") for a in argv)
    assert argv[0] != "run" and "--no-progress" in argv  # the image's entry point is `autotune worker`
    assert 'ENTRYPOINT ["autotune", "worker"]' in (ROOT / "docker" / "Dockerfile").read_text()
