"""The flat values that cross the driver/worker seam: TrialConfig in, TrialResult out.

Neither torch nor optuna is imported here, so the CLI, the driver and the worker can all use
these types without paying for each other's imports.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from autotune.spec import BudgetSpec, DataSpec, ObjectiveSpec, StudySpec, TinyModel
from autotune.spec.packaged import resolve_model


class TrialState(enum.StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    PRUNED = "pruned"
    OOM = "oom"
    DIVERGED = "diverged"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"
    DUPLICATE = "duplicate"  # the same params as a trial already run or running: not trained again


# States a finished trial counts with toward the study's total. INTERRUPTED never counts: it is
# re-queued and run again. CRASHED counts once its retries are spent (see recovery.py). DUPLICATE
# never counts: it shares the result of the trial it repeats.
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
class ModelConfig:
    """The base model: a resolved HF id or directory, or ``tiny`` built from ``tiny`` in code."""

    name: str
    revision: str | None
    tiny: TinyModel
    target_modules: str | tuple[str, ...]


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs, typed and frozen. Built once from a validated spec.

    The searched values are flat fields; data, budget and objective are the spec's own validated
    (frozen) sections, so a new option in one of them is one edit in ``spec.py``."""

    # searched (see spec.SEARCH_PARAMS)
    rank: int
    batch_size: int
    learning_rate: float
    lora_alpha: float
    lora_dropout: float
    # what is trained on what
    task: str
    model: ModelConfig
    data: DataSpec
    budget: BudgetSpec
    objective: ObjectiveSpec
    # optimisation
    precision: str
    seed: int  # training: adapter and head init, data order, dropout
    max_grad_norm: float
    weight_decay: float
    cache_dir: str | None = None
    compile: bool = False
    use_rslora: bool = False  # peft's LoraConfig(use_rslora=...): alpha/sqrt(rank) scaling
    use_dora: bool = False  # peft's LoraConfig(use_dora=...): DoRA's magnitude vectors
    loraplus_lr_ratio: float | None = None  # LoRA+: B's lr over A's (peft's create_loraplus_optimizer)
    gradient_checkpointing: bool = False  # memory.gradient_checkpointing: recompute activations
    # The validation split's seed (and a tiny model's base weights: the task's, not the trial's);
    # None: ``seed``. A replicate changes ``seed`` alone, so it is scored on the same split.
    split_seed: int | None = None

    @property
    def data_seed(self) -> int:
        return self.seed if self.split_seed is None else self.split_seed


def lora_values(spec: StudySpec, params: dict[str, Any]) -> tuple[int, float, float]:
    """(rank, lora_alpha, lora_dropout) of one trial: searched values, else the spec's; the rank
    rounded up to a multiple of ``lora.align_rank`` (and alpha follows it)."""
    rank = int(params["rank"])
    if spec.lora.align_rank:
        rank = -(-rank // spec.lora.align_rank) * spec.lora.align_rank
    alpha_ratio = float(params.get("lora_alpha_ratio", spec.lora.alpha_ratio))
    return rank, alpha_ratio * rank, float(params.get("lora_dropout", spec.lora.dropout))


def trial_config(
    spec: StudySpec,
    params: dict[str, Any],
    cache_dir: str | None = None,
    train_seed: int | None = None,
    checkpointing: bool | None = None,
) -> TrialConfig:
    """Join a spec and one trial's sampled params into a flat TrialConfig. ``train_seed``
    replaces the spec's training seed (``train_seed``, else ``seed``); the split stays ``seed``'s.
    ``checkpointing``: the gate's decision under ``memory.gradient_checkpointing: auto``; None:
    the spec's mode (``auto`` alone trains without it)."""
    rank, alpha, dropout = lora_values(spec, params)
    tm = params.get("target_modules", spec.lora.target_modules)  # a searched placement, else the spec's
    return TrialConfig(
        rank=rank,
        batch_size=int(params["batch_size"]),
        learning_rate=float(params["learning_rate"]),
        lora_alpha=alpha,
        lora_dropout=dropout,
        task=spec.task,
        model=ModelConfig(
            name=resolve_model(spec.model.name),
            revision=spec.model.revision,
            tiny=spec.model.tiny,
            target_modules=tm if isinstance(tm, str) else tuple(tm),
        ),
        data=spec.data,
        budget=spec.budget,
        objective=spec.objective,
        precision=spec.precision,
        seed=train_seed if train_seed is not None else spec.train_seed if spec.train_seed is not None else spec.seed,
        split_seed=spec.seed,
        max_grad_norm=spec.max_grad_norm,
        weight_decay=spec.weight_decay,
        cache_dir=cache_dir,
        compile=spec.compile,
        use_rslora=spec.lora.rslora,
        use_dora=bool(params.get("use_dora", spec.lora.use_dora)),
        loraplus_lr_ratio=_ratio(params.get("loraplus_lr_ratio", spec.lora.loraplus_lr_ratio)),
        gradient_checkpointing=(
            checkpointing if checkpointing is not None else spec.memory.gradient_checkpointing == "on"
        ),
    )


def _ratio(v: Any) -> float | None:
    return None if v is None or float(v) == 1.0 else float(v)  # 1: plain LoRA, one learning rate


def config_to_json(c: TrialConfig) -> dict[str, Any]:
    """A TrialConfig as JSON values (autotune_train.json keeps the fit's exact recipe)."""
    d = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)}
    m = c.model
    d["model"] = {
        "name": m.name,
        "revision": m.revision,
        "tiny": m.tiny.model_dump(mode="json"),
        "target_modules": m.target_modules if isinstance(m.target_modules, str) else list(m.target_modules),
    }
    for section in ("data", "budget", "objective"):
        d[section] = getattr(c, section).model_dump(mode="json")
    return d


def config_from_json(d: dict[str, Any]) -> TrialConfig:
    d = dict(d)
    m = d["model"]
    tm = m["target_modules"]
    d["model"] = ModelConfig(
        name=m["name"],
        revision=m["revision"],
        tiny=TinyModel(**m["tiny"]),
        target_modules=tm if isinstance(tm, str) else tuple(tm),
    )
    d["data"] = DataSpec(**d["data"])
    d["budget"] = BudgetSpec(**d["budget"])
    d["objective"] = ObjectiveSpec(**d["objective"])
    return TrialConfig(**d)


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
    # The module names that got LoRA adapters (peft's choice for "auto", the preset's matches):
    # what a user pastes into their own LoraConfig.
    target_modules: list[str] | None = None
    curve: list[EvalPoint] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    # A crash that is a property of the spec (no such target module, a sequence longer than the
    # model takes): the run stops at once instead of retrying it (autotune.study.guard).
    spec_error: bool = False
    gradient_checkpointing: bool = False  # the trial ran with activations recomputed
    rank_used: int | None = None  # the LoRA rank trained (lora.align_rank may round the sampled one up)
    gpu_slot: str | None = None  # --backend ray: the host:GPU that ran it
    cotenants: int | None = None  # --backend ray: other trials on that GPU while it ran (packing)
