"""A whole study's time from its configs' predictions: how much of each trial's budget the pruner
is expected to spend, and the trials spread over the workers (`autotune estimate`'s last line)."""

from __future__ import annotations

import math

from autotune.costs.model import Prediction


def expected_fraction(pruner: str, evals: int, min_resource: int, reduction_factor: int, warmup: int) -> float:
    """Expected share of a trial's budget that runs under the pruner, once the study has enough
    trials for it to act. ASHA (Li et al. 2020, "A System for Massively Parallel Hyperparameter
    Tuning", Algorithm 2): rungs at min_resource * eta^k evaluations, 1/eta of the trials go on at
    each. Median (Optuna MedianPruner): after the warm-up, about half stop at the first check."""
    if evals <= 1 or pruner == "none":
        return 1.0
    if pruner == "median":
        first = min(evals, warmup + 1)
        return 0.5 * first / evals + 0.5
    rungs = []
    k = 0
    while min_resource * reduction_factor**k < evals:
        rungs.append(min_resource * reduction_factor**k)
        k += 1
    survive, total = 1.0, 0.0
    for step in rungs:
        total += survive * (1 - 1 / reduction_factor) * step / evals
        survive /= reduction_factor
    return total + survive


def study_time_s(predictions: list[Prediction], n_trials: int, fraction: float, workers: int) -> float:
    """n_trials drawn evenly over the configs that fit, each running ``fraction`` of its budget
    on average, spread over ``workers`` processes."""
    fitting = [p for p in predictions if p.fits is not False] or predictions
    # Pruning cuts the training and evaluations, not the set-up (setup = trial - train - evals).
    mean = sum(p.trial_time_s - (1 - fraction) * (p.trial_time_s - setup_s(p)) for p in fitting) / len(fitting)
    return math.ceil(n_trials / max(1, workers)) * mean


def setup_s(p: Prediction) -> float:
    return p.setup_s
