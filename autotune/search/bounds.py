"""Is the best configuration at the edge of what was searched? Pure: no torch, no storage.

Issue 10: on a held-out task all 8 best grid points had the highest learning rate and the best
batch was the smallest: the optimum lay outside the range, and nothing said so. A best value on
the outermost choice, or in the outer tenth of a range (on the log scale for a log range), is at
an edge; the hint names the bound and a wider one to try, within hard limits beyond which a
LoRA setting is not worth searching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from autotune.spec import SEARCH_PARAMS, ParamRange, StudySpec, parse_spec, searched_params

NEAR = 0.1  # the outer tenth of a range counts as "at the bound"
# Widening never goes past these: a learning rate of 0.1 already diverges LoRA on every model we
# ran; rank and batch are whole numbers; dropout and alpha ratio beyond these are not LoRA practice.
HARD_LIMITS: dict[str, tuple[float, float]] = {
    "learning_rate": (1e-6, 0.1),
    "rank": (1, 512),
    "batch_size": (1, 1024),
    "lora_alpha_ratio": (0.125, 64.0),
    "lora_dropout": (0.0, 0.5),
    "loraplus_lr_ratio": (1.0, 64.0),  # LoRA+'s paper tries 2^0..2^6 (arXiv 2402.12354)
}
_WHOLE = ("rank", "batch_size")


@dataclass(frozen=True)
class Edge:
    param: str
    side: str  # "low" or "high"
    bound: float
    widen_to: float

    def message(self) -> str:
        word = "lowest" if self.side == "low" else "highest"
        return (
            f"best {self.param} is at the {word} end of the searched range ({self.bound:g}): "
            f"the optimum may lie beyond it; widen search.{self.param} to {self.widen_to:g}"
        )


def _limit(name: str, v: float) -> float:
    lo, hi = HARD_LIMITS.get(name, (-math.inf, math.inf))
    v = min(max(v, lo), hi)
    return float(round(v)) if name in _WHOLE else v


def _edge_of_choices(name: str, v: float, choices: list[float]) -> tuple[str, float, float] | None:
    c = sorted(choices)
    if len(c) < 2 or v not in (c[0], c[-1]):
        return None
    positive = c[0] > 0
    if v == c[0]:
        return "low", c[0], c[0] / (c[1] / c[0]) if positive else c[0] - (c[1] - c[0])
    return "high", c[-1], c[-1] * (c[-1] / c[-2]) if positive else c[-1] + (c[-1] - c[-2])


def _edge_of_range(v: float, rng: ParamRange) -> tuple[str, float, float] | None:
    assert rng.low is not None and rng.high is not None
    lo, hi = rng.low, rng.high
    if rng.log:
        pos = (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
        factor = math.sqrt(hi / lo)  # widen by half the range's span, on its own scale
        low_to, high_to = lo / factor, hi * factor
    else:
        pos = (v - lo) / (hi - lo)
        low_to, high_to = lo - (hi - lo) / 2, hi + (hi - lo) / 2
    if pos <= NEAR:
        return "low", lo, low_to
    if pos >= 1 - NEAR:
        return "high", hi, high_to
    return None


def find_edges(params: dict[str, Any], spec: StudySpec) -> list[Edge]:
    """The searched parameters whose best value sits at a bound that can still be widened."""
    out = []
    for name, rng in searched_params(spec):
        rule = SEARCH_PARAMS[name]
        if name not in params or params[name] is None or rule.boolean or rule.names is not None:
            continue  # a switch (use_dora) or a named choice (placement) has no range to widen
        v = float(params[name])
        hit = (
            _edge_of_choices(name, v, [float(c) for c in rng.choices])
            if rng.choices is not None
            else _edge_of_range(v, rng)
        )
        if hit is None:
            continue
        side, bound, to = hit
        to = _limit(name, to)
        if to != bound:  # already at the hard limit: nothing to suggest
            out.append(Edge(name, side, bound, to))
    return out


MAX_EXPANSIONS = 2  # follow-up studies `search.expand_bounds` may run, one widening each


def widen(spec: StudySpec, edges: list[Edge]) -> StudySpec:
    """The spec with each edge's bound moved to ``widen_to`` (a new choice, or a new range end)."""
    data = spec.model_dump(mode="json")
    for e in edges:
        rng = data["search"][e.param]
        if rng.get("choices") is not None:
            rng["choices"] = sorted({*rng["choices"], e.widen_to})
        else:
            rng["low" if e.side == "low" else "high"] = e.widen_to
    return parse_spec(data, "widened spec")
