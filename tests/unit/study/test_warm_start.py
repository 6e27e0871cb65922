"""`run --warm-start OTHER` seeds a new study with an earlier study's finished trials."""

from __future__ import annotations

from typing import Any

import optuna

from autotune.search.priors import FROM_ATTR
from autotune.spec import parse_spec
from autotune.storage import Store
from autotune.study.warm_start import warm_start
from autotune.trial import TrialResult, TrialState
from tests.conftest import tiny_spec


def _earlier(db_url: str, rows: list[tuple[dict[str, Any], TrialState, float | None]]) -> None:
    store = Store.open(db_url, create=True)
    store.save_study("old", parse_spec(tiny_spec("old")).to_yaml(), None)
    for n, (params, state, score) in enumerate(rows):
        store.trial_started("old", n, params, "host:1")
        store.trial_finished("old", n, TrialResult(state=state, score=score, val_loss=score))
    store.close()


def test_fitting_complete_trials_become_priors(db_url: str) -> None:
    _earlier(
        db_url,
        [
            ({"rank": 4, "batch_size": 16, "learning_rate": 2e-3}, TrialState.COMPLETE, 3.0),
            ({"rank": 8, "batch_size": 32, "learning_rate": 5e-3}, TrialState.COMPLETE, 2.5),
            ({"rank": 8, "batch_size": 16, "learning_rate": 4e-3}, TrialState.PRUNED, None),  # no final score
            ({"rank": 64, "batch_size": 16, "learning_rate": 2e-3}, TrialState.COMPLETE, 1.0),  # rank not searched
        ],
    )
    spec = parse_spec(tiny_spec("new"))
    assert warm_start(spec, db_url, "new", "old") == 2
    study = optuna.load_study(study_name="new", storage=db_url)
    assert sorted(t.value for t in study.trials if t.value is not None) == [2.5, 3.0]
    assert {t.user_attrs[FROM_ATTR] for t in study.trials} == {"old#0", "old#1"}
    # priors are not this study's trials: nothing in autotune's table counts toward n_trials
    store = Store.open(db_url, create=False)
    assert store.trials("new") == []
    store.close()
