"""The calls into Optuna's private API, pinned: an Optuna upgrade that changes them fails here."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune import optuna_private


def _study(tmp_path: Path) -> optuna.Study:
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'o.db'}", study_name="p")


def test_a_late_tell_is_recognised(tmp_path: Path) -> None:
    """The driver drops the result of a trial that a reaper failed while its worker was paused;
    it recognises Optuna's refusal by this message."""
    study = _study(tmp_path)
    trial = study.ask()
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    with pytest.raises((ValueError, optuna.exceptions.UpdateFinishedTrialError)) as err:
        study.tell(trial, 1.0)
    assert optuna_private.is_late_tell(err.value)
    assert not optuna_private.is_late_tell(ValueError("something else"))


def test_fail_a_running_trial_by_number(tmp_path: Path) -> None:
    study = _study(tmp_path)
    study.ask()
    done = study.ask()
    study.tell(done, 1.0)
    running = optuna_private.frozen_trial(study, 0)
    assert running.state == optuna.trial.TrialState.RUNNING
    optuna_private.fail_if_running(study, running)
    assert optuna_private.frozen_trial(study, 0).state == optuna.trial.TrialState.FAIL
    optuna_private.fail_if_running(study, optuna_private.frozen_trial(study, 1))  # finished: untouched
    assert optuna_private.frozen_trial(study, 1).state == optuna.trial.TrialState.COMPLETE
    with pytest.raises(KeyError):
        optuna_private.frozen_trial(study, 99)


def test_trials_cached_and_contains(tmp_path: Path) -> None:
    study = _study(tmp_path)
    dist = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    t = study.ask({"lr": dist})
    study.tell(t, 1.0)
    study.ask({"lr": dist})
    done = optuna_private.trials_cached(study, [optuna.trial.TrialState.COMPLETE])
    assert [x.number for x in done] == [0]
    assert optuna_private.contains(dist, 1e-3) and not optuna_private.contains(dist, 0.5)
    choices = optuna.distributions.CategoricalDistribution([4, 8])
    assert optuna_private.contains(choices, 8) and not optuna_private.contains(choices, 16)


def test_one_database_sync_per_ask_and_another_process_trials_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sampler that reads the study's trials through ``trials_cached`` adds no database read to
    the one Optuna's ask makes to pop a waiting trial; it still sees a trial another process
    (here: another Study on the same database) finished before the ask, and this ask's own."""
    from optuna.storages._rdb.storage import RDBStorage

    seen: list[list[int]] = []

    class Reader(optuna.samplers.RandomSampler):
        def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
            seen.append([t.number for t in optuna_private.trials_cached(study, tuple(optuna.trial.TrialState))])

    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="p", sampler=Reader())
    other = optuna.load_study(study_name="p", storage=url)
    study.tell(study.ask(), 1.0)
    other.tell(other.ask(), 2.0)  # finished elsewhere, before the next ask
    reads = 0
    real = RDBStorage._get_trials

    def counted(self: RDBStorage, *a: object, **k: object) -> object:
        nonlocal reads
        reads += 1
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(RDBStorage, "_get_trials", counted)
    study.ask()
    assert reads == 1  # the waiting-trial pop's; the sampler's view came from its cache
    assert seen[-1] == [0, 1, 2]


def test_a_failed_tell_inside_optimize_is_unmasked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Optuna asserts "Should not reach." when its own tell fails inside ``optimize``; the driver
    needs the error behind it (a database away, or full)."""
    study = _study(tmp_path)
    storage = study._storage

    def broken(*_a: object, **_k: object) -> bool:
        raise optuna.exceptions.StorageInternalError("database or disk is full")

    monkeypatch.setattr(storage, "set_trial_state_values", broken)
    with pytest.raises(Exception) as err:
        study.optimize(lambda t: 1.0, n_trials=1)
    real = optuna_private.unmask(err.value)
    assert optuna_private.is_storage_error(real), repr(err.value)
    assert optuna_private.unmask(ValueError("x")).args == ("x",)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_no_stale_trials_right_after_an_outage(tmp_path: Path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(storage=storage, study_name="h")
    trial = study.ask()
    storage.record_heartbeat(trial._trial_id)  # what optimize's heartbeat thread does
    seen = {"since": 0.0}
    optuna_private.no_stale_trials_after_outage(storage, 60.0, lambda: seen["since"])
    import time

    time.sleep(2.2)  # past the grace period with no heartbeat
    assert storage._get_stale_trial_ids(study._study_id) == []  # the database was just back
    seen["since"] = 120.0
    assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id]


def test_the_heartbeat_schema_autotune_studies_reads() -> None:
    """storage/overview.py joins Optuna's trial_heartbeats -> trials -> studies by these names."""
    from optuna.storages._rdb import models

    assert models.TrialHeartbeatModel.__tablename__ == "trial_heartbeats"
    assert {"trial_id", "heartbeat"} <= set(models.TrialHeartbeatModel.__table__.columns.keys())
    assert {"trial_id", "number", "study_id"} <= set(models.TrialModel.__table__.columns.keys())
    assert models.TrialModel.__tablename__ == "trials" and models.StudyModel.__tablename__ == "studies"
    assert {"study_id", "study_name"} <= set(models.StudyModel.__table__.columns.keys())
