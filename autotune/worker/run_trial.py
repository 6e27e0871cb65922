"""One LoRA trial, read top to bottom: setup -> model -> data -> train -> evaluate -> measure.

The worker never imports optuna or storage: it takes a ``report(step, score) -> should_stop``
callback and returns a ``TrialResult``. Failures (OOM, NaN loss, pruning, interruption, timeout,
crashes) come back as states, never as exceptions.
"""

from __future__ import annotations

import math
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import peft
import torch
import transformers

from autotune.scoring import score as weighted_score
from autotune.trial import EvalPoint, ReportFn, TrialConfig, TrialResult, TrialState
from autotune.worker import data as wdata
from autotune.worker import faults, state
from autotune.worker.faults import faults_for
from autotune.worker.memory import MemoryMeter, leaf_samples, sample_now
from autotune.worker.models import wrapped_modules
from autotune.worker.precision import Precision, device_name, pick_device, pick_precision
from autotune.worker.spec_errors import is_spec_property


class _Stop(Exception):
    """Raised inside the loop to end a trial early with a given state."""

    def __init__(self, state: TrialState, why: str) -> None:
        super().__init__(why)
        self.state = state


def _eval_steps(n_steps: int, evals: int) -> list[int]:
    """Optimizer steps after which to evaluate: evenly spaced fractions of the budget."""
    points = sorted({max(1, round(k * n_steps / evals)) for k in range(1, evals + 1)})
    return points


# ------------------------------------------------------------------ the recipe


def _apply_thread_limit() -> None:
    # Several workers on one CPU machine split the cores (set by `autotune run --workers N`).
    n = os.environ.get("AUTOTUNE_THREADS")
    if n and n.isdigit() and torch.get_num_threads() != int(n):
        torch.set_num_threads(int(n))


# on_trained(model, tokenizer): called with the trained peft model of a complete trial, before its
# adapters are removed; `autotune train` saves the adapter through it.
KeepFn = Callable[[torch.nn.Module, Any], None]


def run_trial(
    config: TrialConfig,
    report: ReportFn,
    interrupt: threading.Event | None = None,
    on_trained: KeepFn | None = None,
) -> TrialResult:
    """Train fresh LoRA adapters on the cached base model for ``config``'s budget and measure them.

    ``report(k, score)`` is called after evaluation k (1-based) and returns True to stop the trial
    (pruned); ``interrupt``, once set, stops it at the next step (interrupted); ``on_trained``
    sees the trained model of a complete trial before its adapters are removed. Returns a
    ``TrialResult`` whatever happens: OOM, non-finite loss, timeout and any crash become its
    state and error. Raises nothing but ``BaseException``s that are not ``KeyboardInterrupt``."""
    t_start = time.perf_counter()
    _apply_thread_limit()
    device = pick_device()
    prec = pick_precision(config.precision, device)
    result = TrialResult(
        state=TrialState.CRASHED, device=device_name(device), precision=prec.name, versions=_versions()
    )
    model: torch.nn.Module | None = None
    oom = False
    meter = MemoryMeter(device)
    try:
        # setup: data and base model, both built once per process and cached
        entry = state.prepare_data(config)
        base = state.base_model(config, entry, device, prec)
        # Memory is measured from here: what this trial adds on top of the loaded base model.
        with meter:
            model = state.add_adapters(base, config)
            result.target_modules = wrapped_modules(model)
            _sync(device)
            result.setup_time_s = time.perf_counter() - t_start
            _train(model, entry.data, config, device, prec, report, interrupt, result, t_start)
        if on_trained is not None and result.state == TrialState.COMPLETE:
            on_trained(model, entry.tokenizer)  # outside the meter: saving is not training
    except torch.OutOfMemoryError as err:
        oom = True
        result.state, result.error = TrialState.OOM, f"out of memory: {str(err).splitlines()[0][:200]}"
    except _Stop as stop:
        result.state, result.error = stop.state, str(stop)
    except KeyboardInterrupt:
        result.state, result.error = TrialState.INTERRUPTED, "interrupted"
    except Exception as err:  # a crash is data: keep the message, let the study go on
        result.state = TrialState.CRASHED
        result.error = f"{err.__class__.__name__}: {err}"[:500] + "\n" + traceback.format_exc(limit=3)[-1500:]
        result.spec_error = is_spec_property(err)
    # Release memory outside the except block: the traceback would otherwise pin the tensors.
    if model is not None:
        try:
            state.remove_adapters(model)
        except (RuntimeError, ValueError, AttributeError, KeyError) as err:
            # peft could not take its layers out (or the head back): the cached base may still
            # hold LoRA layers, so it is dropped and the next trial loads a clean one. A trial
            # that had completed keeps its result; the failure is noted with it.
            state.MODELS.evict()
            note = f"adapters not removed ({err.__class__.__name__}); base model reloaded for the next trial"
            result.error = f"{result.error}; {note}" if result.error else note
        model = None
    if oom and device.type == "cuda":
        torch.cuda.empty_cache()
    result.peak_memory_mb = meter.peak_mb()
    result.memory_kind = meter.kind
    result.wall_time_s = time.perf_counter() - t_start
    return result


