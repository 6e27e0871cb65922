"""The search space a user writes: ``search:`` in a study spec (``SearchSpec``), each parameter a
``ParamRange``, and ``SEARCH_PARAMS``, the one registry of searchable parameters that Optuna's
distributions, the trials table, ``best`` and the CSV derive from. Apart from schema.py because
this is where a new search parameter goes (docs/architecture.md, "How to add a search parameter").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

# LoRA placement presets: lora.target_modules (schema.py) and the searched search.target_modules
TARGET_PRESETS = ("auto", "attention", "attention+mlp", "all-linear")


class _Strict(BaseModel):  # every spec model (schema.py too): a typo names its field; a spec is a value
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamRange(_Strict):
    """Either ``choices`` or ``low``/``high`` (with ``log`` for a log scale)."""

    choices: list[float] | list[str] | None = None  # names only for a parameter of named choices
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None

    @model_validator(mode="after")
    def _one_form(self) -> ParamRange:
        if self.choices is not None:
            if self.low is not None or self.high is not None:
                raise ValueError("give either choices or low/high, not both")
            if not self.choices:
                raise ValueError("choices must not be empty")
            if len(set(self.choices)) != len(self.choices):
                raise ValueError("choices must be distinct")
            return self
        if self.low is None or self.high is None:
            raise ValueError("give choices, or both low and high")
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        if self.log and self.step is not None:
            raise ValueError("step and log cannot be used together")
        return self


def _default_rank() -> ParamRange:
    return ParamRange(choices=[4, 8, 16, 32])


def _default_batch() -> ParamRange:
    return ParamRange(choices=[16, 32, 64])


def _default_lr() -> ParamRange:
    # LoRA's best learning rate is about 10x full fine-tuning's (1e-5..1e-4 for most models) and
    # nearly independent of the rank (Schulman et al., "LoRA Without Regret", Thinking Machines
    # Lab, 2025): one decade around 3e-4 covers it. A new head trained from scratch wants more.
    return ParamRange(low=1e-4, high=1e-3, log=True)


class SearchSpec(_Strict):
    """The searchable parameters. Every field must have a row in ``SEARCH_PARAMS`` below (checked at
    import): docs/architecture.md, "How to add a search parameter"."""

    rank: ParamRange = Field(default_factory=_default_rank)
    batch_size: ParamRange = Field(default_factory=_default_batch)
    learning_rate: ParamRange = Field(default_factory=_default_lr)
    lora_alpha_ratio: ParamRange | None = None
    lora_dropout: ParamRange | None = None
    use_dora: ParamRange | None = None  # {choices: [false, true]}
    loraplus_lr_ratio: ParamRange | None = None
    target_modules: ParamRange | None = None  # {choices: [attention, attention+mlp, all-linear]}: placement
    expand_bounds: bool = Field(
        False, description="when the best sits at a bound, run a follow-up study with that bound widened"
    )

    @model_validator(mode="after")
    def _values(self) -> SearchSpec:
        for name, rule in SEARCH_PARAMS.items():
            rng = getattr(self, name)
            named = rng is not None and rng.choices is not None and any(isinstance(v, str) for v in rng.choices)
            if rule.names is not None:
                if rng is not None and (not named or not set(rng.choices) <= set(rule.names)):
                    raise ValueError(f"{name} takes choices of {', '.join(rule.names)}")
                continue
            if named:
                raise ValueError(f"{name} values must be numbers ({rule.allowed})")
            for v in _bounds(rng):
                if (rule.integer and not float(v).is_integer()) or not rule.ok(v):
                    raise ValueError(f"{name} values must be {rule.allowed}, got {v}")
        return self


@dataclass(frozen=True)
class SearchParam:
    """How one searchable parameter is typed and bounded."""

    integer: bool  # sampled as int (IntDistribution, int choices)
    ok: Callable[[float], bool]
    allowed: str  # the rule in words, for the error message
    boolean: bool = False  # choices of false/true, sampled as bools
    names: tuple[str, ...] | None = None  # named choices (no range, no order), e.g. placement presets


# The one registry of searchable parameters, in the order they are sampled and shown. Everything
# else (Optuna distributions, the trials table, `best`, the CSV) derives from it.
SEARCH_PARAMS: dict[str, SearchParam] = {
    "rank": SearchParam(True, lambda v: v >= 1, "whole numbers >= 1"),
    "batch_size": SearchParam(True, lambda v: v >= 1, "whole numbers >= 1"),
    "learning_rate": SearchParam(False, lambda v: 0 < v < 1, "in (0, 1)"),
    "lora_alpha_ratio": SearchParam(False, lambda v: v > 0, "> 0"),
    "lora_dropout": SearchParam(False, lambda v: 0 <= v < 1, "in [0, 1)"),
    "use_dora": SearchParam(True, lambda v: v in (0, 1), "false or true", boolean=True),
    "loraplus_lr_ratio": SearchParam(False, lambda v: v >= 1, ">= 1 (1: plain LoRA)"),
    "target_modules": SearchParam(False, lambda v: True, "presets", names=TARGET_PRESETS),
}


def _range_fields() -> list[str]:
    """SearchSpec's searchable fields: those that hold a ParamRange (options like expand_bounds do not)."""
    out = []
    for name, info in SearchSpec.model_fields.items():
        if info.annotation is ParamRange or ParamRange in get_args(info.annotation):
            out.append(name)
    return out


if list(SEARCH_PARAMS) != _range_fields():
    raise RuntimeError("SEARCH_PARAMS must list every ParamRange field of SearchSpec, in order")


def _bounds(rng: ParamRange | None) -> list[float]:
    """The choices of a numeric parameter, or the two ends of its range."""
    if rng is None:
        return []
    if rng.choices is not None:
        return [float(v) for v in rng.choices]
    return [v for v in (rng.low, rng.high) if v is not None]


def searched_ranges(search: SearchSpec) -> list[tuple[str, ParamRange]]:
    """The parameters ``search`` searches, in the registry's order: rank, batch_size, learning_rate, extras."""
    return [(name, rng) for name in SEARCH_PARAMS if (rng := getattr(search, name)) is not None]
