"""GPU checks that check behaviour, not labels (issue 22): autocast really runs the adapted layers
in bf16, fp16's GradScaler scales, updates and skips an overflowing step, and a trial learns.
Skip without CUDA; bench/gpu_check.sh runs them with the timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker import data as wdata
from autotune.worker import state, steps
from autotune.worker.precision import pick_precision
from autotune.worker.run_trial import run_trial
from tests.conftest import tiny_spec

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
PARAMS = {"rank": 8, "batch_size": 16, "learning_rate": 5e-3}
CUDA = torch.device("cuda")


def _setup(tmp_path: Path, precision: str) -> tuple[Any, Any, Any, Any]:
    c = trial_config(parse_spec(tiny_spec(precision=precision)), PARAMS, str(tmp_path))
    prec = pick_precision(precision, CUDA)
    entry = state.prepare_data(c)
    model = state.add_adapters(state.base_model(c, entry, CUDA, prec), c)
    return c, prec, entry, model


def test_bf16_autocast_runs_the_adapted_layers_in_bf16(tmp_path: Path) -> None:
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    from peft.tuners.lora import LoraLayer

    c, prec, entry, model = _setup(tmp_path, "bf16")
    seen: list[torch.dtype] = []
    layer = next(m for m in model.modules() if isinstance(m, LoraLayer))
    hook = layer.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    try:
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = steps.make_optimizer(model, trainable, c, CUDA)
        batch = wdata.make_batch(entry.data.train, torch.arange(16).numpy(), CUDA)
        steps.train_step(model, steps.forward_loss, batch, opt, None, trainable, prec, c.max_grad_norm)
    finally:
        hook.remove()
        state.remove_adapters(model)
    assert seen and all(d == torch.bfloat16 for d in seen), seen
    assert all(p.dtype == torch.float32 for p in trainable)  # the weights and Adam's state stay fp32


def test_fp16_grad_scaler_scales_updates_and_skips_an_overflow(tmp_path: Path) -> None:
    c, prec, entry, model = _setup(tmp_path, "fp16")
    try:
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = steps.make_optimizer(model, trainable, c, CUDA)
        scaler = torch.amp.GradScaler("cuda")
        batch = wdata.make_batch(entry.data.train, torch.arange(16).numpy(), CUDA)
        before = [p.detach().clone() for p in trainable]
        steps.train_step(model, steps.forward_loss, batch, opt, scaler, trainable, prec, c.max_grad_norm)
        assert scaler.get_scale() == 65536.0  # used, and not cut: the first step did not overflow
        assert any(not torch.equal(a, b) for a, b in zip(before, trainable, strict=True))  # it stepped
        scaler.update(new_scale=2.0**60)  # force an overflow: the scaled fp16 loss is inf
        kept = [p.detach().clone() for p in trainable]
        steps.train_step(model, steps.forward_loss, batch, opt, scaler, trainable, prec, c.max_grad_norm)
        assert scaler.get_scale() < 2.0**60  # the scaler backed off
        assert all(torch.equal(a, b) for a, b in zip(kept, trainable, strict=True))  # and skipped the step
    finally:
        state.remove_adapters(model)


@pytest.mark.parametrize("precision", ["auto", "fp16"])
def test_the_loss_falls(tmp_path: Path, precision: str) -> None:
    spec = parse_spec(tiny_spec(precision=precision, budget={"train_examples": 1024, "evals": 4}))
    r = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error
    losses = [p.val_loss for p in r.curve]
    assert losses[-1] < losses[0], losses