def _train(
    model: torch.nn.Module,
    data: wdata.TokenizedData,
    c: TrialConfig,
    device: torch.device,
    prec: Precision,
    report: ReportFn,
    interrupt: threading.Event | None,
    result: TrialResult,
    t_start: float,
) -> None:
    n_steps = math.ceil(c.budget.train_examples / c.batch_size)
    evals_at = _eval_steps(n_steps, c.budget.evals)
    order = wdata.train_order(len(data.train), c.batch_size, n_steps, c.seed, data.train.lengths, group_by_length=True)
    eval_order = wdata.eval_batches(data.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(trainable, c, device)
    scaler = torch.amp.GradScaler(device.type) if prec.use_scaler else None
    step_fn = torch.compile(_forward_loss) if c.compile else _forward_loss
    losses = torch.zeros(n_steps, device=device)  # per-step train loss, read only at evaluations
    tail = max(1, math.ceil(c.objective.train_tail_fraction * n_steps))
    tokens = 0
    train_time = eval_time = 0.0
    fault = faults_for(c)
    timeout_s = c.budget.timeout_s
    model.train()
    t_phase = time.perf_counter()
    for step in range(n_steps):
        if interrupt is not None and interrupt.is_set():
            raise _Stop(TrialState.INTERRUPTED, f"interrupted at step {step}/{n_steps}")
        if timeout_s is not None and time.perf_counter() - t_start > timeout_s:
            raise _Stop(TrialState.TIMEOUT, f"timeout after {timeout_s:g}s at step {step}/{n_steps}")
        batch = wdata.make_batch(data.train, order[step], device)
        tokens += batch.n_tokens
        if fault.active:
            faults.before_step(fault)
        loss = _train_step(model, step_fn, batch, opt, scaler, trainable, prec, c.max_grad_norm)
        if fault.active:
            loss = faults.after_loss(fault, loss)
        losses[step] = loss.detach()
        done = step + 1
        if done in evals_at:
            _sync(device)
            train_time += time.perf_counter() - t_phase
            t_eval = time.perf_counter()
            val_loss, acc = _evaluate(model, data.validation, eval_order, device, prec)
            eval_time += time.perf_counter() - t_eval
            model.train()
            window = losses[max(0, done - tail) : done]
            train_loss = float(window.mean())
            result.train_time_s, result.eval_time_s = train_time, eval_time
            result.optimizer_steps, result.examples_seen = done, done * c.batch_size
            _throughput(result, tokens)
            if not (
                math.isfinite(train_loss) and math.isfinite(val_loss) and bool(torch.isfinite(losses[:done]).all())
            ):
                raise _Stop(TrialState.DIVERGED, f"non-finite loss at step {done} (train {train_loss}, val {val_loss})")
            s = weighted_score(val_loss, train_loss, c.objective.val_weight, c.objective.train_weight)
            k = evals_at.index(done) + 1
            result.curve.append(EvalPoint(k, done, done * c.batch_size, val_loss, train_loss, s, acc))
            result.val_loss, result.train_loss, result.score, result.accuracy = val_loss, train_loss, s, acc
            if report(k, s) and done < n_steps:
                raise _Stop(TrialState.PRUNED, f"pruned at evaluation {k}/{len(evals_at)} (step {done})")
            t_phase = time.perf_counter()
    result.state = TrialState.COMPLETE


def make_optimizer(trainable: list[torch.nn.Parameter], c: TrialConfig, device: torch.device) -> torch.optim.Optimizer:
    """AdamW on the trainable (LoRA, head) parameters: fused on CUDA, foreach elsewhere. The
    calibration probe (autotune/estimate/probe.py) builds the same one, so it measures the trial."""
    fused_ok = device.type == "cuda"
    return torch.optim.AdamW(
        trainable,
        lr=c.learning_rate,
        weight_decay=c.weight_decay,
        fused=fused_ok or None,
        foreach=None if fused_ok else True,
    )


def _forward_loss(model: torch.nn.Module, batch: wdata.Batch) -> torch.Tensor:
    kw: dict[str, Any] = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask, "labels": batch.labels}
    if batch.token_type_ids is not None:
        kw["token_type_ids"] = batch.token_type_ids
    loss: torch.Tensor = model(**kw).loss
    return loss


def _train_step(
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
def _evaluate(
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


def _throughput(result: TrialResult, tokens: int) -> None:
    if result.train_time_s > 0:
        result.samples_per_s = result.examples_seen / result.train_time_s
        result.tokens_per_s = tokens / result.train_time_s


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _versions() -> dict[str, str]:
    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
