"""Train one configuration at a longer budget and keep the adapter; load it back.

The same recipe as a trial (``run_trial``: model, data, precision, objective), with a hook that
saves the trained peft model through ``PeftModel.save_pretrained`` before its adapters are
removed. ``load_trained`` rebuilds base model + adapter from a saved directory in any process:
for a tiny model the base is rebuilt from its config and seed, as a trial builds it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import torch

from autotune.spec.packaged import resolve_model
from autotune.trial import TrialConfig, TrialResult, config_from_json
from autotune.worker import data as wdata
from autotune.worker.models import TINY, build_tiny, load_pretrained
from autotune.worker.precision import pick_precision
from autotune.worker.run_trial import run_trial
from autotune.worker.state import prepare_data
from autotune.worker.steps import evaluate

PROVENANCE = "autotune_train.json"


def fit(config: TrialConfig, out_dir: Path, interrupt: threading.Event | None = None) -> TrialResult:
    """Train ``config`` (never pruned) and, if it completes, save adapter (and, for seq-cls, the
    trained head: peft's modules_to_save) and tokenizer to ``out_dir``."""

    def save(model: torch.nn.Module, tokenizer: Any) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(out_dir))  # type: ignore[operator]
        tokenizer.save_pretrained(str(out_dir))

    return run_trial(config, lambda k, s: False, interrupt, on_trained=save)


def load_trained(path: str | Path, device: str = "cpu") -> tuple[torch.nn.Module, Any, dict[str, Any]]:
    """(peft model in eval mode, tokenizer, provenance) from a directory `autotune train` wrote."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    root = Path(path)
    info: dict[str, Any] = json.loads((root / PROVENANCE).read_text())
    c = config_from_json(info["config"])
    tokenizer = AutoTokenizer.from_pretrained(str(root))
    n_labels = len(info["labels"]) if info.get("labels") else 0
    pad_id = wdata.pad_token_id(tokenizer)
    if c.model.name == TINY:
        tiny = c.model.tiny
        base = build_tiny(
            c.task,
            len(tokenizer),
            n_labels,
            hidden=tiny.hidden_size,
            layers=tiny.num_layers,
            heads=tiny.num_heads,
            intermediate=tiny.intermediate_size,
            pad_id=pad_id,
            seed=c.data_seed,
        )
    else:
        name = resolve_model(info["base_model"])  # the packaged model's directory on this machine
        base = load_pretrained(name, c.task, n_labels, c.model.revision, torch.float32, c.seed)
        cfg: Any = base.config
        if c.task == "seq-cls" and cfg.pad_token_id is None:
            cfg.pad_token_id = pad_id
    model = PeftModel.from_pretrained(base.to(device), str(root))
    model.eval()
    return model, tokenizer, info


MERGED = "merged"  # the sub-directory of `autotune train --merge`


def save_merged(path: str | Path, out_dir: str | Path) -> None:
    """The adapter `autotune train` saved in ``path``, merged into its base model
    (``merge_and_unload``) and saved with the tokenizer by ``save_pretrained``: a plain model that
    loads with ``AutoModelFor*.from_pretrained`` and no peft."""
    model, tokenizer, _ = load_trained(path)
    merged = model.merge_and_unload()  # type: ignore[operator]
    merged.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))


def evaluate_trained(path: str | Path) -> tuple[float, float | None]:
    """Validation loss (and accuracy) of a saved adapter, on the study's validation split, the way
    the fit measured it: the check that what was saved is what was trained."""
    model, _, info = load_trained(path)
    c = config_from_json(info["config"])
    entry = prepare_data(c)
    device = torch.device("cpu")
    order = wdata.eval_batches(entry.data.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
    return evaluate(model, entry.data.validation, order, device, pick_precision("fp32", device))
