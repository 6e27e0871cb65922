"""The trial score, minimised: ``val_weight * val_loss + train_weight * train_loss``.

Intermediate reports use the same formula on the running losses, so the pruner and the final
objective agree.
"""

from __future__ import annotations


def score(val_loss: float, train_loss: float, val_weight: float = 1.0, train_weight: float = 0.1) -> float:
    return val_weight * val_loss + train_weight * train_loss
