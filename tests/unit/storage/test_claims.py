"""The slots the loop counts before it asks (``claims.slots_taken``): what counts toward the total
is what ``Store.count_finished`` counts, split into the search and the confirmation runs, on every
backend."""

from __future__ import annotations

from autotune.storage import Store, claims
from autotune.storage.plan import mark_not_run
from autotune.trial import TrialResult, TrialState


def _finish(store: Store, n: int, state: TrialState) -> None:
    store.trial_finished("s", n, TrialResult(state=state, score=1.0, val_loss=1.0, train_loss=1.0))


def test_slots_taken_splits_search_and_confirmation(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    store.save_study("s", "name: s\n", None)
    assert claims.slots_taken(store, "s") == claims.Taken(0, 0, 0, 0)
    p = {"rank": 4}
    for n, state in enumerate([TrialState.COMPLETE, TrialState.PRUNED, TrialState.OOM, TrialState.INTERRUPTED]):
        store.trial_started("s", n, p, "h:1")
        _finish(store, n, state)
    store.set_requeued("s", 3)  # interrupted and re-queued: its retry counts, not it
    store.trial_started("s", 4, p, "h:1")
    _finish(store, 4, TrialState.OOM)
    mark_not_run(store, "s", 4)  # stopped by its prediction: never trained, not counted
    store.trial_started("s", 5, p, "h:1")  # a search trial still running
    store.trial_started("s", 6, p, "h:1", confirm_of=0)
    _finish(store, 6, TrialState.COMPLETE)
    store.trial_started("s", 7, p, "h:1", confirm_of=0)  # a confirmation run still running
    store.trial_started("other", 0, p, "h:1")  # another study's rows are not this one's
    taken = claims.slots_taken(store, "s")
    assert taken == claims.Taken(search_finished=3, search_running=1, confirm_finished=1, confirm_running=1)
    assert (taken.finished, taken.running) == (store.count_finished("s"), 2)
    store.close()
