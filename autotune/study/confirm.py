"""The confirmation phase (``budget.confirm_top: K``, ``budget.confirm_seeds: R``): once the search
has its ``n_trials``, its K best complete configs are re-trained at the target budget
(``budget.target_examples``, else one pass over the training split) with R training seeds each.
The study then recommends the config with the lowest mean at the target (storage/confirm.py), so
its answer holds at the budget the user trains at, and the runs' spread says whether the top two
can be told apart. With ``budget.keep_adapters: J`` the adapters of the J best confirmed configs
(their first seed's run) are kept, so the recommendation needs no second training.

With ``budget.confirm_hedge`` (on by default) and K >= 2, the K-th slot goes to the best config's
hedge: the same config with a smaller learning rate (``hedge``), since a short trial favours a
step larger than the longer target run wants. Its runs name the best search trial too, with their
own params; storage/confirm.py tells the two configs apart by those.

Each run is an Optuna trial with fixed params (``enqueue_trial``) whose user attrs name the search
trial it confirms and its training seed; retries keep both (study/recovery.py). The runs are not
reported to the pruner: they are another fidelity. The study's user attrs ``CONFIRMED`` and
``HEDGED`` list the search trials confirmed and hedged so far, so a resumed study with more trials
confirms only new leaders.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from autotune.handoff.train_layout import PROVENANCE, Fit, provenance
from autotune.inputs.check import check_inputs
from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.storage import confirm as rows
from autotune.study.recovery import CONFIRM_ATTR, SEED_ATTR
from autotune.trial import TrialConfig, TrialResult, TrialState, trial_config

CONFIRMED = "autotune_confirmed"  # study user attr: the search trial numbers confirmed so far
HEDGED = "autotune_hedged"  # study user attr: the search trial numbers whose hedge was queued
ADAPTERS_ENV = "AUTOTUNE_ADAPTERS_DIR"  # where kept adapters go; default ./autotune-adapters


@dataclass(frozen=True)
class Target:
    """The target budget and what a kept adapter's provenance needs, read once per run."""

    examples: int
    n_train: int
    labels: list[str] | None


def target(spec: StudySpec) -> Target:
    examples = check_inputs(spec)
    n_train = len(examples.train)
    return Target(spec.budget.target_examples or n_train, n_train, list(examples.labels) if examples.labels else None)


def seeds(spec: StudySpec) -> list[int]:
    """The training seeds of a config's runs: the study's own first (the search trained it on that
    seed at the short budget), then the next ones."""
    base = spec.train_seed if spec.train_seed is not None else spec.seed
    return [base + i for i in range(spec.budget.confirm_seeds)]


def planned(study: optuna.Study, spec: StudySpec) -> int:
    """The confirmation runs queued by earlier runs of this study."""
    configs = len(study.user_attrs.get(CONFIRMED, [])) + len(study.user_attrs.get(HEDGED, []))
    return configs * spec.budget.confirm_seeds


def plan(study: optuna.Study, store: Store, name: str, spec: StudySpec, target_examples: int) -> int:
    """Queue the runs of the search's K best configs not confirmed yet, with ``confirm_hedge`` the
    best one's hedge (``hedge``) in place of the K-th; return how many runs the study's
    confirmation holds in all. Call under the study lock, once the search is finished (the driver
    calls it again until the runs are taken: queueing is once per config)."""
    done = [int(n) for n in study.user_attrs.get(CONFIRMED, [])]
    hedged = [int(n) for n in study.user_attrs.get(HEDGED, [])]
    k = spec.budget.confirm_top
    best = _leaders(store, name, k)
    scaled = hedge(spec, best[0][1], target_examples) if spec.budget.confirm_hedge and k >= 2 and best else None
    if scaled is not None:
        best = best[: k - 1]
    confirmed_params = _params_of(store, name, done)
    new = [(n, p) for n, p in best if n not in done and p not in confirmed_params]
    if scaled is not None and best[0][0] not in hedged:
        _enqueue(study, spec, best[0][0], scaled)
        hedged.append(best[0][0])
        study.set_user_attr(HEDGED, hedged)
    for number, params in new:
        _enqueue(study, spec, number, params)
    if new:
        done += [n for n, _ in new]
        study.set_user_attr(CONFIRMED, done)
    return (len(done) + len(hedged)) * spec.budget.confirm_seeds


