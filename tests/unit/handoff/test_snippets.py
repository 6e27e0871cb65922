"""The stored trial in the forms users paste: the peft snippet runs and builds real configs; the
pinned spec parses back and yields the very trial configuration."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from autotune.handoff.snippets import lora_kwargs, peft_snippet, pinned_spec_yaml
from autotune.search.space import distributions
from autotune.spec import parse_spec, parse_spec_yaml
from autotune.trial import trial_config
from tests.conftest import tiny_spec


def _row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trial_number": 3,
        "params": {"rank": 8, "batch_size": 16, "learning_rate": 0.00412345678, "lora_dropout": 0.07},
        "score": 1.23,
        "val_loss": 1.1,
        "accuracy": None,
        "precision": "fp32",
        "target_modules": ["k_proj", "q_proj", "v_proj"],
    }
    row.update(over)
    return row


def _spec(**over: Any) -> Any:
    data = tiny_spec(
        lora={"target_modules": "attention", "alpha_ratio": 1.5, "dropout": 0.0},
        search={**tiny_spec()["search"], "lora_dropout": {"low": 0.0, "high": 0.1}},
        max_grad_norm=0.5,
        weight_decay=0.01,
        seed=7,
        **over,
    )
    return parse_spec(data)


def test_peft_snippet_runs_and_builds_the_trials_configs() -> None:
    import peft
    import transformers

    spec = _spec()
    ns: dict[str, Any] = {}
    exec(peft_snippet("s", _row(), spec), ns)  # the point: the pasted text must run
    lc, ta = ns["lora_config"], ns["training_args"]
    assert isinstance(lc, peft.LoraConfig)
    assert isinstance(ta, transformers.TrainingArguments)
    assert lc.r == 8
    assert lc.lora_alpha == 12
    assert lc.lora_dropout == pytest.approx(0.07)
    assert set(lc.target_modules) == {"k_proj", "q_proj", "v_proj"}  # resolved names, not the preset
    assert lc.task_type == "CAUSAL_LM"
    assert ta.learning_rate == 0.00412345678
    assert ta.per_device_train_batch_size == 16
    assert ta.max_grad_norm == 0.5
    assert ta.weight_decay == 0.01
    assert ta.seed == 7
    assert not ta.bf16
    assert not ta.fp16


def test_snippet_follows_precision_and_task() -> None:
    spec = _spec(task="seq-cls", data={"source": "builtin:smoke-cls"})
    kw = lora_kwargs(_row(target_modules=["query", "value"]), spec)
    assert kw["task_type"] == "SEQ_CLS"
    assert kw["target_modules"] == ["query", "value"]
    text = peft_snippet("s", _row(precision="bf16"), spec)
    assert "bf16=True," in text
    assert "fp16=False," in text
    # A trial stored before target modules were: a preset falls back to peft's default, said so.
    old = peft_snippet("s", _row(target_modules=None), spec)
    assert "target_modules=None,  # peft's default" in old


def test_pinned_spec_round_trip_reproduces_the_trial_config() -> None:
    spec = _spec()
    row = _row()
    pinned = parse_spec_yaml(pinned_spec_yaml("s", spec, row))
    assert pinned.n_trials == 1
    assert pinned.pruner.name == "none"
    assert pinned.name == "t-trial3"
    assert spec.precision == "auto"
    assert pinned.precision == "fp32"  # as the trial ran, on any machine
    dists = distributions(pinned)
    assert set(dists) == {"rank", "batch_size", "learning_rate", "lora_dropout"}
    only = {name: d.choices[0] for name, d in dists.items()}  # type: ignore[attr-defined]
    assert all(len(d.choices) == 1 for d in dists.values())  # type: ignore[attr-defined]
    assert trial_config(pinned, only) == dataclasses.replace(trial_config(spec, row["params"]), precision="fp32")


def test_an_rslora_study_exports_rslora() -> None:
    ns: dict[str, Any] = {}
    spec = parse_spec({**_spec().model_dump(mode="json"), "lora": {"target_modules": "attention", "rslora": True}})
    exec(peft_snippet("s", _row(), spec), ns)
    assert ns["lora_config"].use_rslora is True
    ns = {}
    exec(peft_snippet("s", _row(), _spec()), ns)
    assert ns["lora_config"].use_rslora is False


def test_a_dora_and_loraplus_trial_leaves_as_a_peft_config_and_an_optimizer_line() -> None:
    """A searched use_dora=True reaches LoraConfig (and `export --peft-config`); LoRA+ is no
    LoraConfig field, so the snippet shows peft's optimizer call with the trial's ratio."""
    import peft

    search = {**tiny_spec()["search"], "use_dora": {"choices": [False, True]},
              "loraplus_lr_ratio": {"low": 1.0, "high": 16.0, "log": True}}  # fmt: skip
    spec = parse_spec(tiny_spec(search=search))
    row = _row(params={"rank": 8, "batch_size": 16, "learning_rate": 2e-3, "use_dora": True, "loraplus_lr_ratio": 8.0})
    kw = lora_kwargs(row, spec)
    assert kw["use_dora"] is True
    assert peft.LoraConfig(**kw).use_dora
    text = peft_snippet("s", row, spec)
    assert "    use_dora=True," in text
    assert "loraplus_lr_ratio=8.0" in text and "create_loraplus_optimizer" in text
    compile(text, "snippet", "exec")
    plain = lora_kwargs(_row(), _spec())
    assert "use_dora" not in plain
    assert "loraplus" not in peft_snippet("s", _row(), _spec())
