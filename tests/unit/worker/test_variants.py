"""DoRA and LoRA+ reach peft: the wrapped modules carry DoRA's magnitude vectors, and the
optimizer gives lora_B its own learning rate (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker import state, steps
from autotune.worker.precision import pick_precision
from autotune.worker.run_trial import run_trial
from tests.conftest import tiny_spec

PARAMS = {"rank": 4, "batch_size": 16, "learning_rate": 2e-3}


def _adapted(tmp_path: Path, **lora: object) -> tuple[torch.nn.Module, object]:
    spec = parse_spec(tiny_spec(lora=lora))
    c = trial_config(spec, PARAMS, str(tmp_path))
    entry = state.prepare_data(c)
    base = state.base_model(c, entry, torch.device("cpu"), pick_precision("fp32", torch.device("cpu")))
    return state.add_adapters(base, c), c


def test_dora_adds_magnitude_vectors_and_trains(tmp_path: Path) -> None:
    model, _ = _adapted(tmp_path, use_dora=True)
    try:
        magnitudes = [n for n, p in model.named_parameters() if "lora_magnitude_vector" in n and p.requires_grad]
        assert magnitudes, "no DoRA magnitude vector is trainable"
    finally:
        state.remove_adapters(model)
    plain, _ = _adapted(tmp_path)
    try:
        assert not [n for n, _ in plain.named_parameters() if "lora_magnitude_vector" in n]
    finally:
        state.remove_adapters(plain)
    spec = parse_spec(tiny_spec(lora={"use_dora": True}))
    r = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error


@pytest.mark.parametrize("ratio", [4.0, 16.0])
def test_loraplus_gives_lora_b_its_own_learning_rate(tmp_path: Path, ratio: float) -> None:
    model, c = _adapted(tmp_path, loraplus_lr_ratio=ratio)
    try:
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = steps.make_optimizer(model, trainable, c, torch.device("cpu"))  # type: ignore[arg-type]
        lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if "lora_B" in name:
                assert lr_of[id(p)] == pytest.approx(ratio * PARAMS["learning_rate"]), name
            elif "lora_A" in name:
                assert lr_of[id(p)] == pytest.approx(PARAMS["learning_rate"]), name
        assert set(lr_of) == {id(p) for p in trainable}  # every trainable weight is optimised once
    finally:
        state.remove_adapters(model)
    plain = trial_config(parse_spec(tiny_spec(lora={"loraplus_lr_ratio": 1.0})), PARAMS)
    assert plain.loraplus_lr_ratio is None  # a ratio of 1 is plain LoRA: one learning rate
