"""`estimate` and the gate see what a searched placement or DoRA costs (issue 22): each variant gets
probe points of its own, so a wider placement or DoRA is predicted with more memory, and a trial
of that variant runs with a prediction made for it, not for the spec's fixed setting."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from autotune.costs.model import BatchFacts, Calibration, CostModel, ProbePoint, VariantProbe
from autotune.storage import Store
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def test_a_variant_is_predicted_from_its_own_points() -> None:
    # base: 100 MB + 0.02 MB per token, 1,000 trainable per rank; the variant: 150 MB + 0.03 MB per
    # token (1.5x the base slope), 3,000 trainable per rank, steps 2x as long
    def pt(r: int, b: int, c0: float, per_tok: float, per_rank: int, step: float) -> ProbePoint:
        state = 16 * per_rank * r / 2**20
        return ProbePoint(r, b, b * 40, c0 + state + per_tok * b * 40, step, per_rank * r, b * 40)

    base = [pt(r, b, 100, 0.02, 1000, 0.01) for r in (4, 8) for b in (16, 64)]
    wide = VariantProbe([pt(8, b, 150, 0.03, 3000, 0.02) for b in (16, 64)], 3000.0, 0.0)
    batches = {b: BatchFacts(b, 128 // b, b * 40, 128 * 40, 64 * 40, 2, 0) for b in (16, 32, 64)}
    cal = Calibration("cpu", "x", base, batches, 1e-7, 0.1, 0.0, None, 1000.0, 0.0,
                      variants={"all-linear": wide}, base_variant="attention")  # fmt: skip
    m = CostModel(cal)
    assert m.variants == ["attention", "all-linear"]
    p, q = m.predict(4, 32, variant="attention"), m.predict(4, 32, variant="all-linear")
    assert p.peak_memory_mb == pytest.approx(100 + 16 * 4000 / 2**20 + 0.02 * 32 * 40)
    assert q.peak_memory_mb == pytest.approx(150 + 16 * 12000 / 2**20 + 0.03 * 32 * 40)  # a rank it did not probe
    assert q.train_time_s == pytest.approx(2 * p.train_time_s) and q.variant == "all-linear"
    assert m.predict(4, 32, variant="never-probed").peak_memory_mb == p.peak_memory_mb  # as before: the base


def test_estimate_predicts_each_placement_and_dora(cli: CliFn, write_spec: Callable[..., Path]) -> None:
    data = tiny_spec(
        "variants",
        lora={"target_modules": "attention", "dropout": 0.0},
        search={
            "rank": {"choices": [4, 16]},
            "batch_size": {"choices": [16, 32]},
            "learning_rate": {"choices": [1e-3]},
            "target_modules": {"choices": ["attention", "all-linear"]},
            "use_dora": {"choices": [False, True]},
        },
    )
    rc, out, err = cli("estimate", str(write_spec(data)), "--format", "json")
    assert rc == 0, err
    rows = json.loads(out)["configs"]
    by = {(r["variant"], r["rank"], r["batch_size"]): r for r in rows}
    assert {r["variant"] for r in rows} == {"attention", "attention|dora", "all-linear", "all-linear|dora"}
    assert len(rows) == 4 * 2 * 2
    for b in (16, 32):  # all-linear trains more parameters than attention alone, at every rank
        for r in (4, 16):
            assert by[("all-linear", r, b)]["peak_memory_mb"] > by[("attention", r, b)]["peak_memory_mb"]
    rc, out, _ = cli("estimate", str(write_spec(data)))
    assert rc == 0 and "adapters" in out.splitlines()[0] and "all-linear|dora" in out  # the table names them


def test_a_searched_variant_trial_stores_its_own_prediction(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str
) -> None:
    # wide enough that the adapters' counted state (16 B per trainable parameter) dominates the
    # few MB a tiny model's peak moves between runs: all-linear adds gate/up/down at rank 256
    data = tiny_spec(
        "gate-variants",
        model={
            "name": "tiny",
            "tiny": {"hidden_size": 256, "num_layers": 1, "num_heads": 4, "intermediate_size": 1024},
        },
        lora={"target_modules": "attention", "dropout": 0.0},
        search={
            "rank": {"choices": [256]},  # the adapters' state, not the study's correction, sets the order
            "batch_size": {"choices": [16]},
            "learning_rate": {"choices": [1e-3]},
            "target_modules": {"choices": ["attention", "all-linear"]},
        },
        sampler="grid",
        n_trials=2,
        budget={"memory_limit_mb": 100000},  # a limit asks for the probe (on a CPU it is skipped otherwise)
    )
    rc, _out, err = cli("run", str(write_spec(data)), "--storage", db_url, "--no-progress")
    assert rc == 0, err
    store = Store.open_existing(db_url, "gate-variants")
    rows = {r["params"]["target_modules"]: r for r in store.trials("gate-variants")}
    assert rows["all-linear"]["predicted_memory_mb"] > rows["attention"]["predicted_memory_mb"]
