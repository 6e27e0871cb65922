"""A trial's row as `export --csv`, `trials` and the Python API's ``Study.trials`` show it: one
column per searchable parameter, then the measurements. No torch, no optuna."""

from __future__ import annotations

import json
import math
from typing import Any

from autotune.spec import SEARCH_PARAMS

# One column per searchable parameter (empty where a study does not search it), from the registry.
PARAM_COLUMNS = tuple(SEARCH_PARAMS)

# CSV columns, in order: what a user asks of a trial afterwards.
EXPORT_COLUMNS = (
    "trial",
    "state",
    *PARAM_COLUMNS,
    "val_loss",
    "train_loss",
    "score",
    "accuracy",
    "wall_time_s",
    "predicted_time_s",
    "setup_time_s",
    "train_time_s",
    "eval_time_s",
    "peak_memory_mb",
    "predicted_memory_mb",
    "memory_kind",
    "samples_per_s",
    "tokens_per_s",
    "device",
    "gpu_slot",
    "cotenants",
    "precision",
    "optimizer_steps",
    "examples_seen",
    "retry_of",
    "params",
    "error",
    "started_at",
    "finished_at",
)


def clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def export_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        rec = {c: clean(r.get(c)) for c in EXPORT_COLUMNS if c in r}
        rec.update({p: clean(r["params"].get(p)) for p in PARAM_COLUMNS})
        rec["trial"] = r["trial_number"]
        rec["params"] = json.dumps(r["params"], sort_keys=True)
        out.append({c: rec.get(c) for c in EXPORT_COLUMNS})
    return out
