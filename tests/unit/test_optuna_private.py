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
    optuna_private.stale_trials_check(storage, 60.0, 0.0, lambda: seen["since"])
    import time

    time.sleep(2.2)  # past the grace period with no heartbeat
    assert storage._get_stale_trial_ids(study._study_id) == []  # the database was just back
    seen["since"] = 120.0
    assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id]


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_the_stale_check_reads_once_per_heartbeat_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Optuna checks for stale trials before every ask; the database is read once per interval
    (a trial turns stale on the heartbeat's clock), and a stale trial is still found then."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(storage=storage, study_name="h")
    trial = study.ask()
    storage.record_heartbeat(trial._trial_id)
    reads = _counting(monkeypatch, "_get_stale_trial_ids")
    optuna_private.stale_trials_check(storage, 0.0, 0.5, lambda: 120.0)
    import time

    assert storage._get_stale_trial_ids(study._study_id) == [] and len(reads) == 1  # beating
    time.sleep(2.2)  # the worker died: no heartbeat past the grace period
    assert [storage._get_stale_trial_ids(study._study_id) for _ in range(3)] == [[trial._trial_id], [], []]
    assert len(reads) == 2  # one read for the three checks within the interval


def test_the_heartbeat_schema_autotune_studies_reads() -> None:
    """storage/overview.py joins Optuna's trial_heartbeats -> trials -> studies by these names."""
    from optuna.storages._rdb import models

    assert models.TrialHeartbeatModel.__tablename__ == "trial_heartbeats"
    assert {"trial_id", "heartbeat"} <= set(models.TrialHeartbeatModel.__table__.columns.keys())
    assert {"trial_id", "number", "study_id"} <= set(models.TrialModel.__table__.columns.keys())
    assert models.TrialModel.__tablename__ == "trials" and models.StudyModel.__tablename__ == "studies"
    assert {"study_id", "study_name"} <= set(models.StudyModel.__table__.columns.keys())


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Calls of RDBStorage.``name`` from now on (their count is the list's length)."""
    from optuna.storages._rdb.storage import RDBStorage

    calls: list[int] = []
    real = getattr(RDBStorage, name)

    def spy(self: RDBStorage, *a: object, **k: object) -> object:
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(RDBStorage, name, spy)
    return calls


class _Seen(optuna.samplers.RandomSampler):
    """Records the frozen trial Optuna hands the sampler at the tell."""

    told: optuna.trial.FrozenTrial | None = None

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: object, values: object) -> None:
        self.told = trial


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_own_trial_reads_come_from_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither Trial.__init__ nor the tell reads the trial back from the database; the tell still
    gets what the objective wrote through the Trial, and the database holds all of it."""
    sampler = _Seen(seed=0)
    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="p", sampler=sampler)
    optuna_private.read_own_trials_locally(study)
    reads = _counting(monkeypatch, "get_trial")

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.report(0.5, 1)
        trial.set_user_attr("k", "v")
        optuna_private.tell_from_own_view(trial)
        return x

    verbosity = optuna.logging.get_verbosity()
    # as the driver sets it (study/setup.py): at INFO, Optuna logs "Best is trial", a read
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study.optimize(objective, n_trials=2)
    finally:
        optuna.logging.set_verbosity(verbosity)
    assert reads == []
    told = sampler.told
    assert told is not None and told.number == 1
    assert told.intermediate_values == {1: 0.5} and told.user_attrs == {"k": "v"} and "x" in told.params
    stored = optuna.load_study(study_name="p", storage=url).trials
    assert [t.state for t in stored] == [optuna.trial.TrialState.COMPLETE] * 2
    assert stored[1].params == told.params and stored[1].intermediate_values == {1: 0.5}
    assert stored[1].user_attrs == {"k": "v"} and stored[1].value == told.params["x"]


def test_a_trial_failed_elsewhere_is_still_a_late_tell(tmp_path: Path) -> None:
    """The tell's local view says RUNNING; a reaper in another process failed the trial
    meanwhile: Optuna's write refuses, the driver sees a late tell, the stored state stays FAIL."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="p")
    optuna_private.read_own_trials_locally(study)
    reaper = optuna.load_study(study_name="p", storage=url)

    def objective(trial: optuna.Trial) -> float:
        optuna_private.fail_if_running(reaper, optuna_private.frozen_trial(reaper, trial.number))
        optuna_private.tell_from_own_view(trial)
        return 1.0

    with pytest.raises(Exception) as err:
        study.optimize(objective, n_trials=1)
    assert optuna_private.is_late_tell(optuna_private.unmask(err.value)), repr(err.value)
    assert optuna_private.frozen_trial(reaper, 0).state == optuna.trial.TrialState.FAIL


def test_a_waiting_trial_is_read_from_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial queued by another process (a retry, a confirmation run) carries attributes written
    there: its Trial is built from the database, as before."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="p")
    optuna_private.read_own_trials_locally(study)
    optuna.load_study(study_name="p", storage=url).enqueue_trial({"x": 0.25}, user_attrs={"retry_of": 3})
    reads = _counting(monkeypatch, "get_trial")
    trial = study.ask()
    assert reads == [1]
    assert trial.user_attrs == {"retry_of": 3} and trial.suggest_float("x", 0.0, 1.0) == 0.25


def test_sampling_reads_the_asks_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While params are drawn, TPE's constant-liar read (a fresh sync each time in Optuna) comes
    from the ask's own sync, which still holds another process's running trial; outside, a read
    syncs with the database again."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    sampler = optuna.samplers.TPESampler(seed=0, constant_liar=True, n_startup_trials=2)
    study = optuna.create_study(storage=url, study_name="p", sampler=sampler)
    optuna_private.serve_sampling_from_last_sync(study)
    for _ in range(3):
        t = study.ask()
        study.tell(t, t.suggest_float("x", 0.0, 1.0))
    other = optuna.load_study(study_name="p", storage=url)
    running_elsewhere = other.ask()
    running_elsewhere.suggest_float("x", 0.0, 1.0)
    syncs = _counting(monkeypatch, "_get_trials")
    trial = study.ask()
    with optuna_private.sampling_from_last_sync(study):
        trial.suggest_float("x", 0.0, 1.0)  # TPE samples here: 3 finished trials, past start-up
        seen = study._get_trials(deepcopy=False, states=None, use_cache=False)
    assert syncs == [1]  # the ask's pop; TPE's own read came from it
    assert running_elsewhere.number in {t.number for t in seen}
    study._get_trials(deepcopy=False, states=None, use_cache=False)
    assert syncs == [1, 1]


def test_params_in_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three params, one transaction: stored as suggested; a param whose distribution clashes
    with the study's is refused at the write, with none of the trial's params stored."""
    url = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(storage=url, study_name="p")
    t = study.ask()
    t.suggest_float("c", 0.0, 1.0)
    study.tell(t, 1.0)
    singles = _counting(monkeypatch, "_set_trial_param")
    trial = study.ask()
    with optuna_private.params_in_one_write(trial):
        got = {"a": trial.suggest_int("a", 1, 8), "b": trial.suggest_categorical("b", ["x", "y"])}
        got["c"] = trial.suggest_float("c", 0.0, 1.0)
    assert singles == []
    assert optuna_private.frozen_trial(study, 1).params == got == trial.params
    clash = study.ask()
    with pytest.raises(ValueError), optuna_private.params_in_one_write(clash):
        clash.suggest_int("a", 1, 8)
        clash.suggest_categorical("c", ["x", "y"])  # "c" is a float in this study
    assert optuna_private.frozen_trial(study, 2).params == {}


def test_the_params_write_reads_the_trial_once_and_refuses_a_finished_trial(tmp_path: Path) -> None:
    """Optuna's per-param write reads the trial row again for each param; ours reads it once, and
    still refuses params for a trial another process has finished meanwhile (none stored)."""
    from sqlalchemy import event

    study = _study(tmp_path)
    t = study.ask()
    t.suggest_float("c", 0.0, 1.0)
    study.tell(t, 1.0)
    reads: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if "FROM trials" in statement and "WHERE trials.trial_id = " in statement:  # the trial's own row
            reads.append(statement)

    engine = study._storage._backend.engine  # type: ignore[attr-defined]
    trial = study.ask()
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with optuna_private.params_in_one_write(trial):
            trial.suggest_int("a", 1, 8)
            trial.suggest_categorical("b", ["x", "y"])
            trial.suggest_float("c", 0.0, 1.0)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(reads) == 1
    assert set(optuna_private.frozen_trial(study, 1).params) == {"a", "b", "c"}

    late = study.ask()
    optuna_private.fail_if_running(study, optuna_private.frozen_trial(study, 2))  # a reaper elsewhere
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError), optuna_private.params_in_one_write(late):
        late.suggest_int("a", 1, 8)
    assert optuna_private.frozen_trial(study, 2).params == {}
