"""GPU checks: bf16 (or fp16 + GradScaler) autocast and CUDA peak memory. Skip without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker.run_trial import run_trial
from tests.conftest import tiny_spec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_auto_precision_and_cuda_memory(tmp_path: Path) -> None:
    spec = parse_spec(tiny_spec())
    r = run_trial(
        trial_config(spec, {"rank": 8, "batch_size": 16, "learning_rate": 5e-3}, str(tmp_path)), lambda k, s: False
    )
    assert r.state == TrialState.COMPLETE, r.error
    assert r.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    assert r.memory_kind == "cuda_max_allocated"
    assert r.peak_memory_mb
    assert r.peak_memory_mb > 0
    assert r.device
    assert "cpu" not in r.device


def test_fp16_with_grad_scaler(tmp_path: Path) -> None:
    spec = parse_spec(tiny_spec(precision="fp16"))
    r = run_trial(
        trial_config(spec, {"rank": 8, "batch_size": 16, "learning_rate": 5e-3}, str(tmp_path)), lambda k, s: False
    )
    assert r.state == TrialState.COMPLETE, r.error
    assert r.precision == "fp16", r.error
