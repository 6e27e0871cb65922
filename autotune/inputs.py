"""Everything about a spec's inputs that can be checked before a trial starts: the data (path,
format, columns, splits, labels) and the model (config, tokenizer files, position limit; see
``autotune.modelcheck``). Torch-free, so ``autotune validate`` runs the same checks as
``autotune run`` and stays instant."""

from __future__ import annotations

from autotune.datasets import Examples, load_examples
from autotune.modelcheck import check_model
from autotune.spec import StudySpec


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
        delimiter=d.delimiter,
    )
    check_model(spec)
    return examples
