"""Everything about a spec's inputs that can be checked before a trial starts: the data (path,
format, columns, splits, labels) and a local model path. Torch-free, so ``autotune validate``
runs the same checks as ``autotune run`` and stays instant."""

from __future__ import annotations

import os

from autotune.datasets import Examples, load_data
from autotune.packaged import resolve_model
from autotune.spec import SpecError, StudySpec


def check_inputs(spec: StudySpec) -> Examples:
    """Load and check the examples and the model path; DataError/SpecError carry one line."""
    examples = load_data(spec.task, spec.data, spec.seed)
    name = resolve_model(spec.model.name)
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1
    if name != "tiny" and looks_like_path and not os.path.isdir(os.path.expanduser(name)):
        raise SpecError(f"model.name: {name}: no such model directory")
    return examples
