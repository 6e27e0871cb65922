"""The trial recipe on its own: results, adapter swap reproducibility, precision by hardware."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker.memory import memory_kind
from autotune.worker.precision import pick_precision
from autotune.worker.run_trial import run_trial
from tests.conftest import REPO, tiny_spec

PARAMS = {"rank": 8, "batch_size": 16, "learning_rate": 5e-3}

_FRESH = """
import json, sys
from autotune.spec import parse_spec
from autotune.trial import trial_config
from autotune.worker.run_trial import run_trial
spec = parse_spec(json.loads(sys.argv[1]))
r = run_trial(trial_config(spec, json.loads(sys.argv[2]), cache_dir=sys.argv[3]), lambda k, s: False)
print(json.dumps([r.state.value, [p.val_loss for p in r.curve], r.train_loss]))
"""


def test_result_fields_and_curve(tmp_path: Path) -> None:
    spec = parse_spec(tiny_spec())
    r = run_trial(trial_config(spec, PARAMS, cache_dir=str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error
    assert r.score == pytest.approx(r.val_loss + 0.1 * r.train_loss)  # type: ignore[operator]
    assert [p.step for p in r.curve] == [1, 2]
    assert r.examples_seen == 128
    assert r.optimizer_steps == 8
    assert r.train_time_s > 0
    assert r.eval_time_s > 0
    assert r.wall_time_s >= r.train_time_s + r.eval_time_s
    assert r.samples_per_s
    assert r.tokens_per_s
    assert r.tokens_per_s > r.samples_per_s
    assert r.memory_kind == memory_kind("cpu")  # cpu_allocated_above_baseline on glibc
    assert r.peak_memory_mb is not None
    assert r.precision == "fp32"
    assert r.device
    assert r.device.startswith("cpu")
    # all-linear on the llama-style tiny model, resolved to the names peft actually wrapped
    assert r.target_modules == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]


@pytest.mark.parametrize("task", ["causal-lm", "seq-cls"])
def test_adapter_swap_matches_a_fresh_process(task: str, tmp_path: Path) -> None:
    """A trial run after another trial in the same process (base model reused, adapters and task
    head fresh) gives the same losses as the same trial in a new process."""
    spec_data = tiny_spec() if task == "causal-lm" else tiny_spec(task=task, data={"source": "builtin:smoke-cls"})
    spec = parse_spec(spec_data)
    run_trial(
        trial_config(spec, {"rank": 4, "batch_size": 32, "learning_rate": 1e-2}, str(tmp_path)), lambda k, s: False
    )  # a different trial first: it must leave no trace on the base
    again = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH, json.dumps(spec_data), json.dumps(PARAMS), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    state, val_losses, train_loss = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state == "complete"
    assert [p.val_loss for p in again.curve] == pytest.approx(val_losses, rel=1e-5, abs=1e-6)
    assert again.train_loss == pytest.approx(train_loss, rel=1e-5, abs=1e-6)


def test_classifier_reports_accuracy(tmp_path: Path) -> None:
    spec = parse_spec(tiny_spec(task="seq-cls", data={"source": "builtin:smoke-cls"}))
    r = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error
    assert r.accuracy is not None
    assert 0.0 <= r.accuracy <= 1.0


def test_auto_target_modules_resolve_to_peft_default(tmp_path: Path) -> None:
    """'auto' is stored as the names peft chose for the architecture (bert: query, value), not 'auto'."""
    spec = parse_spec(tiny_spec(task="seq-cls", data={"source": "builtin:smoke-cls"}, lora={"target_modules": "auto"}))
    r = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error
    assert r.target_modules == ["query", "value"]


def test_pruning_and_interrupt_are_states(tmp_path: Path) -> None:
    import threading

    spec = parse_spec(tiny_spec())
    pruned = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: True)
    assert pruned.state == TrialState.PRUNED
    assert len(pruned.curve) == 1
    stop = threading.Event()
    stop.set()
    stopped = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False, stop)
    assert stopped.state == TrialState.INTERRUPTED


def test_precision_picks_by_hardware() -> None:
    cpu = torch.device("cpu")
    assert pick_precision("auto", cpu).name == "fp32"  # bf16 autocast is 4-17x slower on AVX2 CPUs
    assert pick_precision("bf16", cpu).autocast_dtype == torch.bfloat16
    if torch.cuda.is_available():
        want = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        assert pick_precision("auto", torch.device("cuda")).name == want


def test_a_failed_adapter_removal_drops_the_cached_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If peft cannot take its layers out, the next trial must not train on a base that still
    holds them: the cached base model is dropped and loaded again."""
    from autotune.worker import state

    spec = parse_spec(tiny_spec())
    real_remove = state.remove_adapters

    def fail(model: torch.nn.Module) -> None:
        raise RuntimeError("unload failed")

    monkeypatch.setattr(state, "remove_adapters", fail)
    first = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert first.state == TrialState.COMPLETE
    assert first.error is not None
    assert "adapters not removed" in first.error
    assert state.MODELS.model is None

    monkeypatch.setattr(state, "remove_adapters", real_remove)
    second = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert second.state == TrialState.COMPLETE, second.error
    assert second.error is None
    assert state.MODELS.model is not None
    assert not [n for n, _ in state.MODELS.model.named_modules() if "lora" in n.lower()]
    # The reloaded base gives the same result as the first trial on a clean base.
    assert second.score == pytest.approx(first.score, rel=1e-5)


