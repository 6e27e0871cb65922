"""Which crashes are properties of the spec rather than of one trial.

The model that cannot load, the tokenizer that is missing, a target module the model lacks, a
sequence longer than the position embeddings, a label the head has no output for: every trial of
the study would fail the same way, so the driver stops the run at once (one line, exit 2) instead
of retrying each as a crash.
"""

from __future__ import annotations

from autotune.errors import ModelError

# torch's messages for the last two (aten/src/ATen/native: embedding index and nll_loss target).
_SPEC_MESSAGES = ("index out of range in self", "out of bounds", "target_modules")


def is_spec_property(err: BaseException) -> bool:
    if isinstance(err, ModelError):
        return True
    if isinstance(err, (IndexError, ValueError)):
        text = str(err)
        return any(m in text for m in _SPEC_MESSAGES)
    return False
