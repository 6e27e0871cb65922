"""Shared by the seed-stream tests and the script that wrote their committed sequences: a fast,
deterministic stand-in for the worker (the driver's trial_fn seam), so the real samplers and
storage run in milliseconds per trial."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from autotune.trial import EvalPoint, ReportFn, TrialConfig, TrialResult, TrialState
from tests.conftest import tiny_spec

SAMPLERS = ("tpe", "random", "qmc", "gp", "cmaes")


def fake_trial(config: TrialConfig, report: ReportFn, interrupt: threading.Event | None) -> TrialResult:
    # A smooth bowl: best near lr 3e-3, rank 16, batch 16; deterministic in the params.
    score = (math.log10(config.learning_rate) + 2.5) ** 2 + abs(math.log2(config.rank) - 4) / 4 + config.batch_size / 64
    report(1, score)
    point = EvalPoint(1, 1, config.batch_size, score, score, score)
    return TrialResult(state=TrialState.COMPLETE, val_loss=score, train_loss=score, score=score, curve=[point])


def spec_for(sampler: str, n: int, **over: Any) -> dict[str, Any]:
    return tiny_spec(
        name=f"seq-{sampler}",
        sampler={"name": sampler, "n_startup_trials": 4} if sampler in ("tpe", "gp", "cmaes") else sampler,
        pruner="none",
        n_trials=n,
        search={
            "rank": {"choices": [4, 8, 16, 32]},
            "batch_size": {"choices": [16, 32, 64]},
            "learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
        },
        **over,
    )


def single_worker_sequence(sampler: str, n: int, tmp: Path) -> list[dict[str, Any]]:
    from autotune.spec import parse_spec
    from autotune.storage import Store
    from autotune.study.driver import run_study

    url = f"sqlite:///{tmp / f'{sampler}.db'}"
    run_study(parse_spec(spec_for(sampler, n)), url, show_progress=False, trial_fn=fake_trial)
    store = Store.open(url, create=False)
    try:
        return [r["params"] for r in store.trials(f"seq-{sampler}")]
    finally:
        store.close()


if __name__ == "__main__":  # writes tests/unit/data/single_worker_sequences.json
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        out = {s: single_worker_sequence(s, 10, Path(d)) for s in SAMPLERS}
    path = Path(__file__).parent / "data" / "single_worker_sequences.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