def test_rslora_scales_adapters_by_the_square_root_of_the_rank(tmp_path: Path) -> None:
    """``lora.rslora: true`` (arXiv 2312.03732): the adapters train with alpha/sqrt(r), so the
    same rank and learning rate learn a different (here: larger) update than with alpha/r."""
    from autotune.worker.state import add_adapters, base_model, prepare_data, remove_adapters

    params = {"rank": 16, "batch_size": 16, "learning_rate": 5e-3}
    plain = parse_spec(tiny_spec())
    rs = parse_spec(tiny_spec(lora={"target_modules": "all-linear", "dropout": 0.0, "rslora": True}))
    c = trial_config(rs, params, cache_dir=str(tmp_path))
    assert c.use_rslora
    entry = prepare_data(c)
    model = add_adapters(base_model(c, entry, torch.device("cpu"), pick_precision("auto", torch.device("cpu"))), c)
    from peft.tuners.lora import LoraLayer

    scalings = {m.scaling["default"] for m in model.modules() if isinstance(m, LoraLayer)}
    remove_adapters(model)  # the base stays cached for the trials below (and later tests): leave it bare
    assert len(scalings) == 1
    assert scalings.pop() == pytest.approx(c.lora_alpha / 16**0.5)  # not alpha / r = 2
    a = run_trial(trial_config(plain, params, cache_dir=str(tmp_path)), lambda k, s: False)
    b = run_trial(c, lambda k, s: False)
    assert a.state == b.state == TrialState.COMPLETE
    assert a.val_loss != pytest.approx(b.val_loss, rel=1e-4)


@pytest.mark.parametrize("task", ["causal-lm", "seq-cls"])
def test_a_new_training_seed_retrains_on_the_same_split(task: str, tmp_path: Path) -> None:
    """``train_seed`` (or trial_config's ``train_seed``) moves the training alone: another adapter
    init, data order and dropout, scored on the same validation split; the same seed repeats the
    same losses. ``seed`` moves the split too."""
    from autotune.worker import state

    over = {} if task == "causal-lm" else {"task": task, "data": {"source": "builtin:smoke-cls"}}
    spec = parse_spec(tiny_spec(**over))
    cache = str(tmp_path)

    def run(c: object) -> tuple[float, list[str]]:
        r = run_trial(c, lambda k, s: False)  # type: ignore[arg-type]
        assert r.state == TrialState.COMPLETE, r.error
        assert r.score is not None
        return r.score, [str(x) for x in state.prepare_data(c).examples.validation]  # type: ignore[arg-type]

    base, val0 = run(trial_config(spec, PARAMS, cache))
    again, _ = run(trial_config(spec, PARAMS, cache))
    other, val1 = run(trial_config(spec, PARAMS, cache, train_seed=7))
    from_spec, val2 = run(trial_config(parse_spec(tiny_spec(**over, train_seed=7)), PARAMS, cache))
    _, moved = run(trial_config(parse_spec(tiny_spec(**over, seed=1)), PARAMS, cache))
    assert again == base  # deterministic on CPU
    assert other != base
    assert from_spec == other
    assert val0 == val1 == val2
    assert moved != val0
