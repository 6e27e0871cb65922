from __future__ import annotations

import pytest

from autotune.scoring import score


@pytest.mark.parametrize(
    ("val", "train", "vw", "tw"), [(2.0, 3.0, 1.0, 0.1), (1.5, 0.5, 0.7, 0.3), (4.0, 1.0, 1.0, 0.0)]
)
def test_score_is_the_weighted_sum(val: float, train: float, vw: float, tw: float) -> None:
    assert score(val, train, vw, tw) == pytest.approx(vw * val + tw * train)


def test_default_weights() -> None:
    assert score(2.0, 3.0) == pytest.approx(2.3)
