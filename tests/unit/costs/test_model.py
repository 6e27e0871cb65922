"""The cost model is pure: fitted to probe points, it predicts what they were made of."""

from __future__ import annotations

import json

import pytest

from autotune.costs.model import BatchFacts, Calibration, CostModel, ProbePoint
from autotune.costs.study_time import expected_fraction

PER_RANK, HEAD = 10_000.0, 5_000.0


def _cal() -> Calibration:
    # points made by the model's own form: 100 MB fixed, 0.02 MB per token, 0.001 MB per rank x token
    def peak(r: int, tok: int) -> float:
        return 100 + 16 * (PER_RANK * r + HEAD) / 2**20 + (0.02 + 0.001 * r) * tok

    def step(r: int, tok: int) -> float:
        return 0.01 + (1e-5 + 1e-7 * r) * tok

    pts = [ProbePoint(r, b, b * 40, peak(r, b * 40), step(r, b * 40), int(PER_RANK * r + HEAD), b * 40)
           for r in (4, 32) for b in (16, 64)]  # fmt: skip
    batches = {b: BatchFacts(b, 1024 // b, b * 40, 1024 * 40, 64 * 40, 4, 64 * 40) for b in (16, 32, 64)}
    return Calibration("cpu", "cpu_rss_above_baseline", pts, batches, 1e-6, 0.5, 3.0, 8000.0, PER_RANK, HEAD)


def test_fit_recovers_the_model_and_predicts_between_the_probed_corners() -> None:
    model = CostModel(_cal())
    p = model.predict(16, 32)
    expected = 100 + 16 * (PER_RANK * 16 + HEAD) / 2**20 + (0.02 + 0.001 * 16) * 32 * 40
    assert p.peak_memory_mb == pytest.approx(expected, rel=1e-6)
    assert p.train_time_s == pytest.approx(32 * 0.01 + (1e-5 + 1e-7 * 16) * 1024 * 40, rel=1e-6)
    with pytest.raises(KeyError):
        model.predict(16, 128)  # a batch size the probe never laid out


def test_a_trial_peaks_at_the_larger_of_training_and_evaluation() -> None:
    """Evaluation batches have max(B, 64) rows: at a small B their logits can pass training's
    peak (tiny LMs and GPT-2 at B=16), so the prediction is the larger of the two fits."""
    from dataclasses import replace

    cal = _cal()
    state = {r: 16 * (PER_RANK * r + HEAD) / 2**20 for r in (4, 32)}
    eval_peak = 150.0  # above training at B=16 (~113-129 MB), below it at B=64 (~151-188 MB)
    pts = [replace(p, eval_peak_mb=eval_peak + state[p.rank]) for p in cal.points]
    model = CostModel(replace(cal, points=pts))
    old = CostModel(cal)  # a calibration stored before the split: training's fit alone
    small, big = model.predict(8, 16), model.predict(32, 64)
    assert small.peak_memory_mb == pytest.approx(eval_peak + 16 * (PER_RANK * 8 + HEAD) / 2**20, rel=1e-6)
    assert small.peak_memory_mb > old.predict(8, 16).peak_memory_mb
    assert big.peak_memory_mb == old.predict(32, 64).peak_memory_mb  # training sets it there


def test_a_stored_calibration_predicts_as_the_fresh_one() -> None:
    cal = _cal()
    back = Calibration.from_json(json.loads(json.dumps(cal.to_json())))  # as the JSON column holds it
    assert back == cal
    assert CostModel(back).predict(8, 64) == CostModel(cal).predict(8, 64)


def test_asha_runs_a_fraction_of_each_trial() -> None:
    assert expected_fraction("none", 4, 1, 3, 0) == 1.0
    # rungs at 1 and 3 of 4 evaluations: 2/3 stop at 1/4, 2/9 at 3/4, 1/9 run to the end
    assert expected_fraction("asha", 4, 1, 3, 0) == pytest.approx(2 / 3 * 1 / 4 + 2 / 9 * 3 / 4 + 1 / 9)


def test_a_study_learns_the_bias_the_probe_misses() -> None:
    """After one finished trial peaking at 1.5x its prediction, the next prediction is 1.5x too;
    a broken measurement (20x) teaches nothing."""
    from autotune.costs.model import Correction

    model = CostModel(_cal())
    corr = Correction()
    first = model.predict(4, 16)
    assert corr.apply(first) == first  # before any trial: the probe's figure
    corr.observe(first, 1.5 * first.peak_memory_mb, 2.0 * first.trial_time_s)
    corr.observe(first, 20 * first.peak_memory_mb, None)
    nxt = model.predict(32, 64)
    seen = corr.apply(nxt)
    assert seen.peak_memory_mb == pytest.approx(1.5 * nxt.peak_memory_mb)
    assert seen.trial_time_s == pytest.approx(2.0 * nxt.trial_time_s)
