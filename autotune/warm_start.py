"""`run --warm-start OTHER`: seed a new study with the finished trials of an earlier one.

The earlier study's complete trials (same storage) whose params fit this spec's search space
are added to the new Optuna study as finished trials (``Study.add_trials``), so TPE models them
from its first ask instead of starting from nothing (what Optuna issues 1930 and 3104 ask for).
They are priors, not this study's trials: autotune's own tables do not hold them, they do not
count toward ``n_trials``, and `best`/`trials` show only the trials this study ran. Scores from a
study with another budget sit on another scale; TPE splits good from bad by rank, so an earlier
study's ordering still helps, but its values are not compared with this study's as equals.
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from autotune.search_space import distributions
from autotune.spec import SpecError, StudySpec
from autotune.storage import Store

FROM_ATTR = "autotune_warm_start_from"  # user attr on each added trial: "<study>#<trial number>"


def _fits(params: dict[str, Any], dists: dict[str, BaseDistribution]) -> bool:
    if set(params) != set(dists):
        return False
    for k, d in dists.items():
        try:
            if not d._contains(d.to_internal_repr(params[k])):
                return False
        except (ValueError, TypeError):
            return False
    return True


def prior_trial(
    params: dict[str, Any], value: float, dists: dict[str, BaseDistribution], source: str
) -> optuna.trial.FrozenTrial:
    """One finished trial of another study as a prior of this one: params and score, no pruner
    state, marked ``FROM_ATTR`` so the driver and the sweep know it is not this study's own."""
    return optuna.trial.create_trial(params=params, distributions=dists, value=value, user_attrs={FROM_ATTR: source})


def priors(store: Store, other: str, spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    """The earlier study's complete trials that fit this spec's space, as Optuna trials."""
    store.require_study(other)
    dists = distributions(spec)
    out = []
    for r in store.trials(other):
        score = r["score"]
        if r["state"] != "complete" or score is None or not math.isfinite(score) or not _fits(r["params"], dists):
            continue
        out.append(prior_trial(r["params"], float(score), dists, f"{other}#{r['trial_number']}"))
    return out


def warm_start(spec: StudySpec, raw_url: str, name: str, other: str) -> int:
    """Add ``other``'s fitting trials to the new study ``name``; return how many. Refuses a study
    that already holds trials (its sampler has already moved on from them)."""
    from autotune.study_setup import open_study

    if other == name:
        raise SpecError(f"--warm-start {other}: a study cannot warm-start from itself")
    store = Store.open(raw_url, create=True)
    try:
        seeds = priors(store, other, spec)
        if store.get_study(name) is not None:
            raise SpecError(f"--warm-start: study '{name}' already exists; warm-start a new study (--study-name)")
        study = open_study(spec, store, name)
        if study.trials:
            if all(FROM_ATTR in t.user_attrs for t in study.trials):
                return len(study.trials)  # seeded by a run that stopped before its first trial
            raise SpecError(f"--warm-start: study '{name}' already holds trials")
        study.add_trials(seeds)
        return len(seeds)
    finally:
        store.close()