def hedge(spec: StudySpec, params: dict[str, Any], target_examples: int) -> dict[str, Any] | None:
    """The config ``params`` with its learning rate times sqrt(train_examples / target_examples)
    (budget.confirm_hedge; the rule's sources are in spec/schema.py), not below the range's low
    end, to 6 significant digits (as the CSV prints it). None where there is nothing to hedge: a
    learning rate of fixed choices or steps, a target no longer than a search trial, or one
    already at the low end."""
    lr = spec.search.learning_rate
    if lr.choices is not None or lr.step is not None or lr.low is None:
        return None
    scale = math.sqrt(spec.budget.train_examples / target_examples)
    current = float(params["learning_rate"])
    value = max(float(f"{current * scale:.6g}"), lr.low)
    return {**params, "learning_rate": value} if scale < 1 and value < current else None


def _enqueue(study: optuna.Study, spec: StudySpec, number: int, params: dict[str, Any]) -> None:
    for s in seeds(spec):
        study.enqueue_trial(params, user_attrs={CONFIRM_ATTR: number, SEED_ATTR: s}, skip_if_exists=False)


def _leaders(store: Store, name: str, k: int) -> list[tuple[int, dict[str, Any]]]:
    """The K complete search trials with the lowest scores, one per config."""
    out: list[tuple[int, dict[str, Any]]] = []
    live = [
        r
        for r in store.trials(name)
        if r["confirm_of"] is None and r["state"] == TrialState.COMPLETE.value and r["score"] is not None
    ]
    for r in sorted(live, key=lambda r: (r["score"], r["trial_number"])):
        if all(r["params"] != p for _, p in out):
            out.append((int(r["trial_number"]), r["params"]))
        if len(out) == k:
            break
    return out


def _params_of(store: Store, name: str, numbers: list[int]) -> list[dict[str, Any]]:
    return [r["params"] for r in store.trials(name) if r["trial_number"] in numbers]


def config(spec: StudySpec, params: dict[str, Any], cache_dir: str | None, seed: int, t: Target) -> TrialConfig:
    """A confirmation run: the target budget, one evaluation at the end over the whole validation
    split and no timeout, as `autotune train` fits (handoff/train.py)."""
    budget = spec.budget.model_copy(
        update={"train_examples": t.examples, "evals": 1, "max_eval_examples": None, "timeout_s": None}
    )
    return trial_config(spec.model_copy(update={"budget": budget}), params, cache_dir, train_seed=seed)


def keeps(spec: StudySpec, seed: int) -> bool:
    """Whether this run's adapter is saved: keep_adapters is on, and it is its config's first run."""
    return spec.budget.keep_adapters > 0 and seed == seeds(spec)[0]


def adapter_dir(name: str, number: int) -> Path:
    root = Path(os.environ.get(ADAPTERS_ENV) or "autotune-adapters").expanduser().absolute()
    return root / name / f"trial-{number}"


def record_kept(
    store: Store,
    name: str,
    spec: StudySpec,
    number: int,
    confirm_of: int,
    params: dict[str, Any],
    c: TrialConfig,
    r: TrialResult,
    t: Target,
) -> None:
    """Write the provenance `load_trained` reads beside a kept adapter, and store where it is."""
    path = adapter_dir(name, number)
    if r.state != TrialState.COMPLETE or not path.exists():
        return
    original = next(row for row in store.trials(name) if row["trial_number"] == confirm_of)
    hedge = original["params"] != params
    if hedge:  # no search trial ran these params: the run stands for itself
        original = dict(original, trial_number=number, params=params, score=None, val_loss=None, accuracy=None)
    info = provenance(Fit(original, c, 0, r, path), name, spec, t.examples, t.n_train, t.labels)
    info["confirmation_trial"] = number
    if hedge:
        info["hedge_of"] = confirm_of
    (path / PROVENANCE).write_text(json.dumps(info, indent=2) + "\n")
    rows.set_adapter_dir(store, name, number, str(path))


def prune_kept(store: Store, name: str, spec: StudySpec, planned: int) -> None:
    """Once every planned run has finished, delete the kept adapters beyond the best J configs."""
    ranked = rows.confirmed(store, name)
    if sum(c.runs for c in ranked) < planned:
        return
    keep = {n for c in ranked[: spec.budget.keep_adapters] for n in c.numbers}
    for number, _confirm_of, path in rows.kept(store, name):
        if number not in keep:
            shutil.rmtree(path, ignore_errors=True)
            rows.set_adapter_dir(store, name, number, None)
