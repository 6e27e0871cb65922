"""`autotune estimate` and ``autotune.estimate(...)``: the probe, then every (rank, batch size) of
the search space (per searched placement / DoRA setting) predicted against the memory limit, and
the whole study's time. One function for both, so the CLI's table and the API's DataFrame are the
same numbers. Torch loads here (probe)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autotune.errors import SpecError
from autotune.spec import StudySpec


@dataclass(frozen=True)
class StudyEstimate:
    spec: StudySpec
    cal: Any  # costs.model.Calibration
    model: Any  # costs.model.CostModel
    limit_mb: float | None
    limit_source: str
    configs: list[Any]  # costs.model.Prediction, fits set against the limit
    n_trials: int
    workers: int
    budget_fraction: float  # of each trial's budget the pruner is expected to spend
    study_time_s: float


def estimate_study(
    spec: StudySpec, cache_dir: str | None = None, n_trials: int | None = None, workers: int = 1
) -> StudyEstimate:
    """Check the inputs, run the calibration probe, predict every config. SpecError/DataError on
    bad inputs (one line)."""
    from autotune.costs.calibration import memory_limit_mb
    from autotune.costs.model import CostModel, space_values
    from autotune.costs.study_time import expected_fraction
    from autotune.costs.study_time import study_time_s as total_time
    from autotune.inputs.check import check_inputs
    from autotune.worker.preflight import preflight

    for flag, n in (("--workers", workers), ("--n-trials", n_trials)):
        if n is not None and n < 1:
            raise SpecError(f"{flag} must be at least 1, got {n}")
    examples = check_inputs(spec)
    preflight(spec, list(examples.labels) if examples.labels else None)

    from autotune.costs.probe import calibrate  # torch: only now

    cal = calibrate(spec, cache_dir)
    model = CostModel(cal)
    limit, source = memory_limit_mb(spec, cal)
    auto = spec.memory.gradient_checkpointing == "auto"
    preds = []
    for v in model.variants:  # a searched placement or DoRA setting: each predicted from its own points
        for r in space_values(spec, "rank"):
            for b in space_values(spec, "batch_size"):
                p = model.predict(r, b, variant=v)
                if limit is not None and p.peak_memory_mb > limit and auto and model.predicts_checkpointed:
                    q = model.predict(r, b, checkpointed=True, variant=v)  # auto: it runs this way if it fits so
                    p = q if q.peak_memory_mb <= limit else p
                preds.append(replace(p, fits=None if limit is None else p.peak_memory_mb <= limit))
    pr = spec.pruner
    fraction = expected_fraction(pr.name, spec.budget.evals, pr.min_resource, pr.reduction_factor, pr.n_warmup_steps)
    n = n_trials or spec.n_trials
    return StudyEstimate(
        spec, cal, model, limit, source, preds, n, workers, fraction, total_time(preds, n, fraction, workers)
    )
