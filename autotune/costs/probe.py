"""The calibration probe: a few real training steps at the smallest and largest batch size and
rank, in this process, with the trial's own code and meter.

It uses the worker's per-process caches (``prepare_data``, ``base_model``), so in a study the base
model and the tokenized data it loads are the ones the trials then reuse; and the same
``MemoryMeter`` as a trial, so its figures mean what a trial's ``peak_memory_mb`` means. Each
probed config trains on the widest batch its trial would see (the one that sets the trial's
peak), from the trial's own seeded batch order. Imports torch: call it where a trial could run.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import torch

from autotune.costs.model import BatchFacts, Calibration, ProbePoint, VariantProbe, space_values, variant_key
from autotune.spec import StudySpec
from autotune.trial import TrialConfig, trial_config
from autotune.worker import data as wdata
from autotune.worker import state, steps
from autotune.worker.memory import MemoryMeter, memory_kind
from autotune.worker.precision import Precision, pick_device, pick_precision

PROBE_STEPS = 4  # the first is a warm-up (allocator, kernels); the step time is the mean of the rest


def batch_facts(split: wdata.TokenizedData, c: TrialConfig) -> BatchFacts:
    lengths = split.train.lengths
    n_steps = math.ceil(c.budget.train_examples / c.batch_size)
    order = wdata.train_order(len(split.train), c.batch_size, n_steps, c.seed, lengths, group_by_length=True)
    widths = [int(lengths[idx].max()) * len(idx) for idx in order]
    evals = wdata.eval_batches(split.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
    eval_widths = [int(split.validation.lengths[idx].max()) * len(idx) for idx in evals]
    n_evals = len(steps.eval_steps(n_steps, c.budget.evals))
    return BatchFacts(c.batch_size, n_steps, max(widths), sum(widths), sum(eval_widths), n_evals, max(eval_widths))


def _widest(split: wdata.TokenizedData, c: TrialConfig) -> np.ndarray:
    lengths = split.train.lengths
    n_steps = math.ceil(c.budget.train_examples / c.batch_size)
    order = wdata.train_order(len(split.train), c.batch_size, n_steps, c.seed, lengths, group_by_length=True)
    return max(order, key=lambda idx: int(lengths[idx].max()))


def _eval_sample(split: wdata.TokenizedData, c: TrialConfig) -> list[np.ndarray]:
    """The widest of the trial's evaluation batches (it sets the evaluation's peak) and the next
    one, for the seconds per padded token. The whole pass, 5 times a probe, was 30% of the
    quickstart's probe time (cProfile of costs.probe.calibrate, issue 20)."""
    order = wdata.eval_batches(split.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
    lengths = split.validation.lengths
    widest = max(range(len(order)), key=lambda i: int(lengths[order[i]].max()))
    return [order[widest], *[b for i, b in enumerate(order) if i != widest][:1]]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _probe(
    base: torch.nn.Module, entry: Any, c: TrialConfig, device: torch.device, prec: Precision, n_steps: int = PROBE_STEPS
) -> tuple[ProbePoint, float, float]:
    """A miniature trial of one config: the widest batch of its trial first (it sets the peak),
    then the trial's own first batches (varied shapes, as the trial sees them), then one
    evaluation. Returns the point, the seconds it took to add the adapters, and the evaluation's
    seconds per padded token."""
    data = entry.data
    trial_steps = math.ceil(c.budget.train_examples / c.batch_size)
    order = wdata.train_order(len(data.train), c.batch_size, trial_steps, c.seed, data.train.lengths, True)
    batches = [_widest(data, c), *order[: n_steps - 1]]
    eval_order = _eval_sample(data, c)
    meter = MemoryMeter(device)
    times: list[float] = []
    tokens: list[int] = []
    with meter:
        t0 = time.perf_counter()
        model = state.add_adapters(base, c)
        _sync(device)
        setup = time.perf_counter() - t0
        trainable = [p for p in model.parameters() if p.requires_grad]
        n_trainable = sum(p.numel() for p in trainable)
        opt = steps.make_optimizer(model, trainable, c, device)
        scaler = torch.amp.GradScaler(device.type) if prec.use_scaler else None
        model.train()
        for idx in batches:
            t = time.perf_counter()
            batch = wdata.make_batch(data.train, idx, device)
            steps.train_step(model, steps.forward_loss, batch, opt, scaler, trainable, prec, c.max_grad_norm)
            _sync(device)
            times.append(time.perf_counter() - t)
            tokens.append(int(data.train.lengths[idx].max()) * len(idx))
        # Evaluation batches in the same window, as the trial runs them (max(B, 64) rows): on a
        # small batch their peak can pass training's (logits of 64 rows at once), so it is read
        # apart (cost model: a trial peaks at the larger of the two).
        train_peak = meter.restart_peak()
        t = time.perf_counter()
        steps.evaluate(model, data.validation, eval_order, device, prec)
        eval_s = time.perf_counter() - t
        del opt
    state.remove_adapters(model)
    lengths = data.validation.lengths
    eval_per_token = eval_s / max(1, sum(int(lengths[i].max()) * len(i) for i in eval_order))
    # Step time: the timed steps after the first (warm-up), as seconds per padded token at the
    # mean width; the fit then separates the fixed per-step cost across batch sizes and ranks.
    point = ProbePoint(
        c.rank,
        c.batch_size,
        tokens[0],
        train_peak,
        statistics.mean(times[1:]),
        n_trainable,
        step_tokens=round(statistics.mean(tokens[1:])),
        eval_peak_mb=meter.peak_mb(),
    )
    return point, setup, eval_per_token


def device_key(spec: StudySpec) -> str:
    """What a stored calibration is valid for: the device (a GPU's model), the precision and the
    threads a CPU trial uses. A worker on another kind of machine probes its own."""
    device = pick_device()
    prec = pick_precision(spec.precision, device)
    if device.type == "cuda":
        where = torch.cuda.get_device_name(device)
    else:
        steps.apply_thread_limit()
        where = f"cpu x{torch.get_num_threads()}"
    return f"{where}|{prec.name}"


def trial_device_key(device: str | None, precision: str | None) -> str | None:
    """``device_key`` of a stored trial, from its ``device`` and ``precision`` columns
    (``worker.precision.device_name``: a GPU's name, or "cpu (arch, N threads)")."""
    if not device or not precision:
        return None
    if device.startswith("cpu"):
        m = re.search(r"(\d+) threads", device)
        return f"cpu x{m.group(1)}|{precision}" if m else None
    return f"{device}|{precision}"


def device_memory_mb(device_type: str) -> float | None:
    """The memory a config must fit now (a stored calibration's figure is refreshed with this)."""
    if device_type == "cuda":
        return float(torch.cuda.get_device_properties(pick_device()).total_memory) / 2**20
    return float(psutil.virtual_memory().available) / 2**20


@dataclass(frozen=True)
class _Loaded:
    """What every probe of a spec shares: the space's ends, the device, and the base model and
    tokenized data from the worker's per-process caches (the trials then reuse them)."""

    spec: StudySpec
    cache_dir: str | None
    ranks: list[int]
    batches: list[int]
    lr_value: float
    device: torch.device
    prec: Precision
    entry: Any
    base: torch.nn.Module

    def cfg(
        self, rank: int, batch: int, params: dict[str, Any] | None = None, checkpointing: bool | None = None
    ) -> TrialConfig:
        values = {"rank": rank, "batch_size": batch, "learning_rate": self.lr_value, **(params or {})}
        return trial_config(self.spec, values, self.cache_dir, checkpointing=checkpointing)

    def probe(self, c: TrialConfig, n_steps: int = PROBE_STEPS) -> tuple[ProbePoint, float, float]:
        return _probe(self.base, self.entry, c, self.device, self.prec, n_steps)


def _load(spec: StudySpec, cache_dir: str | None) -> _Loaded:
    steps.apply_thread_limit()
    ranks, batches = space_values(spec, "rank"), space_values(spec, "batch_size")
    lr = spec.search.learning_rate
    lr_value = float(lr.choices[0]) if lr.choices is not None else float(lr.low or 1e-4)
    device = pick_device()
    prec = pick_precision(spec.precision, device)
    first = trial_config(spec, {"rank": ranks[0], "batch_size": batches[0], "learning_rate": lr_value}, cache_dir)
    entry = state.prepare_data(first)
    base = state.base_model(first, entry, device, prec)
    return _Loaded(spec, cache_dir, ranks, batches, lr_value, device, prec, entry, base)


def calibrate(spec: StudySpec, cache_dir: str | None = None) -> Calibration:
    """Probe the smallest and largest rank x batch size of the search space."""
    t_start = time.perf_counter()
    ld = _load(spec, cache_dir)
    ranks, batches, device, base, cfg = ld.ranks, ld.batches, ld.device, ld.base, ld.cfg
    first = cfg(ranks[0], batches[0])
    facts = {b: batch_facts(ld.entry.data, cfg(ranks[0], b)) for b in batches}
    points: list[ProbePoint] = []
    setups: list[float] = []
    corners = [(r, b) for r in sorted({ranks[0], ranks[-1]}) for b in sorted({batches[0], batches[-1]})]
    # A throw-away first pass: the first backward in a process starts autograd's threads and
    # sizes the allocator's arenas, which no later trial of the process pays again. On the largest
    # corner, so the lazily made buffers the widest shapes need stay out of the measured points too
    # (on the smallest, a fresh process's first `run` of a tiny spec predicted 12.3 MB for a trial
    # that measured 1.8; on the largest, 1.6 for 1.5).
    ld.probe(cfg(*corners[-1]))
    eval_costs: list[float] = []
    for r, b in corners:
        point, setup, eval_cost = ld.probe(cfg(r, b))
        points.append(point)
        setups.append(setup)
        eval_costs.append(eval_cost)
    checkpointed: list[ProbePoint] = []
    if spec.memory.gradient_checkpointing == "auto":  # the same largest-rank corners, recomputed
        for r, b in corners:
            if r == corners[-1][0]:
                checkpointed.append(ld.probe(cfg(r, b, checkpointing=True))[0])
    lo, hi = points[0], points[-1]
    per_rank, head = _params_line(lo.rank, lo.trainable, hi.rank, hi.trainable)
    variants = {}
    for params in searched_variants(spec):
        # the largest rank at both batch ends, as the checkpointed points; the trainable count at
        # the smallest rank too (adapters added and removed, no step), for this variant's state(r)
        c_lo = cfg(ranks[0], batches[0], params)
        vpoints = [ld.probe(cfg(r, b, params))[0] for r, b in corners if r == corners[-1][0]]
        v_per_rank, v_head = _params_line(ranks[0], _trainable(base, c_lo), vpoints[0].rank, vpoints[0].trainable)
        variants[variant_key(c_lo.model.target_modules, c_lo.use_dora)] = VariantProbe(vpoints, v_per_rank, v_head)
    total = device_memory_mb(device.type)
    kind = memory_kind(device.type)
    return Calibration(
        device=device.type,
        memory_kind=kind,
        points=points,
        batches=facts,
        eval_s_per_token=statistics.median(eval_costs),
        setup_s=statistics.median(setups),
        probe_s=time.perf_counter() - t_start,
        device_memory_mb=total,
        params_per_rank=per_rank,
        head_params=head,
        checkpointed=checkpointed,
        variants=variants,
        base_variant=variant_key(first.model.target_modules, first.use_dora),
    )


def largest_peaks_mb(spec: StudySpec, cache_dir: str | None = None) -> list[float]:
    """The peak memory (MB, the larger of training's and evaluation's) of the largest rank x batch
    size of each adapter variant of the search space: one mini-trial each, the first ``calibrate``
    would run, on the trial's own widest batch. The first in a process carries the allocator's
    first-use buffers (``calibrate``'s throw-away pass), which only overstates it."""
    ld = _load(spec, cache_dir)
    peaks = []
    for params in [{}, *searched_variants(spec)]:
        # two steps: the optimizer's state exists from the first step's end, so the second peaks
        # with it; the timed steps after them only matter to the full probe's step time
        point = ld.probe(ld.cfg(ld.ranks[-1], ld.batches[-1], params), n_steps=2)[0]
        peaks.append(max(point.peak_mb, point.eval_peak_mb or 0.0))
    return peaks


def searched_variants(spec: StudySpec) -> list[dict[str, Any]]:
    """The searched placement x DoRA settings other than the spec's own (what the base points
    measure), as the params a trial would get."""
    import itertools

    tms = [str(v) for v in spec.search.target_modules.choices or []] if spec.search.target_modules else [None]
    doras = [bool(v) for v in spec.search.use_dora.choices or []] if spec.search.use_dora else [None]
    out = []
    for tm, dora in itertools.product(tms, doras):
        params: dict[str, Any] = {}
        if tm is not None:
            params["target_modules"] = tm
        if dora is not None:
            params["use_dora"] = dora
        own_tm = tm is None or tm == spec.lora.target_modules
        own_dora = dora is None or dora == spec.lora.use_dora
        if not (own_tm and own_dora):
            out.append(params)
    return out


def _trainable(base: torch.nn.Module, c: TrialConfig) -> int:
    model = state.add_adapters(base, c)
    n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    state.remove_adapters(model)
    return n


def _params_line(r_lo: int, n_lo: int, r_hi: int, n_hi: int) -> tuple[float, float]:
    """Trainable parameters = per_rank x rank + head (a new task head, DoRA's magnitudes)."""
    per_rank = (n_hi - n_lo) / (r_hi - r_lo) if r_hi != r_lo else n_lo / r_lo
    return per_rank, max(0.0, n_lo - per_rank * r_lo)
