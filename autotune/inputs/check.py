"""Everything about a spec's inputs that can be checked before a trial starts: the data (path,
format, columns, splits, labels) and the model (config, tokenizer files, position limit; see
``autotune.inputs.model_files``). Torch-free, so ``autotune validate`` runs the same checks as
``autotune run`` and stays instant."""

from __future__ import annotations

from autotune.inputs.examples import Examples, load_data
from autotune.inputs.model_files import check_model
from autotune.spec import StudySpec


def check_inputs(spec: StudySpec) -> Examples:
    """Load and check the examples and the model path; DataError/SpecError carry one line."""
    examples = load_data(spec.task, spec.data, spec.seed)
    check_model(spec)
    return examples
