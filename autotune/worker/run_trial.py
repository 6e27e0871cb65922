"""One LoRA trial, read top to bottom: setup -> model -> data -> train -> evaluate -> measure.

The steps it is made of (one optimizer step, an evaluation pass, the optimizer, the evaluation
schedule) are named in ``worker/steps.py``, where the calibration probe (costs/probe.py) and
`autotune train` (worker/fit.py) call the same ones.

The worker never imports optuna or storage: it takes a ``report(step, score) -> should_stop``
callback and returns a ``TrialResult``. Failures (OOM, NaN loss, pruning, interruption, timeout,
crashes) come back as states, never as exceptions.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import peft
import torch
import transformers

from autotune.errors import DatabaseUnavailable
from autotune.scoring import score as weighted_score
from autotune.trial import EvalPoint, ReportFn, TrialConfig, TrialResult, TrialState
from autotune.worker import data as wdata
from autotune.worker import faults, state, steps
from autotune.worker.faults import faults_for
from autotune.worker.memory import MemoryMeter
from autotune.worker.models import wrapped_modules
from autotune.worker.precision import Precision, device_name, pick_device, pick_precision
from autotune.worker.spec_errors import is_spec_property


class _Stop(Exception):
    """Raised inside the loop to end a trial early with a given state."""

    def __init__(self, state: TrialState, why: str) -> None:
        super().__init__(why)
        self.state = state


# ------------------------------------------------------------------ the recipe


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
    state and error. Raises nothing but ``DatabaseUnavailable`` (from ``report``: the run ends) and
    ``BaseException``s that are not ``KeyboardInterrupt``."""
    t_start = time.perf_counter()
    steps.apply_thread_limit()
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
            result.gradient_checkpointing = config.gradient_checkpointing
            result.rank_used = config.rank
            steps.sync(device)
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
    except DatabaseUnavailable:
        raise  # from the report callback: not the trial's failure; the run ends (errors.py)
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
    evals_at = steps.eval_steps(n_steps, c.budget.evals)
    order = wdata.train_order(len(data.train), c.batch_size, n_steps, c.seed, data.train.lengths, group_by_length=True)
    eval_order = wdata.eval_batches(data.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = steps.make_optimizer(model, trainable, c, device)
    scaler = torch.amp.GradScaler(device.type) if prec.use_scaler else None
    step_fn = torch.compile(steps.forward_loss) if c.compile else steps.forward_loss
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
        loss = steps.train_step(model, step_fn, batch, opt, scaler, trainable, prec, c.max_grad_norm)
        if fault.active:
            loss = faults.after_loss(fault, loss)
        losses[step] = loss.detach()
        done = step + 1
        if done in evals_at:
            steps.sync(device)
            train_time += time.perf_counter() - t_phase
            t_eval = time.perf_counter()
            val_loss, acc = steps.evaluate(model, data.validation, eval_order, device, prec)
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


def _throughput(result: TrialResult, tokens: int) -> None:
    if result.train_time_s > 0:
        result.samples_per_s = result.examples_seen / result.train_time_s
        result.tokens_per_s = tokens / result.train_time_s


def _versions() -> dict[str, str]:
    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
