"""Everything about a spec's inputs that can be checked before a trial starts: the data (path,
format, columns, splits, labels) and a local model path. Torch-free, so ``autotune validate``
runs the same checks as ``autotune run`` and stays instant."""

from __future__ import annotations

import os

from autotune.datasets import Examples, load_examples
from autotune.packaged import resolve_model
from autotune.spec import SpecError, StudySpec


def check_inputs(spec: StudySpec) -> Examples:
    """Load and check the examples and the model path; DataError/SpecError carry one line."""
    d = spec.data
    examples = load_examples(
        task=spec.task,
        source=d.source,
        fmt=d.format,
        text_field=d.text_field,
        text_pair_field=d.text_pair_field,
        prompt_field=d.prompt_field,
        completion_field=d.completion_field,
        label_field=d.label_field,
        validation=d.validation,
        validation_fraction=d.validation_fraction,
        max_examples=d.max_examples,
        seed=spec.seed,
    )
    name = resolve_model(spec.model.name)
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1
    if name != "tiny" and looks_like_path and not os.path.isdir(os.path.expanduser(name)):
        raise SpecError(f"model.name: {name}: no such model directory")
    return examples
