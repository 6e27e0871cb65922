"""The study spec: the contract a user writes (schema.py; its ``search:`` section and the registry of
searchable parameters in search_spec.py), how a file becomes one (load.py), and
the models that ship inside PyPI packages (packaged.py).

This face re-exports the names the rest of autotune uses, so ``from autotune.spec import
StudySpec`` stays the one way in. Modules inside ``spec/`` import each other by their full path.
"""

from autotune.errors import SpecError
from autotune.spec.load import load_spec
from autotune.spec.parse import parse_spec, parse_spec_yaml
from autotune.spec.schema import (
    BudgetSpec,
    DataSpec,
    LoraSpec,
    ModelSpec,
    ObjectiveSpec,
    PrunerSpec,
    SamplerSpec,
    StudySpec,
    TinyModel,
    searched_params,
)
from autotune.spec.search_spec import SEARCH_PARAMS, TARGET_PRESETS, ParamRange, SearchParam, SearchSpec

__all__ = [
    "SEARCH_PARAMS",
    "TARGET_PRESETS",
    "BudgetSpec",
    "DataSpec",
    "LoraSpec",
    "ModelSpec",
    "ObjectiveSpec",
    "ParamRange",
    "PrunerSpec",
    "SamplerSpec",
    "SearchParam",
    "SearchSpec",
    "SpecError",
    "StudySpec",
    "TinyModel",
    "load_spec",
    "parse_spec",
    "parse_spec_yaml",
    "searched_params",
]
