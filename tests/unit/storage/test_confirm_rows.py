"""What the confirmation phase's numbers mean: a mean over every run (a failed run scores worst),
the spread as max - min, and the one-line note when the top two cannot be told apart."""

from __future__ import annotations

import math

from autotune.storage.confirm import Confirmed, noise_note


def _c(n: int, *scores: float, runs: int | None = None) -> Confirmed:
    return Confirmed(n, scores, (), runs if runs is not None else len(scores), None)


def test_mean_and_spread_over_the_runs() -> None:
    c = _c(3, 1.0, 1.2, 1.1)
    assert math.isclose(c.mean, 1.1) and math.isclose(c.spread, 0.2)
    assert _c(1, 1.0).spread == 0.0


def test_a_failed_run_makes_the_config_worst() -> None:
    assert _c(1, 1.0, runs=2).mean == math.inf  # one of two runs diverged or ran out of memory


def test_note_when_the_gap_is_inside_the_spread() -> None:
    note = noise_note([_c(1, 1.00, 1.10), _c(2, 1.02, 1.12)])
    assert note is not None and "(trials 1 and 2) cannot be told apart" in note


def test_no_note_when_the_gap_is_wider_than_the_spread_or_there_is_one_config() -> None:
    assert noise_note([_c(1, 1.00, 1.01), _c(2, 1.20, 1.21)]) is None
    assert noise_note([_c(1, 1.00, 1.01)]) is None
    assert noise_note([_c(1, 1.00), _c(2, runs=1)]) is None  # the runner-up's one run failed: it is worst


def test_one_run_each_says_the_gap_is_unmeasured_and_one_measured_spread_is_used() -> None:
    note = noise_note([_c(8, 0.861), _c(9, 0.881)])  # the quickstart's default: best and hedge, once each
    assert note is not None and "(trials 8 and 9) ran once each" in note and "differ by 0.02" in note
    assert "budget.confirm_seeds: 2" in note
    # one config with two runs: its spread (0.1) is the noise the gap (0.05) is read against
    assert "cannot be told apart" in (noise_note([_c(1, 1.00, 1.10), _c(2, 1.10)]) or "")
    assert noise_note([_c(1, 1.00, 1.01), _c(2, 1.10)]) is None
