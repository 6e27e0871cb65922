"""DoRA and LoRA+ reach peft: the wrapped modules carry DoRA's magnitude vectors, and the
optimizer gives lora_B its own learning rate (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autotune.spec import parse_spec
from autotune.trial import TrialState, trial_config
from autotune.worker import state, steps
from autotune.worker.precision import pick_precision
from autotune.worker.run_trial import run_trial
from tests.conftest import tiny_spec

PARAMS = {"rank": 4, "batch_size": 16, "learning_rate": 2e-3}


def _adapted(tmp_path: Path, **lora: object) -> tuple[torch.nn.Module, object]:
    spec = parse_spec(tiny_spec(lora=lora))
    c = trial_config(spec, PARAMS, str(tmp_path))
    entry = state.prepare_data(c)
    base = state.base_model(c, entry, torch.device("cpu"), pick_precision("fp32", torch.device("cpu")))
    return state.add_adapters(base, c), c


def test_dora_adds_magnitude_vectors_and_trains(tmp_path: Path) -> None:
    model, _ = _adapted(tmp_path, use_dora=True)
    try:
        magnitudes = [n for n, p in model.named_parameters() if "lora_magnitude_vector" in n and p.requires_grad]
        assert magnitudes, "no DoRA magnitude vector is trainable"
    finally:
        state.remove_adapters(model)
    plain, _ = _adapted(tmp_path)
    try:
        assert not [n for n, _ in plain.named_parameters() if "lora_magnitude_vector" in n]
    finally:
        state.remove_adapters(plain)
    spec = parse_spec(tiny_spec(lora={"use_dora": True}))
    r = run_trial(trial_config(spec, PARAMS, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error


@pytest.mark.parametrize("ratio", [4.0, 16.0])
def test_loraplus_gives_lora_b_its_own_learning_rate(tmp_path: Path, ratio: float) -> None:
    model, c = _adapted(tmp_path, loraplus_lr_ratio=ratio)
    try:
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = steps.make_optimizer(model, trainable, c, torch.device("cpu"))  # type: ignore[arg-type]
        lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if "lora_B" in name:
                assert lr_of[id(p)] == pytest.approx(ratio * PARAMS["learning_rate"]), name
            elif "lora_A" in name:
                assert lr_of[id(p)] == pytest.approx(PARAMS["learning_rate"]), name
        assert set(lr_of) == {id(p) for p in trainable}  # every trainable weight is optimised once
    finally:
        state.remove_adapters(model)
    plain = trial_config(parse_spec(tiny_spec(lora={"loraplus_lr_ratio": 1.0})), PARAMS)
    assert plain.loraplus_lr_ratio is None  # a ratio of 1 is plain LoRA: one learning rate


def test_gradient_checkpointing_gives_the_same_losses_at_a_lower_peak(tmp_path: Path) -> None:
    """memory.gradient_checkpointing: on recomputes activations: the same trial's losses agree to
    float32 rounding (1e-5 relative), its measured peak is lower, and the next trial in the
    process runs without it again."""
    from autotune.worker.memory import memory_kind

    if memory_kind("cpu") != "cpu_allocated_above_baseline":
        pytest.skip("needs glibc's allocated-bytes meter: RSS cannot resolve this difference")
    big = {"tiny": {"hidden_size": 128, "num_layers": 4, "num_heads": 4, "intermediate_size": 512}}
    params = {"rank": 8, "batch_size": 64, "learning_rate": 2e-3}

    def run(mode: str) -> object:
        spec = parse_spec(tiny_spec(model={"name": "tiny", **big}, memory={"gradient_checkpointing": mode},
                                    data={"max_length": 64}))  # fmt: skip
        r = run_trial(trial_config(spec, params, str(tmp_path)), lambda k, s: False)
        assert r.state == TrialState.COMPLETE, r.error
        return r

    off, on, off_again = run("off"), run("on"), run("off")
    assert on.gradient_checkpointing and not off.gradient_checkpointing  # type: ignore[attr-defined]
    assert on.val_loss == pytest.approx(off.val_loss, rel=1e-5)  # type: ignore[attr-defined]
    assert on.train_loss == pytest.approx(off.train_loss, rel=1e-5)  # type: ignore[attr-defined]
    assert on.peak_memory_mb < off.peak_memory_mb  # type: ignore[attr-defined]
    assert off_again.val_loss == off.val_loss  # type: ignore[attr-defined]
    print(f"checkpointing: peak {off.peak_memory_mb:.1f} -> {on.peak_memory_mb:.1f} MB")  # type: ignore[attr-defined]


def test_align_rank_rounds_the_rank_up_and_the_trial_records_it(tmp_path: Path) -> None:
    from autotune.handoff.snippets import lora_kwargs

    spec = parse_spec(tiny_spec(lora={"align_rank": 8, "alpha_ratio": 2.0}))
    c = trial_config(spec, {**PARAMS, "rank": 12}, str(tmp_path))
    assert (c.rank, c.lora_alpha) == (16, 32.0)
    assert (
        lora_kwargs({"params": {**PARAMS, "rank": 12}, "target_modules": None}, spec)["r"] == 16
    )  # exported as trained
    r = run_trial(trial_config(spec, {**PARAMS, "rank": 4}, str(tmp_path)), lambda k, s: False)
    assert r.state == TrialState.COMPLETE, r.error
    assert r.rank_used == 8
    plain = trial_config(parse_spec(tiny_spec()), {**PARAMS, "rank": 12})
    assert plain.rank == 12


def test_attention_mlp_placement_and_names_that_wrap_the_same_layers_again() -> None:
    """The 'attention+mlp' preset on a llama and on a BERT; the stored names are suffixes that,
    given back to peft, wrap exactly the layers the trial wrapped (BERT's pooler is a 'dense' too)."""
    from peft import LoraConfig, get_peft_model
    from transformers import BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM

    from autotune.worker.models import resolve_target_modules, wrapped_modules

    small = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
    llama = LlamaForCausalLM(LlamaConfig(**small, num_attention_heads=2, num_key_value_heads=2))
    bert = BertForSequenceClassification(BertConfig(**small, num_attention_heads=2, num_labels=3))
    expected = {
        "llama": ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"],
        "bert": ["intermediate.dense", "key", "output.dense", "query", "value"],
    }
    for name, model in (("llama", llama), ("bert", bert)):
        names = resolve_target_modules(model, "attention+mlp")
        task = "CAUSAL_LM" if name == "llama" else "SEQ_CLS"
        peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=names, task_type=task))
        stored = wrapped_modules(peft_model)
        assert stored == expected[name], stored
        layers = sorted(n for n, m in peft_model.named_modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer"))
        assert not any(n.endswith("pooler.dense") for n in layers)
        again = get_peft_model(peft_model.unload(), LoraConfig(r=4, target_modules=stored, task_type=task))
        assert (
            sorted(n for n, m in again.named_modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer")) == layers
        )
