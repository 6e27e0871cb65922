"""The model checked with transformers itself, before the first trial, without loading weights.

``autotune.inputs.model_files`` (torch-free, used by ``validate``) reads config.json and looks for
tokenizer files; this goes further in the process that imports torch anyway (``run``,
``resume``, ``worker``): ``AutoConfig`` and ``AutoTokenizer`` load, and the model is built on
the ``meta`` device (shapes only, no memory, no weights) so that ``lora.target_modules`` is
resolved against its real module names. Every failure is one ``SpecError`` line.
"""

from __future__ import annotations

from typing import Any

from autotune.errors import SpecError
from autotune.inputs.model_files import check_model
from autotune.spec import StudySpec


def _meta_model(spec: StudySpec, name: str, n_labels: int) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    from autotune.worker.models import build_tiny, quiet_transformers

    quiet_transformers()
    with torch.device("meta"):
        if name == "tiny":
            t = spec.model.tiny
            return build_tiny(
                spec.task,
                64,
                max(n_labels, 2),
                hidden=t.hidden_size,
                layers=t.num_layers,
                heads=t.num_heads,
                intermediate=t.intermediate_size,
                pad_id=0,
                seed=spec.seed,
            )
        try:
            cfg = AutoConfig.from_pretrained(name, revision=spec.model.revision)
        except (OSError, ValueError, KeyError) as err:
            raise SpecError(
                f"model.name: transformers cannot load the config of '{name}' ({str(err).splitlines()[0][:160]})"
            ) from None
        if spec.task == "causal-lm":
            return AutoModelForCausalLM.from_config(cfg)
        cfg.num_labels = max(n_labels, 2)
        return AutoModelForSequenceClassification.from_config(cfg)


def preflight(spec: StudySpec, labels: list[str] | None) -> None:
    """SpecError (one line) if the model, its tokenizer or the target modules will not do."""
    from autotune.errors import ModelError
    from autotune.worker.models import load_tokenizer, resolve_target_modules

    facts = check_model(spec)
    if facts.name != "tiny":
        try:
            load_tokenizer(facts.name, spec.model.revision)
        except ModelError as err:
            raise SpecError(str(err)) from None
    model = _meta_model(spec, facts.name, len(labels or ()))
    tm = spec.lora.target_modules
    try:
        resolve_target_modules(model, tm if isinstance(tm, str) else tuple(tm))
    except ModelError as err:
        raise SpecError(str(err)) from None
    if tm == "auto":
        from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

        model_type = getattr(model.config, "model_type", None)
        if model_type not in DEFAULTS:
            raise SpecError(
                f"lora.target_modules: peft has no default target modules for model type '{model_type}'; "
                "use 'attention', 'all-linear' or a list of module names"
            )
