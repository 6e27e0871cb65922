from __future__ import annotations

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from autotune.search.space import distributions, grid, grid_size
from autotune.spec import parse_spec
from tests.conftest import tiny_spec


def test_default_space() -> None:
    spec = parse_spec({"name": "x", "model": {"name": "tiny"}, "data": {"source": "builtin:smoke"}})
    d = distributions(spec)
    assert list(d) == ["rank", "batch_size", "learning_rate"]
    assert d["rank"] == CategoricalDistribution([4, 8, 16, 32])
    assert d["batch_size"] == CategoricalDistribution([16, 32, 64])
    assert d["learning_rate"] == FloatDistribution(1e-4, 1e-3, log=True)


def test_ranges_and_extras() -> None:
    spec = parse_spec(
        tiny_spec(
            search={
                "rank": {"low": 2, "high": 64, "log": True},
                "batch_size": {"low": 8, "high": 64, "step": 8},
                "learning_rate": {"choices": [1e-4, 3e-4]},
                "lora_alpha_ratio": {"choices": [1, 2, 4]},
                "lora_dropout": {"low": 0.0, "high": 0.2},
            }
        )
    )
    d = distributions(spec)
    assert d["rank"] == IntDistribution(2, 64, log=True)
    assert d["batch_size"] == IntDistribution(8, 64, step=8)
    assert d["learning_rate"] == CategoricalDistribution([1e-4, 3e-4])
    assert d["lora_alpha_ratio"] == CategoricalDistribution([1.0, 2.0, 4.0])
    assert d["lora_dropout"] == FloatDistribution(0.0, 0.2)
    assert isinstance(d["rank"].low, int)
    assert isinstance(d["batch_size"].step, int)  # ints, not floats


def test_grid_uses_declared_choices() -> None:
    spec = parse_spec(tiny_spec(sampler="grid", search={"learning_rate": {"choices": [1e-3, 1e-2]}}))
    assert grid(spec) == {"rank": [4, 8], "batch_size": [16, 32], "learning_rate": [1e-3, 1e-2]}
    assert grid_size(spec) == 8
