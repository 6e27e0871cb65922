"""memory.gradient_checkpointing: auto: a config predicted over the memory limit without
checkpointing and under it with checkpointing runs with it; one under the limit runs without it;
one over the limit either way is not run. The probe is replaced by a calibration made by hand so
that the three cases are known in advance; the trials are real."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.costs import probe
from autotune.costs.model import BatchFacts, Calibration, CostModel, ProbePoint
from autotune.storage import Store
from autotune.worker.memory import memory_kind
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def _calibration(device: str) -> Calibration:
    # plain: 100 MB + 0.02 MB per padded token of the widest batch; checkpointed: 0.0125 MB per token
    def pt(b: int, per_token: float, step_s: float) -> ProbePoint:
        return ProbePoint(8, b, b * 40, 100 + per_token * b * 40, step_s, 0, b * 40)

    plain = [ProbePoint(r, b, b * 40, 100 + 0.02 * b * 40, 0.01, 0, b * 40) for r in (4, 8) for b in (16, 64)]
    ckpt = [pt(16, 0.0125, 0.015), pt(64, 0.0125, 0.015)]
    batches = {b: BatchFacts(b, 128 // b, b * 40, 128 * 40, 64 * 40, 2, 64 * 40) for b in (16, 32, 64)}
    return Calibration(device, memory_kind(device), plain, batches, 1e-7, 0.1, 0.0, 8000.0, checkpointed=ckpt)


def test_the_cost_model_predicts_both_modes() -> None:
    m = CostModel(_calibration("cpu"))
    assert m.predicts_checkpointed
    assert m.predict(8, 32).peak_memory_mb == pytest.approx(125.6)
    ck = m.predict(8, 32, checkpointed=True)
    assert ck.peak_memory_mb == pytest.approx(116.0) and ck.checkpointed
    assert ck.train_time_s == pytest.approx(1.5 * m.predict(8, 32).train_time_s)  # the probe's step ratio
    without = CostModel(Calibration("cpu", "x", _calibration("cpu").points, _calibration("cpu").batches,
                                    1e-7, 0.1, 0.0, None))  # fmt: skip
    with pytest.raises(KeyError):
        without.predict(8, 32, checkpointed=True)


def test_auto_flips_exactly_the_configs_that_fit_only_with_it(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "calibrate", lambda *a, **k: _calibration("cpu"))
    data = tiny_spec(
        "auto",
        search={
            "rank": {"choices": [8]},
            "batch_size": {"choices": [16, 32, 64]},
            "learning_rate": {"choices": [1e-3]},
        },
        memory={"gradient_checkpointing": "auto"},
        sampler="grid",
        n_trials=3,
    )
    # limit 120 MB: batch 16 fits (112.8); batch 32 only checkpointed (125.6 -> 116); batch 64 neither (151.2, 132)
    code, _out, err = cli("run", str(write_spec(data)), "--storage", db_url, "--no-progress", "--memory-limit", "120MB")
    # the grid holds 3 configs and one is never run: the study ends with 2 of its 3 trials (exit 1)
    assert code == 1 and "2/3 trials finished" in err, err
    store = Store.open(db_url, create=False)
    try:
        rows = {}
        for r in store.trials("auto"):  # the first trial of each config (the grid proposes again)
            rows.setdefault(r["batch_size"], r)
    finally:
        store.close()
    assert rows[16]["state"] == "complete" and rows[16]["gradient_checkpointing"] is False
    assert rows[32]["state"] == "complete" and rows[32]["gradient_checkpointing"] is True
    assert rows[32]["predicted_memory_mb"] == pytest.approx(116.0, rel=0.05)
    assert rows[64]["state"] == "oom" and rows[64]["not_run"] is True and "predicted" in rows[64]["error"]


def test_the_probe_measures_checkpointing_only_under_auto() -> None:
    from autotune.spec import parse_spec

    # 4 layers: with the conftest's one layer, recomputation saves too little to stand above the
    # allocator's noise, and the checkpointed peak sometimes read above the plain one; at 4 layers
    # of 64 the saving is most of the peak
    deep = {"name": "tiny", "tiny": {"hidden_size": 64, "num_layers": 4, "num_heads": 2, "intermediate_size": 256}}
    spec = tiny_spec("p", model=deep, memory={"gradient_checkpointing": "auto"}, data={"max_length": 32})
    cal = probe.calibrate(parse_spec(spec))
    assert [(p.rank, p.batch_size) for p in cal.checkpointed] == [(8, 16), (8, 32)]
    plain = {(p.rank, p.batch_size): p for p in cal.points}
    widest = cal.checkpointed[-1]
    assert widest.peak_mb < plain[(8, 32)].peak_mb  # recomputed activations: a lower peak, measured
    assert probe.calibrate(parse_spec({**spec, "memory": {"gradient_checkpointing": "off"}})).checkpointed == []
