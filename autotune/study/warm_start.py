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

import optuna

from autotune.errors import SpecError
from autotune.search.priors import FROM_ATTR, fits, prior_trial
from autotune.search.space import distributions
from autotune.spec import StudySpec
from autotune.storage import Store


def priors(store: Store, other: str, spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    """The earlier study's complete trials that fit this spec's space, as Optuna trials."""
    store.require_study(other)
    dists = distributions(spec)
    out = []
    for r in store.trials(other):
        score = r["score"]
        if r["state"] != "complete" or score is None or not math.isfinite(score) or not fits(r["params"], dists):
            continue
        out.append(prior_trial(r["params"], float(score), dists, f"{other}#{r['trial_number']}"))
    return out


def warm_start(spec: StudySpec, raw_url: str, name: str, other: str) -> int:
    """Add ``other``'s fitting trials to the new study ``name``; return how many. Refuses a study
    that already holds trials (its sampler has already moved on from them)."""
    from autotune.study.setup import open_study  # setup imports the samplers, which import priors

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
