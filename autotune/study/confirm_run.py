"""A confirmation run (budget.confirm_top, study/confirm.py) inside the driver's loop: the config
at the target budget, never pruned, no gate (its config already ran), its adapter kept when
asked. Split from study/driver.py; ``driver._Loop`` is the ``Runner``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import optuna

from autotune.interrupt import TwoStageStop
from autotune.spec import StudySpec
from autotune.storage import Store
from autotune.study import confirm
from autotune.study.guard import RunGuard
from autotune.study.outcome import conclude
from autotune.study.progress import Progress
from autotune.trial import TrialFn

T = TypeVar("T")


class Runner(Protocol):
    """What of the driver's loop a confirmation run needs."""

    spec: StudySpec
    store: Store
    name: str
    study: optuna.Study
    progress: Progress
    trial_fn: TrialFn
    stop: TwoStageStop
    cache_dir: str | None
    guard: RunGuard
    keeps: bool
    planned: int

    def target(self) -> confirm.Target: ...

    def db(self, fn: Callable[[], T], what: str) -> T: ...


def run(loop: Runner, trial: optuna.Trial, params: dict[str, Any], confirm_of: int, seed: int) -> float:
    """A confirmation run (study/confirm.py): the target budget, never pruned, no gate (its
    config already ran), its adapter kept when asked."""
    t = loop.target()
    c = confirm.config(loop.spec, params, loop.cache_dir, seed, t)
    keep = loop.keeps and confirm.keeps(loop.spec, seed)
    path = confirm.adapter_dir(loop.name, trial.number)

    def save(model: Any, tokenizer: Any) -> None:
        path.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(path))
        tokenizer.save_pretrained(str(path))

    def report(_k: int, value: float) -> bool:
        loop.progress.evaluated(_k, value)
        return False  # another fidelity: the pruner never sees it

    if keep:
        from autotune.worker.run_trial import run_trial  # the real worker (``keeps``)

        result = run_trial(c, report, loop.stop.event, on_trained=save)
    else:
        result = loop.trial_fn(c, report, loop.stop.event)
    loop.guard.observe(result)
    value = conclude(loop, trial, params, result)
    if keep:
        number = trial.number
        loop.db(
            lambda: confirm.record_kept(loop.store, loop.name, loop.spec, number, confirm_of, params, c, result, t),
            "the kept adapter",
        )
    if loop.spec.budget.keep_adapters:
        loop.db(lambda: confirm.prune_kept(loop.store, loop.name, loop.spec, loop.planned), "the kept adapters")
    return value
