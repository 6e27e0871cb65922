"""A stored trial in the forms users paste: a peft + transformers snippet, or a pinned spec.

Torch-free (``best --format peft|spec`` stays instant): the values come from the stored trial
and the study's spec, and are rendered with ``repr`` so the snippet is valid Python. The report
and ``export --peft-config`` reuse ``lora_kwargs``/``peft_snippet`` from here.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from autotune.spec import StudySpec, parse_spec, searched_params
from autotune.trial import lora_values

TASK_TYPES = {"causal-lm": "CAUSAL_LM", "seq-cls": "SEQ_CLS"}


def _num(v: float) -> int | float:
    """2.0 -> 2: peft types lora_alpha as int, and a pasted value should read naturally."""
    return int(v) if float(v).is_integer() else float(v)


def resolved_target_modules(row: dict[str, Any], spec: StudySpec) -> list[str] | None:
    """The names the trial wrapped (stored since revision 0002_train). For an older trial, the
    spec's own list; for an older trial with a preset, None: peft's default for the model."""
    stored = row.get("target_modules")
    if stored:
        return list(stored)
    tm = spec.lora.target_modules
    return list(tm) if isinstance(tm, list) else None


def lora_kwargs(row: dict[str, Any], spec: StudySpec) -> dict[str, Any]:
    """Keyword arguments of ``peft.LoraConfig`` for a stored trial."""
    rank, alpha, dropout = lora_values(spec, row["params"])
    return {
        "r": rank,
        "lora_alpha": _num(alpha),
        "lora_dropout": dropout,
        **({"use_rslora": True} if spec.lora.rslora else {}),  # peft's default is False
        **({"use_dora": True} if _dora(row, spec) else {}),
        "target_modules": resolved_target_modules(row, spec),
        "task_type": TASK_TYPES[spec.task],
    }


def _dora(row: dict[str, Any], spec: StudySpec) -> bool:
    return bool(row["params"].get("use_dora", spec.lora.use_dora))


def loraplus_ratio(row: dict[str, Any], spec: StudySpec) -> float | None:
    """LoRA+'s B-over-A learning-rate ratio of a stored trial (None: plain LoRA)."""
    v = row["params"].get("loraplus_lr_ratio", spec.lora.loraplus_lr_ratio)
    return None if v is None or float(v) == 1.0 else float(v)


def training_kwargs(row: dict[str, Any], spec: StudySpec, output_dir: str) -> dict[str, Any]:
    """Keyword arguments of ``transformers.TrainingArguments`` matching the trial's recipe."""
    precision = row.get("precision") or "fp32"
    return {
        "output_dir": output_dir,
        "learning_rate": float(row["params"]["learning_rate"]),
        "per_device_train_batch_size": int(row["params"]["batch_size"]),
        "max_grad_norm": spec.max_grad_norm,
        "weight_decay": spec.weight_decay,
        # autotune's loop keeps the learning rate constant, without warmup (worker/run_trial.py)
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "seed": spec.seed,
    }


def _call(name: str, kwargs: dict[str, Any], notes: dict[str, str]) -> list[str]:
    lines = [f"{name}("]
    for k, v in kwargs.items():
        note = f"  # {notes[k]}" if k in notes else ""
        lines.append(f"    {k}={v!r},{note}")
    lines.append(")")
    return lines


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else str(v)


def peft_snippet(study_name: str, row: dict[str, Any], spec: StudySpec) -> str:
    """A ready-to-run Python snippet: the trial's ``peft.LoraConfig`` (resolved target modules)
    and the matching ``transformers.TrainingArguments`` fields."""
    lk = lora_kwargs(row, spec)
    tk = training_kwargs(row, spec, f"{study_name}-lora")
    batch = tk["per_device_train_batch_size"]
    steps = math.ceil(spec.budget.train_examples / batch)
    head = [
        f"# autotune study '{study_name}', trial {row['trial_number']}: score {_fmt(row.get('score'))}, "
        f"val_loss {_fmt(row.get('val_loss'))}, accuracy {_fmt(row.get('accuracy'))}",
        f"# model {spec.model.name} ({spec.task}); the trial trained {spec.budget.train_examples} examples "
        f"({steps} steps of {batch}) with precision {row.get('precision') or 'fp32'}",
        "import peft",
        "import transformers",
        "",
    ]
    notes: dict[str, str] = {}
    if lk["target_modules"] is None:
        notes["target_modules"] = "peft's default for the architecture (this trial predates stored names)"
    if spec.task == "seq-cls":
        notes["task_type"] = "peft also trains and saves the classification head (modules_to_save)"
    body = _call("lora_config = peft.LoraConfig", lk, notes)
    body += ["", *_call("training_args = transformers.TrainingArguments", tk, {})]
    ratio = loraplus_ratio(row, spec)
    if ratio is not None:  # LoRA+ is an optimizer, not a LoraConfig field: pass it to Trainer(optimizers=...)
        body += [
            "",
            "# LoRA+: lora_B learns at ratio x the learning rate (model = peft.get_peft_model(base, lora_config))",
            "# optimizer = peft.optimizers.create_loraplus_optimizer(",
            f"#     model, torch.optim.AdamW, lr={tk['learning_rate']!r}, loraplus_lr_ratio={ratio!r})",
        ]
    return "\n".join(head + body) + "\n"


def pinned_spec_data(spec: StudySpec, row: dict[str, Any]) -> dict[str, Any]:
    """The study's spec with every searched parameter pinned to the trial's value (choices of
    one), the precision the trial ran in, one trial and no pruning: ``autotune run`` on it
    trains the same configuration. Checked by parsing it back."""
    params, trial_number = row["params"], row["trial_number"]
    data = spec.model_dump(mode="json", exclude_none=True)
    search: dict[str, Any] = {}
    for pname, _ in searched_params(spec):
        value = params[pname]
        if pname in ("rank", "batch_size"):
            value = int(value)
        search[pname] = {"choices": [value]}
    data["search"] = search
    data["name"] = f"{spec.name}-trial{trial_number}"
    data["n_trials"] = 1
    data["pruner"] = {"name": "none"}
    if row.get("precision"):
        data["precision"] = row["precision"]
    parse_spec(data, "pinned spec")
    return data


def pinned_spec_yaml(study_name: str, spec: StudySpec, row: dict[str, Any]) -> str:
    data = pinned_spec_data(spec, row)
    head = (
        f"# study '{study_name}', trial {row['trial_number']} pinned (score {_fmt(row.get('score'))}): "
        f"`autotune run` on this file trains the same configuration\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False)
