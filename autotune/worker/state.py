"""What a worker process keeps between trials: the base model and the tokenized data are built
once and reused by every trial; only the LoRA adapters (and a task head) are new per trial.
``run_trial`` (the recipe) calls ``prepare_data`` -> ``base_model`` -> ``add_adapters`` ... train
... ``remove_adapters``; the calibration probe (costs/probe.py) and ``fit`` use the same."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autotune.inputs.examples import Examples, load_data
from autotune.trial import TrialConfig
from autotune.worker import data as wdata
from autotune.worker.models import (
    TINY,
    BaseModelCache,
    build_tiny,
    load_pretrained,
    load_tokenizer,
    resolve_target_modules,
    tiny_tokenizer,
)
from autotune.worker.precision import Precision


@dataclass
class DataEntry:
    key: tuple[Any, ...]
    examples: Examples
    tokenizer: Any
    data: wdata.TokenizedData


MODELS = BaseModelCache()
_CHECKPOINTED: set[int] = set()  # peft models whose base runs with gradient checkpointing
DATA: dict[tuple[Any, ...], DataEntry] = {}


def _data_key(c: TrialConfig) -> tuple[Any, ...]:
    return (c.model.name, c.model.revision, c.task, c.data, c.data_seed)


def prepare_data(c: TrialConfig) -> DataEntry:
    key = _data_key(c)
    hit = DATA.get(key)
    if hit is not None:
        return hit
    examples = load_data(c.task, c.data, c.data_seed)
    if c.model.name == TINY:
        d = c.data
        fields = [
            f
            for f in (d.text_field, d.text_pair_field, d.prompt_field, d.completion_field)
            if f is not None and f in examples.train[0]
        ]
        tokenizer = tiny_tokenizer(examples.train + examples.validation, fields)
    else:
        tokenizer = load_tokenizer(c.model.name, c.model.revision)
    from autotune.worker.cache import tokenize_cached

    tokenized = tokenize_cached(tokenizer, examples, c)
    entry = DataEntry(key, examples, tokenizer, tokenized)
    DATA.clear()  # one study per process: keep one dataset in memory
    DATA[key] = entry
    return entry


def base_model(c: TrialConfig, entry: DataEntry, device: torch.device, prec: Precision) -> torch.nn.Module:
    n_labels = len(entry.data.labels) if entry.data.labels else 0
    dtype = prec.autocast_dtype if (device.type == "cuda" and prec.autocast_dtype is not None) else torch.float32
    key = (
        c.model.name,
        c.model.revision,
        c.task,
        c.model.tiny,
        n_labels,
        len(entry.tokenizer),
        str(dtype),
        str(device),
        c.seed,  # a pretrained model's new head is initialised from the training seed
        c.data_seed,  # a tiny model's base weights: the task's
    )
    model = MODELS.get(key)
    if model is None:
        MODELS.put((), torch.nn.Identity())  # drop the old model before loading a new one
        if c.model.name == TINY:
            tiny = c.model.tiny
            model = build_tiny(
                c.task,
                len(entry.tokenizer),
                n_labels,
                hidden=tiny.hidden_size,
                layers=tiny.num_layers,
                heads=tiny.num_heads,
                intermediate=tiny.intermediate_size,
                pad_id=entry.data.pad_id,
                seed=c.data_seed,
            )
        else:
            model = load_pretrained(c.model.name, c.task, n_labels, c.model.revision, dtype, c.seed)
            cfg: Any = model.config
            if c.task == "seq-cls" and cfg.pad_token_id is None:
                cfg.pad_token_id = entry.data.pad_id
        model.to(device=device, dtype=dtype)
        for p in model.parameters():
            p.requires_grad_(False)
        MODELS.put(key, model)
    return model


def add_adapters(base: torch.nn.Module, c: TrialConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(c.seed)  # the same seed gives the same adapter (and head) init in any process
    lcfg = LoraConfig(
        r=c.rank,
        lora_alpha=c.lora_alpha,  # type: ignore[arg-type]  # peft accepts a float alpha
        lora_dropout=c.lora_dropout,
        use_rslora=c.use_rslora,
        use_dora=c.use_dora,
        target_modules=resolve_target_modules(base, c.model.target_modules),
        task_type="CAUSAL_LM" if c.task == "causal-lm" else "SEQ_CLS",
    )
    model = get_peft_model(base, lcfg)
    if c.gradient_checkpointing:
        # the frozen embeddings' output needs requires_grad, or no gradient reaches the adapters
        # through the recomputed blocks: peft's hook does that (undone in remove_adapters)
        _checkpointing(base, "enable")()
        model.enable_input_require_grads()
        _CHECKPOINTED.add(id(model))
    for p in model.parameters():
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()  # trainable weights and AdamW state in fp32 under any autocast
    return model


def _checkpointing(base: torch.nn.Module, verb: str) -> Any:
    # transformers 5.2x names it activation_checkpointing_*; 5.17 (the CUDA image a lent H200 ran,
    # bench/results/gpu_check.log) has only gradient_checkpointing_*: take whichever this one has
    new = getattr(base, f"activation_checkpointing_{verb}", None)
    return new if new is not None else getattr(base, f"gradient_checkpointing_{verb}")


def remove_adapters(model: torch.nn.Module) -> None:
    # unload() takes the LoRA layers out; it leaves the trained head copy in place of the head,
    # so the head is put back to its initial weights for the next trial.
    if id(model) in _CHECKPOINTED:  # the cached base model runs the next trial as it was loaded
        _CHECKPOINTED.discard(id(model))
        model.disable_input_require_grads()  # type: ignore[operator]
        _checkpointing(model.base_model.model, "disable")()  # type: ignore[union-attr,arg-type]
    model.unload()  # type: ignore[operator]
    MODELS.restore_head()


def save_lora_config(kwargs: dict[str, Any], out: str) -> None:
    """peft's own ``adapter_config.json`` for these ``LoraConfig`` keyword arguments
    (``handoff.snippets.lora_kwargs``): the worker side of ``export --peft-config``, so the CLI never
    imports peft itself."""
    from peft import LoraConfig

    LoraConfig(**kwargs).save_pretrained(out)
