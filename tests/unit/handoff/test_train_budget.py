"""`autotune train`'s budget: the flags, else the spec's ``budget.target_examples``, else one pass."""

from __future__ import annotations

from autotune.handoff.train import TrainOptions, _budget


def test_the_target_budget_is_the_default_and_flags_win() -> None:
    assert _budget(TrainOptions(), n_train=1800, target=None) == 1800  # one pass
    assert _budget(TrainOptions(), n_train=1800, target=5000) == 5000  # what the study was tuned for
    assert _budget(TrainOptions(train_examples=300), n_train=1800, target=5000) == 300
    assert _budget(TrainOptions(epochs=0.5), n_train=1800, target=5000) == 900
