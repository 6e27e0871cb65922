"""The named steps of the trial recipe (worker/run_trial.py), public so that everything that must
measure or reproduce a trial runs the same code: the calibration probe (costs/probe.py) times
and measures ``train_step`` and ``evaluate``; `autotune train` (worker/fit.py) evaluates with
``evaluate``. No optuna, no storage.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from autotune.trial import TrialConfig
from autotune.worker import data as wdata
from autotune.worker.memory import leaf_samples, sample_now
from autotune.worker.precision import Precision


def eval_steps(n_steps: int, evals: int) -> list[int]:
    """Optimizer steps after which to evaluate: evenly spaced fractions of the budget."""
    points = sorted({max(1, round(k * n_steps / evals)) for k in range(1, evals + 1)})
    return points


def apply_thread_limit() -> None:
    # Several workers on one CPU machine split the cores (set by `autotune run --workers N`).
    n = os.environ.get("AUTOTUNE_THREADS")
    if n and n.isdigit() and torch.get_num_threads() != int(n):
        torch.set_num_threads(int(n))


def make_optimizer(
    model: torch.nn.Module, trainable: list[torch.nn.Parameter], c: TrialConfig, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW on the trainable (LoRA, head) parameters: fused on CUDA, foreach elsewhere. With LoRA+
    (``loraplus_lr_ratio``), peft's ``create_loraplus_optimizer`` groups them: lora_B (and 1-d
    weights such as DoRA's magnitudes) at ratio x lr, the rest at lr. The calibration probe
    (autotune/costs/probe.py) builds the same one, so it measures the trial."""
    fused_ok = device.type == "cuda"
    kw: dict[str, Any] = {
        "weight_decay": c.weight_decay,
        "fused": fused_ok or None,
        "foreach": None if fused_ok else True,
    }
    if c.loraplus_lr_ratio is not None:
        from peft.optimizers import create_loraplus_optimizer

        return create_loraplus_optimizer(
            model,  # type: ignore[arg-type]  # a PeftModel
            torch.optim.AdamW,
            lr=c.learning_rate,
            loraplus_lr_ratio=c.loraplus_lr_ratio,
            loraplus_weight_decay=c.weight_decay,
            **kw,
        )
    return torch.optim.AdamW(trainable, lr=c.learning_rate, **kw)


def forward_loss(model: torch.nn.Module, batch: wdata.Batch) -> torch.Tensor:
    kw: dict[str, Any] = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask, "labels": batch.labels}
    if batch.token_type_ids is not None:
        kw["token_type_ids"] = batch.token_type_ids
    loss: torch.Tensor = model(**kw).loss
    return loss


def train_step(
    model: torch.nn.Module,
    step_fn: Any,
    batch: wdata.Batch,
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    trainable: list[torch.nn.Parameter],
    prec: Precision,
    max_grad_norm: float,
) -> torch.Tensor:
    with torch.autocast(
        batch.input_ids.device.type, dtype=prec.autocast_dtype or torch.float32, enabled=prec.autocast_dtype is not None
    ):
        loss: torch.Tensor = step_fn(model, batch)
    sample_now()  # the forward's activations are all alive here
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm, foreach=True)
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm, foreach=True)
        opt.step()
    sample_now()  # gradients and the optimizer's moments (created at the first step)
    opt.zero_grad(set_to_none=True)
    return loss


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, split: wdata.TokenizedSplit, order: list[np.ndarray], device: torch.device, prec: Precision
) -> tuple[float, float | None]:
    """Mean loss over the whole validation split (per token for an LM, per example for a
    classifier), and accuracy for a classifier. One host sync at the end."""
    model.eval()
    total = torch.zeros((), device=device, dtype=torch.float64)
    count = torch.zeros((), device=device, dtype=torch.float64)
    correct = torch.zeros((), device=device, dtype=torch.float64)
    is_cls = split.labels.dim() == 1
    with leaf_samples(model):  # the evaluation's peak is inside a block (worker/memory.py)
        for idx in order:
            batch = wdata.make_batch(split, idx, device)
            kw: dict[str, Any] = {
                "input_ids": batch.input_ids,
                "attention_mask": batch.attention_mask,
                "labels": batch.labels,
            }
            if batch.token_type_ids is not None:
                kw["token_type_ids"] = batch.token_type_ids
            with torch.autocast(
                device.type, dtype=prec.autocast_dtype or torch.float32, enabled=prec.autocast_dtype is not None
            ):
                out = model(**kw)
            sample_now()  # a batch of logits, max(B, 64) rows: above training's peak at a small B
            if is_cls:
                n = torch.tensor(float(len(idx)), device=device, dtype=torch.float64)
                correct += (out.logits.argmax(-1) == batch.labels).sum()
            else:
                n = (batch.labels[:, 1:] != wdata.IGNORE_INDEX).sum().to(torch.float64)
            total += out.loss.double() * n
            count += n
    val = float(total / count.clamp(min=1))
    acc = float(correct / count.clamp(min=1)) if is_cls else None
    return val, acc


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
