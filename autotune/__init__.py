"""autotune: hyperparameter tuning for LoRA fine-tuning (rank, batch size, learning rate).

``autotune.run``, ``autotune.load``, ``autotune.estimate`` and ``autotune.Study`` are the Python
API (autotune/api.py), loaded when first named, so that ``import autotune.<anything>`` stays light.
"""

from typing import Any

from autotune.version import __version__

_API = ("run", "load", "estimate", "Study", "BestTrial")


def __getattr__(name: str) -> Any:
    if name in _API:
        from autotune import api

        return getattr(api, name)
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")


__all__ = ["BestTrial", "Study", "__version__", "estimate", "load", "run"]
