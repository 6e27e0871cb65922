"""The best trial as a ready-to-paste ``peft.LoraConfig``: text only, peft is never imported.

One small function on purpose: ``autotune best --format peft`` is being built beside this, and
the integrator can swap this for that shared renderer without touching the report.
"""

from __future__ import annotations

from typing import Any

from autotune.spec import StudySpec

_TASK_TYPES = {"causal-lm": "CAUSAL_LM", "seq-cls": "SEQ_CLS"}


def peft_snippet(best: dict[str, Any], spec: StudySpec) -> str:
    """``peft.LoraConfig(...)`` for a stored best row; alpha and dropout follow the same rules as
    ``autotune.trial.trial_config`` (searched value if any, else the spec's). target_modules is
    written as the spec states it; the preset ``auto`` is peft's own default, i.e. ``None``."""
    params = best["params"]
    rank = int(params["rank"])
    alpha = float(params.get("lora_alpha_ratio", spec.lora.alpha_ratio)) * rank
    dropout = float(params.get("lora_dropout", spec.lora.dropout))
    tm = spec.lora.target_modules
    target: Any = None if tm == "auto" else (tm if isinstance(tm, str) else list(tm))
    lines = [
        "import peft",
        "",
        f"# best trial {best['trial_number']} (score {best['score']:.6g})",
        "config = peft.LoraConfig(",
        f"    r={rank},",
        f"    lora_alpha={alpha:g},",
        f"    lora_dropout={dropout:g},",
        f"    target_modules={target!r},",
        f"    task_type={_TASK_TYPES[spec.task]!r},",
        ")",
    ]
    return "\n".join(lines)
