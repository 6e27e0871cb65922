"""Every searchable parameter reaches Optuna, the trials table, `best`, `trials` and the CSV:
a parameter added to spec.SEARCH_PARAMS cannot be validated and then silently not searched."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import optuna

from autotune.spec import SEARCH_PARAMS, parse_spec
from autotune.storage import Store
from autotune.trial import trial_config
from tests.conftest import tiny_spec

CliFn = Callable[..., tuple[int, str, str]]

EVERY_PARAM = {
    "rank": {"choices": [4, 8]},
    "batch_size": {"choices": [16, 32]},
    "learning_rate": {"low": 1e-3, "high": 1e-2, "log": True},
    "lora_alpha_ratio": {"choices": [1.0, 4.0]},
    "lora_dropout": {"low": 0.0, "high": 0.1},
    "use_dora": {"choices": [False, True]},
    "loraplus_lr_ratio": {"low": 1.0, "high": 16.0, "log": True},
    "target_modules": {"choices": ["attention", "attention+mlp"]},
}


def test_the_test_searches_every_parameter() -> None:
    assert set(EVERY_PARAM) == set(SEARCH_PARAMS)


def test_every_search_parameter_end_to_end(
    cli: CliFn, write_spec: Callable[..., Path], db_url: str, tmp_path: Path
) -> None:
    spec_path = write_spec(tiny_spec(name="every", search=EVERY_PARAM, sampler="random", n_trials=2))
    code, _, err = cli("run", str(spec_path), "--storage", db_url, "--no-progress")
    assert code == 0, err

    # Optuna sampled each one.
    study = optuna.load_study(study_name="every", storage=db_url)
    for t in study.trials:
        assert set(t.params) == set(SEARCH_PARAMS), t.params
    # Our trials table stored each one.
    store = Store.open(db_url, create=False)
    rows = store.trials("every")
    store.close()
    for row in rows:
        assert set(row["params"]) == set(SEARCH_PARAMS), row["params"]
    # The worker got the sampled values, not the spec's fixed ones.
    spec = parse_spec(tiny_spec(name="every", search=EVERY_PARAM))
    p = rows[0]["params"]
    config = trial_config(spec, p)
    assert config.lora_alpha == p["lora_alpha_ratio"] * p["rank"]
    assert config.lora_dropout == p["lora_dropout"]
    assert config.use_dora is p["use_dora"]
    assert config.loraplus_lr_ratio == p["loraplus_lr_ratio"]
    assert config.model.target_modules == p["target_modules"]
    # the placement each trial ran is stored resolved: attention alone, or with the MLP too
    for row in rows:
        mlp = {"down_proj", "gate_proj", "up_proj"} & set(row["target_modules"])
        assert bool(mlp) == (row["params"]["target_modules"] == "attention+mlp"), row

    code, out, err = cli("best", "every", "--storage", db_url, "--format", "json")
    assert code == 0, err
    assert set(json.loads(out)["params"]) == set(SEARCH_PARAMS)

    code, out, err = cli("trials", "every", "--storage", db_url)
    assert code == 0, err
    header = out.splitlines()[0].split()
    for name in SEARCH_PARAMS:
        assert name in header, header

    csv_path = tmp_path / "every.csv"
    code, _, err = cli("export", "every", "--storage", db_url, "--csv", str(csv_path))
    assert code == 0, err
    with csv_path.open() as fh:
        exported = list(csv.DictReader(fh))
    for rec, row in zip(exported, rows, strict=True):
        for name in SEARCH_PARAMS:
            value = row["params"][name]
            assert (rec[name] == str(value)) if isinstance(value, bool | str) else float(rec[name]) == value, (
                name,
                rec,
            )
