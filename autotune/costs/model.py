"""What a trial's peak memory and time are made of, fitted to a short calibration probe. Pure:
no torch, so the CLI and the driver can predict without the worker.

Peak memory (the trial's own ``peak_memory_mb``: CUDA ``max_memory_allocated``, the base model
included; CPU: bytes malloc handed out, above the baseline taken after the base model loaded) is

    peak(r, B) = c0 + state(r) + (a + c * r) * T(B)

- ``state(r)``: every trainable parameter (LoRA A/B at rank r, plus a new task head) is held in
  fp32 with its gradient and AdamW's two moments, ``exp_avg`` and ``exp_avg_sq`` (Kingma & Ba 2015,
  Algorithm 1; torch.optim.AdamW keeps both in the parameter's dtype): 4 x 4 = 16 bytes each.
  This part is counted, not fitted.
- ``T(B)``: the padded tokens of the widest batch the trial will see (B x its padded length),
  known exactly from the data and the trial's seeded batch order. Activations kept for backward
  grow linearly with it (Korthikanti et al. 2022, "Reducing Activation Recomputation", eq. 1:
  activation memory per layer ~ s * b * h); LoRA's own activations add r per token (the
  down-projection's output), hence ``c * r``.
- ``c0``: what is neither: the frozen weights on CUDA, allocator and library workspaces.

``c0``, ``a`` and ``c`` are fitted by least squares to the probe's four points (smallest and
largest rank x smallest and largest batch). Step time is fitted the same way,
``step(r, B) = t0 + (u + v * r) * tokens``: forward and backward work is linear in the tokens of a
batch at these lengths (Kaplan et al. 2020, C ~ 6 N per token; attention's quadratic term is small
below a few hundred tokens), and a trial's train time sums it over its exact batch order.

A study that searches where adapters go (``search.target_modules``) or DoRA (``search.use_dora``)
trains other parameters with other activations: each such *variant* other than the spec's own gets
two probe points of its own, the largest rank at the smallest and largest batch, and its trainable
parameters counted at both rank ends. Its peak is then ``k0 + state_v(r) + s * (a + c * r) * T(B)``
(its own intercept, its own counted state, and the base fit's token slope scaled by what the two
points measured), and its step time the base prediction times the measured ratio at those points.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

BYTES_PER_TRAINABLE = 16  # fp32 weight + gradient + two AdamW moments (see the module docstring)
MB = 2**20


def space_values(spec: Any, name: str) -> list[int]:
    """Every value of an integer dimension: its choices, or a range's ends and a few points
    between (geometric for a log range, else even)."""
    rng = getattr(spec.search, name)
    if rng.choices is not None:
        return sorted(int(v) for v in rng.choices)
    lo, hi = int(rng.low), int(rng.high)
    pts = np.geomspace(lo, hi, 5) if rng.log else np.linspace(lo, hi, 5)
    step = int(rng.step or 1)
    vals = {lo, hi} | {max(lo, min(hi, lo + step * round((float(p) - lo) / step))) for p in pts}
    return sorted(vals)


@dataclass(frozen=True)
class BatchFacts:
    """Exact token counts of a trial at one batch size, from the data and its batch order."""

    batch_size: int
    n_steps: int
    peak_tokens: int  # B x padded length of the widest batch: the one that sets the peak
    train_tokens: int  # padded tokens over all training steps
    eval_tokens: int  # padded tokens of one evaluation pass
    n_evals: int
    eval_peak_tokens: int = 0  # padded tokens of the widest evaluation batch (max(B, 64) rows)


@dataclass(frozen=True)
class ProbePoint:
    rank: int
    batch_size: int
    tokens: int  # padded tokens of the probed (widest) batch
    peak_mb: float
    step_s: float
    trainable: int  # trainable parameters at this rank
    step_tokens: int = 0  # mean padded tokens of the timed steps
    # The evaluation's own peak (same baseline), apart from training's in ``peak_mb``; None in a
    # calibration stored before they were split, whose ``peak_mb`` is the peak of both.
    eval_peak_mb: float | None = None


def variant_key(target_modules: Any, use_dora: Any) -> str:
    """The cost-relevant adapter choices of a config, as the probe and the gate name them."""
    tm = target_modules if isinstance(target_modules, str) else ",".join(target_modules)
    return f"{tm}|dora" if use_dora else tm


@dataclass(frozen=True)
class VariantProbe:
    """A searched placement or DoRA setting probed apart from the spec's own (see the docstring)."""

    points: list[ProbePoint]  # the largest rank at the smallest and largest batch
    params_per_rank: float
    head_params: float


