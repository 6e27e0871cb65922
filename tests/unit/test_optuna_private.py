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
