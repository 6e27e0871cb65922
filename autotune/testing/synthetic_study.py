"""A synthetic study of N trials (default 1,000), written through the real write paths: the
fixture the report's tests and `bench/report_scale.py` build on (as Optuna ships
``optuna/testing/``).

``Store.save_study`` / ``trial_started`` / ``trial_finished`` fill autotune's tables, and Optuna's
``RDBStorage`` (``study.add_trials``) the Optuna study the importance plot reads. The scores follow
a made-up but plausible landscape (a learning-rate valley, a small rank effect, noise), and the
states mix as a real study's might: complete, pruned (curves cut), oom (large batch x rank),
diverged (high learning rate), timeout and crashed (with a traceback).
"""

from __future__ import annotations

import math
import random
from typing import Any

RANKS = (4, 8, 16, 32)
BATCHES = (16, 32, 64)
EVALS = 4
TRAIN_EXAMPLES = 1024
TRACEBACK = (
    "RuntimeError: worker exited unexpectedly\n"
    "Traceback (most recent call last):\n"
    '  File "autotune/worker/run_trial.py", line 230, in run_trial\n'
    "    _train(model, entry.data, config, device, prec, report, interrupt, result, t_start)\n"
    "RuntimeError: worker exited unexpectedly"
)


def spec_yaml(name: str, data_source: str = "builtin:smoke") -> str:
    from autotune.spec import parse_spec

    spec = parse_spec(
        {
            "name": name,
            "model": {"name": "tiny"},
            "data": {"source": data_source},
            "lora": {"target_modules": "all-linear"},
            "search": {
                "rank": {"choices": list(RANKS)},
                "batch_size": {"choices": list(BATCHES)},
                "learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
            },
            "budget": {"train_examples": TRAIN_EXAMPLES, "evals": EVALS},
            "n_trials": 8,
        }
    )
    return spec.to_yaml()


def _state(rng: random.Random, rank: int, batch: int, lr: float) -> str:
    if batch == 64 and rank == 32 and rng.random() < 0.5:
        return "oom"
    if lr > 6e-3 and rng.random() < 0.4:
        return "diverged"
    roll = rng.random()
    return "crashed" if roll < 0.02 else "timeout" if roll < 0.03 else "pruned" if roll < 0.35 else "complete"


def fill_study(
    url: str,
    name: str = "scale",
    n_trials: int = 1000,
    seed: int = 0,
    error_text: str | None = None,
    data_source: str = "builtin:smoke",
) -> dict[str, int]:
    """Write N synthetic trials into both autotune's tables and Optuna's; returns state counts.
    ``error_text`` replaces every failed trial's error message (the escaping test uses it)."""
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    from autotune.spec import parse_spec_yaml
    from autotune.storage import Store
    from autotune.storage.url import url_string
    from autotune.trial import EvalPoint, TrialResult, TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(seed)
    store = Store.open(url, create=True)
    text = spec_yaml("scale", data_source)
    parse_spec_yaml(text)  # the stored spec must be one autotune itself would accept
    store.save_study(name, text, None)
    study = optuna.create_study(study_name=name, storage=url_string(store.url), direction="minimize")
    dists: dict[str, Any] = {
        "rank": CategoricalDistribution(list(RANKS)),
        "batch_size": CategoricalDistribution(list(BATCHES)),
        "learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
    }
    frozen = []
    counts: dict[str, int] = {}
    for n in range(n_trials):
        rank, batch = rng.choice(RANKS), rng.choice(BATCHES)
        lr = math.exp(rng.uniform(math.log(1e-4), math.log(1e-2)))
        params = {"rank": rank, "batch_size": batch, "learning_rate": lr}
        state = _state(rng, rank, batch, lr)
        counts[state] = counts.get(state, 0) + 1
        final = 0.9 + 0.35 * (math.log10(lr) + 2.6) ** 2 + 0.02 * math.log2(32 / rank) + rng.gauss(0, 0.03)
        n_evals = {"complete": EVALS, "pruned": rng.randint(1, EVALS - 1), "diverged": rng.randint(0, 2)}.get(state, 0)
        curve = [
            EvalPoint(k, k * TRAIN_EXAMPLES // EVALS // batch, k * TRAIN_EXAMPLES // EVALS, 0, 0, final + 1.5 / k)
            for k in range(1, n_evals + 1)
        ]
        wall = 1.5 + TRAIN_EXAMPLES / (40.0 * batch**0.5) * (1 + rank / 64) * rng.uniform(0.9, 1.1)
        score = curve[-1].score if state in ("complete", "pruned") and curve else None
        err = None if state == "complete" else error_text or _error(state, n_evals)
        result = TrialResult(
            state=TrialState(state),
            val_loss=None if score is None else score - 0.1,
            train_loss=None if score is None else 1.0,
            score=score,
            accuracy=None,
            wall_time_s=wall * (n_evals or 1) / EVALS,
            train_time_s=wall * 0.8,
            eval_time_s=wall * 0.1,
            peak_memory_mb=20.0 + 0.9 * batch + 0.6 * rank + rng.uniform(0, 3),
            memory_kind="cpu_rss_above_baseline",
            device="cpu",
            precision="fp32",
            optimizer_steps=n_evals * TRAIN_EXAMPLES // EVALS // batch,
            examples_seen=n_evals * TRAIN_EXAMPLES // EVALS,
            error=err,
            curve=curve,
        )
        store.trial_started(name, n, params, "bench:0")
        store.trial_finished(name, n, result)
        opt_state, value = optuna.trial.TrialState.COMPLETE, score
        if state == "pruned":
            opt_state, value = optuna.trial.TrialState.PRUNED, None
        elif state == "crashed":
            opt_state, value = optuna.trial.TrialState.FAIL, None
        elif state != "complete":
            value = math.inf  # OOM, diverged, timeout: infeasible points, as the driver tells them
        frozen.append(
            optuna.trial.create_trial(
                params=params,
                distributions=dists,
                value=value,
                state=opt_state,
                intermediate_values={p.step: p.score for p in curve},
            )
        )
    study.add_trials(frozen)
    store.close()
    return counts


def _error(state: str, evals: int) -> str:
    return {
        "oom": "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB",
        "diverged": f"non-finite loss at step {evals * 8} (train nan, val nan)",
        "timeout": "timeout after 60s at step 40/64",
        "crashed": TRACEBACK,
        "pruned": f"pruned at evaluation {evals}/{EVALS}",
    }[state]
