"""The flat values that cross the driver/worker seam: TrialConfig in, TrialResult out.

Neither torch nor optuna is imported here, so the CLI, the driver and the worker can all use
these types without paying for each other's imports.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from autotune.packaged import resolve_model
from autotune.spec import StudySpec


class TrialState(enum.StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    OOM = "oom"
    DIVERGED = "diverged"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"


# States a finished trial counts with toward the study's total. INTERRUPTED never counts: it is
# re-queued and run again. CRASHED counts once its retries are spent (see the driver).
FINISHED_STATES = frozenset(
    {TrialState.COMPLETE, TrialState.PRUNED, TrialState.OOM, TrialState.DIVERGED, TrialState.TIMEOUT}
)

# report(step, score) -> should_stop: the worker calls it after each evaluation; step is the
# evaluation index (1-based), the same for every batch size, so the pruner compares like with like.
ReportFn = Callable[[int, float], bool]


class TrialFn(Protocol):
    """The worker seam: ``autotune.worker.run_trial.run_trial`` is the real one."""

    def __call__(self, config: TrialConfig, report: ReportFn, interrupt: threading.Event | None, /) -> TrialResult: ...


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs, flat and typed. Built once from a validated spec."""

    # searched
    rank: int
    batch_size: int
    learning_rate: float
    lora_alpha: float
    lora_dropout: float
    # model and task
    model: str
    task: str
    tiny_hidden_size: int
    tiny_num_layers: int
    tiny_num_heads: int
    tiny_intermediate_size: int
    model_revision: str | None
    target_modules: str | tuple[str, ...]
    # data
    data_source: str
    data_format: str
    text_field: str
    text_pair_field: str | None
    prompt_field: str | None
    completion_field: str | None
    label_field: str
    validation: str | None
    validation_fraction: float
    max_length: int
    max_examples: int | None
    # budget and objective
    train_examples: int
    evals: int
    max_eval_examples: int | None
    timeout_s: float | None
    val_weight: float
    train_weight: float
    train_tail_fraction: float
    # optimisation
    precision: str
    seed: int
    max_grad_norm: float
    weight_decay: float
    cache_dir: str | None = None
    compile: bool = False
    data_delimiter: str | None = None  # CSV delimiter from the spec (None: sniffed)


def trial_config(spec: StudySpec, params: dict[str, Any], cache_dir: str | None = None) -> TrialConfig:
    """Join a spec and one trial's sampled params into a flat TrialConfig."""
    rank = int(params["rank"])
    alpha_ratio = float(params.get("lora_alpha_ratio", spec.lora.alpha_ratio))
    tm = spec.lora.target_modules
    return TrialConfig(
        rank=rank,
        batch_size=int(params["batch_size"]),
        learning_rate=float(params["learning_rate"]),
        lora_alpha=alpha_ratio * rank,
        lora_dropout=float(params.get("lora_dropout", spec.lora.dropout)),
        model=resolve_model(spec.model.name),
        task=spec.task,
        tiny_hidden_size=spec.model.tiny.hidden_size,
        tiny_num_layers=spec.model.tiny.num_layers,
        tiny_num_heads=spec.model.tiny.num_heads,
        tiny_intermediate_size=spec.model.tiny.intermediate_size,
        model_revision=spec.model.revision,
        target_modules=tm if isinstance(tm, str) else tuple(tm),
        data_source=spec.data.source,
        data_format=spec.data.format,
        text_field=spec.data.text_field,
        text_pair_field=spec.data.text_pair_field,
        prompt_field=spec.data.prompt_field,
        completion_field=spec.data.completion_field,
        label_field=spec.data.label_field,
        validation=spec.data.validation,
        validation_fraction=spec.data.validation_fraction,
        max_length=spec.data.max_length,
        max_examples=spec.data.max_examples,
        train_examples=spec.budget.train_examples,
        evals=spec.budget.evals,
        max_eval_examples=spec.budget.max_eval_examples,
        timeout_s=spec.budget.timeout_s,
        val_weight=spec.objective.val_weight,
        train_weight=spec.objective.train_weight,
        train_tail_fraction=spec.objective.train_tail_fraction,
        precision=spec.precision,
        seed=spec.seed,
        max_grad_norm=spec.max_grad_norm,
        weight_decay=spec.weight_decay,
        cache_dir=cache_dir,
        compile=spec.compile,
        data_delimiter=spec.data.delimiter,
    )


@dataclass(frozen=True)
class EvalPoint:
    step: int  # evaluation index, 1-based
    optimizer_steps: int
    examples_seen: int
    val_loss: float
    train_loss: float
    score: float
    accuracy: float | None = None


@dataclass
class TrialResult:
    state: TrialState
    val_loss: float | None = None
    train_loss: float | None = None
    score: float | None = None
    accuracy: float | None = None
    wall_time_s: float = 0.0
    setup_time_s: float = 0.0
    train_time_s: float = 0.0
    eval_time_s: float = 0.0
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    peak_memory_mb: float | None = None
    memory_kind: str | None = None
    device: str | None = None
    precision: str | None = None
    optimizer_steps: int = 0
    examples_seen: int = 0
    error: str | None = None
    curve: list[EvalPoint] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    # A crash that is a property of the spec (no such target module, a sequence longer than the
    # model takes): the run stops at once instead of retrying it (autotune.guard).
    spec_error: bool = False