@dataclass(frozen=True)
class Calibration:
    device: str  # "cpu" or "cuda"
    memory_kind: str
    points: list[ProbePoint]
    batches: dict[int, BatchFacts]
    eval_s_per_token: float
    setup_s: float
    probe_s: float
    device_memory_mb: float | None  # CUDA: total memory; CPU: available RAM at the probe
    params_per_rank: float = 0.0
    head_params: float = 0.0
    notes: list[str] = field(default_factory=list)
    # memory.gradient_checkpointing: auto: the largest rank at the smallest and largest batch again,
    # with activations recomputed (empty otherwise, and in calibrations stored before it existed)
    checkpointed: list[ProbePoint] = field(default_factory=list)
    # search.target_modules / search.use_dora: every other variant's own points, by variant_key;
    # ``base_variant`` is the key of the spec's own setting, which ``points`` measured
    variants: dict[str, VariantProbe] = field(default_factory=dict)
    base_variant: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["batches"] = {str(k): v for k, v in d["batches"].items()}
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Calibration:
        return Calibration(
            **{
                **d,
                "points": [ProbePoint(**p) for p in d["points"]],
                "batches": {int(k): BatchFacts(**v) for k, v in d["batches"].items()},
                "notes": list(d.get("notes", [])),
                "checkpointed": [ProbePoint(**p) for p in d.get("checkpointed", [])],
                "variants": {
                    k: VariantProbe([ProbePoint(**p) for p in v["points"]], v["params_per_rank"], v["head_params"])
                    for k, v in d.get("variants", {}).items()
                },
            }
        )


