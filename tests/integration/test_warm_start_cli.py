"""`autotune run --warm-start OTHER` end to end: one real tiny trial after the priors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autotune.storage import Store
from autotune.trial import TrialState
from tests.conftest import tiny_spec
from tests.unit.study.test_warm_start import _earlier

CliFn = Callable[..., tuple[int, str, str]]


def test_run_with_warm_start(cli: CliFn, db_url: str, write_spec: Callable[..., Path]) -> None:
    _earlier(db_url, [({"rank": 4, "batch_size": 16, "learning_rate": 2e-3}, TrialState.COMPLETE, 3.0)])
    path = write_spec(tiny_spec("new", n_trials=1))
    code, _, err = cli("run", str(path), "--storage", db_url, "--no-progress", "--warm-start", "old")
    assert code == 0, err
    assert "warm start: 1 finished trials of 'old'" in err
    store = Store.open(db_url, create=False)
    assert len(store.trials("new")) == 1
    store.close()
    code, _, err = cli("run", str(path), "--storage", db_url, "--study-name", "x", "--warm-start", "nope")
    assert code == 2 and err.count("\n") == 1 and "nope" in err