def _fit3(x_tok: np.ndarray, x_rtok: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least squares y = k0 + k1 * tok + k2 * r * tok with every k >= 0 (a coefficient below zero is
    noise, e.g. timings on a loaded machine: that term is dropped and the rest refitted)."""
    cols = [np.ones_like(y), x_tok, x_rtok]
    active = [0, 1, 2]
    while True:
        a = np.stack([cols[i] for i in active], axis=1)
        sol, *_ = np.linalg.lstsq(a, y, rcond=None)
        coef = dict(zip(active, sol.tolist(), strict=True))
        neg = [i for i in active if coef[i] < 0]
        if not neg or len(active) == 1:
            return coef.get(0, 0.0), coef.get(1, 0.0), coef.get(2, 0.0)
        active.remove(neg[0])


@dataclass(frozen=True)
class Prediction:
    rank: int
    batch_size: int
    peak_memory_mb: float
    step_s: float
    train_time_s: float
    trial_time_s: float
    setup_s: float = 0.0
    fits: bool | None = None
    checkpointed: bool = False  # predicted with gradient checkpointing (memory.gradient_checkpointing: auto)
    variant: str = ""  # the placement (and "|dora") it was predicted for, when the study searches them


class CostModel:
    def __init__(self, cal: Calibration) -> None:
        self.cal = cal
        pts = cal.points
        r = np.array([p.rank for p in pts], dtype=float)
        tok = np.array([p.tokens for p in pts], dtype=float)
        state = np.array([self.state_mb(p.rank) for p in pts])
        mem = np.array([p.peak_mb for p in pts]) - state
        self.mem = _fit3(tok, r * tok, mem)
        # An evaluation runs batches of max(B, 64) rows without keeping activations for backward:
        # at a small B its peak (a batch of logits) can pass training's (tiny LMs, GPT-2 at B=16),
        # so a trial's peak is the larger of the two, each fitted to its own probe figures.
        evals = [p for p in pts if p.eval_peak_mb is not None]
        self.eval_mem: tuple[float, float] | None = None
        if evals:
            e_tok = np.array([self.batch(p.batch_size).eval_peak_tokens for p in evals], dtype=float)
            e_mem = np.array([float(p.eval_peak_mb or 0.0) - self.state_mb(p.rank) for p in evals])
            if np.ptp(e_tok) > 0:
                k0, k1, _ = _fit3(e_tok, np.zeros_like(e_tok), e_mem)
                self.eval_mem = (k0, k1)
            else:  # one evaluation width probed: proportional to its tokens
                self.eval_mem = (0.0, float(np.median(e_mem)) / max(1.0, float(e_tok[0])))
        step_tok = np.array([p.step_tokens or p.tokens for p in pts], dtype=float)
        self.time = _fit3(step_tok, r * step_tok, np.array([p.step_s for p in pts]))
        self.mem_ckpt, self.ckpt_time_ratio = self._fit_checkpointed()
        self.variant_fits = {k: self._fit_variant(v) for k, v in cal.variants.items()}

    def _fit_variant(self, v: VariantProbe) -> tuple[float, float, float]:
        """(k0, slope scale, time ratio) of a variant from its two points at the largest rank."""
        base = {(p.rank, p.batch_size): p for p in self.cal.points}
        _c0, a, c = self.mem
        tok = np.array([p.tokens for p in v.points], dtype=float)
        act = np.array([p.peak_mb - self._state_mb(p.rank, v.params_per_rank, v.head_params) for p in v.points])
        slope0 = np.array([(a + c * p.rank) for p in v.points])
        if np.ptp(tok) > 0:  # two widths: intercept and slope of their own
            k0, k1, _ = _fit3(tok, np.zeros_like(tok), act)
            scale = k1 / float(np.median(slope0)) if float(np.median(slope0)) > 0 else 1.0
        else:
            k0, scale = float(self.mem[0]), float(np.median((act - self.mem[0]) / np.maximum(slope0 * tok, 1e-9)))
        ratios = [p.step_s / base[(p.rank, p.batch_size)].step_s for p in v.points if (p.rank, p.batch_size) in base]
        return k0, max(0.0, scale), float(np.median(ratios)) if ratios else 1.0

    @property
    def variants(self) -> list[str]:
        """Every variant this model predicts: the spec's own first, then those probed apart."""
        return [self.cal.base_variant, *self.cal.variants]

    def _fit_checkpointed(self) -> tuple[tuple[float, float] | None, float]:
        """With activations recomputed, what backward keeps is each block's input (Chen et al.
        2016, "Training Deep Nets with Sublinear Memory Cost", section 3): still linear in the
        batch's tokens, with a smaller slope, fitted to the checkpointed probe points as
        ``k0 + k1 * T``. Its step is the plain step times the measured ratio at the same configs
        (one more forward per step: about 1.3x on a GPU, per the same paper)."""
        pts = self.cal.checkpointed
        if not pts:
            return None, 1.0
        tok = np.array([p.tokens for p in pts], dtype=float)
        mem = np.array([p.peak_mb - self.state_mb(p.rank) for p in pts])
        if np.ptp(tok) > 0:
            k0, k1, _ = _fit3(tok, np.zeros_like(tok), mem)
        else:  # one batch size probed: proportional to its tokens
            k0, k1 = 0.0, float(np.median(mem)) / max(1.0, float(tok[0]))
        plain = {(p.rank, p.batch_size): p.step_s for p in self.cal.points}
        ratios = [p.step_s / plain[(p.rank, p.batch_size)] for p in pts if plain.get((p.rank, p.batch_size))]
        return (k0, k1), float(np.median(ratios)) if ratios else 1.0

    @property
    def predicts_checkpointed(self) -> bool:
        return self.mem_ckpt is not None

    def state_mb(self, rank: int) -> float:
        return self._state_mb(rank, self.cal.params_per_rank, self.cal.head_params)

    @staticmethod
    def _state_mb(rank: int, per_rank: float, head: float) -> float:
        return BYTES_PER_TRAINABLE * (per_rank * rank + head) / MB

    def batch(self, batch_size: int) -> BatchFacts:
        facts = self.cal.batches.get(batch_size)
        if facts is None:
            raise KeyError(f"batch size {batch_size} was not measured by the probe")
        return facts

    def predict(self, rank: int, batch_size: int, checkpointed: bool = False, variant: str | None = None) -> Prediction:
        """``checkpointed``: with gradient checkpointing (KeyError when the probe did not measure it).
        ``variant``: a searched placement / DoRA setting (``variant_key``); None or the spec's own
        is the base fit; one the probe did not measure is predicted as the base, as before."""
        fit = self.variant_fits.get(variant) if variant and variant != self.cal.base_variant else None
        base = self._predict(rank, batch_size, checkpointed)
        if fit is None:
            return replace(base, variant=variant or self.cal.base_variant)
        k0, scale, slower = fit
        v = self.cal.variants[variant or ""]
        b = self.batch(batch_size)
        _c0, a, c = self.mem
        peak = k0 + self._state_mb(rank, v.params_per_rank, v.head_params) + scale * (a + c * rank) * b.peak_tokens
        if checkpointed:  # the variant's own share of what checkpointing keeps: the same ratio as plain
            plain = self._predict(rank, batch_size, False).peak_memory_mb
            peak = peak * base.peak_memory_mb / plain if plain > 0 else peak
        if self.eval_mem is not None:  # the evaluation's own peak, with this variant's state
            e0, e1 = self.eval_mem
            peak = max(peak, e0 + self._state_mb(rank, v.params_per_rank, v.head_params) + e1 * b.eval_peak_tokens)
        evals = base.trial_time_s - base.setup_s - base.train_time_s
        train = base.train_time_s * slower
        return replace(
            base,
            peak_memory_mb=max(0.0, peak),
            step_s=base.step_s * slower,
            train_time_s=train,
            trial_time_s=base.setup_s + train + evals * slower,  # a forward pass's share too
            variant=variant or "",
        )

    def _predict(self, rank: int, batch_size: int, checkpointed: bool) -> Prediction:
        b = self.batch(batch_size)
        c0, a, c = self.mem
        peak = c0 + self.state_mb(rank) + (a + c * rank) * b.peak_tokens
        if checkpointed:
            if self.mem_ckpt is None:
                raise KeyError("the probe did not measure gradient checkpointing")
            k0, k1 = self.mem_ckpt
            peak = k0 + self.state_mb(rank) + k1 * b.peak_tokens
        if self.eval_mem is not None:
            e0, e1 = self.eval_mem
            peak = max(peak, e0 + self.state_mb(rank) + e1 * b.eval_peak_tokens)
        t0, u, v = self.time
        per_token = u + v * rank
        slower = self.ckpt_time_ratio if checkpointed else 1.0
        train = (b.n_steps * t0 + per_token * b.train_tokens) * slower
        step = (t0 + per_token * b.train_tokens / max(1, b.n_steps)) * slower
        evals = b.n_evals * b.eval_tokens * self.cal.eval_s_per_token
        total = self.cal.setup_s + train + evals
        return Prediction(
            rank, batch_size, max(0.0, peak), step, train, total, self.cal.setup_s, checkpointed=checkpointed
        )


@dataclass
class Correction:
    """What the short probe misses over a whole trial, learned from the study's own finished
    trials: the median ratio of measured to probe-predicted peak memory and trial time, applied to
    the predictions that follow: what one trial reveals about a whole trial that four probe steps
    do not (while the CPU figure was RSS, glibc's heap slack: MiniLM trials at 1.40-1.67x the
    probe's figure; since it counts allocated bytes, the bias left is small, a few percent on the
    tiny model; python bench/memory_prediction.py). Before any trial it is 1 (``autotune
    estimate`` has only the probe)."""

    memory: list[float] = field(default_factory=list)
    time: list[float] = field(default_factory=list)

    LIMITS = (0.5, 4.0)  # a ratio outside this is a broken measurement, not a bias to learn

    def observe(self, raw: Prediction, peak_mb: float | None, wall_s: float | None) -> None:
        lo, hi = self.LIMITS
        if peak_mb and raw.peak_memory_mb > 0 and lo <= peak_mb / raw.peak_memory_mb <= hi:
            self.memory.append(peak_mb / raw.peak_memory_mb)
        if wall_s and raw.trial_time_s > 0 and lo <= wall_s / raw.trial_time_s <= hi:
            self.time.append(wall_s / raw.trial_time_s)

    def apply(self, raw: Prediction) -> Prediction:
        m = float(np.median(self.memory)) if self.memory else 1.0
        t = float(np.median(self.time)) if self.time else 1.0
        return replace(
            raw,
            peak_memory_mb=raw.peak_memory_mb * m,
            step_s=raw.step_s * t,
            train_time_s=raw.train_time_s * t,
            trial_time_s=raw.trial_time_s * t,
        )
